import { crc32 } from 'node:zlib';
import { IdentityMismatchError, StorageCorruptError } from '../errors.js';
import type { HardState, LogEntry, Snapshot, SnapshotMeta } from '../raft/types.js';
import type { KvEngine, KvOp } from './kv-engine.js';

/**
 * The durable Raft state on a {@link KvEngine} (LevelDB in production).
 *
 * Layout (all values JSON; indexes as 16 hex digits so key order is index order):
 * ```
 *   id                 { nodeId }                                  who owns this directory
 *   hs                 { term, vote, commit, lastIndex, lastTerm,  the marker: written last in
 *                        snapIndex, snapTerm, seq }                 every batch
 *   e:<index>          { t, k, d, b, c }    term, kind, data, batch seq, crc32
 *   s:<index>          { meta, data, b, c } a state-machine snapshot
 * ```
 * Every write is ONE batch with `sync: true`, ordered so that any prefix of it can be recovered:
 *
 *   [snapshot put] [entry puts] [marker] [entry deletes] [old snapshot delete]
 *    └── new data, tagged with the batch seq ──┘ └── only garbage after the marker ──┘
 *
 * LevelDB applies a batch atomically, but the open checks do not rely on it. If the marker did
 * not land, entries newer than it (and whatever they overwrote) are dropped: nothing in a batch
 * is acknowledged before the whole batch is durable, and an entry is only ever overwritten when
 * a newer leader conflicts with it, which means it was not committed. If the marker landed but
 * some deletes did not, the leftovers lie outside the marker's log and are removed. Anything
 * else that does not add up — a bad checksum, a gap, a missing snapshot — is reported as
 * {@link StorageCorruptError}, never papered over.
 */

const ID_KEY = 'id';
const MARKER_KEY = 'hs';
const ENTRY_PREFIX = 'e:';
const SNAP_PREFIX = 's:';
/** Sorts after every hex digit, so `e:` ≤ key < `e:` + KEY_END covers every entry key. */
const KEY_END = '\uffff';

interface Marker {
  readonly term: number;
  readonly vote: string | null;
  readonly commit: number;
  readonly lastIndex: number;
  readonly lastTerm: number;
  readonly snapIndex: number;
  readonly snapTerm: number;
  readonly seq: number;
}

export interface RecoveredState {
  readonly hardState: HardState;
  readonly snapshot: Snapshot | undefined;
  readonly entries: LogEntry[];
  /** True when nothing was on disk (a new node). */
  readonly fresh: boolean;
  /** What the open checks repaired: entries of a torn last batch and stray keys removed. */
  readonly repaired: { readonly tornEntries: number; readonly strayKeys: number };
}

export interface SaveRequest {
  readonly hardState: HardState | undefined;
  readonly snapshot: Snapshot | undefined;
  readonly entries: readonly LogEntry[];
}

export function indexKey(prefix: string, index: number): string {
  return prefix + index.toString(16).padStart(16, '0');
}

function entryChecksum(index: number, term: number, kind: string, batch: number, data: string): number {
  return crc32(`${index}|${term}|${kind}|${batch}|${data}`);
}

function snapshotChecksum(meta: SnapshotMeta, batch: number, data: string): number {
  return crc32(`${JSON.stringify(meta)}|${batch}|${data}`);
}

export class RaftStorage {
  readonly #engine: KvEngine;
  #marker: Marker;
  /** Smallest and largest entry index currently stored (0/0 when none). */
  #firstStored: number;
  #lastStored: number;

  private constructor(engine: KvEngine, marker: Marker, firstStored: number, lastStored: number) {
    this.#engine = engine;
    this.#marker = marker;
    this.#firstStored = firstStored;
    this.#lastStored = lastStored;
  }

  get lastIndex(): number {
    return this.#marker.lastIndex;
  }
  get snapshotIndex(): number {
    return this.#marker.snapIndex;
  }

