/**
 * The memory + LevelDB queue backend: the in-memory queue's semantics with memory that stays
 * flat as a topic grows, and — given a directory — durability across a SIGKILL.
 *
 * Each priority lane keeps a bounded head in memory; what does not fit waits on disk as
 * encoded records and is read back (in order) as the head drains:
 *
 * ```
 *   publish ──▶ lane p: [ head: ≤ headSize entries in memory ] ◀── refill ── [ disk: records seq ≥ cursor ]
 *                           │ consume (highest lane first, FIFO)              ▲ publish when the lane
 *                           ▼                                                 │ already spills or the
 *                        leased ──ack──▶ gone                                 │ head is full
 *                           │ nack / lapse ──▶ back to the lane's tail ───────┘
 *                           │ nack(delay) ──▶ delayed (memory heap) ──due──▶ lane tail
 *                           └ maxDeliveries / deadLetter ──▶ DLQ
 * ```
 *
 * Invariant: in every lane, every on-disk record with seq ≥ `cursor` is *only* on disk (counted
 * in `diskCount`), every entry in memory has seq < `cursor`; a message goes to the head only
 * while the lane has nothing on disk, so FIFO order holds across memory and disk.
 *
 * Two modes:
 *   - spill only (no `dir`, or `persist: false`): only the overflow is written, to a temporary
 *     directory opened on the first spill and removed on close; the DLQ stays in memory.
 *   - persistent (`dir`, `persist` defaults to true): every message is written before
 *     `publish` resolves, attempts are written at each delivery, acks delete. A process killed
 *     with SIGKILL and reopened on the directory gets back every message not acked: leased ones
 *     are delivered again (their attempt counted), delayed ones keep their time, and the DLQ is
 *     on disk too. See `leveldb-keys.ts` for the layout.
 *
 * Payloads in memory are passed by reference (as in the memory backend); payloads read from
 * disk are delivered as decoded copies (msgpack or JSON, the queue codec's format), so consumers
 * rebuild class instances (`Request.from`) as with any encoding backend. In spill-only mode a
 * lane that overflows keeps only the first `hotSize` entries of its head in memory and sends
 * the rest to disk with the overflow: a big frontier's queued requests would otherwise be most
 * of the live heap, and V8 sizes the heap at a multiple of that. Only one process can open a
 * directory (LevelDB's lock): a second gets StoreLockedError.
 */
import zlib from 'node:zlib';
import {
  InvalidArgumentError,
  PayloadTooLargeError,
  QueueClosedError,
  QueueDecodeError,
  QueueEncodeError,
} from '../errors.js';
import { publishPoison } from './channels.js';
import {
  CODEC_MAGIC,
  createQueueCodec,
  type LazyPackr,
  lazyPackr,
  type QueueCodec,
  type QueueCodecOptions,
} from './codec.js';
import {
  EMPTY_HEADERS,
  entryId,
  type Lane,
  LeaseTable,
  type LetterStore,
  MemoryLetters,
  type StorageOp,
  type TableEntry,
  type TableStorage,
} from './lease-table.js';
import { BatchWriter, type WriteOp } from './leveldb-batch-writer.js';
import {
  composeKey,
  KeyArena,
  prefixEnd,
  priorityCode,
  priorityOf,
  readSeq,
  topicPrefix,
  writeSeq,
} from './leveldb-keys.js';
import { type OpenedStore, openStore } from './leveldb-store.js';
import { TopicRegistry } from './topic-options.js';
import type { DeadLetter, LeaseQueue, PublishMessage, QueueBackend, TopicOptions } from './types.js';

