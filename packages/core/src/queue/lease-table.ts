/**
 * The lease table: the one state machine behind the in-process queues. The memory backend is a
 * table with no storage; the memory + LevelDB backend is the same table with a
 * {@link TableStorage} that spills lanes to disk (and, when persistent, writes every change).
 *
 * ```
 *            publish                consume (highest lane first, FIFO inside a lane)
 *   ──▶ lanes: [prio 10] head ▶▶▶ ─┐            ◀── refill ── [storage: spilled tail]
 *              [prio  0] head ▶▶▶ ─┼──▶ leased (lease heap, one timer) ──ack──▶ gone
 *              [prio -3] head ▶▶▶ ─┘         │ lease lapses / nack
 *         ▲                                  ▼
 *         └──── delayed (ready-time heap, one timer) ◀── nack(delay)    DLQ (LetterStore)
 * ```
 *
 * Invariants: an entry is in exactly one of lanes / delayed / leased / done; `generation`
 * increases on every delivery, so a settle call from an older delivery (whose lease lapsed and
 * whose message went to someone else) is refused with LeaseExpiredError. In every lane, the
 * entries in the head have seq < `cursor` and the `diskCount` messages in storage have
 * seq ≥ `cursor`; a message goes to the head only while its lane has nothing in storage, so FIFO
 * order holds across memory and storage.
 *
 * Every storage call adds its writes to one `ops` batch per step; the table hands the batch to
 * `storage.write` once the step's state changes are done (synchronously, so writes keep the
 * order of the changes that made them).
 */
import { LeaseExpiredError, QueueClosedError } from '../errors.js';
import { publishBackpressure, publishDeadLetter } from './channels.js';
import { matchesDeadLetterFilter, pageOfLetters } from './dead-letter-filter.js';
import { Fifo } from './fifo.js';
import { MinHeap } from './heap.js';
import { EarliestDeadlineTimer, MAX_TIMER_MS } from './timing.js';
import { checkConsume, checkPublish } from './topic-options.js';
import type {
  ConsumeOptions,
  DeadLetter,
  DeadLetterFilter,
  DeadLetterQueue,
  Delivery,
  LeaseQueue,
  PublishMessage,
  QueueBackendKind,
  QueueStats,
  TopicOptions,
} from './types.js';

export type EntryState = 'ready' | 'delayed' | 'leased' | 'done';

/**
 * One message of the table. Its id is `<topic>:<idSeq in base 36>` and is built only when read
 * (a queued frontier would otherwise hold a string per message); a message whose id came from
 * elsewhere (a replayed dead letter, a record read back) carries it in `foreignId`.
 */
export interface TableEntry<T> {
  /** The seq the message was published under (its id). */
  readonly idSeq: number;
  readonly foreignId: string | undefined;
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
  /** Persistent storage: which record holds it ('m' lane, 't' delayed). */
  onDisk: 'm' | 't' | undefined;
  /**
   * Persistent storage: published, but its record is not written yet. Such an entry is not
   * handed out: a consumer's side effects (items written, requests marked seen) must never
   * outlive a message that a SIGKILL could still erase.
   */
  pending?: boolean;
}

export interface Lane<T> {
  readonly priority: number;
  readonly head: Fifo<TableEntry<T>>;
  /** Ready messages only in storage. */
  diskCount: number;
  /** Messages with seq ≥ cursor are in storage only. */
  cursor: number;
  refilling: Promise<void> | undefined;
}

/** An opaque storage write (the LevelDB backend's put/del); the table only batches them. */
export type StorageOp = unknown;

/** A dead letter on its way to the {@link LetterStore}, with the bytes that could not be decoded. */
export type NewDeadLetter<T> = Omit<DeadLetter<T>, 'id' | 'topic' | 'deadLetteredAt' | 'raw'> & {
  raw?: Uint8Array;
};

/** Where a table keeps its dead letters. */
export interface LetterStore<T> {
  add(seq: number, letter: DeadLetter<T>, raw: Uint8Array | undefined, ops: StorageOp[]): void;
  /** Every letter with its sequence, in any order. */
  all(): Promise<{ seq: number; letter: DeadLetter<T> }[]>;
  get(id: string): Promise<DeadLetter<T> | undefined>;
  remove(seq: number, id: string, ops: StorageOp[]): void;
  /** Letters written to a store that outlives the process (refused once it is closed). */
  readonly durable: boolean;
}