  /**
   * Open the log of `nodeId`, check it and repair a torn last batch. `bootstrap` (a configuration
   * entry) is written as entry 1 of a brand-new log only.
   */
  static async open(
    engine: KvEngine,
    nodeId: string,
    bootstrap?: LogEntry,
  ): Promise<{ storage: RaftStorage; state: RecoveredState }> {
    const idRaw = await engine.get(ID_KEY);
    if (idRaw !== undefined) {
      const owner = parseJson(idRaw, 'id record') as { nodeId?: unknown };
      if (owner.nodeId !== nodeId) throw new IdentityMismatchError(nodeId, String(owner.nodeId));
    }
    const markerRaw = await engine.get(MARKER_KEY);
    const snapPairs = await engine.range(SNAP_PREFIX, SNAP_PREFIX + KEY_END);
    const entryPairs = await engine.range(ENTRY_PREFIX, ENTRY_PREFIX + KEY_END);

    if (markerRaw === undefined) {
      // A new log. Anything else present came from a first batch that never completed.
      const stray = [...snapPairs, ...entryPairs].map(([key]) => ({ type: 'del', key }) as const);
      const marker: Marker = {
        term: 0,
        vote: null,
        commit: 0,
        lastIndex: 0,
        lastTerm: 0,
        snapIndex: 0,
        snapTerm: 0,
        seq: 0,
      };
      const storage = new RaftStorage(engine, marker, 0, 0);
      const ops: KvOp[] = [...stray, { type: 'put', key: ID_KEY, value: JSON.stringify({ nodeId }) }];
      const entries: LogEntry[] = [];
      let hardState: HardState = { term: 0, vote: null, commit: 0 };
      if (bootstrap) {
        entries.push(bootstrap);
        hardState = { term: bootstrap.term, vote: null, commit: bootstrap.index };
      }
      await engine.write(ops, { sync: true });
      if (bootstrap) await storage.save({ hardState, snapshot: undefined, entries });
      return {
        storage,
        state: {
          hardState,
          snapshot: undefined,
          entries,
          fresh: true,
          repaired: { tornEntries: 0, strayKeys: stray.length },
        },
      };
    }
    if (idRaw === undefined) throw new StorageCorruptError('the Raft log has a marker but no owner record');

    const marker = parseMarker(markerRaw);
    const stray: KvOp[] = [];
    let snapshot: Snapshot | undefined;
    for (const [key, value] of snapPairs) {
      const index = Number.parseInt(key.slice(SNAP_PREFIX.length), 16);
      if (index !== marker.snapIndex) {
        stray.push({ type: 'del', key });
        continue;
      }
      const rec = parseJson(value, key) as { meta: SnapshotMeta; data: string; b: number; c: number };
      if (snapshotChecksum(rec.meta, rec.b, rec.data) !== rec.c) {
        throw new StorageCorruptError(`snapshot ${index} fails its checksum`);
      }
      snapshot = { meta: rec.meta, data: rec.data };
    }
    if (marker.snapIndex > 0 && !snapshot) {
      throw new StorageCorruptError(`the marker names snapshot ${marker.snapIndex}, which is missing`);
    }

    const entries: LogEntry[] = [];
    let torn = 0;
    let tornFrom = Number.POSITIVE_INFINITY;
    let firstStored = 0;
    let lastStored = 0;
    for (const [key, value] of entryPairs) {
      const index = Number.parseInt(key.slice(ENTRY_PREFIX.length), 16);
      const rec = parseJson(value, key) as {
        t: number;
        k: LogEntry['kind'];
        d: string;
        b: number;
        c: number;
      };
      if (index <= marker.snapIndex) {
        stray.push({ type: 'del', key }); // covered by the snapshot
        continue;
      }
      if (index >= tornFrom || rec.b > marker.seq) {
        // Written by a batch whose marker never landed (or overwritten by one): never
        // acknowledged in this form, so dropped along with everything after it.
        tornFrom = Math.min(tornFrom, index);
        torn++;
        stray.push({ type: 'del', key });
        continue;
      }
      if (index > marker.lastIndex) {
        stray.push({ type: 'del', key }); // a delete after the marker that did not land
        continue;
      }
      if (entryChecksum(index, rec.t, rec.k, rec.b, rec.d) !== rec.c) {
        throw new StorageCorruptError(`entry ${index} fails its checksum`);
      }
      entries.push({ index, term: rec.t, kind: rec.k, data: rec.d });
      if (firstStored === 0) firstStored = index;
      lastStored = index;
    }

    // The surviving entries must continue the snapshot without gaps, terms never decreasing.
    let prevIndex = marker.snapIndex;
    let prevTerm = marker.snapTerm;
    for (const e of entries) {
      if (e.index !== prevIndex + 1) {
        throw new StorageCorruptError(`the Raft log has a gap after index ${prevIndex} (next is ${e.index})`);
      }
      if (e.term < prevTerm)
        throw new StorageCorruptError(
          `entry ${e.index} has term ${e.term}, lower than ${prevTerm} before it`,
        );
      prevIndex = e.index;
      prevTerm = e.term;
    }
    const last = entries[entries.length - 1];
    const lastIndex = last?.index ?? marker.snapIndex;
    const lastTerm = last?.term ?? marker.snapTerm;
    // Without a torn batch the log must end exactly where the marker says; with one it may end
    // earlier (the torn batch overwrote a conflicting tail), but what is left must still agree.
    const endsEarly = torn > 0 && lastIndex < marker.lastIndex;
    if (!endsEarly && (lastIndex !== marker.lastIndex || lastTerm !== marker.lastTerm)) {
      throw new StorageCorruptError(
        `the Raft log ends at ${lastIndex}/${lastTerm} but its marker says ${marker.lastIndex}/${marker.lastTerm}`,
      );
    }
    if (lastTerm > marker.term) {
      throw new StorageCorruptError(
        `entry ${lastIndex} has term ${lastTerm}, above the stored term ${marker.term}`,
      );
    }

    const commit = Math.min(marker.commit, lastIndex);
    let fixed: Marker = { ...marker, lastIndex, lastTerm, commit };
    const storage = new RaftStorage(engine, fixed, firstStored, lastStored);
    if (stray.length > 0) {
      fixed = { ...fixed, seq: fixed.seq + 1 };
      await engine.write([...stray, { type: 'put', key: MARKER_KEY, value: JSON.stringify(fixed) }], {
        sync: true,
      });
      storage.#marker = fixed;
    }
    return {
      storage,
      state: {
        hardState: { term: marker.term, vote: marker.vote, commit },
        snapshot,
        entries,
        fresh: false,
        repaired: { tornEntries: torn, strayKeys: stray.length - torn },
      },
    };
  }

