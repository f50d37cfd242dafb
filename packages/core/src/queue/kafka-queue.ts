/**
 * The Kafka queue backend (kafkajs, or any client with the same surface — `kafka-client.ts`).
 *
 * Kafka has no per-message acks or leases: a consumer group owns partitions and commits one
 * offset per partition. The queue contract is built on top of that, in the consumer:
 *
 * ```
 *  topics of queue topic T (namespace ns):
 *    mocra.ns.T.high / .normal / .low   priority lanes (key → partition: one key, one consumer)
 *    mocra.ns.T.retry                   nacked and delayed messages, with a not-before header
 *    mocra.ns.T.dlq                     dead letters (1 partition) + removal markers
 *
 *  per owned partition, in this process:
 *    offsets  40 41 42 43 44 45 46
 *             ✓  ✓  ▒  ✓  ·  ·  ·      ✓ acked  ▒ leased  · buffered (ready)
 *             └──┘ committed = 42: only the contiguous acked prefix is committed
 * ```
 *
 * - A fetched message is buffered until a `consume` leases it; a lease that lapses puts it back
 *   in the buffer (attempt + 1) — only this process owns the partition, so only it can redeliver.
 * - `nack` republishes the message to the retry topic (attempt count and not-before in headers)
 *   and acks the original; retry messages are held here until due. `publish` with `delayMs`
 *   goes to the retry topic the same way.
 * - When a consumer dies (or leaves), the group rebalances after the session timeout and the new
 *   owner reads from the last committed offset: everything not committed comes again. Attempts
 *   counted in the dead process but not yet written to the retry topic are lost with it.
 * - Ack commits the contiguous acked prefix (coalesced; `ack()` resolves after that commit was
 *   attempted). An acked message above an unsettled one is committed once the gap closes; if
 *   the process dies first, it is delivered again (at-least-once).
 * - The DLQ is a topic: listing scans it with a throw-away consumer group (O(DLQ size), seconds
 *   on a real cluster because of the group join); replay and purge append removal markers.
 */
import { randomBytes } from 'node:crypto';
import {
  BackendUnavailableError,
  InvalidArgumentError,
  InvalidBackendUrlError,
  isMocraError,
  LeaseExpiredError,
  PayloadTooLargeError,
  QueueClosedError,
  QueueDecodeError,
} from '../errors.js';
import { importOptional } from '../optional-dependency.js';
import { publishDeadLetter, publishPoison } from './channels.js';
import { createQueueCodec, type QueueCodec, type QueueCodecOptions } from './codec.js';
import {
  letterPayload,
  matchesDeadLetterFilter,
  pageOfLetters,
  parseHeaderObject,
} from './dead-letter-filter.js';
import { Fifo } from './fifo.js';
import { MinHeap } from './heap.js';
import type {
  KafkaAdminLike,
  KafkaConsumerLike,
  KafkaEachBatchPayloadLike,
  KafkaHeaderValue,
  KafkaIncomingMessage,
  KafkaLike,
  KafkaOutgoingMessage,
  KafkaProducerLike,
} from './kafka-client.js';
import { createIdGenerator, sleep } from './timing.js';
import { assertQueueName, checkConsume, checkPublish, TopicRegistry } from './topic-options.js';
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

export interface KafkaQueueBackendOptions {
  /** Bootstrap brokers (`host:port`). Ignored when `kafka` is given. @default ['127.0.0.1:9092'] */
  brokers?: string[];
  /** kafkajs client id. @default 'mocra' */
  clientId?: string;
  /** A ready client (a configured kafkajs `Kafka` with SASL/TLS, or a test double). */
  kafka?: KafkaLike;
  /** Prefix of topic and group names. @default 'mocra' */
  namespace?: string;
  /** Defaults for every topic; per-topic options override them. */
  topicDefaults?: TopicOptions;
  /** How payloads are encoded and compressed. */
  codec?: QueueCodecOptions;
  /**
   * Largest encoded payload accepted by `publish` (refused with PayloadTooLargeError). Keep it
   * under the broker's `message.max.bytes` minus room for headers.
   * @default 1000000
   */
  maxPayloadBytes?: number;
  /** Partitions of the lane and retry topics this backend creates. @default 8 */
  partitions?: number;
  /** Replication factor of the topics this backend creates (-1: the broker's default). @default -1 */
  replicationFactor?: number;
  /** How long a silent consumer keeps its partitions (its messages wait that long after a crash). @default 10000 */
  sessionTimeoutMs?: number;
  /** @default 1000 */
  heartbeatIntervalMs?: number;
  /** Fetched-but-unleased messages held per topic before its partitions are paused. @default 1000 */
  maxBufferedMessages?: number;
  /** Poll interval for capacity checks and waiting consumers; also the broker fetch wait. @default 250 */
  pollMs?: number;
  /** Give up a DLQ scan after this long. @default 30000 */
  dlqScanTimeoutMs?: number;
}

const FEATURE = 'the Kafka queue backend';
/** After waking for new data, wait this long so the rest of the fetch round lands (priority order). */
const FETCH_GRACE_MS = 5;
const DLQ_COUNT_TTL_MS = 5_000;

const H = {
  id: 'mocra-id',
  priority: 'mocra-priority',
  published: 'mocra-published',
  attempts: 'mocra-attempts',
  headers: 'mocra-headers',
  notBefore: 'mocra-not-before',
  reason: 'mocra-reason',
  deadAt: 'mocra-dead-at',
  remove: 'mocra-dlq-remove',
} as const;

type KafkaJsModule = typeof import('kafkajs');

