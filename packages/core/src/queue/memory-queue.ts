/**
 * The in-memory queue backend: the default for a single process with no services, and the
 * reference implementation of the queue contract (`./types.ts`).
 *
 * Payloads are passed by reference (no encoding): this is the hot path of a single-node crawl.
 * A producer must not mutate a payload after publishing it.
 *
 * ```
 *            publish                consume (highest lane first, FIFO inside a lane)
 *   ──▶ lanes: [prio 10] ▶▶▶ ─┐
 *              [prio  0] ▶▶▶ ─┼──▶ leased (lease heap, one timer) ──ack──▶ gone
 *              [prio -3] ▶▶▶ ─┘         │ lease lapses / nack
 *         ▲                             ▼
 *         └──── delayed (ready-time heap, one timer) ◀── nack(delay)     DLQ (entries kept in order)
 * ```
 *
 * Invariants: an entry is in exactly one of lanes / delayed / leased / done; `generation`
 * increases on every delivery, so a settle call from an older delivery (whose lease lapsed and
 * whose message went to someone else) is refused with LeaseExpiredError.
 */
import { LeaseExpiredError, QueueClosedError } from '../errors.js';
import { publishBackpressure } from './channels.js';
import { matchesDeadLetterFilter, pageOf } from './dead-letter-filter.js';
import { Fifo } from './fifo.js';
import { MinHeap } from './heap.js';
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

export interface MemoryQueueBackendOptions {
  /** Prefix of topic names (keeps two engines in one process apart). @default 'mocra' */
  namespace?: string;
  /** Defaults for every topic; per-topic options override them. */
  topicDefaults?: TopicOptions;
  /** Clock (epoch ms). Tests pass a fake one together with fake timers. @default Date.now */
  now?: () => number;
}

type EntryState = 'ready' | 'delayed' | 'leased' | 'done';

interface Entry<T> {
  readonly id: string;
  readonly payload: T;
  readonly key: string | undefined;
  readonly priority: number;
  readonly headers: Record<string, string>;
  readonly publishedAt: number;
  attempt: number;
  generation: number;
  state: EntryState;
  leaseDeadline: number;
  readyAt: number;
}

interface Waiter<T> {
  max: number;
  leaseMs: number;
  resolve: (deliveries: Delivery<T>[]) => void;
  timer: NodeJS.Timeout | undefined;
  cleanup: () => void;
}

const EMPTY_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

export function createMemoryQueueBackend(options: MemoryQueueBackendOptions = {}): QueueBackend {
  return new MemoryQueueBackend(options);
}

export class MemoryQueueBackend implements QueueBackend {
  readonly kind = 'memory' as const;
  readonly namespace: string;
  readonly #topics = new Map<string, MemoryQueue<unknown>>();
  readonly #defaults: TopicOptions;
  readonly #now: () => number;
  #closed = false;

  constructor(options: MemoryQueueBackendOptions = {}) {
    this.namespace = options.namespace ?? 'mocra';
    this.#defaults = options.topicDefaults ?? {};
    this.#now = options.now ?? Date.now;
  }

