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
  LeaseExpiredError,
  PayloadTooLargeError,
  QueueClosedError,
  QueueDecodeError,
  QueueEncodeError,
} from '../errors.js';
import { publishBackpressure, publishDeadLetter, publishPoison } from './channels.js';
import {
  CODEC_MAGIC,
  createQueueCodec,
  type LazyPackr,
  lazyPackr,
  type QueueCodec,
  type QueueCodecOptions,
} from './codec.js';
import { matchesDeadLetterFilter, pageOf } from './dead-letter-filter.js';
import { Fifo } from './fifo.js';
import { MinHeap } from './heap.js';
import { BatchWriter, type WriteOp } from './leveldb-batch-writer.js';
import {
  composeKey,
  prefixEnd,
  priorityCode,
  priorityOf,
  readSeq,
  topicPrefix,
  writeSeq,
} from './leveldb-keys.js';
import { type OpenedStore, openStore } from './leveldb-store.js';
import { EarliestDeadlineTimer, MAX_TIMER_MS } from './timing.js';
import { checkConsume, checkPublish, resolveTopicOptions } from './topic-options.js';
import type {
  ConsumeOptions,
  DeadLetter,
  DeadLetterFilter,
  DeadLetterQueue,
  Delivery,
  LeaseQueue,
  PublishMessage,
  QueueBackend,
  QueueStats,
  TopicOptions,
} from './types.js';

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
  /** Ready messages kept in memory per priority lane; the rest wait on disk. @default 50000 */
  headSize?: number;
  /**
   * Spill-only mode: once a lane overflows to disk (a big frontier), its head keeps only its
   * first `hotSize` messages and the rest of the head goes to disk too; refills read back up to
   * this many. A lane that never overflows keeps its whole head (`headSize`) in memory.
   * @default 4096
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
const EMPTY_HEADERS: Readonly<Record<string, string>> = Object.freeze({});
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
  /** message id */
  i: string;
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

type EntryState = 'ready' | 'delayed' | 'leased' | 'done';

interface Entry<T> {
  readonly id: string;
  /** Storage sequence (key); a new one each time the entry moves to a lane tail. */
  seq: number;
  payload: T;
  readonly key: string | undefined;
  readonly priority: number;
  readonly headers: Record<string, string>;
  readonly publishedAt: number;
  attempt: number;
  generation: number;
  state: EntryState;
  leaseDeadline: number;
  readyAt: number;
  /** Persistent mode: which record holds it on disk ('m' lane, 't' delayed). */
  onDisk: 'm' | 't' | undefined;
  /**
   * Persistent mode: published, but its record is not written yet. Such an entry is not handed
   * out: a consumer's side effects (items written, requests marked seen) must never outlive a
   * message that a SIGKILL could still erase.
   */
  pending?: boolean;
}

interface Lane<T> {
  readonly priority: number;
  readonly code: Uint8Array;
  readonly head: Fifo<Entry<T>>;
  /** Ready messages only on disk. */
  diskCount: number;
  /** Records with seq ≥ cursor are disk-only. */
  cursor: number;
  refilling: Promise<void> | undefined;
}

interface Waiter<T> {
  max: number;
  leaseMs: number;
  resolve: (deliveries: Delivery<T>[]) => void;
  timer: NodeJS.Timeout | undefined;
  cleanup: () => void;
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
  readonly #defaults: TopicOptions;
  readonly #topics = new Map<string, LevelQueue<unknown>>();
  #store: Promise<OpenedStore> | undefined;
  #opened: OpenedStore | undefined;
  #writer: BatchWriter | undefined;
  #closed = false;