  /**
   * Persist one Ready (snapshot, then entries, then hard state) in a single synced batch. Entries
   * overwrite from their first index; stored entries past the new last index are deleted (a
   * conflicting tail the leader told us to drop).
   */
  async save(req: SaveRequest): Promise<void> {
    const m = this.#marker;
    const seq = m.seq + 1;
    const puts: KvOp[] = [];
    const garbage: KvOp[] = [];
    let { lastIndex, lastTerm, snapIndex, snapTerm } = m;
    const oldFirst = this.#firstStored;
    const oldLast = this.#lastStored;
    // The stored range after this write; entries of the old range outside it become garbage.
    let firstStored = oldFirst;
    let lastStored = oldLast;

    if (req.snapshot) {
      const meta = req.snapshot.meta;
      puts.push({
        type: 'put',
        key: indexKey(SNAP_PREFIX, meta.index),
        value: JSON.stringify({
          meta,
          data: req.snapshot.data,
          b: seq,
          c: snapshotChecksum(meta, seq, req.snapshot.data),
        }),
      });
      if (m.snapIndex > 0 && m.snapIndex !== meta.index) {
        garbage.push({ type: 'del', key: indexKey(SNAP_PREFIX, m.snapIndex) });
      }
      // A received snapshot replaces the whole log.
      firstStored = 0;
      lastStored = 0;
      snapIndex = meta.index;
      snapTerm = meta.term;
      lastIndex = meta.index;
      lastTerm = meta.term;
    }

    if (req.entries.length > 0) {
      const first = req.entries[0]!;
      const final = req.entries[req.entries.length - 1]!;
      if (first.index > lastIndex + 1 || first.index <= snapIndex) {
        throw new Error(
          `entries ${first.index}..${final.index} do not continue the stored log (last ${lastIndex})`,
        );
      }
      for (const e of req.entries) {
        puts.push({
          type: 'put',
          key: indexKey(ENTRY_PREFIX, e.index),
          value: JSON.stringify({
            t: e.term,
            k: e.kind,
            d: e.data,
            b: seq,
            c: entryChecksum(e.index, e.term, e.kind, seq, e.data),
          }),
        });
      }
      if (firstStored === 0) firstStored = first.index;
      lastStored = final.index;
      lastIndex = final.index;
      lastTerm = final.term;
    }

    if (oldFirst > 0) {
      // Old entries below the new range (replaced by a snapshot) or above it (a conflicting tail).
      const keepFrom = firstStored === 0 ? Number.POSITIVE_INFINITY : firstStored;
      const keepTo = firstStored === 0 ? Number.NEGATIVE_INFINITY : lastStored;
      for (let i = oldFirst; i <= Math.min(oldLast, keepFrom - 1); i++) {
        garbage.push({ type: 'del', key: indexKey(ENTRY_PREFIX, i) });
      }
      for (let i = Math.max(oldFirst, keepTo + 1); i <= oldLast; i++) {
        garbage.push({ type: 'del', key: indexKey(ENTRY_PREFIX, i) });
      }
    }

    const hs = req.hardState ?? { term: m.term, vote: m.vote, commit: m.commit };
    const marker: Marker = {
      term: hs.term,
      vote: hs.vote,
      commit: Math.min(hs.commit, lastIndex),
      lastIndex,
      lastTerm,
      snapIndex,
      snapTerm,
      seq,
    };
    await this.#engine.write(
      [...puts, { type: 'put', key: MARKER_KEY, value: JSON.stringify(marker) }, ...garbage],
      {
        sync: true,
      },
    );
    this.#marker = marker;
    this.#firstStored = firstStored;
    this.#lastStored = lastStored;
  }

  /**
   * Persist a snapshot the node took of its own state machine, and drop the entries it covers
   * from disk. The log past the snapshot is untouched.
   */
  async saveSnapshot(snapshot: Snapshot): Promise<void> {
    const m = this.#marker;
    const meta = snapshot.meta;
    if (meta.index <= m.snapIndex) return;
    if (meta.index > m.lastIndex)
      throw new Error(`snapshot ${meta.index} is past the stored log (${m.lastIndex})`);
    const seq = m.seq + 1;
    const ops: KvOp[] = [
      {
        type: 'put',
        key: indexKey(SNAP_PREFIX, meta.index),
        value: JSON.stringify({
          meta,
          data: snapshot.data,
          b: seq,
          c: snapshotChecksum(meta, seq, snapshot.data),
        }),
      },
    ];
    const cleanup: KvOp[] = [];
    let firstStored = this.#firstStored;
    for (let i = firstStored; i > 0 && i <= Math.min(meta.index, this.#lastStored); i++) {
      cleanup.push({ type: 'del', key: indexKey(ENTRY_PREFIX, i) });
    }
    firstStored = meta.index < this.#lastStored ? meta.index + 1 : 0;
    const lastStored = firstStored === 0 ? 0 : this.#lastStored;
    const marker: Marker = { ...m, snapIndex: meta.index, snapTerm: meta.term, seq };
    if (m.snapIndex > 0) cleanup.push({ type: 'del', key: indexKey(SNAP_PREFIX, m.snapIndex) });
    await this.#engine.write(
      [...ops, { type: 'put', key: MARKER_KEY, value: JSON.stringify(marker) }, ...cleanup],
      {
        sync: true,
      },
    );
    this.#marker = marker;
    this.#firstStored = firstStored;
    this.#lastStored = lastStored;
  }

  async close(): Promise<void> {
    await this.#engine.close();
  }
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new StorageCorruptError(`${what} in the Raft log is not valid JSON`);
  }
}

function parseMarker(text: string): Marker {
  const raw = parseJson(text, 'the marker') as Record<string, unknown>;
  const num = (k: string): number => {
    const v = raw[k];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
      throw new StorageCorruptError(`the marker's ${k} is not a non-negative integer`);
    }
    return v;
  };
  const vote = raw.vote;
  if (vote !== null && typeof vote !== 'string')
    throw new StorageCorruptError("the marker's vote is not a node id");
  return {
    term: num('term'),
    vote,
    commit: num('commit'),
    lastIndex: num('lastIndex'),
    lastTerm: num('lastTerm'),
    snapIndex: num('snapIndex'),
    snapTerm: num('snapTerm'),
    seq: num('seq'),
  };
}
