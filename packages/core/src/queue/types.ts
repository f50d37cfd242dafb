/**
 * The queue contract. Every stage boundary of the pipeline is one topic of a
 * {@link QueueBackend}; every backend (memory, memory+LevelDB, Redis Streams, NATS JetStream,
 * Kafka) implements these interfaces and passes the one conformance suite in
 * `packages/core/test/queue-conformance.ts` (what each backend promises and what it does not:
 * docs/queues.md).
 *
 * Lifecycle of one message:
 *
 * ```
 *  publish ──▶ ready ──consume──▶ leased ──ack──▶ gone
 *               ▲  ▲                 │ │
 *               │  └──lease lapses───┘ │          (worker died or stalled: redelivered)
 *               │                      │
 *            delayed ◀──nack(delay)────┤          attempt < maxDeliveries
 *                                      └──nack / lease lapse, attempt ≥ maxDeliveries,
 *                                         or deadLetter() ──▶ DLQ ──replay──▶ ready
 * ```
 *
 * Guarantees: at-least-once. A message acked is never delivered again; a message not acked
 * is never lost (a killed worker's lease lapses and another worker gets it). Exactly-once
 * *effects* come from idempotency (`itemId`), never from the queue.
 */

/** One message to publish. */
export interface PublishMessage<T> {
  payload: T;
  /**
   * Partition key: messages with the same key stay on one consumer where the backend can
   * promise it, in publish order. The engine uses the account by default.
   */
  key?: string;
  /** Higher runs first. Backends without native priority map it to a few priority lanes. @default 0 */
  priority?: number;
  /** Not deliverable before this many milliseconds have passed. @default 0 */
  delayMs?: number;
  /** Small string metadata carried with the message (trace ids, origin stage). */
  headers?: Record<string, string>;
}

/** One leased message handed to a consumer. Exactly one of ack / nack / deadLetter settles it. */
export interface Delivery<T> {
  /** Stable id of the message (the same across redeliveries). */
  readonly id: string;
  readonly topic: string;
  readonly payload: T;
  readonly key: string | undefined;
  readonly priority: number;
  /** 1 on the first delivery, then 2, 3, … (counts lease lapses too). */
  readonly attempt: number;
  /** Epoch ms of the first publish. */
  readonly publishedAt: number;
  readonly headers: Readonly<Record<string, string>>;
  /** Epoch ms at which the lease ends unless extended. */
  readonly leaseDeadline: number;
  /**
   * Done: the message is removed for good. (Kafka commits offsets, not messages: an ack is
   * durable once every earlier message of its partition is settled too.)
   */
  ack(): Promise<void>;
  /**
   * Not done: deliver again after `delayMs`, or dead-letter it once `attempt` has reached the
   * topic's `maxDeliveries`.
   */
  nack(options?: { delayMs?: number; reason?: string }): Promise<void>;
  /** Keep the lease for `ms` more from now (defaults to the topic's lease length). */
  extendLease(ms?: number): Promise<void>;
  /** Straight to the dead-letter queue (poison or permanently failing work). */
  deadLetter(reason: string): Promise<void>;
}

export interface ConsumeOptions {
  /** At most this many deliveries are returned. */
  max: number;
  /** Wait up to this long for the first message when none is ready. 0 returns at once. @default 1000 */
  waitMs?: number;
  /**
   * Lease length for these deliveries. Brokers that lease per consumer (NATS AckWait, the Redis
   * idle time) grant at least this: a shorter value gets the topic's leaseMs, a longer one is kept
   * alive with heartbeats while the process lives.
   * @default the topic's leaseMs
   */
  leaseMs?: number;
  /** Aborting returns what has been leased so far (possibly nothing). */
  signal?: AbortSignal;
}

export interface QueueStats {
  /** Deliverable now. */
  ready: number;
  /** Leased and not yet settled. */
  inflight: number;
  /** Waiting for a delay (nack with delay, or publish with delayMs). */
  delayed: number;
  /** In the dead-letter queue. */
  deadLettered: number;
}

/** One dead-lettered message, kept with why and how it failed. */
export interface DeadLetter<T = unknown> {
  /** Id of the dead-letter entry. */
  id: string;
  topic: string;
  /** The original message id. */
  messageId: string;
  /** The decoded payload, or undefined when it could not be decoded (then `raw` holds the bytes, base64). */
  payload: T | undefined;
  raw?: string;
  key: string | undefined;
  priority: number;
  headers: Record<string, string>;
  reason: string;
  attempts: number;
  publishedAt: number;
  deadLetteredAt: number;
}

export interface DeadLetterFilter {
  /** Only entries whose reason contains this text. */
  reasonIncludes?: string;
  /** Only entries dead-lettered at or after this epoch ms. */
  since?: number;
  /** Only these entry ids. */
  ids?: readonly string[];
}

/** The dead-letter queue of one topic. */
export interface DeadLetterQueue<T> {
  /** Oldest first. */
  list(options?: { limit?: number; offset?: number; filter?: DeadLetterFilter }): Promise<DeadLetter<T>[]>;
  get(id: string): Promise<DeadLetter<T> | undefined>;
  /** Publish matching entries to the topic again (attempts start over) and remove them from the DLQ. Returns how many. */
  replay(filter?: DeadLetterFilter): Promise<number>;
  /** Remove matching entries for good. Returns how many. */
  purge(filter?: DeadLetterFilter): Promise<number>;
  size(): Promise<number>;
}

export interface TopicOptions {
  /** A message delivered this many times and still not acked goes to the DLQ. @default 5 */
  maxDeliveries?: number;
  /** Default lease length. @default 30000 */
  leaseMs?: number;
  /**
   * Backpressure: `publish` waits while ready + delayed + inflight is at or above this.
   * Backends where counting is expensive may apply it approximately. @default 10000
   */
  capacity?: number;
}

/** One stage boundary: a named topic with leases, delays and a dead-letter queue. */
export interface LeaseQueue<T> {
  readonly name: string;
  readonly options: Readonly<Required<TopicOptions>>;
  /**
   * Publish in order. Resolves once the backend has durably accepted every message (for
   * memory: at once, unless the topic is at capacity, then once there is room).
   */
  publish(messages: readonly PublishMessage<T>[]): Promise<void>;
  /** Lease up to `max` ready messages, highest priority first, FIFO within a priority. */
  consume(options: ConsumeOptions): Promise<Delivery<T>[]>;
  stats(): Promise<QueueStats>;
  readonly deadLetters: DeadLetterQueue<T>;
}

export type QueueBackendKind = 'memory' | 'leveldb' | 'redis' | 'nats' | 'kafka';

/** A family of topics sharing one connection / store, namespaced by `namespace`. */
export interface QueueBackend {
  readonly kind: QueueBackendKind;
  readonly namespace: string;
  /** The same name returns the same topic object. */
  topic<T>(name: string, options?: TopicOptions): LeaseQueue<T>;
  /** Stop consumers (pending `consume` calls resolve with what they have) and release connections. */
  close(): Promise<void>;
}

export const DEFAULT_TOPIC_OPTIONS: Readonly<Required<TopicOptions>> = Object.freeze({
  maxDeliveries: 5,
  leaseMs: 30_000,
  capacity: 10_000,
});