/** What the Kafka backend offers beyond {@link QueueBackend}. */
export interface KafkaQueueBackend extends QueueBackend {
  readonly kind: 'kafka';
  /** The client it talks through. */
  readonly kafka: KafkaLike;
  /** Partitions of the topics it creates. */
  readonly partitions: number;
  /** Kafka topic and group names of one queue topic. */
  namesOf(topic: string): KafkaTopicNames;
}

export async function createKafkaQueueBackend(
  options: KafkaQueueBackendOptions = {},
): Promise<KafkaQueueBackend> {
  const namespace = options.namespace ?? 'mocra';
  assertQueueName('namespace', namespace);
  const partitions = options.partitions ?? 8;
  if (!Number.isInteger(partitions) || partitions < 1) {
    throw new InvalidArgumentError(`partitions must be an integer ≥ 1, got ${partitions}`);
  }
  const codec = createQueueCodec(options.codec);
  let kafka = options.kafka;
  if (!kafka) {
    const brokers = options.brokers ?? ['127.0.0.1:9092'];
    for (const b of brokers) {
      if (!/^[\w.-]+:\d+$/.test(b)) throw new InvalidBackendUrlError(b, 'a Kafka broker is host:port');
    }
    const mod = await importOptional<KafkaJsModule>('kafkajs', FEATURE);
    kafka = new mod.Kafka({
      clientId: options.clientId ?? 'mocra',
      brokers,
      logLevel: mod.logLevel.ERROR,
    });
  }
  const backend = new KafkaGroupBackend(kafka, namespace, codec, partitions, options);
  await backend.connect();
  return backend;
}

export class KafkaGroupBackend implements KafkaQueueBackend {
  readonly kind = 'kafka' as const;
  readonly namespace: string;
  readonly kafka: KafkaLike;
  readonly partitions: number;
  readonly #codec: QueueCodec;
  readonly #topics: TopicRegistry<KafkaQueue<unknown>>;
  readonly #producer: KafkaProducerLike;
  readonly #admin: KafkaAdminLike;
  readonly nextId = createIdGenerator();
  readonly #settings: KafkaSettings;