/**
 * What a store behind the table does at each step of the state machine. Every method adds its
 * writes to `ops`; `write` commits a batch.
 */
export interface TableStorage<T> {
  readonly kind: QueueBackendKind;
  /** Every message, attempt and dead letter is written (the table survives the process). */
  readonly persist: boolean;
  /** Ready messages a lane keeps in memory before the rest wait in storage. */
  readonly headSize: number;
  /** A refill reads up to this many into a head; one starts when the head is down to a quarter. */
  readonly refillTo: number;
  readonly letters: LetterStore<T>;
  /** Whether a spill can be written now (a spill-only store opens on its first spill). */
  readonly canSpill: boolean;
  /** Open the store (a spill needs it; persistent stores are open from the start). */
  open(): Promise<unknown>;
  /** Load what a previous process left into `table` (persistent storage). */
  recover(table: LeaseTable<T>): Promise<void>;
  /** Payload bytes checked before anything changes (throws to refuse the whole batch). */
  encode(messages: readonly PublishMessage<T>[]): (Uint8Array | undefined)[] | undefined;
  /** Write the entry's record (`m`: lane, `t`: delayed). */
  putRecord(entry: TableEntry<T>, kind: 'm' | 't', ops: StorageOp[], bytes?: Uint8Array): void;
  /** Delete the entry's record, if it has one. */
  dropRecord(entry: TableEntry<T>, ops: StorageOp[]): void;
  /** A delivery started (persistent storage counts the attempt). */
  leased(entry: TableEntry<T>, ops: StorageOp[]): void;
  /** The table's next seq (persistent storage keeps it across restarts). */
  saveSeq(seq: number, ops: StorageOp[]): void;
  /** The lane spills for the first time: what it keeps in its head past this point may go too. */
  spillHead(lane: Lane<T>, ops: StorageOp[]): void;
  /** Read the lane's next messages from storage into its head (the table tracks the run). */
  refill(lane: Lane<T>, table: LeaseTable<T>): Promise<void>;
  /** Commit a batch. Resolves once it is written. */
  write(ops: StorageOp[]): Promise<void>;
}

interface Waiter<T> {
  max: number;
  leaseMs: number;
  resolve: (deliveries: Delivery<T>[]) => void;
  timer: NodeJS.Timeout | undefined;
  cleanup: () => void;
}

interface LeaseRecord<T> {
  entry: TableEntry<T>;
  generation: number;
  deadline: number;
}

export const EMPTY_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** The message id of an entry of topic `topic`. */
export function entryId(topic: string, entry: Pick<TableEntry<unknown>, 'idSeq' | 'foreignId'>): string {
  return entry.foreignId ?? `${topic}:${entry.idSeq.toString(36)}`;
}

/** Dead letters kept in memory (the memory backend, and a spill-only LevelDB backend). */
export class MemoryLetters<T> implements LetterStore<T> {
  readonly durable = false;
  readonly #letters = new Map<string, { seq: number; letter: DeadLetter<T> }>();

  add(seq: number, letter: DeadLetter<T>): void {
    this.#letters.set(letter.id, { seq, letter });
  }
  async all(): Promise<{ seq: number; letter: DeadLetter<T> }[]> {
    return [...this.#letters.values()];
  }
  async get(id: string): Promise<DeadLetter<T> | undefined> {
    return this.#letters.get(id)?.letter;
  }
  remove(_seq: number, id: string): void {
    this.#letters.delete(id);
  }
}

export interface LeaseTableOptions<T> {
  name: string;
  options: Required<TopicOptions>;
  now: () => number;
  /** Where spilled, persisted or dead-lettered messages go. None: everything stays in memory. */
  storage?: TableStorage<T>;
}

export class LeaseTable<T> implements LeaseQueue<T> {
  readonly name: string;
  readonly options: Readonly<Required<TopicOptions>>;
  readonly deadLetters: DeadLetterQueue<T>;