  topic<T>(name: string, options?: TopicOptions): LeaseQueue<T> {
    if (this.#closed) throw new QueueClosedError(name);
    let topic = this.#topics.get(name);
    if (!topic) {
      topic = new MemoryQueue<unknown>(name, { ...this.#defaults, ...options }, this.#now);
      this.#topics.set(name, topic);
    }
    return topic as LeaseQueue<T>;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const topic of this.#topics.values()) topic.close();
  }
}

class MemoryQueue<T> implements LeaseQueue<T> {
  readonly name: string;
  readonly options: Readonly<Required<TopicOptions>>;
  readonly deadLetters: DeadLetterQueue<T>;

  readonly #now: () => number;
  /** Ready entries per priority; `#priorities` holds the lane keys, highest first. */
  readonly #lanes = new Map<number, Fifo<Entry<T>>>();
  #priorities: number[] = [];
  #ready = 0;
  readonly #delayed = new MinHeap<Entry<T>>();
  #delayedCount = 0;
  readonly #leases = new MinHeap<{ entry: Entry<T>; generation: number; deadline: number }>();
  #inflight = 0;
  readonly #dlq = new Map<string, DeadLetter<T>>();
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
  #dlqSeq = 0;
  #closed = false;

  constructor(name: string, options: TopicOptions, now: () => number) {
    this.name = name;
    this.options = Object.freeze(resolveTopicOptions(name, undefined, options));
    this.#now = now;
    this.deadLetters = new MemoryDeadLetters(this);
  }

  get #size(): number {
    return this.#ready + this.#delayedCount + this.#inflight;
  }

  async publish(messages: readonly PublishMessage<T>[]): Promise<void> {
    if (this.#closed) throw new QueueClosedError(this.name);
    if (messages.length === 0) return;
    // The whole batch is checked before any of it goes in (a NaN priority would break the heap).
    for (const m of messages) checkPublish(this.name, m.priority, m.delayMs);
    // Backpressure: wait until the whole batch fits (a batch larger than the capacity waits
    // for an empty topic, then goes in, so it can never wait forever).
    const need = Math.min(messages.length, this.options.capacity);
    if (this.#size + need > this.options.capacity) {
      publishBackpressure({ backend: 'memory', topic: this.name, queue: this });
      await new Promise<void>((resolve, reject) => this.#publishWaiters.push({ need, resolve, reject }));
      if (this.#closed) throw new QueueClosedError(this.name);
    }
    const now = this.#now();
    for (const m of messages) {
      const delay = m.delayMs ?? 0;
      const entry: Entry<T> = {
        id: `${this.name}:${(this.#seq++).toString(36)}`,
        payload: m.payload,
        key: m.key,
        priority: m.priority ?? 0,
        headers: m.headers ?? (EMPTY_HEADERS as Record<string, string>),
        publishedAt: now,
        attempt: 0,
        generation: 0,
        state: 'ready',
        leaseDeadline: 0,
        readyAt: now + delay,
      };
      if (delay > 0) this.#toDelayed(entry);
      else this.#toReady(entry);
    }
    this.#serveWaiters();
  }

  consume(options: ConsumeOptions): Promise<Delivery<T>[]> {
    if (this.#closed) return Promise.resolve([]);
    let max: number;
    try {
      max = checkConsume(this.name, options.max);
    } catch (err) {
      return Promise.reject(err); // a bad argument rejects, as from every other backend
    }
    const leaseMs = options.leaseMs ?? this.options.leaseMs;
    this.#reclaimExpired();
    this.#promoteDue();
    if (this.#ready > 0) return Promise.resolve(this.#take(max, leaseMs));
    const waitMs = options.waitMs ?? 1000;
    const signal = options.signal;
    if (waitMs <= 0 || signal?.aborted) return Promise.resolve([]);
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
    });
  }

  async stats(): Promise<QueueStats> {
    this.#reclaimExpired();
    this.#promoteDue();
    return {
      ready: this.#ready,
      inflight: this.#inflight,
      delayed: this.#delayedCount,
      deadLettered: this.#dlq.size,
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

  // ── settle operations (called by MemoryDelivery) ────────────────────────────

  settle(
    entry: Entry<T>,
    generation: number,
    outcome: 'ack' | 'nack' | 'dead',
    delayMs: number,
    reason: string,
  ): void {
    this.#checkLease(entry, generation);
    this.#inflight--;
    this.#compactLeases();
    if (outcome === 'ack') {
      entry.state = 'done';
    } else if (outcome === 'dead' || entry.attempt >= this.options.maxDeliveries) {
      this.#toDeadLetters(
        entry,
        outcome === 'dead' ? reason : `${reason} (after ${entry.attempt} deliveries)`,
      );
    } else if (delayMs > 0) {
      entry.readyAt = this.#now() + delayMs;
      this.#toDelayed(entry);
    } else {
      this.#toReady(entry);
    }
    this.#afterRemoval();
    this.#serveWaiters();
  }

  extend(entry: Entry<T>, generation: number, ms: number): number {
    this.#checkLease(entry, generation);
    const deadline = this.#now() + ms;
    entry.leaseDeadline = deadline;
    this.#leases.push(deadline, { entry, generation, deadline });
    this.#compactLeases();
    this.#armLeaseTimer();
    return deadline;
  }

  /**
   * Settled leases stay in the heap until their deadline (lazy deletion), and with them their
   * payloads — response bodies, on the engine's response topic. Once stale records outnumber
   * live ones by far, rebuild the heap from the live leases so memory follows what is in flight.
   */
  #compactLeases(): void {
    if (this.#leases.size <= 2 * this.#inflight + 1024) return;
    this.#leases.retain(
      ({ entry, generation, deadline }) =>
        entry.state === 'leased' && entry.generation === generation && entry.leaseDeadline === deadline,
    );
  }

  #checkLease(entry: Entry<T>, generation: number): void {
    if (this.#closed) throw new QueueClosedError(this.name);
    if (entry.state !== 'leased' || entry.generation !== generation) {
      throw new LeaseExpiredError(this.name, entry.id);
    }
  }

  // ── dead letters (called by MemoryDeadLetters) ───────────────────────────────

  deadLetterEntries(): Map<string, DeadLetter<T>> {
    return this.#dlq;
  }

  republish(letter: DeadLetter<T>): void {
    const entry: Entry<T> = {
      id: letter.messageId,
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
    };
    this.#toReady(entry);
    this.#serveWaiters();
  }

  // ── internals ────────────────────────────────────────────────────────────────

  #toReady(entry: Entry<T>): void {
    entry.state = 'ready';
    let lane = this.#lanes.get(entry.priority);
    if (!lane) {
      lane = new Fifo<Entry<T>>();
      this.#lanes.set(entry.priority, lane);
      this.#priorities.push(entry.priority);
      this.#priorities.sort((a, b) => b - a);
    }
    lane.push(entry);
    this.#ready++;
  }

  #toDelayed(entry: Entry<T>): void {
    entry.state = 'delayed';
    this.#delayed.push(entry.readyAt, entry);
    this.#delayedCount++;
    this.#armDelayTimer();
  }

  #toDeadLetters(entry: Entry<T>, reason: string): void {
    entry.state = 'done';
    const id = `dlq:${this.name}:${(this.#dlqSeq++).toString(36)}`;
    this.#dlq.set(id, {
      id,
      topic: this.name,
      messageId: entry.id,
      payload: entry.payload,
      key: entry.key,
      priority: entry.priority,
      headers: { ...entry.headers },
      reason,
      attempts: entry.attempt,
      publishedAt: entry.publishedAt,
      deadLetteredAt: this.#now(),
    });
  }