  constructor(
    kafka: KafkaLike,
    namespace: string,
    codec: QueueCodec,
    partitions: number,
    options: KafkaQueueBackendOptions,
  ) {
    this.kafka = kafka;
    this.namespace = namespace;
    this.#codec = codec;
    this.partitions = partitions;
    this.#settings = Object.freeze({
      maxPayloadBytes: options.maxPayloadBytes ?? 1_000_000,
      replicationFactor: options.replicationFactor ?? -1,
      sessionTimeoutMs: options.sessionTimeoutMs ?? 10_000,
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? 1_000,
      maxBufferedMessages: options.maxBufferedMessages ?? 1_000,
      pollMs: options.pollMs ?? 250,
      dlqScanTimeoutMs: options.dlqScanTimeoutMs ?? 30_000,
    });
    this.#producer = kafka.producer({ allowAutoTopicCreation: false });
    this.#admin = kafka.admin();
    this.#topics = new TopicRegistry(
      options.topicDefaults,
      (name, resolved) => new KafkaQueue(this, name, resolved),
    );
  }

  async connect(): Promise<void> {
    try {
      await Promise.all([this.#producer.connect(), this.#admin.connect()]);
    } catch (err) {
      throw kafkaFailure('connecting', err);
    }
  }

  get closed(): boolean {
    return this.#topics.closed;
  }
  get codec(): QueueCodec {
    return this.#codec;
  }
  get producer(): KafkaProducerLike {
    return this.#producer;
  }
  get admin(): KafkaAdminLike {
    return this.#admin;
  }
  /** The resolved timing and size settings. */
  get settings(): KafkaSettings {
    return this.#settings;
  }

  /** Kafka topic and group names of one queue topic (exposed for tests and operators). */
  namesOf(topic: string): KafkaTopicNames {
    const base = `mocra.${this.namespace}.${topic}`;
    return {
      lanes: [`${base}.high`, `${base}.normal`, `${base}.low`],
      retry: `${base}.retry`,
      dlq: `${base}.dlq`,
      group: base,
    };
  }

  topic<T>(name: string, options?: TopicOptions): LeaseQueue<T> {
    return this.#topics.get(name, options) as LeaseQueue<T>;
  }

  async close(): Promise<void> {
    const topics = this.#topics.close();
    if (!topics) return;
    await Promise.all(topics.map((t) => t.close()));
    await Promise.all([
      this.#producer.disconnect().catch(() => {}),
      this.#admin.disconnect().catch(() => {}),
    ]);
  }
}

type KafkaSettings = Readonly<
  Required<
    Pick<
      KafkaQueueBackendOptions,
      | 'maxPayloadBytes'
      | 'replicationFactor'
      | 'sessionTimeoutMs'
      | 'heartbeatIntervalMs'
      | 'maxBufferedMessages'
      | 'pollMs'
      | 'dlqScanTimeoutMs'
    >
  >
>;

export interface KafkaTopicNames {
  lanes: [string, string, string];
  retry: string;
  dlq: string;
  group: string;
}

interface MessageMeta {
  id: string;
  key: string | undefined;
  priority: number;
  publishedAt: number;
  attempts: number;
  headers: Record<string, string>;
}

type HeldState = 'ready' | 'delayed' | 'leased' | 'settling' | 'done' | 'revoked';

/** One fetched message, from fetch to commit. */
interface Held {
  readonly track: PartitionTrack;
  readonly offset: number;
  readonly message: KafkaIncomingMessage;
  readonly meta: MessageMeta;
  readonly payload: unknown;
  readonly lane: number;
  notBefore: number;
  state: HeldState;
  /** Deliveries so far, counting those before the message was (re)published. */
  attempt: number;
  generation: number;
  leaseDeadline: number;
}

/** One owned partition: what was fetched and not yet committed, in offset order. */
interface PartitionTrack {
  readonly key: string;
  readonly topic: string;
  readonly partition: number;
  readonly entries: Map<number, Held | 'acked'>;
  committed: number;
  highestSeen: number;
}

class KafkaQueue<T> implements LeaseQueue<T> {
  readonly name: string;
  readonly options: Readonly<Required<TopicOptions>>;
  readonly deadLetters: DeadLetterQueue<T>;
  readonly names: KafkaTopicNames;
  readonly #backend: KafkaGroupBackend;
  #topicsReady: Promise<void> | undefined;
  #consumer: KafkaConsumerLike | undefined;
  #consumerReady: Promise<void> | undefined;
  #closed = false;

  readonly #tracks = new Map<string, PartitionTrack>();
  readonly #lanes = [new Fifo<Held>(), new Fifo<Held>(), new Fifo<Held>()];
  #ready = 0;
  readonly #delayed = new MinHeap<Held>();
  #delayedCount = 0;
  readonly #leases = new MinHeap<{ held: Held; generation: number; deadline: number }>();
  #inflight = 0;
  readonly #waits = new Set<() => void>();
  #resumes: (() => void)[] = [];
  readonly #dirty = new Set<PartitionTrack>();
  #flushRequested = false;
  #flushLoop: Promise<void> | undefined;
  readonly #background = new Set<Promise<unknown>>();
  #approxSize = 0;
  #approxAt = 0;
  #dlqCount: { value: number; at: number } | undefined;
  #dlqRefresh: Promise<number> | undefined;

  constructor(backend: KafkaGroupBackend, name: string, options: Required<TopicOptions>) {
    this.#backend = backend;
    this.name = name;
    this.options = Object.freeze(options);
    this.names = backend.namesOf(name);
    this.deadLetters = new KafkaDeadLetters<T>(this, backend);
  }

  get backend(): KafkaGroupBackend {
    return this.#backend;
  }

  #checkOpen(): void {
    if (this.#closed || this.#backend.closed) throw new QueueClosedError(this.name);
  }

  ensureTopics(): Promise<void> {
    if (!this.#topicsReady) {
      const { replicationFactor } = this.#backend.settings;
      const partitions = this.#backend.partitions;
      this.#topicsReady = this.#backend.admin
        .createTopics({
          waitForLeaders: true,
          topics: [
            ...[...this.names.lanes, this.names.retry].map((topic) => ({
              topic,
              numPartitions: partitions,
              replicationFactor,
            })),
            // One partition keeps the DLQ in one order, oldest first.
            { topic: this.names.dlq, numPartitions: 1, replicationFactor },
          ],
        })
        .then(
          () => {},
          (err: unknown) => {
            // Another process created them first.
            if (!describe(err).includes('already exists')) {
              this.#topicsReady = undefined;
              throw kafkaFailure(`creating the topics of '${this.name}'`, err);
            }
          },
        );
    }
    return this.#topicsReady;
  }

  // ── publish ──────────────────────────────────────────────────────────────────

  async publish(messages: readonly PublishMessage<T>[]): Promise<void> {
    this.#checkOpen();
    if (messages.length === 0) return;
    const backend = this.#backend;
    const limit = backend.settings.maxPayloadBytes;
    const now = Date.now();
    const prepared = await Promise.all(
      messages.map(async (m) => {
        const priority = checkPublish(this.name, m.priority, m.delayMs);
        const value = await backend.codec.encode(m.payload, this.name);
        if (value.length > limit) throw new PayloadTooLargeError(this.name, value.length, limit);
        const meta: MessageMeta = {
          id: backend.nextId(),
          key: m.key,
          priority,
          publishedAt: now,
          attempts: 0,
          headers: m.headers ?? {},
        };
        const headers = metaHeaders(meta);
        const delay = m.delayMs ?? 0;
        let topic = this.names.lanes[laneIndex(priority)];
        if (delay > 0) {
          headers[H.notBefore] = String(now + delay);
          topic = this.names.retry;
        }
        return { topic, message: { key: m.key ?? null, value, headers } satisfies KafkaOutgoingMessage };
      }),
    );
    await this.ensureTopics();
    await this.#waitForRoom(prepared.length);
    await this.#send(prepared);
    this.#approxSize += prepared.length;
  }

  /** Send grouped by topic; order inside a topic (and so inside a key's partition) is kept. */
  async #send(items: readonly { topic: string; message: KafkaOutgoingMessage }[]): Promise<void> {
    const byTopic = new Map<string, KafkaOutgoingMessage[]>();
    for (const { topic, message } of items) {
      const list = byTopic.get(topic);
      if (list) list.push(message);
      else byTopic.set(topic, [message]);
    }
    try {
      await Promise.all(
        [...byTopic].map(([topic, list]) => this.#backend.producer.send({ topic, messages: list, acks: -1 })),
      );
    } catch (err) {
      this.#checkOpen();
      throw kafkaFailure(`publish to '${this.name}'`, err);
    }
  }

  /** Backpressure on the group's lag (approximate: other publishers are seen at the next check). */
  async #waitForRoom(n: number): Promise<void> {
    const need = Math.min(n, this.options.capacity);
    const pollMs = this.#backend.settings.pollMs;
    if (Date.now() - this.#approxAt < pollMs && this.#approxSize + need <= this.options.capacity) return;
    for (;;) {
      this.#checkOpen();
      const lag = await this.#lag();
      this.#approxSize = [...lag.values()].reduce((a, b) => a + b, 0);
      this.#approxAt = Date.now();
      if (this.#approxSize + need <= this.options.capacity) return;
      await this.#pause(pollMs);
    }
  }

  /** Uncommitted messages per lane/retry topic for the group. */
  async #lag(): Promise<Map<string, number>> {
    const admin = this.#backend.admin;
    const topics = [...this.names.lanes, this.names.retry];
    try {
      const [ends, committed] = await Promise.all([
        Promise.all(topics.map((t) => admin.fetchTopicOffsets(t))),
        admin.fetchOffsets({ groupId: this.names.group, topics }),
      ]);
      const out = new Map<string, number>();
      topics.forEach((topic, i) => {
        const done = new Map(
          (committed.find((c) => c.topic === topic)?.partitions ?? []).map((p) => [
            p.partition,
            Number(p.offset),
          ]),
        );
        let lag = 0;
        for (const p of ends[i]!) {
          const from = done.get(p.partition) ?? -1;
          lag += Math.max(0, Number(p.high) - (from >= 0 ? from : Number(p.low)));
        }
        out.set(topic, lag);
      });
      return out;
    } catch (err) {
      throw kafkaFailure(`reading the lag of '${this.name}'`, err);
    }
  }

  // ── the group consumer ───────────────────────────────────────────────────────

  #ensureConsumer(): Promise<void> {
    if (!this.#consumerReady) {
      const s = this.#backend.settings;
      const consumer = this.#backend.kafka.consumer({
        groupId: this.names.group,
        sessionTimeout: s.sessionTimeoutMs,
        heartbeatInterval: s.heartbeatIntervalMs,
        rebalanceTimeout: Math.max(s.sessionTimeoutMs, 30_000),
        maxWaitTimeInMs: s.pollMs,
        allowAutoTopicCreation: false,
      });
      this.#consumer = consumer;
      consumer.on('consumer.group_join', (event) => this.#onAssignment(event.payload.memberAssignment));
      consumer.on('consumer.crash', (event) => {
        // kafkajs gave up on this consumer: the next consume starts a new one (which rejoins).
        if (!event.payload.restart && this.#consumer === consumer) {
          this.#consumer = undefined;
          this.#consumerReady = undefined;
        }
      });
      this.#consumerReady = (async () => {
        await this.ensureTopics();
        await consumer.connect();
        await consumer.subscribe({ topics: [...this.names.lanes, this.names.retry], fromBeginning: true });
        await consumer.run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          partitionsConsumedConcurrently: 1,
          eachBatch: (payload) => this.#onBatch(payload),
        });
      })().catch((err: unknown) => {
        this.#consumerReady = undefined;
        this.#consumer = undefined;
        throw kafkaFailure(`starting the consumer of '${this.name}'`, err);
      });
    }
    return this.#consumerReady;
  }

  async #onBatch(payload: KafkaEachBatchPayloadLike): Promise<void> {
    const { batch } = payload;
    const key = `${batch.topic}:${batch.partition}`;
    let track = this.#tracks.get(key);
    if (!track) {
      track = {
        key,
        topic: batch.topic,
        partition: batch.partition,
        entries: new Map(),
        committed: -1,
        highestSeen: -1,
      };
      this.#tracks.set(key, track);
    }
    const max = this.#backend.settings.maxBufferedMessages;
    for (const message of batch.messages) {
      if (this.#closed || !payload.isRunning() || payload.isStale()) break;
      if (this.#ready + this.#delayedCount >= max) {
        this.#resumes.push(payload.pause());
        break;
      }
      const offset = Number(message.offset);
      // After a rebalance a kept partition is fetched again from the commit: skip what we hold.
      if (!track.entries.has(offset) && offset >= track.committed) await this.#admit(track, message, offset);
      payload.resolveOffset(message.offset);
    }
    await payload.heartbeat();
    this.#wake();
  }

  async #admit(track: PartitionTrack, message: KafkaIncomingMessage, offset: number): Promise<void> {
    track.highestSeen = Math.max(track.highestSeen, offset);
    let meta: MessageMeta;
    let payload: unknown;
    try {
      meta = readMeta(message, `${track.topic}:${track.partition}:${offset}`, this.name);
      if (message.value === null) throw new QueueDecodeError(this.name, 'the record has no value');
      payload = await this.#backend.codec.decode(message.value, this.name);
    } catch (err) {
      const id = header(message.headers, H.id) ?? `${track.topic}:${track.partition}:${offset}`;
      publishPoison({ backend: 'kafka', topic: this.name, messageId: id, error: err });
      // If this throws, the batch is not resolved past the record and is fetched again.
      await this.#produceDeadLetter(message, id, `poison: ${describe(err)}`, 1);
      track.entries.set(offset, 'acked');
      this.#dirty.add(track);
      void this.#flushSoon();
      return;
    }
    const fromRetry = track.topic === this.names.retry;
    const held: Held = {
      track,
      offset,
      message,
      meta,
      payload,
      lane: laneIndex(meta.priority),
      notBefore: fromRetry ? Number(header(message.headers, H.notBefore) ?? 0) || 0 : 0,
      state: 'ready',
      attempt: meta.attempts,
      generation: 0,
      leaseDeadline: 0,
    };
    track.entries.set(offset, held);
    if (held.notBefore > Date.now()) {
      held.state = 'delayed';
      this.#delayed.push(held.notBefore, held);
      this.#delayedCount++;
    } else {
      this.#toReady(held);
    }
  }

  /** A rebalance: partitions we no longer own are dropped (their new owner reads them again). */
  #onAssignment(assignment: Record<string, number[]>): void {
    const keep = new Set(Object.entries(assignment).flatMap(([t, ps]) => ps.map((p) => `${t}:${p}`)));
    for (const [key, track] of this.#tracks) {
      if (keep.has(key)) {
        this.#dirty.add(track);
        continue;
      }
      for (const v of track.entries.values()) if (v !== 'acked') this.#revoke(v);
      this.#tracks.delete(key);
      this.#dirty.delete(track);
    }
    if (this.#dirty.size > 0) void this.#flushSoon();
  }

  #revoke(held: Held): void {
    if (held.state === 'ready') this.#ready--;
    else if (held.state === 'delayed') this.#delayedCount--;
    else if (held.state === 'leased' || held.state === 'settling') this.#inflight--;
    held.state = 'revoked';
    held.generation++;
  }

  #toReady(held: Held): void {
    held.state = 'ready';
    this.#lanes[held.lane]!.push(held);
    this.#ready++;
  }

  // ── consume ──────────────────────────────────────────────────────────────────

  async consume(options: ConsumeOptions): Promise<Delivery<T>[]> {
    if (this.#closed || this.#backend.closed) return [];
    const max = checkConsume(this.name, options.max);
    const leaseMs = options.leaseMs ?? this.options.leaseMs;
    const waitMs = options.waitMs ?? 1000;
    const signal = options.signal;
    const deadline = Date.now() + waitMs;
    await this.#ensureConsumer();
    let waited = false;
    for (;;) {
      if (this.#closed) return [];
      if (waited) await sleep(FETCH_GRACE_MS);
      const out = this.#take(max, leaseMs);
      if (out.length > 0) return out;
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted) return [];
      await this.#pause(Math.min(left, this.#backend.settings.pollMs, this.#nextEventIn()), signal);
      waited = true;
    }
  }

  #take(max: number, leaseMs: number): Delivery<T>[] {
    this.#promoteDue();
    this.#reclaimLapsed();
    const out: Delivery<T>[] = [];
    const now = Date.now();
    for (const lane of this.#lanes) {
      while (out.length < max && lane.size > 0) {
        const held = lane.shift()!;
        if (held.state !== 'ready') continue; // revoked while buffered
        this.#ready--;
        held.state = 'leased';
        held.attempt++;
        held.generation++;
        held.leaseDeadline = now + leaseMs;
        this.#inflight++;
        this.#leases.push(held.leaseDeadline, {
          held,
          generation: held.generation,
          deadline: held.leaseDeadline,
        });
        out.push(new KafkaDelivery<T>(this, held));
      }
    }
    if (
      this.#resumes.length > 0 &&
      this.#ready + this.#delayedCount < this.#backend.settings.maxBufferedMessages / 2
    ) {
      const resumes = this.#resumes;
      this.#resumes = [];
      for (const resume of resumes) resume();
    }
    return out;
  }

  #promoteDue(): void {
    const now = Date.now();
    while (this.#delayed.size > 0 && this.#delayed.peekKey()! <= now) {
      const held = this.#delayed.pop()!;
      if (held.state !== 'delayed') continue;
      this.#delayedCount--;
      this.#toReady(held);
    }
  }

  /** Leases that lapsed go back to the buffer, or to the DLQ after the last allowed delivery. */
  #reclaimLapsed(): void {
    const now = Date.now();
    while (this.#leases.size > 0 && this.#leases.peekKey()! <= now) {
      const { held, generation, deadline } = this.#leases.pop()!;
      if (held.state !== 'leased' || held.generation !== generation || held.leaseDeadline !== deadline)
        continue;
      this.#inflight--;
      held.generation++;
      if (held.attempt >= this.options.maxDeliveries) {
        held.state = 'settling';
        this.#inflight++;
        this.#track(
          this.#deadLetterHeld(held, `lease expired (after ${held.attempt} deliveries)`).catch(() => {
            // The DLQ write failed: keep the message here; the next lapse check tries again.
            this.#leases.push(now, { held, generation: held.generation, deadline: now });
            held.state = 'leased';
            held.leaseDeadline = now;
          }),
        );
      } else {
        this.#toReady(held);
      }
    }
  }

  #nextEventIn(): number {
    const now = Date.now();
    const next = Math.min(
      this.#delayed.peekKey() ?? Number.POSITIVE_INFINITY,
      this.#leases.peekKey() ?? Number.POSITIVE_INFINITY,
    );
    return Math.max(1, next - now);
  }

  #wake(): void {
    for (const wake of this.#waits) wake();
  }

  #pause(ms: number, signal?: AbortSignal): Promise<void> {
    let wake: () => void = () => {};
    const interrupted = new Promise<void>((resolve) => {
      wake = resolve;
    });
    this.#waits.add(wake);
    return Promise.race([sleep(ms, signal), interrupted]).finally(() => this.#waits.delete(wake));
  }

  #track<P>(p: Promise<P>): void {
    this.#background.add(p);
    void p.finally(() => this.#background.delete(p));
  }

  // ── settling (called by KafkaDelivery) ───────────────────────────────────────

  checkLease(held: Held, generation: number, id: string): void {
    this.#checkOpen();
    this.#reclaimLapsed();
    if (held.state !== 'leased' || held.generation !== generation) throw new LeaseExpiredError(this.name, id);
  }

  async ack(held: Held): Promise<void> {
    held.state = 'done';
    this.#inflight--;
    await this.#markAcked(held);
  }

  extend(held: Held, ms: number): number {
    held.leaseDeadline = Date.now() + ms;
    this.#leases.push(held.leaseDeadline, {
      held,
      generation: held.generation,
      deadline: held.leaseDeadline,
    });
    return held.leaseDeadline;
  }

  /** nack: republish to the retry topic with the attempt count and not-before, then ack the original. */
  async retry(held: Held, delayMs: number, reason: string): Promise<void> {
    held.state = 'settling';
    const headers = copyHeaders(held.message.headers);
    headers[H.attempts] = String(held.attempt);
    headers[H.notBefore] = String(Date.now() + delayMs);
    headers[H.reason] = encodeURIComponent(reason);
    try {
      await this.#backend.producer.send({
        topic: this.names.retry,
        messages: [{ key: held.message.key, value: held.message.value, headers }],
        acks: -1,
      });
    } catch (err) {
      if (held.state === 'settling') {
        // Not republished: deliver it again from here.
        this.#inflight--;
        this.#toReady(held);
      }
      throw kafkaFailure(`nack on '${this.name}'`, err);
    }
    if (held.state !== 'settling') return; // revoked meanwhile: the new owner has it again
    held.state = 'done';
    this.#inflight--;
    await this.#markAcked(held);
  }

  async deadLetter(held: Held, reason: string): Promise<void> {
    held.state = 'settling';
    try {
      await this.#deadLetterHeld(held, reason);
    } catch (err) {
      if (held.state === 'settling') {
        this.#inflight--;
        this.#toReady(held);
      }
      throw err;
    }
  }

  async #deadLetterHeld(held: Held, reason: string): Promise<void> {
    await this.#produceDeadLetter(held.message, held.meta.id, reason, held.attempt);
    if (held.state !== 'settling') return;
    held.state = 'done';
    this.#inflight--;
    await this.#markAcked(held);
  }

  async #produceDeadLetter(
    message: KafkaIncomingMessage,
    id: string,
    reason: string,
    attempts: number,
  ): Promise<void> {
    const headers = copyHeaders(message.headers);
    delete headers[H.notBefore];
    headers[H.id] = id;
    headers[H.attempts] = String(attempts);
    headers[H.reason] = encodeURIComponent(reason);
    headers[H.deadAt] = String(Date.now());
    try {
      await this.#backend.producer.send({
        topic: this.names.dlq,
        messages: [{ key: message.key, value: message.value, headers }],
        acks: -1,
      });
    } catch (err) {
      throw kafkaFailure(`dead-lettering on '${this.name}'`, err);
    }
    this.invalidateDeadLetterCount();
    publishDeadLetter({ backend: 'kafka', topic: this.name, messageId: id, reason, attempts });
  }

  async #markAcked(held: Held): Promise<void> {
    const track = held.track;
    if (this.#tracks.get(track.key) !== track) return; // revoked: nothing to commit here
    track.entries.set(held.offset, 'acked');
    this.#dirty.add(track);
    await this.#flushSoon();
  }

  /** Coalesce commits: every caller resolves after a flush that started after its request. */
  #flushSoon(): Promise<void> {
    this.#flushRequested = true;
    if (!this.#flushLoop) {
      this.#flushLoop = (async () => {
        await Promise.resolve();
        while (this.#flushRequested) {
          this.#flushRequested = false;
          await this.#flush();
        }
      })().finally(() => {
        this.#flushLoop = undefined;
      });
    }
    return this.#flushLoop;
  }

  async #flush(): Promise<void> {
    const consumer = this.#consumer;
    if (!consumer || this.#dirty.size === 0) return;
    const commits: { track: PartitionTrack; next: number }[] = [];
    for (const track of this.#dirty) {
      let next = -1;
      let gap = false;
      for (const [offset, v] of track.entries) {
        if (v !== 'acked') {
          gap = true;
          break;
        }
        next = offset + 1;
      }
      if (!gap && track.highestSeen >= 0) next = track.highestSeen + 1;
      if (next > track.committed) commits.push({ track, next });
    }
    this.#dirty.clear();
    if (commits.length === 0) return;
    try {
      await consumer.commitOffsets(
        commits.map(({ track, next }) => ({
          topic: track.topic,
          partition: track.partition,
          offset: String(next),
        })),
      );
    } catch {
      // Mostly a rebalance in progress: kept partitions are committed after the join, lost ones
      // are read again by their new owner. Either way the acks stay recorded here.
      for (const { track } of commits) if (this.#tracks.get(track.key) === track) this.#dirty.add(track);
      return;
    }
    for (const { track, next } of commits) {
      track.committed = next;
      for (const offset of track.entries.keys()) {
        if (offset >= next) break;
        track.entries.delete(offset);
      }
    }
  }

  // ── stats, close ─────────────────────────────────────────────────────────────

  async stats(): Promise<QueueStats> {
    this.#checkOpen();
    await this.ensureTopics();
    this.#promoteDue();
    this.#reclaimLapsed();
    const lag = await this.#lag();
    const laneLag = this.names.lanes.reduce((sum, t) => sum + (lag.get(t) ?? 0), 0);
    const retryLag = lag.get(this.names.retry) ?? 0;
    // Split what this process holds by origin topic: the broker's lag cannot tell.
    let laneHeld = 0;
    let retryReady = 0;
    let retryHeld = 0;
    for (const track of this.#tracks.values()) {
      const fromRetry = track.topic === this.names.retry;
      for (const v of track.entries.values()) {
        const settledOrLeased =
          v === 'acked' || v.state === 'leased' || v.state === 'settling' || v.state === 'done';
        if (fromRetry) {
          if (v !== 'acked' && v.state === 'ready') retryReady++;
          else if (settledOrLeased) retryHeld++;
        } else if (settledOrLeased) laneHeld++;
      }
    }
    return {
      ready: Math.max(0, laneLag - laneHeld + retryReady),
      inflight: this.#inflight,
      delayed: Math.max(0, retryLag - retryHeld - retryReady),
      deadLettered: await this.#deadLetterCount(),
    };
  }

  /**
   * Counting the DLQ means scanning it (seconds on a real cluster), so stats() serves the last
   * count and refreshes it in the background when it is older than 5 s or known to be stale.
   * Only the very first call waits for a scan.
   */
  async #deadLetterCount(): Promise<number> {
    const cached = this.#dlqCount;
    if (cached && Date.now() - cached.at < DLQ_COUNT_TTL_MS) return cached.value;
    if (!this.#dlqRefresh) {
      this.#dlqRefresh = (this.deadLetters as KafkaDeadLetters<T>)
        .size()
        .then((value) => {
          this.#dlqCount = { value, at: Date.now() };
          return value;
        })
        .finally(() => {
          this.#dlqRefresh = undefined;
        });
      this.#track(this.#dlqRefresh.catch(() => {}));
    }
    return cached ? cached.value : this.#dlqRefresh;
  }

  /** The DLQ changed here: the next stats() refreshes the count. */
  invalidateDeadLetterCount(): void {
    if (this.#dlqCount) this.#dlqCount.at = 0;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake();
    this.#waits.clear();
    // Commit what was acked before leaving the group, so it is not delivered again.
    await Promise.allSettled([...this.#background]);
    await this.#flushSoon().catch(() => {});
    const consumer = this.#consumer;
    if (consumer && this.#consumerReady) {
      await this.#consumerReady.catch(() => {});
      await consumer.disconnect().catch(() => {});
    }
  }

  /** Publish a dead letter's message to its lane again, attempts starting over. */
  async republish(letter: DeadLetter<T>, record: KafkaIncomingMessage): Promise<void> {
    const headers = copyHeaders(record.headers);
    for (const h of [H.reason, H.deadAt, H.notBefore]) delete headers[h];
    headers[H.attempts] = '0';
    await this.ensureTopics();
    await this.#send([
      {
        topic: this.names.lanes[laneIndex(letter.priority)],
        message: { key: record.key, value: record.value, headers },
      },
    ]);
  }
}