  readonly #now: () => number;
  readonly #storage: TableStorage<T> | undefined;
  readonly #persist: boolean;
  readonly #headSize: number;
  readonly #letters: LetterStore<T>;
  readonly #lanes = new Map<number, Lane<T>>();
  /** Lane keys, highest first. */
  #priorities: number[] = [];
  #ready = 0;
  readonly #delayed = new MinHeap<TableEntry<T>>();
  #delayedCount = 0;
  readonly #leases = new MinHeap<LeaseRecord<T>>();
  #inflight = 0;
  /** Lease records in the heap that no longer count (settled, extended): compacted when they pile up. */
  #staleLeases = 0;
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
  #closed = false;
  readonly #init: Promise<void>;
  #initDone: boolean;
  readonly #pending = new Set<Promise<unknown>>();
  #lastError: unknown;

  constructor(init: LeaseTableOptions<T>) {
    this.name = init.name;
    this.options = Object.freeze(init.options);
    this.#now = init.now;
    this.#storage = init.storage;
    this.#persist = init.storage?.persist ?? false;
    this.#headSize = init.storage?.headSize ?? Number.POSITIVE_INFINITY;
    this.#letters = init.storage?.letters ?? new MemoryLetters<T>();
    this.deadLetters = new TableDeadLetters(this);
    this.#initDone = !this.#persist;
    this.#init = this.#persist ? this.#storage!.recover(this) : Promise.resolve();
    if (this.#persist) {
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
  }

  get #size(): number {
    return this.#ready + this.#delayedCount + this.#inflight;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Resolves when background work (refills, fire-and-forget writes) has finished. */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  /** The last error of a background write or refill (observability). */
  get lastError(): unknown {
    return this.#lastError;
  }

  // ── publish ────────────────────────────────────────────────────────────────

  async publish(messages: readonly PublishMessage<T>[]): Promise<void> {
    if (this.#closed) throw new QueueClosedError(this.name);
    if (messages.length === 0) return;
    if (!this.#initDone) await this.#init;
    // The whole batch is checked before any of it goes in (a NaN priority would break the heap).
    const priorities = messages.map((m) => checkPublish(this.name, m.priority, m.delayMs));
    const encoded = this.#storage?.encode(messages);
    // Backpressure: wait until the whole batch fits (a batch larger than the capacity waits
    // for an empty topic, then goes in, so it can never wait forever).
    const need = Math.min(messages.length, this.options.capacity);
    if (this.#size + need > this.options.capacity) {
      publishBackpressure({ backend: this.#storage?.kind ?? 'memory', topic: this.name, queue: this });
      await new Promise<void>((resolve, reject) => this.#publishWaiters.push({ need, resolve, reject }));
      if (this.#closed) throw new QueueClosedError(this.name);
    }
    // Spilled records need the store; open it before touching any state (the rest is synchronous,
    // so a concurrent ack can never queue its delete ahead of this publish's put).
    if (this.#storage && !this.#storage.canSpill && this.#wouldSpill(messages, priorities)) {
      await this.#storage.open();
      if (this.#closed) throw new QueueClosedError(this.name);
    }
    // Returned, not awaited: a suspended async function keeps every local and argument alive, and
    // the write can take a while (a frontier spilling to disk) — the payloads of spilled messages
    // must not stay on the heap until then.
    return this.#place(messages, priorities, encoded);
  }

  /** The synchronous part of `publish`: every message to its lane head, to storage, or delayed. */
  #place(
    messages: readonly PublishMessage<T>[],
    priorities: readonly number[],
    encoded: readonly (Uint8Array | undefined)[] | undefined,
  ): Promise<void> {
    const now = this.#now();
    const ops: StorageOp[] = [];
    // Persistent storage: the entries kept in memory, not deliverable before their records are written.
    const pending: TableEntry<T>[] = [];
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      const delay = m.delayMs ?? 0;
      const entry = this.#newEntry(m.payload, priorities[i]!, m.key, m.headers, now);
      entry.readyAt = now + delay;
      const bytes = encoded?.[i];
      if (delay > 0) {
        if (this.#persist) this.#storage!.putRecord(entry, 't', ops, bytes);
        this.#toDelayed(entry);
      } else {
        this.#placeReady(entry, ops, bytes);
      }
      if (this.#persist && entry.state !== 'done') pending.push(entry);
    }
    const written = this.#write(ops);
    if (this.#persist && written) {
      // Not deliverable before durable (see TableEntry.pending); FIFO order holds because
      // writes complete in the order they were queued.
      for (const entry of pending) entry.pending = true;
      return written.finally(() => {
        for (const entry of pending) entry.pending = false;
        this.#serveWaiters();
      });
    }
    this.#serveWaiters();
    return written ?? Promise.resolve();
  }

  /** A new ready entry under the next seq. */
  #newEntry(
    payload: T,
    priority: number,
    key: string | undefined,
    headers: Record<string, string> | undefined,
    publishedAt: number,
    foreignId?: string,
  ): TableEntry<T> {
    const seq = this.#seq++;
    // Fields in one order for every entry (storage builds the same shape): one hidden class.
    return {
      idSeq: seq,
      foreignId,
      seq,
      payload,
      key,
      priority,
      headers: headers ?? (EMPTY_HEADERS as Record<string, string>),
      publishedAt,
      attempt: 0,
      generation: 0,
      state: 'ready',
      leaseDeadline: 0,
      readyAt: 0,
      onDisk: undefined,
    };
  }

  #wouldSpill(messages: readonly PublishMessage<T>[], priorities: readonly number[]): boolean {
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

  /** Put a ready entry at its lane's tail: in the head while the lane has nothing in storage and room, else in storage. */
  #placeReady(entry: TableEntry<T>, ops: StorageOp[], bytes?: Uint8Array): void {
    entry.state = 'ready';
    const lane = this.lane(entry.priority);
    const storage = this.#storage;
    if (!storage || (lane.diskCount === 0 && lane.head.size < this.#headSize)) {
      if (this.#persist) storage!.putRecord(entry, 'm', ops, bytes);
      lane.cursor = entry.seq + 1;
      lane.head.push(entry);
    } else {
      if (lane.diskCount === 0) storage.spillHead(lane, ops); // the lane overflows: a big frontier
      storage.putRecord(entry, 'm', ops, bytes);
      entry.onDisk = undefined;
      entry.state = 'done'; // the object is dropped; the record is the message now
      lane.diskCount++;
    }
    this.#ready++;
  }

  /** #placeReady for entries that already exist (spilling may need the store to be opened first). */
  #placeReadyOrSpill(entry: TableEntry<T>, ops: StorageOp[]): void {
    const lane = this.lane(entry.priority);
    const spills = lane.diskCount > 0 || lane.head.size >= this.#headSize;
    if (spills && !this.#storage!.canSpill) {
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

  /** The lane of a priority, created on first use. */
  lane(priority: number): Lane<T> {
    let lane = this.#lanes.get(priority);
    if (!lane) {
      lane = { priority, head: new Fifo<TableEntry<T>>(), diskCount: 0, cursor: 0, refilling: undefined };
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
      const refills = [...this.#lanes.values()].flatMap((l) => (l.refilling ? [l.refilling] : []));
      if (refills.length === 0) return Promise.resolve(got);
      return Promise.allSettled(refills).then(() => (this.#closed ? [] : this.#take(max, leaseMs)));
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

  /**
   * Lease up to `max` entries from the heads, highest lane first. A lane whose head is empty
   * but which has messages in storage stops the walk (strict priority) and starts a refill.
   */
  #take(max: number, leaseMs: number): Delivery<T>[] {
    const out: Delivery<T>[] = [];
    if (this.#ready === 0) return out;
    const deadline = this.#now() + leaseMs;
    const ops: StorageOp[] = [];
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
        if (this.#persist) this.#storage!.leased(entry, ops);
        out.push(new TableDelivery(this, entry, entry.generation));
      }
      if (lane.diskCount > 0) {
        if (lane.head.size <= this.#storage!.refillTo / 4) this.#refill(lane);
        if (lane.head.size === 0) break;
      }
    }
    if (ops.length > 0) this.#background(this.#storage!.write(ops));
    if (out.length > 0) this.#armLeaseTimer();
    return out;
  }

  #refill(lane: Lane<T>): void {
    if (lane.refilling || this.#closed) return;
    const run = this.#storage!.refill(lane, this);
    lane.refilling = run;
    this.#background(
      run.finally(() => {
        lane.refilling = undefined;
        this.#serveWaiters();
      }),
    );
  }

  /** Hand ready entries to waiting consumers, oldest waiter first. */
  serveWaiters(): void {
    this.#serveWaiters();
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

  // ── settle (called by TableDelivery) ───────────────────────────────────────

  settle(
    entry: TableEntry<T>,
    generation: number,
    outcome: 'ack' | 'nack' | 'dead',
    delayMs: number,
    reason: string,
  ): Promise<void> {
    this.#checkLease(entry, generation);
    this.#inflight--;
    this.#leaseWentStale();
    const ops: StorageOp[] = [];
    if (outcome === 'ack') {
      entry.state = 'done';
      this.#storage?.dropRecord(entry, ops);
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
    const written = this.#write(ops);
    this.#afterRemoval();
    this.#serveWaiters();
    return written ?? Promise.resolve();
  }

  extend(entry: TableEntry<T>, generation: number, ms: number): void {
    this.#checkLease(entry, generation);
    const deadline = this.#now() + ms;
    entry.leaseDeadline = deadline;
    this.#leases.push(deadline, { entry, generation, deadline });
    this.#leaseWentStale();
    this.#armLeaseTimer();
  }

  /**
   * One lease record went stale. The heap deletes lazily (records are skipped when they come
   * due); at high throughput that would keep every acked message for a whole lease length,
   * so the heap is rebuilt once stale records outnumber live ones.
   */
  #leaseWentStale(): void {
    this.#staleLeases++;
    if (this.#staleLeases < 1024 || this.#staleLeases < 2 * this.#inflight) return;
    this.#leases.retain((lease) => isLive(lease));
    this.#staleLeases = 0;
  }

  #checkLease(entry: TableEntry<T>, generation: number): void {
    if (this.#closed) throw new QueueClosedError(this.name);
    if (entry.state !== 'leased' || entry.generation !== generation) {
      throw new LeaseExpiredError(this.name, entryId(this.name, entry));
    }
  }

  /** Back to the lane's tail (now, or after a delay), under a new seq. */
  #requeue(entry: TableEntry<T>, delayMs: number, ops: StorageOp[]): void {
    const storage = this.#storage;
    if (!storage) {
      if (delayMs > 0) {
        entry.readyAt = this.#now() + delayMs;
        this.#toDelayed(entry);
      } else {
        this.#placeReady(entry, ops);
      }
      return;
    }
    storage.dropRecord(entry, ops);
    entry.seq = this.#seq++;
    if (delayMs > 0) {
      entry.readyAt = this.#now() + delayMs;
      if (this.#persist) storage.putRecord(entry, 't', ops);
      this.#toDelayed(entry);
    } else {
      this.#placeReadyOrSpill(entry, ops);
    }
  }

  /** Wait until `readyAt` (also for storage bringing delayed records back). */
  toDelayed(entry: TableEntry<T>): void {
    this.#toDelayed(entry);
  }

  #toDelayed(entry: TableEntry<T>): void {
    entry.state = 'delayed';
    this.#delayed.push(entry.readyAt, entry);
    this.#delayedCount++;
    this.#armDelayTimer();
  }

  #toDeadLetters(entry: TableEntry<T>, reason: string, ops: StorageOp[]): void {
    entry.state = 'done';
    this.#storage?.dropRecord(entry, ops);
    this.addDeadLetter(
      {
        messageId: entryId(this.name, entry),
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

  /** Add a dead letter (also for storage: records that cannot be decoded). */
  addDeadLetter(letter: NewDeadLetter<T>, ops: StorageOp[]): void {
    const seq = this.#dlqSeq++;
    this.#dlqCount++;
    publishDeadLetter({
      backend: this.#storage?.kind ?? 'memory',
      topic: this.name,
      messageId: letter.messageId,
      reason: letter.reason,
      attempts: letter.attempts,
    });
    const stored: DeadLetter<T> = {
      id: `dlq:${this.name}:${seq.toString(36)}`,
      topic: this.name,
      messageId: letter.messageId,
      payload: letter.payload,
      key: letter.key,
      priority: letter.priority,
      headers: letter.headers,
      reason: letter.reason,
      attempts: letter.attempts,
      publishedAt: letter.publishedAt,
      deadLetteredAt: this.#now(),
    };
    if (letter.raw !== undefined) stored.raw = Buffer.from(letter.raw).toString('base64');
    this.#letters.add(seq, stored, letter.raw, ops);
  }

  // ── dead-letter queue (called by TableDeadLetters) ────────────────────────────

  async letters(): Promise<{ seq: number; letter: DeadLetter<T> }[]> {
    if (!this.#initDone) await this.#init;
    return this.#letters.all();
  }

  async getLetter(id: string): Promise<DeadLetter<T> | undefined> {
    if (!this.#initDone) await this.#init;
    return this.#letters.get(id);
  }

  /** Remove dead letters (and, for replay, publish them again with attempts starting over). */
  async removeLetters(filter: DeadLetterFilter | undefined, replay: boolean): Promise<number> {
    // An in-memory DLQ stays readable and purgeable after close (a finished run's dead letters
    // are inspected after it); replaying into a closed topic, or touching a closed store, is refused.
    if (this.#closed && (replay || this.#letters.durable)) throw new QueueClosedError(this.name);
    const matching = (await this.letters()).filter(({ letter }) => matchesDeadLetterFilter(letter, filter));
    if (matching.length === 0) return 0;
    const ops: StorageOp[] = [];
    for (const { seq, letter } of matching) {
      this.#letters.remove(seq, letter.id, ops);
      this.#dlqCount--;
      if (!replay) continue;
      const entry = this.#newEntry(
        letter.payload as T,
        letter.priority,
        letter.key,
        letter.headers,
        letter.publishedAt,
        letter.messageId,
      );
      if (this.#storage && !this.#storage.canSpill) {
        const lane = this.lane(entry.priority);
        if (lane.diskCount > 0 || lane.head.size >= this.#headSize) await this.#storage.open();
      }
      this.#placeReady(entry, ops);
    }
    const written = this.#write(ops);
    if (written) await written;
    this.#serveWaiters();
    return matching.length;
  }

  get deadLetterCount(): number {
    return this.#dlqCount;
  }

  // ── storage bookkeeping ──────────────────────────────────────────────────────

  /** Storage counts ready messages it holds (recovery, injected records, poison records). */
  countReady(n: number): void {
    this.#ready += n;
  }

  /** Storage found dead letters of a previous process; later ones are numbered after them. */
  countDeadLetters(count: number, maxSeq: number): void {
    this.#dlqCount += count;
    this.#dlqSeq = Math.max(this.#dlqSeq, maxSeq + 1);
  }

  /** Storage found records up to `maxSeq`; new entries are numbered after them. */
  seqAtLeast(next: number): void {
    this.#seq = Math.max(this.#seq, next);
  }

  get nextSeq(): number {
    return this.#seq;
  }

  /** Save the seq with the batch (persistent storage), then commit it. */
  #write(ops: StorageOp[]): Promise<void> | undefined {
    const storage = this.#storage;
    if (!storage) return undefined;
    storage.saveSeq(this.#seq, ops);
    return ops.length > 0 ? storage.write(ops) : undefined;
  }

  #background(p: Promise<unknown>): void {
    const tracked = p.catch((err: unknown) => {
      this.#lastError = err;
    });
    this.#pending.add(tracked);
    void tracked.finally(() => this.#pending.delete(tracked));
  }

  // ── timers ─────────────────────────────────────────────────────────────────

  /** Space freed: let blocked publishers in, oldest first, while their batches fit. */
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
    const ops: StorageOp[] = [];
    while (this.#delayedCount > 0 && (this.#delayed.peekKey() ?? Number.POSITIVE_INFINITY) <= now) {
      const entry = this.#delayed.pop()!;
      this.#delayedCount--;
      this.#requeue(entry, 0, ops);
      moved = true;
    }
    if (moved) {
      this.#writeInBackground(ops);
      this.#serveWaiters();
    }
    this.#armDelayTimer();
  }

  #reclaimExpired(): void {
    const now = this.#now();
    let freed = false;
    const ops: StorageOp[] = [];
    while (this.#leases.size > 0 && this.#leases.peekKey()! <= now) {
      const lease = this.#leases.pop()!;
      // Stale heap records (settled, re-leased or extended) are skipped: lazy deletion.
      if (!isLive(lease)) {
        if (this.#staleLeases > 0) this.#staleLeases--;
        continue;
      }
      const { entry } = lease;
      this.#inflight--;
      entry.generation++; // the lapsed delivery can no longer settle
      if (entry.attempt >= this.options.maxDeliveries) {
        this.#toDeadLetters(entry, `lease expired (after ${entry.attempt} deliveries)`, ops);
        freed = true;
      } else {
        this.#requeue(entry, 0, ops);
      }
    }
    this.#writeInBackground(ops);
    if (freed) this.#afterRemoval();
    this.#serveWaiters();
    this.#armLeaseTimer();
  }

  /** Writes of a timer step: nobody awaits them; the store may still have to open. */
  #writeInBackground(ops: StorageOp[]): void {
    const storage = this.#storage;
    if (!storage) return;
    storage.saveSeq(this.#seq, ops);
    if (ops.length === 0) return;
    this.#background(storage.canSpill ? storage.write(ops) : storage.open().then(() => storage.write(ops)));
  }

  #armDelayTimer(): void {
    if (!this.#closed) this.#delayTimer.arm(this.#delayed.peekKey());
  }

  #armLeaseTimer(): void {
    if (!this.#closed) this.#leaseTimer.arm(this.#leases.peekKey());
  }
}

function isLive<T>(lease: LeaseRecord<T>): boolean {
  const { entry } = lease;
  return (
    entry.state === 'leased' &&
    entry.generation === lease.generation &&
    entry.leaseDeadline === lease.deadline
  );
}

class TableDelivery<T> implements Delivery<T> {
  readonly #table: LeaseTable<T>;
  readonly #entry: TableEntry<T>;
  readonly #generation: number;
  /** Kept here: the entry drops its payload once acked. */
  readonly #payload: T;

  constructor(table: LeaseTable<T>, entry: TableEntry<T>, generation: number) {
    this.#table = table;
    this.#entry = entry;
    this.#generation = generation;
    this.#payload = entry.payload;
  }

  get id(): string {
    return entryId(this.#table.name, this.#entry);
  }
  get topic(): string {
    return this.#table.name;
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
    return this.#settle('ack', 0, '');
  }

  nack(options: { delayMs?: number; reason?: string } = {}): Promise<void> {
    return this.#settle('nack', options.delayMs ?? 0, options.reason ?? 'nack');
  }

  async extendLease(ms?: number): Promise<void> {
    this.#table.extend(this.#entry, this.#generation, ms ?? this.#table.options.leaseMs);
  }

  deadLetter(reason: string): Promise<void> {
    return this.#settle('dead', 0, reason);
  }

  #settle(outcome: 'ack' | 'nack' | 'dead', delayMs: number, reason: string): Promise<void> {
    try {
      return this.#table.settle(this.#entry, this.#generation, outcome, delayMs, reason);
    } catch (err) {
      return Promise.reject(err);
    }
  }
}

class TableDeadLetters<T> implements DeadLetterQueue<T> {
  readonly #table: LeaseTable<T>;

  constructor(table: LeaseTable<T>) {
    this.#table = table;
  }

  async list(
    options: { limit?: number; offset?: number; filter?: DeadLetterFilter } = {},
  ): Promise<DeadLetter<T>[]> {
    const all = (await this.#table.letters()).sort((a, b) => a.seq - b.seq).map(({ letter }) => letter);
    return pageOfLetters(all, options);
  }

  get(id: string): Promise<DeadLetter<T> | undefined> {
    return this.#table.getLetter(id);
  }

  replay(filter?: DeadLetterFilter): Promise<number> {
    return this.#table.removeLetters(filter, true);
  }

  purge(filter?: DeadLetterFilter): Promise<number> {
    return this.#table.removeLetters(filter, false);
  }

  async size(): Promise<number> {
    await this.#table.stats();
    return this.#table.deadLetterCount;
  }
}