export interface LevelQueueBackendOptions {
  /**
   * Directory of the LevelDB store. With `persist` (the default when a directory is given)
   * the queue survives the process. Without a directory, overflow goes to a temporary
   * directory created on the first spill.
   */
  dir?: string;
  /** Write every message (durable, resumable). Needs `dir`. @default true when `dir` is given */
  persist?: boolean;
  /** Prefix of every topic's keys. @default 'mocra' */
  namespace?: string;
  /** Defaults for every topic; per-topic options override them. */
  topicDefaults?: TopicOptions;
  /**
   * Ready messages kept in memory per priority lane; the rest wait on disk. Every request held
   * here is a live object that V8 sizes the old generation by (several times the live heap), so
   * a frontier's head is kept short. @default 16384
   */
  headSize?: number;
  /**
   * Spill-only mode: once a lane overflows to disk (a big frontier), its head keeps only its
   * first `hotSize` messages and the rest of the head goes to disk too; refills read back up to
   * this many. A lane that never overflows keeps its whole head (`headSize`) in memory.
   * @default 1024
   */
  hotSize?: number;
  /** How payloads are written to disk. @default msgpack, gzip from 16 KiB */
  codec?: QueueCodecOptions;
  /**
   * Largest encoded payload `publish` accepts. When set, every payload is encoded at publish to
   * check it (also those kept in memory). @default no limit
   */
  maxPayloadBytes?: number;
  /** Clock (epoch ms). @default Date.now */
  now?: () => number;
}

const FORMAT_JSON = 1;
const FORMAT_MSGPACK = 2;
const FLAG_GZIP = 0x10;
const REFILL_CHUNK = 1024;
const envelopePackr = lazyPackr({ useRecords: false, mapsAsObjects: true });
const payloadPackr = lazyPackr({ useRecords: false, mapsAsObjects: true });
/**
 * For bytes that never leave this process — the records of a spill-only store (a temporary
 * directory removed on close): msgpackr's records, with their
 * structures shared by this one instance, are a third smaller and faster than plain maps.
 * Persistent records stay self-describing (envelopePackr).
 */
const localPackr = lazyPackr({ structures: [], mapsAsObjects: true });

/** A message as stored on disk. */
interface Envelope {
  /** message id; absent: `<topic>:<seq of the key, base 36>` (spill-only records) */
  i?: string;
  k?: string;
  p: number;
  h?: Record<string, string>;
  /** publishedAt */
  t: number;
  /** attempts so far */
  a: number;
  /** readyAt (delayed records) */
  r?: number;
  /** encoded payload (codec framing: any format, compression, raw injected bytes) */
  b?: Uint8Array;
  /** the payload itself, msgpack'd inline (the fast form, see #putRecord) */
  v?: unknown;
}

/** A dead letter as stored on disk. */
interface LetterEnvelope {
  i: string;
  m: string;
  k?: string;
  p: number;
  h: Record<string, string>;
  r: string;
  a: number;
  t: number;
  x: number;
  b: Uint8Array;
}

export async function createLevelQueueBackend(
  options: LevelQueueBackendOptions = {},
): Promise<LevelQueueBackend> {
  const backend = new LevelQueueBackend(options);
  await backend.open();
  return backend;
}

export class LevelQueueBackend implements QueueBackend {
  /**
   * 'leveldb' when persistent; 'memory' when spilling only — it keeps the in-memory backend's
   * semantics (nothing survives the process), the disk is only where the overflow waits.
   */
  readonly kind: 'leveldb' | 'memory';
  readonly namespace: string;
  readonly persist: boolean;
  readonly headSize: number;
  readonly hotSize: number;
  readonly maxPayloadBytes: number;
  readonly now: () => number;
  readonly codec: QueueCodec;
  /** Records carry msgpack payloads inline (the default codec) instead of framed codec bytes. */
  readonly inlinePayloads: boolean;
  readonly #format: number;
  readonly #compressThreshold: number;
  readonly #dir: string | undefined;
  readonly #topics: TopicRegistry<{ table: LeaseTable<unknown>; storage: LevelStorage<unknown> }>;
  #store: Promise<OpenedStore> | undefined;
  #opened: OpenedStore | undefined;
  #writer: BatchWriter | undefined;

