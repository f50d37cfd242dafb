/**
 * A dedup set whose memory stays bounded however many fingerprints it has seen: an exact
 * in-memory table while it is small, then a Bloom filter and a table of recent keys in front
 * of an exact set in LevelDB. 10M seen URLs are ~12 MB of Bloom bits and a fixed-size recent
 * table, not 10M strings on the heap.
 *
 * ```
 *  phase 1 (memory)        keys ─▶ FingerprintSet (exact, 16 B/slot)       answers synchronously
 *      │ size reaches memoryEntries (or a `dir` is given: start here)
 *      ▼
 *  phase 2 (disk)          keys ─▶ recent table (2 generations) ── hit ──▶ seen
 *                                   │ miss
 *                                   ▼
 *                                 phase 1 table, frozen ── hit ──▶ seen   (only until its keys
 *                                   │ miss                        are copied to disk, in the background)
 *                                   ▼
 *                                 Bloom ── "never" ──────────────────────▶ new   (no disk read)
 *                                   │ "maybe"
 *                                   ▼
 *                                 LevelDB getMany ── found ──▶ seen / missing ──▶ new
 *                          new keys ─▶ Bloom + recent table + one LevelDB batch per call
 * ```
 *
 * Calls are serialized (one at a time), so two overlapping calls can never both admit the
 * same key. With `dir`, the set survives the process: reopening reads every key once to
 * rebuild the Bloom filter (about a second per million keys).
 */
import { InvalidArgumentError, StoreFailedError } from '../../errors.js';
import { type OpenedStore, openStore } from '../../queue/leveldb-store.js';
import type { Deduplicator } from '../dedup.js';
import { ScalableBloomFilter } from './bloom-filter.js';
import { KEY_BYTES, keyOf, keyWordsOf } from './fingerprint-key.js';
import { FingerprintSet } from './fingerprint-set.js';

export interface TieredDeduplicatorOptions {
  /**
   * LevelDB directory. Given: the set is persistent (a resumed crawl remembers what it saw)
   * and disk-backed from the start. Omitted: memory only until `memoryEntries`, then a
   * temporary directory that `close()` removes.
   */
  dir?: string;
  /** Exact in-memory keys before spilling to disk (21–32 bytes each). @default 1_000_000 */
  memoryEntries?: number;
  /** Keys per generation of the recent table in the disk phase (two generations are kept). @default 262_144 */
  recentEntries?: number;
  /** Bloom filter false-positive rate (a false positive costs one disk read, never a wrong answer). @default 0.01 */
  falsePositiveRate?: number;
}

export interface TieredDeduplicatorStats {
  phase: 'memory' | 'disk';
  /** Distinct keys seen. */
  size: number;
  /** Bytes of typed arrays held (tables and Bloom bits). */
  memoryBytes: number;
  /** Lookups answered by LevelDB reads (Bloom said "maybe" and the recent table missed). */
  diskReads: number;
  /** Of those, keys that turned out new (Bloom false positives). */
  falsePositives: number;
  /** Keys of the memory phase not yet copied to disk (answered from memory until they are). */
  copying: number;
  /** Set when disk-backed. */
  dir: string | undefined;
}

const EMPTY = new Uint8Array(0);
const WRITE_CHUNK = 10_000;

export class TieredDeduplicator implements Deduplicator {
  readonly #memoryEntries: number;
  readonly #recentEntries: number;
  readonly #rate: number;
  readonly #dir: string | undefined;
  #phase: 'memory' | 'disk' = 'memory';
  #table = new FingerprintSet();
  // disk phase
  #store: OpenedStore | undefined;
  #bloom: ScalableBloomFilter | undefined;
  #recent: FingerprintSet | undefined;
  #recentOld: FingerprintSet | undefined;
  /** The memory phase's table while its keys are copied to the store (see #toDisk). */
  #frozen: FingerprintSet | undefined;
  #copying: Promise<void> | undefined;
  #size = 0;
  #diskReads = 0;
  #falsePositives = 0;
  #chain: Promise<unknown> = Promise.resolve();
  #busy = false;
  #closed = false;
  readonly #words = new Uint32Array(4);
  #keyBuf = new Uint8Array(KEY_BYTES * 64);