  constructor(options: LevelQueueBackendOptions = {}) {
    this.namespace = options.namespace ?? 'mocra';
    this.#dir = options.dir;
    this.persist = options.persist ?? options.dir !== undefined;
    this.kind = this.persist ? 'leveldb' : 'memory';
    if (this.persist && options.dir === undefined) {
      throw new InvalidArgumentError('a persistent LevelDB queue needs a directory (dir)');
    }
    this.headSize = options.headSize ?? 50_000;
    if (!Number.isInteger(this.headSize) || this.headSize < 1) {
      throw new InvalidArgumentError(`headSize must be an integer ≥ 1, got ${options.headSize}`);
    }
    this.hotSize = options.hotSize ?? 4096;
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
    this.#defaults = options.topicDefaults ?? {};
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
    if (this.#closed) return Promise.reject(new QueueClosedError(this.namespace));
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
    for (const topic of this.#topics.values()) await topic.idle();
    await this.#writer?.idle();
  }

  /** The writer; only valid once `store()` resolved. */
  get writer(): BatchWriter {
    return this.#writer!;
  }

  topic<T>(name: string, options?: TopicOptions): LeaseQueue<T> {
    if (this.#closed) throw new QueueClosedError(name);
    let topic = this.#topics.get(name);
    if (!topic) {
      topic = new LevelQueue<unknown>(this, name, resolveTopicOptions(name, this.#defaults, options));
      this.#topics.set(name, topic);
    }
    return topic as LeaseQueue<T>;
  }

  /**
   * Write a message whose payload bytes are taken as they are (tooling, tests of poison
   * handling): it waits on disk and is decoded when read back.
   */
  async injectRaw(topic: string, bytes: Uint8Array): Promise<void> {
    await (this.topic(topic) as LevelQueue<unknown>).injectRaw(bytes);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const topic of this.#topics.values()) topic.close();
    const store = this.#store ? await this.#store.catch(() => undefined) : undefined;
    if (store) {
      await this.#writer?.idle().catch(() => {});
      for (const topic of this.#topics.values()) await topic.idle();
      await store.close();
    }
  }

  get closed(): boolean {
    return this.#closed;
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

class LevelQueue<T> implements LeaseQueue<T> {
  readonly name: string;
  readonly options: Readonly<Required<TopicOptions>>;
  readonly deadLetters: DeadLetterQueue<T>;

  readonly #backend: LevelQueueBackend;
  readonly #persist: boolean;
  readonly #headSize: number;
  /** How records are packed: in-process records when nothing outlives the process. */
  readonly #recordPackr: LazyPackr;
  /** Once the lane overflows, the head keeps this many; the rest go to disk (Infinity: persistent mode). */
  readonly #hotSize: number;
  /** A refill reads records up to this head size. */
  readonly #refillTo: number;
  readonly #now: () => number;
  readonly #mPrefix: Uint8Array;
  readonly #tPrefix: Uint8Array;
  readonly #aPrefix: Uint8Array;
  readonly #dPrefix: Uint8Array;
  readonly #sKey: Uint8Array;
  readonly #lanes = new Map<number, Lane<T>>();
  #priorities: number[] = [];
  #ready = 0;
  readonly #delayed = new MinHeap<Entry<T>>();
  #delayedCount = 0;
  readonly #leases = new MinHeap<{ entry: Entry<T>; generation: number; deadline: number }>();
  #inflight = 0;
  /** Lease records in the heap that no longer count (settled, extended): compacted when they pile up. */
  #staleLeases = 0;
  /** Attempts of messages that were leased when the process died (persistent recovery). */
  #recoveredAttempts = new Map<number, number>();
  readonly #memoryDlq = new Map<string, DeadLetter<T>>();
  #dlqCount = 0;
  #dlqSeq = 0;
  #waiters: Waiter<T>[] = [];
  #publishWaiters: { need: number; resolve: () => void; reject: (err: unknown) => void }[] = [];
  /** Promotes delayed messages when the earliest is due (keeps the process alive: work is pending). */
  readonly #delayTimer = new EarliestDeadlineTimer(
    () => this.#promoteDue(),
    () => this.#now(),
  );
  /**
   * Reclaims expired leases. Unref'd: a lease timer alone must not keep a finished process
   * alive; a consumer that holds a lease is itself pending work and keeps the process up.
   */
  readonly #leaseTimer = new EarliestDeadlineTimer(
    () => this.#reclaimExpired(),
    () => this.#now(),
    { unref: true },
  );
  #seq = 0;
  #savedSeq = -1;
  #closed = false;
  readonly #init: Promise<void>;
  #initDone = false;
  readonly #pending = new Set<Promise<unknown>>();
  #lastError: unknown;

  constructor(backend: LevelQueueBackend, name: string, options: Required<TopicOptions>) {
    this.#backend = backend;
    this.name = name;
    this.options = Object.freeze(options);
    this.#persist = backend.persist;
    this.#headSize = backend.headSize;
    this.#recordPackr = backend.persist ? envelopePackr : localPackr;
    this.#hotSize = backend.persist ? Number.POSITIVE_INFINITY : backend.hotSize;
    this.#refillTo = Math.min(this.#headSize, this.#hotSize);
    this.#now = backend.now;
    this.#mPrefix = backend.prefix('m', name);
    this.#tPrefix = backend.prefix('t', name);
    this.#aPrefix = backend.prefix('a', name);
    this.#dPrefix = backend.prefix('d', name);
    this.#sKey = backend.prefix('s', name);
    this.deadLetters = new LevelDeadLetters(this);
    this.#init = this.#persist ? this.#recover() : Promise.resolve();
    this.#init.then(
      () => {
        this.#initDone = true;
        this.#serveWaiters();
      },
      (err: unknown) => {
        this.#lastError = err;
      },
    );
  }

  get #size(): number {
    return this.#ready + this.#delayedCount + this.#inflight;
  }

  /** Resolves when background work (refills, fire-and-forget writes) has finished. */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  // ── publish ────────────────────────────────────────────────────────────────

  async publish(messages: readonly PublishMessage<T>[]): Promise<void> {
    if (this.#closed) throw new QueueClosedError(this.name);
    if (messages.length === 0) return;
    if (!this.#initDone) await this.#init;
    const priorities = messages.map((m) => checkPublish(this.name, m.priority, m.delayMs));
    // With a size limit every payload is encoded up front, so an oversized one refuses the whole batch.
    let encoded: (Uint8Array | undefined)[] | undefined;
    if (Number.isFinite(this.#backend.maxPayloadBytes) || this.#persist) {
      encoded = messages.map((m) => this.#backend.encodePayload(m.payload, this.name));
      for (const bytes of encoded) {
        if (bytes!.length > this.#backend.maxPayloadBytes) {
          throw new PayloadTooLargeError(this.name, bytes!.length, this.#backend.maxPayloadBytes);
        }
      }
    }
    const need = Math.min(messages.length, this.options.capacity);
    if (this.#size + need > this.options.capacity) {
      publishBackpressure({ backend: this.#backend.kind, topic: this.name, queue: this });
      await new Promise<void>((resolve, reject) => this.#publishWaiters.push({ need, resolve, reject }));
      if (this.#closed) throw new QueueClosedError(this.name);
    }
    // Spilled records need the store; open it before touching any state (the rest is synchronous,
    // so a concurrent ack can never queue its delete ahead of this publish's put).
    if (!this.#persist && !this.#backend.hasStore && this.#wouldSpill(messages, priorities)) {
      await this.#backend.store();
      if (this.#closed) throw new QueueClosedError(this.name);
    }
    // Returned, not awaited: a suspended async function keeps every local and argument alive, and
    // the write can take a while (a frontier spilling to disk) — the payloads of spilled messages
    // must not stay on the heap until then.
    return this.#place(messages, priorities, encoded);
  }

  /**
   * The synchronous part of `publish`: every message to its lane head, on disk, or delayed.
   * Resolves once the records are written.
   */
  #place(
    messages: readonly PublishMessage<T>[],
    priorities: readonly number[],
    encoded: readonly (Uint8Array | undefined)[] | undefined,
  ): Promise<void> {
    const now = this.#now();
    const ops: WriteOp[] = [];
    // Persistent mode: the entries kept in memory, not deliverable before their records are written.
    const pending: Entry<T>[] = [];
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      const delay = m.delayMs ?? 0;
      const entry: Entry<T> = {
        id: `${this.name}:${this.#seq.toString(36)}`,
        seq: this.#seq++,
        payload: m.payload,
        key: m.key,
        priority: priorities[i]!,
        headers: m.headers ?? (EMPTY_HEADERS as Record<string, string>),
        publishedAt: now,
        attempt: 0,
        generation: 0,
        state: 'ready',
        leaseDeadline: 0,
        readyAt: now + delay,
        onDisk: undefined,
      };
      const bytes = encoded?.[i];
      if (delay > 0) {
        if (this.#persist) ops.push(this.#putRecord(entry, 't', bytes));
        this.#toDelayed(entry);
      } else {
        this.#placeReady(entry, ops, bytes);
      }
      if (this.#persist && entry.state !== 'done') pending.push(entry);
    }
    this.#saveSeq(ops);
    const written = ops.length > 0 ? this.#backend.writer.write(ops) : undefined;
    if (this.#persist && written) {
      // Not deliverable before durable (see Entry.pending); FIFO order holds because writes
      // complete in the order they were queued.
      for (const entry of pending) entry.pending = true;
      return written.finally(() => {
        for (const entry of pending) entry.pending = false;
        this.#serveWaiters();
      });
    }
    this.#serveWaiters();
    return written ?? Promise.resolve();
  }

  /**
   * The lane overflows to disk (a big frontier): its head keeps only its first `hotSize`
   * entries and the rest follow the overflow to disk, in order (see the module comment). An
   * entry that cannot be encoded stays in memory as the object it is, and so does everything
   * before it, so that the head still holds exactly the seqs below `cursor`.
   */
  #spillHeadTail(lane: Lane<T>, ops: WriteOp[]): void {
    if (lane.head.size <= this.#hotSize) return;
    const tail = lane.head.truncate(this.#hotSize);
    let records: WriteOp[] = [];
    let from = 0;
    for (let i = 0; i < tail.length; i++) {
      try {
        records.push(this.#putRecord(tail[i]!, 'm'));
      } catch {
        records = [];
        from = i + 1;
      }
    }
    // #putRecord marked each entry as on disk; in spill-only mode nothing in memory has a record.
    for (const entry of tail) entry.onDisk = undefined;
    for (let i = 0; i < from; i++) lane.head.push(tail[i]!);
    if (from === tail.length) return;
    for (const op of records) ops.push(op);
    for (let i = from; i < tail.length; i++) tail[i]!.state = 'done'; // the record is the message now
    lane.cursor = tail[from]!.seq;
    lane.diskCount += tail.length - from;
  }

  #wouldSpill(messages: readonly PublishMessage<T>[], priorities: number[]): boolean {
    const extra = new Map<number, number>();
    for (let i = 0; i < messages.length; i++) {
      if ((messages[i]!.delayMs ?? 0) > 0) continue;
      const p = priorities[i]!;
      const lane = this.#lanes.get(p);
      const n = (extra.get(p) ?? 0) + 1;
      extra.set(p, n);
      if (lane && lane.diskCount > 0) return true;
      if ((lane?.head.size ?? 0) + n > this.#headSize) return true;
    }
    return false;
  }

  /** Put a ready entry at its lane's tail: in the head when the lane has nothing on disk and room, else on disk. */
  #placeReady(entry: Entry<T>, ops: WriteOp[], bytes?: Uint8Array): void {
    entry.state = 'ready';
    const lane = this.#lane(entry.priority);
    if (lane.diskCount === 0 && lane.head.size < this.#headSize) {
      if (this.#persist) ops.push(this.#putRecord(entry, 'm', bytes));
      lane.cursor = entry.seq + 1;
      lane.head.push(entry);
    } else {
      if (lane.diskCount === 0) this.#spillHeadTail(lane, ops); // the lane overflows: a big frontier
      ops.push(this.#putRecord(entry, 'm', bytes));
      entry.onDisk = undefined;
      entry.state = 'done'; // the object is dropped; the record is the message now
      lane.diskCount++;
    }
    this.#ready++;
  }

  /**
   * The record of an entry. With the msgpack codec and no payload bytes at hand, the payload is
   * packed inline with the envelope (one encoding and one buffer per record — the spill path of
   * a big frontier); otherwise the codec's framed bytes are stored (json, compression, and the
   * bytes the size check already produced).
   */
  #putRecord(entry: Entry<T>, kind: 'm' | 't', bytes?: Uint8Array): WriteOp {
    const envelope: Envelope = {
      i: entry.id,
      p: entry.priority,
      t: entry.publishedAt,
      a: entry.attempt,
    };
    if (bytes === undefined && this.#backend.inlinePayloads) envelope.v = entry.payload;
    else envelope.b = bytes ?? this.#backend.encodePayload(entry.payload, this.name);
    if (entry.key !== undefined) envelope.k = entry.key;
    if (entry.headers !== EMPTY_HEADERS && Object.keys(entry.headers).length > 0) envelope.h = entry.headers;
    if (kind === 't') envelope.r = entry.readyAt;
    entry.onDisk = kind;
    let value: Uint8Array;
    try {
      value = this.#recordPackr.pack(envelope);
    } catch (err) {
      throw new QueueEncodeError(this.name, err instanceof Error ? err.message : String(err), { cause: err });
    }
    return { type: 'put', key: this.#recordKey(entry, kind), value };
  }

  /** The payload of a record read back. */
  async #payloadOf(envelope: Envelope): Promise<T> {
    if (envelope.b === undefined) return envelope.v as T;
    return (await this.#backend.codec.decode(envelope.b, this.name)) as T;
  }

  #recordKey(entry: Entry<T>, kind: 'm' | 't'): Uint8Array {
    return kind === 'm'
      ? composeKey(this.#mPrefix, this.#lane(entry.priority).code, entry.seq)
      : composeKey(this.#tPrefix, undefined, entry.seq);
  }

  /** Delete the on-disk record (and attempt key) of an entry (persistent mode). */
  #dropRecord(entry: Entry<T>, ops: WriteOp[]): void {
    if (entry.onDisk === undefined) return;
    ops.push({ type: 'del', key: this.#recordKey(entry, entry.onDisk) });
    if (entry.onDisk === 'm') ops.push({ type: 'del', key: composeKey(this.#aPrefix, undefined, entry.seq) });
    entry.onDisk = undefined;
  }

  #saveSeq(ops: WriteOp[]): void {
    if (!this.#persist || this.#seq === this.#savedSeq) return;
    const value = new Uint8Array(8);
    writeSeq(value, 0, this.#seq);
    ops.push({ type: 'put', key: this.#sKey, value });
    this.#savedSeq = this.#seq;
  }

  #lane(priority: number): Lane<T> {
    let lane = this.#lanes.get(priority);
    if (!lane) {
      lane = {
        priority,
        code: priorityCode(priority),
        head: new Fifo<Entry<T>>(),
        diskCount: 0,
        cursor: 0,
        refilling: undefined,
      };
      this.#lanes.set(priority, lane);
      this.#priorities.push(priority);
      this.#priorities.sort((a, b) => b - a);
    }
    return lane;
  }

  // ── consume ────────────────────────────────────────────────────────────────

  consume(options: ConsumeOptions): Promise<Delivery<T>[]> {
    if (this.#closed) return Promise.resolve([]);
    let max: number;
    try {
      max = checkConsume(this.name, options.max);
    } catch (err) {
      return Promise.reject(err); // a bad argument rejects, as from every other backend
    }
    if (!this.#initDone) return this.#init.then(() => this.consume(options));
    const leaseMs = options.leaseMs ?? this.options.leaseMs;
    this.#reclaimExpired();
    this.#promoteDue();
    const got = this.#take(max, leaseMs);
    if (got.length > 0) return Promise.resolve(got);
    const waitMs = options.waitMs ?? 1000;
    const signal = options.signal;
    if (waitMs <= 0 || signal?.aborted) {
      // Nothing in memory now; a refill may be on its way: wait for it when asked not to block.
      return this.#afterRefills().then(() => (this.#closed ? [] : this.#take(max, leaseMs)));
    }
    return new Promise<Delivery<T>[]>((resolve) => {
      const waiter: Waiter<T> = {
        max,
        leaseMs,
        resolve,
        timer: undefined,
        cleanup: () => {
          if (waiter.timer) clearTimeout(waiter.timer);
          signal?.removeEventListener('abort', onAbort);
        },
      };
      const leave = () => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
        waiter.cleanup();
        resolve([]);
      };
      const onAbort = () => leave();
      waiter.timer = setTimeout(leave, Math.min(waitMs, MAX_TIMER_MS));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
      this.#serveWaiters();
    });
  }

  async #afterRefills(): Promise<void> {
    const refills = [...this.#lanes.values()].map((l) => l.refilling).filter((p) => p !== undefined);
    if (refills.length > 0) await Promise.allSettled(refills);
  }

  /**
   * Lease up to `max` entries from the heads, highest lane first. A lane whose head is empty
   * but which has records on disk stops the walk (strict priority) and starts a refill.
   */
  #take(max: number, leaseMs: number): Delivery<T>[] {
    const out: Delivery<T>[] = [];
    if (this.#ready === 0) return out;
    const now = this.#now();
    const deadline = now + leaseMs;
    const attemptOps: WriteOp[] = [];
    for (let p = 0; p < this.#priorities.length && out.length < max; p++) {
      const lane = this.#lanes.get(this.#priorities[p]!)!;
      while (lane.head.size > 0 && out.length < max) {
        if (lane.head.peek()!.pending) break; // not written yet: nothing behind it goes first
        const entry = lane.head.shift()!;
        this.#ready--;
        entry.state = 'leased';
        entry.attempt++;
        entry.generation++;
        entry.leaseDeadline = deadline;
        this.#inflight++;
        this.#leases.push(deadline, { entry, generation: entry.generation, deadline });
        if (this.#persist) attemptOps.push(this.#attemptOp(entry));
        out.push(new LevelDelivery(this, entry, entry.generation));
      }
      if (lane.diskCount > 0 && lane.head.size <= this.#refillTo / 4) this.#refill(lane);
      if (lane.head.size === 0 && lane.diskCount > 0) break;
    }
    if (attemptOps.length > 0) this.#background(this.#backend.writer.write(attemptOps));
    if (out.length > 0) this.#armLeaseTimer();
    return out;
  }

  #attemptOp(entry: Entry<T>): WriteOp {
    const value = new Uint8Array(4);
    new DataView(value.buffer).setUint32(0, entry.attempt);
    return { type: 'put', key: composeKey(this.#aPrefix, undefined, entry.seq), value };
  }

  /** Read the next records of a lane from disk into its head. */
  #refill(lane: Lane<T>): void {
    if (lane.refilling || this.#closed) return;
    const run = (async () => {
      const store = await this.#backend.store();
      await this.#backend.writer.idle();
      while (!this.#closed && lane.diskCount > 0 && lane.head.size < this.#refillTo) {
        const limit = Math.min(REFILL_CHUNK, this.#refillTo - lane.head.size, lane.diskCount);
        const from = composeKey(this.#mPrefix, lane.code, lane.cursor);
        const to = prefixEnd(composeKey(this.#mPrefix, lane.code, 0).subarray(0, this.#mPrefix.length + 8));
        const rows = await store.db.iterator({ gte: from, lt: to, limit }).all();
        if (rows.length === 0) {
          // Counted but not found: the count is wrong (should not happen); resync it.
          this.#ready -= lane.diskCount;
          lane.diskCount = 0;
          break;
        }
        const dels: WriteOp[] = [];
        const poison: { seq: number; envelope: Envelope | undefined; raw: Uint8Array; error: unknown }[] = [];
        for (const [key, value] of rows) {
          const seq = readSeq(key, key.length - 8);
          lane.cursor = seq + 1;
          lane.diskCount--;
          if (!this.#persist) dels.push({ type: 'del', key });
          let envelope: Envelope | undefined;
          try {
            envelope = this.#recordPackr.unpack(value) as Envelope;
            const payload = await this.#payloadOf(envelope);
            const entry = this.#entryOf(envelope, seq, payload, 'm');
            lane.head.push(entry);
          } catch (error) {
            this.#ready--;
            if (this.#persist) dels.push({ type: 'del', key });
            poison.push({ seq, envelope, raw: envelope?.b ?? value, error });
          }
        }
        const ops = dels;
        for (const p of poison) this.#poisonToDlq(p.envelope, p.raw, p.error, ops);
        if (ops.length > 0) await this.#backend.writer.write(ops);
        this.#serveWaiters();
      }
    })();
    lane.refilling = run;
    this.#background(
      run.finally(() => {
        lane.refilling = undefined;
        this.#serveWaiters();
      }),
    );
  }

  #entryOf(envelope: Envelope, seq: number, payload: T, onDisk: 'm' | 't' | undefined): Entry<T> {
    const recovered = this.#recoveredAttempts.get(seq);
    if (recovered !== undefined) this.#recoveredAttempts.delete(seq);
    return {
      id: envelope.i,
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
      onDisk: this.#persist ? onDisk : undefined,
    };
  }

  #poisonToDlq(envelope: Envelope | undefined, raw: Uint8Array, error: unknown, ops: WriteOp[]): void {
    const messageId = envelope?.i ?? `${this.name}:poison`;
    const message = error instanceof Error ? error.message : String(error);
    publishPoison({ backend: this.#backend.kind, topic: this.name, messageId, error });
    const decodeError = error instanceof QueueDecodeError ? error : new QueueDecodeError(this.name, message);
    this.#addDeadLetter(
      {
        messageId,
        payload: undefined,
        raw,
        key: envelope?.k,
        priority: envelope?.p ?? 0,
        headers: envelope?.h ?? {},
        reason: `decode failed: ${decodeError.message}`,
        attempts: envelope?.a ?? 0,
        publishedAt: envelope?.t ?? this.#now(),
      },
      ops,
    );
  }

  #serveWaiters(): void {
    while (this.#waiters.length > 0 && this.#ready > 0 && this.#initDone) {
      const waiter = this.#waiters[0]!;
      const got = this.#take(waiter.max, waiter.leaseMs);
      if (got.length === 0) return; // a refill is on its way; it calls back
      this.#waiters.shift();
      waiter.cleanup();
      waiter.resolve(got);
    }
  }

  async stats(): Promise<QueueStats> {
    if (!this.#initDone) await this.#init;
    this.#reclaimExpired();
    this.#promoteDue();
    return {
      ready: this.#ready,
      inflight: this.#inflight,
      delayed: this.#delayedCount,
      deadLettered: this.#dlqCount,
    };
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const w of this.#waiters) {
      w.cleanup();
      w.resolve([]);
    }
    this.#waiters = [];
    for (const p of this.#publishWaiters) p.reject(new QueueClosedError(this.name));
    this.#publishWaiters = [];
    this.#delayTimer.clear();
    this.#leaseTimer.clear();
  }

  // ── settle (called by LevelDelivery) ───────────────────────────────────────

  async settle(
    entry: Entry<T>,
    generation: number,
    outcome: 'ack' | 'nack' | 'dead',
    delayMs: number,
    reason: string,
  ): Promise<void> {
    this.#checkLease(entry, generation);
    this.#inflight--;
    this.#leaseSettled();
    const ops: WriteOp[] = [];
    if (outcome === 'ack') {
      entry.state = 'done';
      this.#dropRecord(entry, ops);
      // Stale lease records may still point at the entry; the payload need not stay with it.
      (entry as { payload: T | undefined }).payload = undefined;
    } else if (outcome === 'dead' || entry.attempt >= this.options.maxDeliveries) {
      this.#toDeadLetters(
        entry,
        outcome === 'dead' ? reason : `${reason} (after ${entry.attempt} deliveries)`,
        ops,
      );
    } else {
      this.#requeue(entry, delayMs, ops);
    }
    this.#saveSeq(ops);
    const written = ops.length > 0 ? this.#backend.writer.write(ops) : undefined;
    this.#afterRemoval();
    this.#serveWaiters();
    if (written) await written;
  }

  extend(entry: Entry<T>, generation: number, ms: number): void {
    this.#checkLease(entry, generation);
    const deadline = this.#now() + ms;
    entry.leaseDeadline = deadline;
    this.#leases.push(deadline, { entry, generation, deadline });
    this.#leaseSettled();
    this.#armLeaseTimer();
  }

  /**
   * One lease record went stale. The heap deletes lazily (records are skipped when they come
   * due); at high throughput that would keep every acked message for a whole lease length,
   * so the heap is rebuilt once stale records outnumber live ones.
   */
  #leaseSettled(): void {
    this.#staleLeases++;
    if (this.#staleLeases < 1024 || this.#staleLeases < 2 * this.#inflight) return;
    const keep: { entry: Entry<T>; generation: number; deadline: number }[] = [];
    while (this.#leases.size > 0) {
      const lease = this.#leases.pop()!;
      const { entry } = lease;
      if (
        entry.state === 'leased' &&
        entry.generation === lease.generation &&
        entry.leaseDeadline === lease.deadline
      ) {
        keep.push(lease);
      }
    }
    for (const lease of keep) this.#leases.push(lease.deadline, lease);
    this.#staleLeases = 0;
  }

  #checkLease(entry: Entry<T>, generation: number): void {
    if (this.#closed) throw new QueueClosedError(this.name);
    if (entry.state !== 'leased' || entry.generation !== generation)
      throw new LeaseExpiredError(this.name, entry.id);
  }

  /** Back to the lane's tail (now, or after a delay), under a new seq. */
  #requeue(entry: Entry<T>, delayMs: number, ops: WriteOp[]): void {
    this.#dropRecord(entry, ops);
    entry.seq = this.#seq++;
    if (delayMs > 0) {
      entry.readyAt = this.#now() + delayMs;
      if (this.#persist) ops.push(this.#putRecord(entry, 't'));
      this.#toDelayed(entry);
    } else {
      this.#placeReadyOrSpill(entry, ops);
    }
  }

  /** #placeReady for entries that already exist (spilling may need the store to be opened first). */
  #placeReadyOrSpill(entry: Entry<T>, ops: WriteOp[]): void {
    const lane = this.#lane(entry.priority);
    const spills = lane.diskCount > 0 || lane.head.size >= this.#headSize;
    if (spills && !this.#persist && !this.#backend.hasStore) {
      // Rare (a requeue into a full head before anything spilled): keep it in memory rather
      // than block a synchronous path on opening the store; the head may exceed headSize by it.
      entry.state = 'ready';
      lane.cursor = Math.max(lane.cursor, entry.seq + 1);
      lane.head.push(entry);
      this.#ready++;
      return;
    }
    this.#placeReady(entry, ops);
  }

  #toDelayed(entry: Entry<T>): void {
    entry.state = 'delayed';
    this.#delayed.push(entry.readyAt, entry);
    this.#delayedCount++;
    this.#armDelayTimer();
  }

  #toDeadLetters(entry: Entry<T>, reason: string, ops: WriteOp[]): void {
    entry.state = 'done';
    this.#dropRecord(entry, ops);
    this.#addDeadLetter(
      {
        messageId: entry.id,
        payload: entry.payload,
        key: entry.key,
        priority: entry.priority,
        headers: { ...entry.headers },
        reason,
        attempts: entry.attempt,
        publishedAt: entry.publishedAt,
      },
      ops,
    );
  }

  #addDeadLetter(
    letter: Omit<DeadLetter<T>, 'id' | 'topic' | 'deadLetteredAt' | 'raw'> & { raw?: Uint8Array },
    ops: WriteOp[],
  ): void {
    const seq = this.#dlqSeq++;
    const id = `dlq:${this.name}:${seq.toString(36)}`;
    const deadLetteredAt = this.#now();
    this.#dlqCount++;
    publishDeadLetter({
      backend: this.#backend.kind,
      topic: this.name,
      messageId: letter.messageId,
      reason: letter.reason,
      attempts: letter.attempts,
    });
    const raw = letter.raw === undefined ? undefined : Buffer.from(letter.raw).toString('base64');
    if (!this.#persist) {
      const entry: DeadLetter<T> = {
        id,
        topic: this.name,
        messageId: letter.messageId,
        payload: letter.payload,
        key: letter.key,
        priority: letter.priority,
        headers: letter.headers,
        reason: letter.reason,
        attempts: letter.attempts,
        publishedAt: letter.publishedAt,
        deadLetteredAt,
      };
      if (raw !== undefined) entry.raw = raw;
      this.#memoryDlq.set(id, entry);
      return;
    }
    const env: LetterEnvelope = {
      i: id,
      m: letter.messageId,
      p: letter.priority,
      h: letter.headers,
      r: letter.reason,
      a: letter.attempts,
      t: letter.publishedAt,
      x: deadLetteredAt,
      b:
        letter.payload === undefined && letter.raw !== undefined
          ? rawMarker(letter.raw)
          : this.#backend.encodePayload(letter.payload, this.name),
    };
    if (letter.key !== undefined) env.k = letter.key;
    ops.push({ type: 'put', key: composeKey(this.#dPrefix, undefined, seq), value: envelopePackr.pack(env) });
  }

  // ── dead-letter queue (called by LevelDeadLetters) ───────────────────────────

  async letters(): Promise<{ seq: number; letter: DeadLetter<T> }[]> {
    if (!this.#initDone) await this.#init;
    if (!this.#persist) {
      return [...this.#memoryDlq.values()].map((letter) => ({ seq: dlqSeqOf(letter.id), letter }));
    }
    const store = await this.#backend.store();
    await this.#backend.writer.idle();
    const out: { seq: number; letter: DeadLetter<T> }[] = [];
    for await (const [key, value] of store.db.iterator({
      gte: this.#dPrefix,
      lt: prefixEnd(this.#dPrefix),
    })) {
      out.push({ seq: readSeq(key, key.length - 8), letter: await this.#decodeLetter(value) });
    }
    return out;
  }

  async #decodeLetter(value: Uint8Array): Promise<DeadLetter<T>> {
    const env = envelopePackr.unpack(value) as LetterEnvelope;
    const letter: DeadLetter<T> = {
      id: env.i,
      topic: this.name,
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
      letter.payload = (await this.#backend.codec.decode(env.b, this.name)) as T;
    } catch {
      letter.raw = Buffer.from(env.b).toString('base64');
    }
    return letter;
  }

  async getLetter(id: string): Promise<DeadLetter<T> | undefined> {
    if (!this.#initDone) await this.#init;
    if (!this.#persist) return this.#memoryDlq.get(id);
    const prefix = `dlq:${this.name}:`;
    if (!id.startsWith(prefix) || !/^[0-9a-z]+$/.test(id.slice(prefix.length))) return undefined;
    const seq = Number.parseInt(id.slice(prefix.length), 36);
    if (!Number.isSafeInteger(seq)) return undefined;
    const store = await this.#backend.store();
    await this.#backend.writer.idle();
    const value = await store.db.get(composeKey(this.#dPrefix, undefined, seq));
    return value === undefined ? undefined : this.#decodeLetter(value);
  }

  /** Remove dead letters (and, for replay, publish them again with attempts starting over). */
  async removeLetters(filter: DeadLetterFilter | undefined, replay: boolean): Promise<number> {
    // An in-memory DLQ stays readable and purgeable after close (a finished run's dead letters
    // are inspected after it); replaying into a closed topic, or touching a closed store, is refused.
    if (this.#closed && (replay || this.#persist)) throw new QueueClosedError(this.name);
    const matching = (await this.letters()).filter(({ letter }) => matchesDeadLetterFilter(letter, filter));
    if (matching.length === 0) return 0;
    const ops: WriteOp[] = [];
    for (const { seq, letter } of matching) {
      if (this.#persist) ops.push({ type: 'del', key: composeKey(this.#dPrefix, undefined, seq) });
      else this.#memoryDlq.delete(letter.id);
      this.#dlqCount--;
      if (replay) {
        const entry: Entry<T> = {
          id: letter.messageId,
          seq: this.#seq++,
          payload: letter.payload as T,
          key: letter.key,
          priority: letter.priority,
          headers: letter.headers,
          publishedAt: letter.publishedAt,
          attempt: 0,
          generation: 0,
          state: 'ready',
          leaseDeadline: 0,
          readyAt: 0,
          onDisk: undefined,
        };
        if (!this.#persist && !this.#backend.hasStore) {
          const lane = this.#lane(entry.priority);
          if (lane.diskCount > 0 || lane.head.size >= this.#headSize) await this.#backend.store();
        }
        this.#placeReady(entry, ops);
      }
    }
    this.#saveSeq(ops);
    if (ops.length > 0) await this.#backend.writer.write(ops);
    this.#serveWaiters();
    return matching.length;
  }

  get deadLetterCount(): number {
    return this.#dlqCount;
  }

  async injectRaw(bytes: Uint8Array): Promise<void> {
    if (!this.#initDone) await this.#init;
    await this.#backend.store();
    const lane = this.#lane(0);
    const envelope: Envelope = {
      i: `${this.name}:${this.#seq.toString(36)}`,
      p: 0,
      t: this.#now(),
      a: 0,
      b: bytes,
    };
    const seq = this.#seq++;
    const ops: WriteOp[] = [
      {
        type: 'put',
        key: composeKey(this.#mPrefix, lane.code, seq),
        value: this.#recordPackr.pack(envelope),
      },
    ];
    lane.diskCount++;
    this.#ready++;
    this.#saveSeq(ops);
    await this.#backend.writer.write(ops);
    this.#serveWaiters();
  }

  // ── recovery (persistent mode) ─────────────────────────────────────────────

  async #recover(): Promise<void> {
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
      const lane = this.#lane(priorityOf(key, p));
      lane.diskCount++;
      this.#ready++;
      const seq = readSeq(key, p + 8);
      if (seq > maxSeq) maxSeq = seq;
    }
    // Delayed messages come back into memory with their ready time.
    const ops: WriteOp[] = [];
    for await (const [key, value] of db.iterator({ gte: this.#tPrefix, lt: prefixEnd(this.#tPrefix) })) {
      const seq = readSeq(key, key.length - 8);
      if (seq > maxSeq) maxSeq = seq;
      let envelope: Envelope | undefined;
      try {
        envelope = envelopePackr.unpack(value) as Envelope;
        const payload = await this.#payloadOf(envelope);
        const entry = this.#entryOf(envelope, seq, payload, 't');
        this.#toDelayed(entry);
      } catch (error) {
        ops.push({ type: 'del', key });
        this.#poisonToDlq(envelope, envelope?.b ?? value, error, ops);
      }
    }
    let dlqMax = -1;
    let dlqCount = 0;
    for await (const key of db.keys({ gte: this.#dPrefix, lt: prefixEnd(this.#dPrefix) })) {
      dlqCount++;
      const seq = readSeq(key, key.length - 8);
      if (seq > dlqMax) dlqMax = seq;
    }
    this.#dlqCount += dlqCount;
    this.#dlqSeq = Math.max(this.#dlqSeq, dlqMax + 1);
    this.#seq = Math.max(this.#seq, maxSeq + 1);
    this.#savedSeq = this.#seq;
    if (ops.length > 0) await this.#backend.writer.write(ops);
  }

  // ── timers ─────────────────────────────────────────────────────────────────

  #afterRemoval(): void {
    while (this.#publishWaiters.length > 0) {
      const next = this.#publishWaiters[0]!;
      if (this.#size + next.need > this.options.capacity) break;
      this.#publishWaiters.shift();
      next.resolve();
    }
  }

  #promoteDue(): void {
    const now = this.#now();
    let moved = false;
    const ops: WriteOp[] = [];
    while (this.#delayedCount > 0 && (this.#delayed.peekKey() ?? Number.POSITIVE_INFINITY) <= now) {
      const entry = this.#delayed.pop()!;
      this.#delayedCount--;
      this.#dropRecord(entry, ops);
      entry.seq = this.#seq++;
      this.#placeReadyOrSpill(entry, ops);
      moved = true;
    }
    if (moved) {
      this.#saveSeq(ops);
      if (ops.length > 0) this.#background(this.#writeWhenOpen(ops));
      this.#serveWaiters();
    }
    this.#armDelayTimer();
  }

  #reclaimExpired(): void {
    const now = this.#now();
    let freed = false;
    const ops: WriteOp[] = [];
    while (this.#leases.size > 0 && this.#leases.peekKey()! <= now) {
      const lease = this.#leases.pop()!;
      const { entry } = lease;
      if (
        entry.state !== 'leased' ||
        entry.generation !== lease.generation ||
        entry.leaseDeadline !== lease.deadline
      ) {
        if (this.#staleLeases > 0) this.#staleLeases--;
        continue;
      }
      this.#inflight--;
      entry.generation++; // the lapsed delivery can no longer settle
      if (entry.attempt >= this.options.maxDeliveries) {
        this.#toDeadLetters(entry, `lease expired (after ${entry.attempt} deliveries)`, ops);
        freed = true;
      } else {
        this.#requeue(entry, 0, ops);
      }
    }
    if (ops.length > 0) {
      this.#saveSeq(ops);
      this.#background(this.#writeWhenOpen(ops));
    }
    if (freed) this.#afterRemoval();
    this.#serveWaiters();
    this.#armLeaseTimer();
  }

  async #writeWhenOpen(ops: WriteOp[]): Promise<void> {
    await this.#backend.store();
    await this.#backend.writer.write(ops);
  }

  #background(p: Promise<unknown>): void {
    const tracked = p.catch((err: unknown) => {
      this.#lastError = err;
    });
    this.#pending.add(tracked);
    void tracked.finally(() => this.#pending.delete(tracked));
  }

  /** The last error of a background write or refill (observability). */
  get lastError(): unknown {
    return this.#lastError;
  }

  #armDelayTimer(): void {
    if (!this.#closed) this.#delayTimer.arm(this.#delayed.peekKey());
  }

  #armLeaseTimer(): void {
    if (!this.#closed) this.#leaseTimer.arm(this.#leases.peekKey());
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

function dlqSeqOf(id: string): number {
  const n = Number.parseInt(id.slice(id.lastIndexOf(':') + 1), 36);
  return Number.isSafeInteger(n) ? n : 0;
}

class LevelDelivery<T> implements Delivery<T> {
  readonly #queue: LevelQueue<T>;
  readonly #entry: Entry<T>;
  readonly #generation: number;
  /** Kept here: the entry drops its payload once acked. */
  readonly #payload: T;

  constructor(queue: LevelQueue<T>, entry: Entry<T>, generation: number) {
    this.#queue = queue;
    this.#entry = entry;
    this.#generation = generation;
    this.#payload = entry.payload;
  }

  get id(): string {
    return this.#entry.id;
  }
  get topic(): string {
    return this.#queue.name;
  }
  get payload(): T {
    return this.#payload;
  }
  get key(): string | undefined {
    return this.#entry.key;
  }
  get priority(): number {
    return this.#entry.priority;
  }
  get attempt(): number {
    return this.#entry.attempt;
  }
  get publishedAt(): number {
    return this.#entry.publishedAt;
  }
  get headers(): Readonly<Record<string, string>> {
    return this.#entry.headers;
  }
  get leaseDeadline(): number {
    return this.#entry.leaseDeadline;
  }

  ack(): Promise<void> {
    return this.#run(() => this.#queue.settle(this.#entry, this.#generation, 'ack', 0, ''));
  }

  nack(options: { delayMs?: number; reason?: string } = {}): Promise<void> {
    return this.#run(() =>
      this.#queue.settle(
        this.#entry,
        this.#generation,
        'nack',
        options.delayMs ?? 0,
        options.reason ?? 'nack',
      ),
    );
  }

  async extendLease(ms?: number): Promise<void> {
    this.#queue.extend(this.#entry, this.#generation, ms ?? this.#queue.options.leaseMs);
  }

  deadLetter(reason: string): Promise<void> {
    return this.#run(() => this.#queue.settle(this.#entry, this.#generation, 'dead', 0, reason));
  }

  #run(fn: () => Promise<void>): Promise<void> {
    try {
      return fn();
    } catch (err) {
      return Promise.reject(err);
    }
  }
}

class LevelDeadLetters<T> implements DeadLetterQueue<T> {
  readonly #queue: LevelQueue<T>;

  constructor(queue: LevelQueue<T>) {
    this.#queue = queue;
  }

  async list(
    options: { limit?: number; offset?: number; filter?: DeadLetterFilter } = {},
  ): Promise<DeadLetter<T>[]> {
    const all = (await this.#queue.letters())
      .sort((a, b) => a.seq - b.seq)
      .map(({ letter }) => letter)
      .filter((letter) => matchesDeadLetterFilter(letter, options.filter));
    return pageOf(all, options.offset ?? 0, options.limit ?? 100);
  }

  get(id: string): Promise<DeadLetter<T> | undefined> {
    return this.#queue.getLetter(id);
  }

  replay(filter?: DeadLetterFilter): Promise<number> {
    return this.#queue.removeLetters(filter, true);
  }

  purge(filter?: DeadLetterFilter): Promise<number> {
    return this.#queue.removeLetters(filter, false);
  }

  async size(): Promise<number> {
    await this.#queue.stats();
    return this.#queue.deadLetterCount;
  }
}