  constructor(options: LevelQueueBackendOptions = {}) {
    this.namespace = options.namespace ?? 'mocra';
    this.#dir = options.dir;
    this.persist = options.persist ?? options.dir !== undefined;
    this.kind = this.persist ? 'leveldb' : 'memory';
    if (this.persist && options.dir === undefined) {
      throw new InvalidArgumentError('a persistent LevelDB queue needs a directory (dir)');
    }
    this.headSize = options.headSize ?? 16_384;
    if (!Number.isInteger(this.headSize) || this.headSize < 1) {
      throw new InvalidArgumentError(`headSize must be an integer ≥ 1, got ${options.headSize}`);
    }
    this.hotSize = options.hotSize ?? 1024;
    if (!Number.isInteger(this.hotSize) || this.hotSize < 1) {
      throw new InvalidArgumentError(`hotSize must be an integer ≥ 1, got ${options.hotSize}`);
    }
    this.maxPayloadBytes = options.maxPayloadBytes ?? Number.POSITIVE_INFINITY;
    if (!(this.maxPayloadBytes > 0)) {
      throw new InvalidArgumentError(`maxPayloadBytes must be > 0, got ${options.maxPayloadBytes}`);
    }
    this.now = options.now ?? Date.now;
    this.codec = createQueueCodec(options.codec);
    this.#format = this.codec.format === 'json' ? FORMAT_JSON : FORMAT_MSGPACK;
    this.#compressThreshold = options.codec?.compressThresholdBytes ?? 16_384;
    // Spill-only records never outlive the process: the lean inline form. Persistent records keep
    // the codec's framing (checked before any state changes, compressible, readable by tools).
    this.inlinePayloads =
      !this.persist && this.#format === FORMAT_MSGPACK && options.codec?.compressThresholdBytes === undefined;
    this.#topics = new TopicRegistry(
      options.topicDefaults,
      (name, resolved) => {
        const storage = new LevelStorage<unknown>(this, name);
        return {
          table: new LeaseTable<unknown>({ name, options: resolved, now: this.now, storage }),
          storage,
        };
      },
      { brokerNames: false },
    );
  }

  /** The store's directory, once one is open. */
  get dir(): string | undefined {
    return this.#opened?.dir ?? this.#dir;
  }

  /** Whether a store is open (spill-only backends open one on the first spill). */
  get hasStore(): boolean {
    return this.#opened !== undefined;
  }

  /** Open the store now (persistent backends; the factory does it). */
  async open(): Promise<void> {
    if (this.persist) await this.store();
  }

  /** The store, opened on first use. */
  store(): Promise<OpenedStore> {
    if (this.closed) return Promise.reject(new QueueClosedError(this.namespace));
    this.#store ??= openStore({
      ...(this.#dir === undefined ? {} : { dir: this.#dir }),
      tempPrefix: 'mocra-queue-',
    }).then((opened) => {
      this.#opened = opened;
      this.#writer = new BatchWriter(opened.db, opened.dir);
      return opened;
    });
    return this.#store;
  }

  /** Resolves once every write issued so far (acks, attempts, requeues) has reached the store. */
  async flush(): Promise<void> {
    for (const { table } of this.#topics.values()) await table.idle();
    await this.#writer?.idle();
  }

  /** The writer; only valid once `store()` resolved. */
  get writer(): BatchWriter {
    return this.#writer!;
  }

  topic<T>(name: string, options?: TopicOptions): LeaseQueue<T> {
    return this.#topics.get(name, options).table as LeaseQueue<T>;
  }

  /**
   * Write a message whose payload bytes are taken as they are (tooling, tests of poison
   * handling): it waits on disk and is decoded when read back.
   */
  async injectRaw(topic: string, bytes: Uint8Array): Promise<void> {
    const { table, storage } = this.#topics.get(topic);
    await storage.injectRaw(table, bytes);
  }

  async close(): Promise<void> {
    const topics = this.#topics.close();
    if (!topics) return;
    for (const { table } of topics) table.close();
    const store = this.#store ? await this.#store.catch(() => undefined) : undefined;
    if (store) {
      await this.#writer?.idle().catch(() => {});
      for (const { table } of topics) await table.idle();
      await store.close();
    }
  }

  get closed(): boolean {
    return this.#topics.closed;
  }

  /** Synchronous payload encoding in the queue codec's wire format (see codec.ts). */
  encodePayload(value: unknown, topic: string): Uint8Array {
    let body: Uint8Array;
    try {
      if (this.#format === FORMAT_JSON) {
        const text = JSON.stringify(value);
        if (text === undefined) throw new TypeError(`${typeof value} is not JSON-serializable`);
        body = Buffer.from(text, 'utf8');
      } else {
        body = payloadPackr.pack(value);
      }
    } catch (err) {
      throw new QueueEncodeError(topic, err instanceof Error ? err.message : String(err), { cause: err });
    }
    let flags = this.#format;
    if (this.#compressThreshold > 0 && body.length >= this.#compressThreshold) {
      const gz = zlib.gzipSync(body);
      if (gz.length < body.length) {
        body = gz;
        flags |= FLAG_GZIP;
      }
    }
    const out = new Uint8Array(body.length + 2);
    out[0] = CODEC_MAGIC;
    out[1] = flags;
    out.set(body, 2);
    return out;
  }

  prefix(kind: 'm' | 't' | 'a' | 'd' | 's', topic: string): Uint8Array {
    return topicPrefix(kind, `${this.namespace}/${topic}`);
  }
}