  constructor(options: TieredDeduplicatorOptions = {}) {
    this.#memoryEntries = options.memoryEntries ?? 1_000_000;
    this.#recentEntries = options.recentEntries ?? 262_144;
    this.#rate = options.falsePositiveRate ?? 0.01;
    this.#dir = options.dir;
    if (!(this.#memoryEntries >= 1)) {
      throw new InvalidArgumentError(`memoryEntries must be ≥ 1, got ${options.memoryEntries}`);
    }
    if (!(this.#recentEntries >= 1)) {
      throw new InvalidArgumentError(`recentEntries must be ≥ 1, got ${options.recentEntries}`);
    }
    if (!(this.#rate > 0 && this.#rate < 1)) {
      throw new InvalidArgumentError(`falsePositiveRate must be in (0, 1), got ${options.falsePositiveRate}`);
    }
  }

  /** Open the on-disk set when a `dir` was given (reads what an earlier run stored). */
  async open(): Promise<this> {
    if (this.#dir !== undefined && this.#phase === 'memory')
      await this.#enqueue(() => this.#toDisk(this.#dir));
    return this;
  }

  markSeen(fingerprints: readonly string[]): readonly boolean[] | Promise<readonly boolean[]> {
    if (this.#closed)
      return Promise.reject(new StoreFailedError(this.#dir ?? '(memory)', 'markSeen after close'));
    // Fast path: nothing queued, memory phase, and the batch fits under the threshold.
    if (
      !this.#busy &&
      this.#phase === 'memory' &&
      this.#dir === undefined &&
      this.#table.size + fingerprints.length <= this.#memoryEntries
    ) {
      return this.#markInMemory(fingerprints);
    }
    return this.#enqueue(async () => {
      if (this.#phase === 'memory') {
        if (this.#dir !== undefined || this.#table.size + fingerprints.length > this.#memoryEntries) {
          await this.#toDisk(this.#dir);
        } else {
          return this.#markInMemory(fingerprints);
        }
      }
      return this.#markOnDisk(fingerprints);
    });
  }

  size(): number {
    return this.#phase === 'memory' ? this.#table.size : this.#size;
  }

  stats(): TieredDeduplicatorStats {
    const memoryBytes =
      this.#phase === 'memory'
        ? this.#table.byteLength
        : (this.#bloom?.byteLength ?? 0) +
          (this.#frozen?.byteLength ?? 0) +
          (this.#recent?.byteLength ?? 0) +
          (this.#recentOld?.byteLength ?? 0);
    return {
      phase: this.#phase,
      size: this.size(),
      memoryBytes,
      diskReads: this.#diskReads,
      falsePositives: this.#falsePositives,
      copying: this.#frozen?.size ?? 0,
      dir: this.#store?.dir,
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#chain.catch(() => {});
    await this.#copying;
    this.#frozen = undefined;
    this.#table.clear();
    this.#recent = undefined;
    this.#recentOld = undefined;
    this.#bloom = undefined;
    await this.#store?.close();
  }

  #enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(async () => {
      this.#busy = true;
      try {
        return await fn();
      } finally {
        this.#busy = false;
      }
    });
    this.#chain = run.catch(() => {});
    return run;
  }

  #markInMemory(fingerprints: readonly string[]): boolean[] {
    const out = new Array<boolean>(fingerprints.length);
    const w = this.#words;
    const table = this.#table;
    for (let i = 0; i < fingerprints.length; i++) {
      keyWordsOf(fingerprints[i]!, w);
      out[i] = table.add(w[0]!, w[1]!, w[2]!, w[3]!);
    }
    return out;
  }

  /**
   * Move to the disk phase: open the store and put the in-memory keys into it and the Bloom
   * filter. On a fresh store the copy runs in the background: the old table stays, frozen, and
   * answers exactly for its keys until they are all written, so admission does not stop for the
   * seconds a million writes take (it did, and the pages that piled up behind it set the peak
   * memory of a crawl with a million queued URLs).
   */
  async #toDisk(dir: string | undefined): Promise<void> {
    const store = await openStore({ ...(dir === undefined ? {} : { dir }), tempPrefix: 'mocra-dedup-' });
    const table = this.#table;
    const bloom = new ScalableBloomFilter({
      initialCapacity: Math.max(65_536, table.size * 2),
      falsePositiveRate: this.#rate,
    });
    let size = 0;
    try {
      // Keys an earlier run stored (persistent dir): rebuild the Bloom filter from them.
      for await (const key of store.db.keys()) {
        if (key.length !== KEY_BYTES) continue;
        const w = wordsOf(key);
        bloom.add(w[1]!, w[2]!);
        size++;
      }
      if (size > 0 && table.size > 0) {
        // Keys on disk and in memory (not reached today: with a dir the disk phase starts at
        // open): copy now, skipping keys the store has, so that `size` stays exact.
        size += await copyKeys(store, table, bloom, true);
      }
    } catch (err) {
      await store.close().catch(() => {});
      throw new StoreFailedError(store.dir, 'loading the dedup set', { cause: err });
    }
    if (size === 0 && table.size > 0) {
      const w = this.#words;
      for (let slot = 0; slot < table.slots; slot++) if (table.readSlot(slot, w)) bloom.add(w[1]!, w[2]!);
      size = table.size;
      this.#frozen = table;
      // Closing a temporary store ends the copy early: the directory is removed right after.
      const abandon = () => this.#closed && store.temporary;
      this.#copying = copyKeys(store, table, bloom, false, abandon).then(
        () => {
          this.#frozen = undefined; // every key is on disk and in the Bloom filter now
        },
        () => {
          // The frozen table still answers exactly for its keys: keep it (memory, not
          // correctness, is what the failed copy costs). The store's next write reports the fault.
        },
      );
    }
    this.#store = store;
    this.#bloom = bloom;
    this.#size = size;
    this.#recent = new FingerprintSet();
    this.#recentOld = undefined;
    this.#table = new FingerprintSet();
    this.#phase = 'disk';
  }

  async #markOnDisk(fingerprints: readonly string[]): Promise<boolean[]> {
    const n = fingerprints.length;
    const out = new Array<boolean>(n).fill(false);
    if (this.#keyBuf.length < n * KEY_BYTES) this.#keyBuf = new Uint8Array(n * KEY_BYTES * 2);
    const buf = this.#keyBuf;
    const words = new Uint32Array(n * 4);
    const w = this.#words;
    const bloom = this.#bloom!;
    const batchSeen = n > 64 ? new FingerprintSet(n) : undefined;
    const check: number[] = [];
    for (let i = 0; i < n; i++) {
      keyOf(fingerprints[i]!, buf, i * KEY_BYTES, w);
      words.set(w, i * 4);
      // A key repeated inside the batch is new only at its first position.
      if (batchSeen ? !batchSeen.add(w[0]!, w[1]!, w[2]!, w[3]!) : repeatsEarlier(words, i)) continue;
      if (this.#recentHas(w) || this.#frozen?.has(w[0]!, w[1]!, w[2]!, w[3]!)) continue;
      if (!bloom.mightHave(w[1]!, w[2]!)) {
        out[i] = true;
        continue;
      }
      check.push(i);
    }
    const store = this.#store!;
    if (check.length > 0) {
      let found: (Uint8Array | undefined)[];
      try {
        found = await store.db.getMany(check.map((i) => buf.slice(i * KEY_BYTES, (i + 1) * KEY_BYTES)));
      } catch (err) {
        throw new StoreFailedError(store.dir, 'reading the dedup set', { cause: err });
      }
      this.#diskReads += check.length;
      for (let j = 0; j < check.length; j++) {
        if (found[j] === undefined) {
          out[check[j]!] = true;
          this.#falsePositives++;
        }
      }
    }
    const batch = store.db.batch();
    let puts = 0;
    for (let i = 0; i < n; i++) {
      const o = i * 4;
      if (out[i]) {
        bloom.add(words[o + 1]!, words[o + 2]!);
        batch.put(buf.slice(i * KEY_BYTES, (i + 1) * KEY_BYTES), EMPTY);
        puts++;
        this.#size++;
      }
      // Every key of the call is recent now, new or not: the next duplicate is a table hit.
      this.#recentAdd(words[o]!, words[o + 1]!, words[o + 2]!, words[o + 3]!);
    }
    try {
      if (puts > 0) await batch.write();
      else await batch.close();
    } catch (err) {
      throw new StoreFailedError(store.dir, 'writing the dedup set', { cause: err });
    }
    return out;
  }

  #recentHas(w: Uint32Array): boolean {
    return (
      this.#recent!.has(w[0]!, w[1]!, w[2]!, w[3]!) ||
      (this.#recentOld?.has(w[0]!, w[1]!, w[2]!, w[3]!) ?? false)
    );
  }

  #recentAdd(w0: number, w1: number, w2: number, w3: number): void {
    if (this.#recent!.size >= this.#recentEntries) {
      this.#recentOld = this.#recent;
      this.#recent = new FingerprintSet();
    }
    this.#recent!.add(w0, w1, w2, w3);
  }
}

/** Whether key i of `words` equals an earlier one (small batches: a scan beats a table). */
function repeatsEarlier(words: Uint32Array, i: number): boolean {
  const o = i * 4;
  for (let j = 0; j < o; j += 4) {
    if (
      words[j] === words[o] &&
      words[j + 1] === words[o + 1] &&
      words[j + 2] === words[o + 2] &&
      words[j + 3] === words[o + 3]
    ) {
      return true;
    }
  }
  return false;
}

/**
 * Write every key of `table` to the store (and the Bloom filter, when not there yet), in
 * batches of WRITE_CHUNK. With `skipStored`, keys the store already has are skipped; when
 * `stop` says so (checked between batches), it ends early. Resolves to the number of keys written.
 */
async function copyKeys(
  store: OpenedStore,
  table: FingerprintSet,
  bloom: ScalableBloomFilter,
  skipStored: boolean,
  stop?: () => boolean,
): Promise<number> {
  let written = 0;
  let batch = store.db.batch();
  let inBatch = 0;
  const w = new Uint32Array(4);
  // One key buffer for every put: a chained batch copies the key into LevelDB's native batch
  // at put(), so a million keys do not mean a million short-lived arrays.
  const key = new Uint8Array(KEY_BYTES);
  for (let slot = 0; slot < table.slots; slot++) {
    if (!table.readSlot(slot, w)) continue;
    bytesInto(w, key);
    if (skipStored) {
      if (bloom.mightHave(w[1]!, w[2]!) && (await store.db.has(key.slice()))) continue;
      bloom.add(w[1]!, w[2]!);
    }
    batch.put(key, EMPTY);
    written++;
    if (++inBatch >= WRITE_CHUNK) {
      await batch.write();
      if (stop?.()) return written;
      batch = store.db.batch();
      inBatch = 0;
    }
  }
  if (inBatch > 0) await batch.write();
  else await batch.close();
  return written;
}

function wordsOf(key: Uint8Array): Uint32Array {
  const out = new Uint32Array(4);
  for (let i = 0; i < 4; i++) {
    const o = i * 4;
    out[i] = (key[o]! | (key[o + 1]! << 8) | (key[o + 2]! << 16) | (key[o + 3]! << 24)) >>> 0;
  }
  return out;
}

function bytesInto(w: Uint32Array, out: Uint8Array): void {
  for (let i = 0; i < 4; i++) {
    const v = w[i]!;
    out[i * 4] = v & 0xff;
    out[i * 4 + 1] = (v >>> 8) & 0xff;
    out[i * 4 + 2] = (v >>> 16) & 0xff;
    out[i * 4 + 3] = (v >>> 24) & 0xff;
  }
}

/** A bounded-memory {@link Deduplicator}; with `dir` it is opened (and persistent) before it resolves. */
export async function createTieredDeduplicator(
  options: TieredDeduplicatorOptions = {},
): Promise<TieredDeduplicator> {
  return new TieredDeduplicator(options).open();
}