class KafkaDelivery<T> implements Delivery<T> {
  readonly id: string;
  readonly topic: string;
  readonly payload: T;
  readonly key: string | undefined;
  readonly priority: number;
  readonly attempt: number;
  readonly publishedAt: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly #queue: KafkaQueue<T>;
  readonly #held: Held;
  readonly #generation: number;

  constructor(queue: KafkaQueue<T>, held: Held) {
    this.#queue = queue;
    this.#held = held;
    this.#generation = held.generation;
    this.id = held.meta.id;
    this.topic = queue.name;
    this.payload = held.payload as T;
    this.key = held.meta.key;
    this.priority = held.meta.priority;
    this.attempt = held.attempt;
    this.publishedAt = held.meta.publishedAt;
    this.headers = held.meta.headers;
  }

  get leaseDeadline(): number {
    return this.#held.leaseDeadline;
  }

  async ack(): Promise<void> {
    this.#queue.checkLease(this.#held, this.#generation, this.id);
    await this.#queue.ack(this.#held);
  }

  async nack(options: { delayMs?: number; reason?: string } = {}): Promise<void> {
    this.#queue.checkLease(this.#held, this.#generation, this.id);
    const reason = options.reason ?? 'nack';
    if (this.attempt >= this.#queue.options.maxDeliveries) {
      await this.#queue.deadLetter(this.#held, `${reason} (after ${this.attempt} deliveries)`);
      return;
    }
    await this.#queue.retry(this.#held, Math.max(0, options.delayMs ?? 0), reason);
  }