/**
 * The LevelDB side of one topic's {@link LeaseTable}: spilled lanes, and in persistent mode
 * every record, attempt and dead letter.
 */
class LevelStorage<T> implements TableStorage<T> {
  readonly kind: 'leveldb' | 'memory';
  readonly persist: boolean;
  readonly headSize: number;
  readonly refillTo: number;
  readonly letters: LetterStore<T>;
  readonly #backend: LevelQueueBackend;
  readonly #name: string;
  /** How records are packed: in-process records when nothing outlives the process. */
  readonly #recordPackr: LazyPackr;
  /** Once the lane overflows, the head keeps this many; the rest go to disk (Infinity: persistent mode). */
  readonly #hotSize: number;
  readonly #mPrefix: Uint8Array;
  readonly #tPrefix: Uint8Array;
  readonly #aPrefix: Uint8Array;
  readonly #sKey: Uint8Array;
  readonly #laneCodes = new Map<number, Uint8Array>();
  /** Keys of write operations (see KeyArena). */
  readonly #keys = new KeyArena();
  #savedSeq = -1;
  /** Attempts of messages that were leased when the process died (persistent recovery). */
  readonly #recoveredAttempts = new Map<number, number>();

  constructor(backend: LevelQueueBackend, name: string) {
    this.#backend = backend;
    this.#name = name;
    this.kind = backend.kind;
    this.persist = backend.persist;
    this.headSize = backend.headSize;
    this.#hotSize = backend.persist ? Number.POSITIVE_INFINITY : backend.hotSize;
    this.refillTo = Math.min(this.headSize, this.#hotSize);
    this.#recordPackr = backend.persist ? envelopePackr : localPackr;
    this.#mPrefix = backend.prefix('m', name);
    this.#tPrefix = backend.prefix('t', name);
    this.#aPrefix = backend.prefix('a', name);
    this.#sKey = backend.prefix('s', name);
    this.letters = backend.persist
      ? new LevelLetters<T>(backend, name, backend.prefix('d', name))
      : new MemoryLetters<T>();
  }

  get canSpill(): boolean {
    return this.persist || this.#backend.hasStore;
  }

  open(): Promise<unknown> {
    return this.#backend.store();
  }

  write(ops: StorageOp[]): Promise<void> {
    return this.#backend.writer.write(ops as WriteOp[]);
  }

  encode(messages: readonly PublishMessage<T>[]): (Uint8Array | undefined)[] | undefined {
    // With a size limit every payload is encoded up front, so an oversized one refuses the whole batch.
    if (!Number.isFinite(this.#backend.maxPayloadBytes) && !this.persist) return undefined;
    const encoded = messages.map((m) => this.#backend.encodePayload(m.payload, this.#name));
    for (const bytes of encoded) {
      if (bytes.length > this.#backend.maxPayloadBytes) {
        throw new PayloadTooLargeError(this.#name, bytes.length, this.#backend.maxPayloadBytes);
      }
    }
    return encoded;
  }

  /**
   * The lane overflows to disk (a big frontier): its head keeps only its first `hotSize`
   * entries and the rest follow the overflow to disk, in order (see the module comment). An
   * entry that cannot be encoded stays in memory as the object it is, and so does everything
   * before it, so that the head still holds exactly the seqs below `cursor`.
   */
  spillHead(lane: Lane<T>, ops: StorageOp[]): void {
    if (lane.head.size <= this.#hotSize) return;
    const tail = lane.head.truncate(this.#hotSize);
    let records: StorageOp[] = [];
    let from = 0;
    for (let i = 0; i < tail.length; i++) {
      try {
        this.putRecord(tail[i]!, 'm', records);
      } catch {
        records = [];
        from = i + 1;
      }
    }
    // putRecord marked each entry as on disk; in spill-only mode nothing in memory has a record.
    for (const entry of tail) entry.onDisk = undefined;
    for (let i = 0; i < from; i++) lane.head.push(tail[i]!);
    if (from === tail.length) return;
    for (const op of records) ops.push(op);
    for (let i = from; i < tail.length; i++) tail[i]!.state = 'done'; // the record is the message now
    lane.cursor = tail[from]!.seq;
    lane.diskCount += tail.length - from;
  }

  /**
   * The record of an entry. With the msgpack codec and no payload bytes at hand, the payload is
   * packed inline with the envelope (one encoding and one buffer per record — the spill path of
   * a big frontier); otherwise the codec's framed bytes are stored (json, compression, and the
   * bytes the size check already produced).
   */
  putRecord(entry: TableEntry<T>, kind: 'm' | 't', ops: StorageOp[], bytes?: Uint8Array): void {
    const envelope: Envelope = { p: entry.priority, t: entry.publishedAt, a: entry.attempt };
    // A spill-only record under the seq of its id leaves the id out (it is rebuilt from the key).
    if (this.persist || entry.foreignId !== undefined || entry.idSeq !== entry.seq) {
      envelope.i = entryId(this.#name, entry);
    }
    if (bytes === undefined && this.#backend.inlinePayloads) envelope.v = entry.payload;
    else envelope.b = bytes ?? this.#backend.encodePayload(entry.payload, this.#name);
    if (entry.key !== undefined) envelope.k = entry.key;
    if (entry.headers !== EMPTY_HEADERS && Object.keys(entry.headers).length > 0) envelope.h = entry.headers;
    if (kind === 't') envelope.r = entry.readyAt;
    let value: Uint8Array;
    try {
      value = this.#recordPackr.pack(envelope);
    } catch (err) {
      throw new QueueEncodeError(this.#name, err instanceof Error ? err.message : String(err), {
        cause: err,
      });
    }
    entry.onDisk = kind;
    ops.push({ type: 'put', key: this.#recordKey(entry.priority, entry.seq, kind), value });
  }

  /** The payload of a record read back. */
  async #payloadOf(envelope: Envelope): Promise<T> {
    if (envelope.b === undefined) return envelope.v as T;
    return (await this.#backend.codec.decode(envelope.b, this.#name)) as T;
  }

  #laneCode(priority: number): Uint8Array {
    let code = this.#laneCodes.get(priority);
    if (!code) {
      code = priorityCode(priority);
      this.#laneCodes.set(priority, code);
    }
    return code;
  }

  #recordKey(priority: number, seq: number, kind: 'm' | 't'): Uint8Array {
    return kind === 'm'
      ? this.#keys.compose(this.#mPrefix, this.#laneCode(priority), seq)
      : this.#keys.compose(this.#tPrefix, undefined, seq);
  }

  dropRecord(entry: TableEntry<T>, ops: StorageOp[]): void {
    if (entry.onDisk === undefined) return;
    ops.push({ type: 'del', key: this.#recordKey(entry.priority, entry.seq, entry.onDisk) });
    if (entry.onDisk === 'm')
      ops.push({ type: 'del', key: this.#keys.compose(this.#aPrefix, undefined, entry.seq) });
    entry.onDisk = undefined;
  }

  saveSeq(seq: number, ops: StorageOp[]): void {
    if (!this.persist || seq === this.#savedSeq) return;
    const value = new Uint8Array(8);
    writeSeq(value, 0, seq);
    ops.push({ type: 'put', key: this.#sKey, value });
    this.#savedSeq = seq;
  }

  leased(entry: TableEntry<T>, ops: StorageOp[]): void {
    const value = new Uint8Array(4);
    new DataView(value.buffer).setUint32(0, entry.attempt);
    ops.push({ type: 'put', key: this.#keys.compose(this.#aPrefix, undefined, entry.seq), value });
  }

  /** Read the next records of a lane from disk into its head. */
  async refill(lane: Lane<T>, table: LeaseTable<T>): Promise<void> {
    const store = await this.#backend.store();
    await this.#backend.writer.idle();
    const code = this.#laneCode(lane.priority);
    const to = prefixEnd(composeKey(this.#mPrefix, code, 0).subarray(0, this.#mPrefix.length + 8));
    while (!table.closed && lane.diskCount > 0 && lane.head.size < this.refillTo) {
      const limit = Math.min(REFILL_CHUNK, this.refillTo - lane.head.size, lane.diskCount);
      const from = composeKey(this.#mPrefix, code, lane.cursor);
      const rows = await store.db.iterator({ gte: from, lt: to, limit }).all();
      if (rows.length === 0) {
        // Counted but not found: the count is wrong (should not happen); resync it.
        table.countReady(-lane.diskCount);
        lane.diskCount = 0;
        break;
      }
      const ops: StorageOp[] = [];
      const poison: { seq: number; envelope: Envelope | undefined; raw: Uint8Array; error: unknown }[] = [];
      for (const [key, value] of rows) {
        const seq = readSeq(key, key.length - 8);
        lane.cursor = seq + 1;
        lane.diskCount--;
        if (!this.persist) ops.push({ type: 'del', key });
        let envelope: Envelope | undefined;
        try {
          envelope = this.#recordPackr.unpack(value) as Envelope;
          lane.head.push(this.#entryOf(envelope, seq, await this.#payloadOf(envelope), 'm'));
        } catch (error) {
          table.countReady(-1);
          if (this.persist) ops.push({ type: 'del', key });
          poison.push({ seq, envelope, raw: envelope?.b ?? value, error });
        }
      }
      for (const p of poison) this.#poisonToDlq(table, p.seq, p.envelope, p.raw, p.error, ops);
      if (ops.length > 0) await this.write(ops);
      table.serveWaiters();
    }
  }

  #entryOf(envelope: Envelope, seq: number, payload: T, onDisk: 'm' | 't'): TableEntry<T> {
    const recovered = this.#recoveredAttempts.get(seq);
    if (recovered !== undefined) this.#recoveredAttempts.delete(seq);
    return {
      idSeq: seq,
      foreignId: envelope.i,
      seq,
      payload,
      key: envelope.k,
      priority: envelope.p,
      headers: envelope.h ?? (EMPTY_HEADERS as Record<string, string>),
      publishedAt: envelope.t,
      attempt: Math.max(envelope.a, recovered ?? 0),
      generation: 0,
      state: 'ready',
      leaseDeadline: 0,
      readyAt: envelope.r ?? 0,
      onDisk: this.persist ? onDisk : undefined,
    };
  }

  #poisonToDlq(
    table: LeaseTable<T>,
    seq: number,
    envelope: Envelope | undefined,
    raw: Uint8Array,
    error: unknown,
    ops: StorageOp[],
  ): void {
    const messageId = envelope ? (envelope.i ?? `${this.#name}:${seq.toString(36)}`) : `${this.#name}:poison`;
    const message = error instanceof Error ? error.message : String(error);
    publishPoison({ backend: this.kind, topic: this.#name, messageId, error });
    const decodeError = error instanceof QueueDecodeError ? error : new QueueDecodeError(this.#name, message);
    table.addDeadLetter(
      {
        messageId,
        payload: undefined,
        raw,
        key: envelope?.k,
        priority: envelope?.p ?? 0,
        headers: envelope?.h ?? {},
        reason: `decode failed: ${decodeError.message}`,
        attempts: envelope?.a ?? 0,
        publishedAt: envelope?.t ?? this.#backend.now(),
      },
      ops,
    );
  }

  /** Write a message whose payload bytes are taken as they are; it is decoded when read back. */
  async injectRaw(table: LeaseTable<T>, bytes: Uint8Array): Promise<void> {
    await table.stats(); // recovered
    await this.#backend.store();
    const lane = table.lane(0);
    const seq = table.nextSeq;
    table.seqAtLeast(seq + 1);
    const envelope: Envelope = {
      i: `${this.#name}:${seq.toString(36)}`,
      p: 0,
      t: this.#backend.now(),
      a: 0,
      b: bytes,
    };
    const ops: StorageOp[] = [
      {
        type: 'put',
        key: composeKey(this.#mPrefix, this.#laneCode(0), seq),
        value: this.#recordPackr.pack(envelope),
      },
    ];
    lane.diskCount++;
    table.countReady(1);
    this.saveSeq(table.nextSeq, ops);
    await this.write(ops);
    table.serveWaiters();
  }

  // ── recovery (persistent mode) ─────────────────────────────────────────────

  async recover(table: LeaseTable<T>): Promise<void> {
    const store = await this.#backend.store();
    const db = store.db;
    let maxSeq = -1;
    const saved = await db.get(this.#sKey);
    if (saved !== undefined && saved.length === 8) maxSeq = readSeq(saved, 0) - 1;
    for await (const [key, value] of db.iterator({ gte: this.#aPrefix, lt: prefixEnd(this.#aPrefix) })) {
      if (value.length === 4) {
        this.#recoveredAttempts.set(
          readSeq(key, key.length - 8),
          new DataView(value.buffer, value.byteOffset).getUint32(0),
        );
      }
    }
    // Lanes: count keys only; records are read when the lane's head needs them.
    const p = this.#mPrefix.length;
    for await (const key of db.keys({ gte: this.#mPrefix, lt: prefixEnd(this.#mPrefix) })) {
      if (key.length !== p + 16) continue;
      table.lane(priorityOf(key, p)).diskCount++;
      table.countReady(1);
      const seq = readSeq(key, p + 8);
      if (seq > maxSeq) maxSeq = seq;
    }
    // Delayed messages come back into memory with their ready time.
    const ops: StorageOp[] = [];
    for await (const [key, value] of db.iterator({ gte: this.#tPrefix, lt: prefixEnd(this.#tPrefix) })) {
      const seq = readSeq(key, key.length - 8);
      if (seq > maxSeq) maxSeq = seq;
      let envelope: Envelope | undefined;
      try {
        envelope = envelopePackr.unpack(value) as Envelope;
        table.toDelayed(this.#entryOf(envelope, seq, await this.#payloadOf(envelope), 't'));
      } catch (error) {
        ops.push({ type: 'del', key });
        this.#poisonToDlq(table, seq, envelope, envelope?.b ?? value, error, ops);
      }
    }
    const letters = this.letters as LevelLetters<T>;
    const { count, maxSeq: dlqMax } = await letters.scan();
    table.countDeadLetters(count, dlqMax);
    table.seqAtLeast(maxSeq + 1);
    this.#savedSeq = table.nextSeq;
    if (ops.length > 0) await this.write(ops);
  }
}

/** The dead letters of a persistent topic, on disk. */
class LevelLetters<T> implements LetterStore<T> {
  readonly durable = true;
  readonly #backend: LevelQueueBackend;
  readonly #name: string;
  readonly #prefix: Uint8Array;

  constructor(backend: LevelQueueBackend, name: string, prefix: Uint8Array) {
    this.#backend = backend;
    this.#name = name;
    this.#prefix = prefix;
  }

  add(seq: number, letter: DeadLetter<T>, raw: Uint8Array | undefined, ops: StorageOp[]): void {
    const env: LetterEnvelope = {
      i: letter.id,
      m: letter.messageId,
      p: letter.priority,
      h: letter.headers,
      r: letter.reason,
      a: letter.attempts,
      t: letter.publishedAt,
      x: letter.deadLetteredAt,
      b:
        letter.payload === undefined && raw !== undefined
          ? rawMarker(raw)
          : this.#backend.encodePayload(letter.payload, this.#name),
    };
    if (letter.key !== undefined) env.k = letter.key;
    ops.push({ type: 'put', key: composeKey(this.#prefix, undefined, seq), value: envelopePackr.pack(env) });
  }

  remove(seq: number, _id: string, ops: StorageOp[]): void {
    ops.push({ type: 'del', key: composeKey(this.#prefix, undefined, seq) });
  }

  /** How many letters a previous process left, and the highest seq among them. */
  async scan(): Promise<{ count: number; maxSeq: number }> {
    const store = await this.#backend.store();
    let maxSeq = -1;
    let count = 0;
    for await (const key of store.db.keys({ gte: this.#prefix, lt: prefixEnd(this.#prefix) })) {
      count++;
      const seq = readSeq(key, key.length - 8);
      if (seq > maxSeq) maxSeq = seq;
    }
    return { count, maxSeq };
  }

  async all(): Promise<{ seq: number; letter: DeadLetter<T> }[]> {
    const store = await this.#backend.store();
    await this.#backend.writer.idle();
    const out: { seq: number; letter: DeadLetter<T> }[] = [];
    for await (const [key, value] of store.db.iterator({ gte: this.#prefix, lt: prefixEnd(this.#prefix) })) {
      out.push({ seq: readSeq(key, key.length - 8), letter: await this.#decode(value) });
    }
    return out;
  }

  async get(id: string): Promise<DeadLetter<T> | undefined> {
    const prefix = `dlq:${this.#name}:`;
    if (!id.startsWith(prefix) || !/^[0-9a-z]+$/.test(id.slice(prefix.length))) return undefined;
    const seq = Number.parseInt(id.slice(prefix.length), 36);
    if (!Number.isSafeInteger(seq)) return undefined;
    const store = await this.#backend.store();
    await this.#backend.writer.idle();
    const value = await store.db.get(composeKey(this.#prefix, undefined, seq));
    return value === undefined ? undefined : this.#decode(value);
  }

  async #decode(value: Uint8Array): Promise<DeadLetter<T>> {
    const env = envelopePackr.unpack(value) as LetterEnvelope;
    const letter: DeadLetter<T> = {
      id: env.i,
      topic: this.#name,
      messageId: env.m,
      payload: undefined,
      key: env.k,
      priority: env.p,
      headers: env.h ?? {},
      reason: env.r,
      attempts: env.a,
      publishedAt: env.t,
      deadLetteredAt: env.x,
    };
    const raw = rawOf(env.b);
    if (raw !== undefined) {
      letter.raw = Buffer.from(raw).toString('base64');
      return letter;
    }
    try {
      letter.payload = (await this.#backend.codec.decode(env.b, this.#name)) as T;
    } catch {
      letter.raw = Buffer.from(env.b).toString('base64');
    }
    return letter;
  }
}

/** Undecodable bytes kept in a dead letter are marked so that they are never decoded again. */
const RAW_MARK = 0xfe;
function rawMarker(raw: Uint8Array): Uint8Array {
  const out = new Uint8Array(raw.length + 1);
  out[0] = RAW_MARK;
  out.set(raw, 1);
  return out;
}
function rawOf(b: Uint8Array): Uint8Array | undefined {
  return b.length > 0 && b[0] === RAW_MARK ? b.subarray(1) : undefined;
}