  #take(max: number, leaseMs: number): Delivery<T>[] {
    const out: Delivery<T>[] = [];
    const now = this.#now();
    const deadline = now + leaseMs;
    for (let p = 0; p < this.#priorities.length && out.length < max; p++) {
      const lane = this.#lanes.get(this.#priorities[p]!)!;
      while (lane.size > 0 && out.length < max) {
        const entry = lane.shift()!;
        this.#ready--;
        entry.state = 'leased';
        entry.attempt++;
        entry.generation++;
        entry.leaseDeadline = deadline;
        this.#inflight++;
        this.#leases.push(deadline, { entry, generation: entry.generation, deadline });
        out.push(new MemoryDelivery(this, entry, entry.generation));
      }
    }
    if (out.length > 0) this.#armLeaseTimer();
    return out;
  }

  #serveWaiters(): void {
    while (this.#waiters.length > 0 && this.#ready > 0) {
      const waiter = this.#waiters.shift()!;
      waiter.cleanup();
      waiter.resolve(this.#take(waiter.max, waiter.leaseMs));
    }
  }

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
    while (this.#delayedCount > 0 && (this.#delayed.peekKey() ?? Number.POSITIVE_INFINITY) <= now) {
      const entry = this.#delayed.pop()!;
      this.#delayedCount--;
      this.#toReady(entry);
      moved = true;
    }
    if (moved) this.#serveWaiters();
    this.#armDelayTimer();
  }

  #reclaimExpired(): void {
    const now = this.#now();
    let freed = false;
    while (this.#leases.size > 0 && this.#leases.peekKey()! <= now) {
      const lease = this.#leases.pop()!;
      const { entry } = lease;
      // Stale heap records (settled, re-leased or extended) are skipped: lazy deletion.
      if (
        entry.state !== 'leased' ||
        entry.generation !== lease.generation ||
        entry.leaseDeadline !== lease.deadline
      ) {
        continue;
      }
      this.#inflight--;
      entry.generation++; // the lapsed delivery can no longer settle
      if (entry.attempt >= this.options.maxDeliveries) {
        this.#toDeadLetters(entry, `lease expired (after ${entry.attempt} deliveries)`);
        freed = true;
      } else {
        this.#toReady(entry);
      }
    }
    if (freed) this.#afterRemoval();
    this.#serveWaiters();
    this.#armLeaseTimer();
  }

  #armDelayTimer(): void {
    if (!this.#closed) this.#delayTimer.arm(this.#delayed.peekKey());
  }

  #armLeaseTimer(): void {
    if (!this.#closed) this.#leaseTimer.arm(this.#leases.peekKey());
  }
}