  async extendLease(ms?: number): Promise<void> {
    this.#queue.checkLease(this.#held, this.#generation, this.id);
    this.#queue.extend(this.#held, ms ?? this.#queue.options.leaseMs);
  }

  async deadLetter(reason: string): Promise<void> {
    this.#queue.checkLease(this.#held, this.#generation, this.id);
    await this.#queue.deadLetter(this.#held, reason);
  }
}

interface ScannedLetter<T> {
  letter: DeadLetter<T>;
  record: KafkaIncomingMessage;
}

class KafkaDeadLetters<T> implements DeadLetterQueue<T> {
  readonly #queue: KafkaQueue<T>;
  readonly #backend: KafkaGroupBackend;

  constructor(queue: KafkaQueue<T>, backend: KafkaGroupBackend) {
    this.#queue = queue;
    this.#backend = backend;
  }

  /** Read the DLQ topic up to its current end with a throw-away group; apply removal markers. */
  async #scan(): Promise<ScannedLetter<T>[]> {
    await this.#queue.ensureTopics();
    const backend = this.#backend;
    const topic = this.#queue.names.dlq;
    let ends: { partition: number; high: string; low: string }[];
    try {
      ends = await backend.admin.fetchTopicOffsets(topic);
    } catch (err) {
      throw kafkaFailure(`reading the DLQ of '${this.#queue.name}'`, err);
    }
    const targets = new Map(
      ends.filter((e) => Number(e.high) > Number(e.low)).map((e) => [e.partition, Number(e.high) - 1]),
    );
    const records = new Map<string, KafkaIncomingMessage>();
    if (targets.size > 0) {
      const s = backend.settings;
      const groupId = `${this.#queue.names.group}.dlq-scan.${randomBytes(6).toString('hex')}`;
      const consumer = backend.kafka.consumer({
        groupId,
        sessionTimeout: s.sessionTimeoutMs,
        heartbeatInterval: s.heartbeatIntervalMs,
        maxWaitTimeInMs: Math.min(s.pollMs, 100),
        allowAutoTopicCreation: false,
      });
      try {
        await consumer.connect();
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
        const remaining = new Set(targets.keys());
        let finished: () => void = () => {};
        const done = new Promise<void>((resolve) => {
          finished = resolve;
        });
        await consumer.run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          eachBatch: async ({ batch, resolveOffset }) => {
            const last = targets.get(batch.partition) ?? -1;
            for (const m of batch.messages) {
              if (Number(m.offset) <= last) records.set(`${batch.partition}-${m.offset}`, m);
              resolveOffset(m.offset);
              if (Number(m.offset) >= last) remaining.delete(batch.partition);
            }
            if (remaining.size === 0) finished();
          },
        });
        let timer: NodeJS.Timeout | undefined;
        const timedOut = new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), s.dlqScanTimeoutMs);
        });
        const late = await Promise.race([done.then(() => false), timedOut]);
        clearTimeout(timer);
        if (late)
          throw new BackendUnavailableError(FEATURE, `scanning the DLQ of '${this.#queue.name}' timed out`);
      } finally {
        await consumer.disconnect().catch(() => {});
        await backend.admin.deleteGroups([groupId]).catch(() => {});
      }
    }
    const removed = new Set<string>();
    for (const m of records.values()) {
      const ids = header(m.headers, H.remove);
      if (ids) for (const id of ids.split(',')) removed.add(id);
    }
    const out: ScannedLetter<T>[] = [];
    for (const [id, record] of records) {
      if (removed.has(id) || header(record.headers, H.remove) !== undefined) continue;
      out.push({ letter: await this.#toLetter(id, record), record });
    }
    return out;
  }

  async #toLetter(id: string, record: KafkaIncomingMessage): Promise<DeadLetter<T>> {
    // A record without a value is listed with empty raw bytes.
    const { payload, raw } = await letterPayload<T>(
      this.#backend.codec,
      record.value ?? Buffer.alloc(0),
      this.#queue.name,
    );
    let headers: Record<string, string> = {};
    try {
      headers = parseUserHeaders(header(record.headers, H.headers), this.#queue.name);
    } catch {
      // A dead letter with broken headers is still listed; its headers are unknown.
    }
    return {
      id,
      topic: this.#queue.name,
      messageId: header(record.headers, H.id) ?? id,
      payload,
      ...(raw === undefined ? {} : { raw }),
      key: record.key === null ? undefined : record.key.toString('utf8'),
      priority: Number(header(record.headers, H.priority) ?? 0) || 0,
      headers,
      reason: safeDecode(header(record.headers, H.reason) ?? ''),
      attempts: Number(header(record.headers, H.attempts) ?? 0) || 0,
      publishedAt: Number(header(record.headers, H.published) ?? 0) || 0,
      deadLetteredAt: Number(header(record.headers, H.deadAt) ?? 0) || 0,
    };
  }

  async #remove(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    try {
      await this.#backend.producer.send({
        topic: this.#queue.names.dlq,
        messages: [{ key: null, value: Buffer.alloc(0), headers: { [H.remove]: ids.join(',') } }],
        acks: -1,
      });
    } catch (err) {
      throw kafkaFailure(`updating the DLQ of '${this.#queue.name}'`, err);
    }
    this.#queue.invalidateDeadLetterCount();
  }

  async list(
    options: { limit?: number; offset?: number; filter?: DeadLetterFilter } = {},
  ): Promise<DeadLetter<T>[]> {
    return pageOfLetters(
      (await this.#scan()).map((s) => s.letter),
      options,
    );
  }

  async get(id: string): Promise<DeadLetter<T> | undefined> {
    return (await this.#scan()).find((s) => s.letter.id === id)?.letter;
  }

  async replay(filter?: DeadLetterFilter): Promise<number> {
    const picked = (await this.#scan()).filter((s) => matchesDeadLetterFilter(s.letter, filter));
    for (const { letter, record } of picked) await this.#queue.republish(letter, record);
    await this.#remove(picked.map((s) => s.letter.id));
    return picked.length;
  }

  async purge(filter?: DeadLetterFilter): Promise<number> {
    const picked = (await this.#scan()).filter((s) => matchesDeadLetterFilter(s.letter, filter));
    await this.#remove(picked.map((s) => s.letter.id));
    return picked.length;
  }

  async size(): Promise<number> {
    return (await this.#scan()).length;
  }
}

// ── helpers ──────────────────────────────────────────────────────────────────────

function laneIndex(priority: number): 0 | 1 | 2 {
  return priority > 0 ? 0 : priority < 0 ? 2 : 1;
}

function metaHeaders(meta: MessageMeta): Record<string, string> {
  const h: Record<string, string> = {
    [H.id]: meta.id,
    [H.priority]: String(meta.priority),
    [H.published]: String(meta.publishedAt),
    [H.attempts]: String(meta.attempts),
  };
  if (Object.keys(meta.headers).length > 0) h[H.headers] = JSON.stringify(meta.headers);
  return h;
}

function readMeta(message: KafkaIncomingMessage, fallbackId: string, topic: string): MessageMeta {
  const h = message.headers;
  const priority = Number(header(h, H.priority) ?? 0);
  const attempts = Number(header(h, H.attempts) ?? 0);
  if (!Number.isFinite(priority) || !Number.isFinite(attempts)) {
    throw new QueueDecodeError(topic, 'malformed mocra-priority or mocra-attempts header');
  }
  return {
    id: header(h, H.id) ?? fallbackId,
    key: message.key === null ? undefined : message.key.toString('utf8'),
    priority,
    publishedAt: Number(header(h, H.published) ?? message.timestamp) || 0,
    attempts,
    headers: parseUserHeaders(header(h, H.headers), topic),
  };
}

function header(headers: Record<string, KafkaHeaderValue> | undefined, name: string): string | undefined {
  const v = headers?.[name];
  const first = Array.isArray(v) ? v[0] : v;
  if (first === undefined) return undefined;
  return Buffer.isBuffer(first) ? first.toString('utf8') : first;
}

function copyHeaders(headers: Record<string, KafkaHeaderValue> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(headers ?? {})) {
    const v = header(headers, name);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

function parseUserHeaders(raw: string | undefined, topic: string): Record<string, string> {
  if (!raw) return {};
  return parseHeaderObject(raw, topic, 'mocra-headers');
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

function kafkaFailure(what: string, err: unknown): Error {
  if (isMocraError(err)) return err;
  return new BackendUnavailableError(FEATURE, `${what} failed: ${describe(err)}`, { cause: err });
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