class MemoryDelivery<T> implements Delivery<T> {
  readonly #queue: MemoryQueue<T>;
  readonly #entry: Entry<T>;
  readonly #generation: number;

  constructor(queue: MemoryQueue<T>, entry: Entry<T>, generation: number) {
    this.#queue = queue;
    this.#entry = entry;
    this.#generation = generation;
  }

  get id(): string {
    return this.#entry.id;
  }
  get topic(): string {
    return this.#queue.name;
  }
  get payload(): T {
    return this.#entry.payload;
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

  async ack(): Promise<void> {
    this.#queue.settle(this.#entry, this.#generation, 'ack', 0, '');
  }

  async nack(options: { delayMs?: number; reason?: string } = {}): Promise<void> {
    this.#queue.settle(this.#entry, this.#generation, 'nack', options.delayMs ?? 0, options.reason ?? 'nack');
  }

  async extendLease(ms?: number): Promise<void> {
    this.#queue.extend(this.#entry, this.#generation, ms ?? this.#queue.options.leaseMs);
  }

  async deadLetter(reason: string): Promise<void> {
    this.#queue.settle(this.#entry, this.#generation, 'dead', 0, reason);
  }
}

class MemoryDeadLetters<T> implements DeadLetterQueue<T> {
  readonly #queue: MemoryQueue<T>;

  constructor(queue: MemoryQueue<T>) {
    this.#queue = queue;
  }

  async list(
    options: { limit?: number; offset?: number; filter?: DeadLetterFilter } = {},
  ): Promise<DeadLetter<T>[]> {
    const letters = [...this.#queue.deadLetterEntries().values()];
    const matching = letters.filter((letter) => matchesDeadLetterFilter(letter, options.filter));
    return pageOf(matching, options.offset, options.limit);
  }

  async get(id: string): Promise<DeadLetter<T> | undefined> {
    return this.#queue.deadLetterEntries().get(id);
  }

  async replay(filter?: DeadLetterFilter): Promise<number> {
    const entries = this.#queue.deadLetterEntries();
    let n = 0;
    for (const [id, letter] of [...entries]) {
      if (!matchesDeadLetterFilter(letter, filter)) continue;
      entries.delete(id);
      this.#queue.republish(letter);
      n++;
    }
    return n;
  }

  async purge(filter?: DeadLetterFilter): Promise<number> {
    const entries = this.#queue.deadLetterEntries();
    let n = 0;
    for (const [id, letter] of [...entries]) {
      if (!matchesDeadLetterFilter(letter, filter)) continue;
      entries.delete(id);
      n++;
    }
    return n;
  }

  async size(): Promise<number> {
    return this.#queue.deadLetterEntries().size;
  }
}
