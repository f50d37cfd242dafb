/**
 * The NATS JetStream queue backend (@nats-io/transport-node + @nats-io/jetstream, server ≥ 2.9).
 *
 * One work-queue stream per topic; the subject of a message names its lane and partition:
 *
 * ```
 *  stream  mocra~{ns}~{topic}        subjects mocra.{ns}.{topic}.q.>   (WorkQueue: acked = gone)
 *            mocra.{ns}.{topic}.q.{high|normal|low}.{partition}   ready work, one lane each
 *            mocra.{ns}.{topic}.q.delayed.{partition}             publish with delayMs
 *  stream  mocra~{ns}~{topic}~dlq    subject  mocra.{ns}.{topic}.dlq     dead letters (Limits)
 *  subject mocra.{ns}.{topic}.bell   core NATS, not stored: "something was published"
 *
 *  partition = hash32(key) mod partitions   (no key: hash of the message id)
 * ```
 *
 * Durable pull consumers do the leasing: AckWait = the topic's `leaseMs`, MaxDeliver unlimited
 * (the backend dead-letters itself, so the count and the DLQ entry are exact), explicit acks
 * that wait for the server's confirmation. `nack(delay)` is JetStream's `-NAK {delay}`;
 * `extendLease` is `+WPI` (and longer leases are kept alive with repeated `+WPI`).
 *
 * Account affinity. By default every process pulls from one durable per lane (filter
 * `…q.{lane}.*`): competing consumers, any process gets any key. With `ownedPartitions` a
 * process pulls only from durables of its partitions (`{lane}-p{n}`, filter `…q.{lane}.{n}`),
 * so all messages of one key reach the one process that owns the key's partition — the
 * coordination layer's partition ownership (rendezvous hashing over live members) decides who
 * owns what, and when ownership moves the new owner simply pulls from the same durable (the old
 * owner's unacked messages come back after AckWait). One stream uses one mode: JetStream does
 * not allow overlapping consumers on a work-queue stream.
 *
 * Pulls are always `no_wait` (the server answers at once with what it has), so a consumer never
 * leaves a pull open that could deliver messages it no longer waits for. A waiting consumer
 * sleeps until the topic's bell rings or `pollMs` passes (nak delays and lapsed leases have no
 * bell).
 */

import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Msg, MsgHdrs, NatsConnection } from '@nats-io/transport-node';
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
import { publishBackpressure, publishDeadLetter, publishPoison } from './channels.js';
import { createQueueCodec, type QueueCodec, type QueueCodecOptions } from './codec.js';
import {
  letterPayload,
  matchesDeadLetterFilter,
  pageOfLetters,
  parseHeaderObject,
} from './dead-letter-filter.js';
import { partitionOf } from './hash.js';
import { LeaseKeeper } from './lease-keeper.js';
import { createIdGenerator, sleep } from './timing.js';
import {
  assertQueueName,
  checkConsume,
  checkPublish,
  laneOf,
  PRIORITY_LANES,
  type PriorityLane,
  TopicRegistry,
} from './topic-options.js';
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

export interface NatsQueueBackendOptions {
  /** One server URL or several (`nats://host:4222`). @default 'nats://127.0.0.1:4222' */
  servers?: string | string[];
  /** Prefix of stream and subject names. @default 'mocra' */
  namespace?: string;
  /** Defaults for every topic; per-topic options override them. */
  topicDefaults?: TopicOptions;
  /** How payloads are encoded and compressed. */
  codec?: QueueCodecOptions;
  /**
   * Largest encoded payload accepted by `publish` (refused with PayloadTooLargeError).
   * @default the server's max_payload minus 8 KiB for headers
   */
  maxPayloadBytes?: number;
  /** How often a waiting consumer re-checks for nak-delayed, delayed and lapsed messages. @default 250 */
  pollMs?: number;
  /**
   * Partition tokens per lane; keys hash into them. Every process of a deployment must use the
   * same number.
   * @default 16
   */
  partitions?: number;
  /**
   * Key affinity: consume only these partitions (0 … partitions-1). A function is asked again on
   * every consume, so it can follow a partition ownership that changes as members come and go.
   * Unset: competing consumers over all partitions.
   */
  ownedPartitions?: readonly number[] | (() => Iterable<number>);
  /** Where JetStream stores the streams this backend creates. @default 'file' */
  storage?: 'file' | 'memory';
  /** Stream replicas (clustered JetStream). @default 1 */
  replicas?: number;
  /** How long to wait for the server to confirm an ack, nak or publish. @default 5000 */
  requestTimeoutMs?: number;
  /** Extra @nats-io/transport-node connection options, passed through. */
  connectionOptions?: Record<string, unknown>;
}

const FEATURE = 'the NATS JetStream queue backend';
const DELAYED_ACK_WAIT_MS = 30_000;

type TransportModule = typeof import('@nats-io/transport-node');
type JetStreamModule = typeof import('@nats-io/jetstream');

/** What the NATS backend offers beyond {@link QueueBackend}. */
export interface NatsQueueBackend extends QueueBackend {
  readonly kind: 'nats';
  /** Partition tokens per lane. */
  readonly partitions: number;
  /** Stream and subject names of one topic. */
  namesOf(topic: string): NatsTopicNames;
}

export async function createNatsQueueBackend(
  options: NatsQueueBackendOptions = {},
): Promise<NatsQueueBackend> {
  const namespace = options.namespace ?? 'mocra';
  assertQueueName('namespace', namespace);
  const partitions = options.partitions ?? 16;
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > 1024) {
    throw new InvalidArgumentError(`partitions must be an integer in 1…1024, got ${partitions}`);
  }
  const codec = createQueueCodec(options.codec);
  const servers = options.servers ?? 'nats://127.0.0.1:4222';
  for (const s of Array.isArray(servers) ? servers : [servers]) checkServerUrl(s);
  const transport = await importOptional<TransportModule>('@nats-io/transport-node', FEATURE);
  const js = await importOptional<JetStreamModule>('@nats-io/jetstream', FEATURE);
  let nc: NatsConnection;
  try {
    nc = await transport.connect({
      servers,
      name: `mocra-queue-${namespace}`,
      ...(options.connectionOptions ?? {}),
    });
  } catch (err) {
    throw new BackendUnavailableError(FEATURE, `cannot connect to ${String(servers)}: ${describe(err)}`, {
      cause: err,
    });
  }
  const jsm = await js.jetstreamManager(nc);
  return new JetStreamBackend(nc, js.jetstream(nc), jsm, transport, namespace, codec, partitions, options);
}

function checkServerUrl(server: string): void {
  if (/^[\w.-]+:\d+$/.test(server)) return; // host:port
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new InvalidBackendUrlError(server, 'not a URL or host:port');
  }
  if (!['nats:', 'tls:', 'ws:', 'wss:'].includes(url.protocol)) {
    throw new InvalidBackendUrlError(server, `expected nats://, got ${url.protocol}//`);
  }
}

export class JetStreamBackend implements NatsQueueBackend {
  readonly kind = 'nats' as const;
  readonly namespace: string;
  readonly partitions: number;
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #transport: TransportModule;
  readonly #codec: QueueCodec;
  readonly #options: NatsQueueBackendOptions;
  readonly #topics: TopicRegistry<NatsQueue<unknown>>;
  readonly #maxPayloadBytes: number;
  readonly nextId = createIdGenerator();

  constructor(
    nc: NatsConnection,
    js: JetStreamClient,
    jsm: JetStreamManager,
    transport: TransportModule,
    namespace: string,
    codec: QueueCodec,
    partitions: number,
    options: NatsQueueBackendOptions,
  ) {
    this.#nc = nc;
    this.#js = js;
    this.#jsm = jsm;
    this.#transport = transport;
    this.namespace = namespace;
    this.#codec = codec;
    this.partitions = partitions;
    this.#options = options;
    const serverMax = nc.info?.max_payload ?? 1024 * 1024;
    this.#maxPayloadBytes = options.maxPayloadBytes ?? Math.max(1024, serverMax - 8 * 1024);
    this.#topics = new TopicRegistry(
      options.topicDefaults,
      (name, resolved) => new NatsQueue(this, name, resolved),
    );
  }

  get closed(): boolean {
    return this.#topics.closed;
  }
  get connection(): NatsConnection {
    return this.#nc;
  }
  get js(): JetStreamClient {
    return this.#js;
  }
  get jsm(): JetStreamManager {
    return this.#jsm;
  }
  get codec(): QueueCodec {
    return this.#codec;
  }
  get maxPayloadBytes(): number {
    return this.#maxPayloadBytes;
  }
  get pollMs(): number {
    return this.#options.pollMs ?? 250;
  }
  get requestTimeoutMs(): number {
    return this.#options.requestTimeoutMs ?? 5_000;
  }
  get storage(): 'file' | 'memory' {
    return this.#options.storage ?? 'file';
  }
  get replicas(): number {
    return this.#options.replicas ?? 1;
  }

  headers(): MsgHdrs {
    return this.#transport.headers();
  }
  inbox(): string {
    return this.#transport.createInbox();
  }

  /** Partitions this process consumes, or undefined for competing consumers over all of them. */
  ownedPartitions(): number[] | undefined {
    const owned = this.#options.ownedPartitions;
    if (owned === undefined) return undefined;
    const list = typeof owned === 'function' ? [...owned()] : [...owned];
    return [...new Set(list)]
      .filter((p) => Number.isInteger(p) && p >= 0 && p < this.partitions)
      .sort((a, b) => a - b);
  }

  /** Stream, subject and durable names of one topic (exposed for tests and operators). */
  namesOf(topic: string): NatsTopicNames {
    const base = `mocra.${this.namespace}.${topic}`;
    return {
      stream: `mocra~${this.namespace}~${topic}`,
      dlqStream: `mocra~${this.namespace}~${topic}~dlq`,
      subjectPrefix: `${base}.q`,
      dlqSubject: `${base}.dlq`,
      bellSubject: `${base}.bell`,
    };
  }

  topic<T>(name: string, options?: TopicOptions): LeaseQueue<T> {
    return this.#topics.get(name, options) as LeaseQueue<T>;
  }

  async close(): Promise<void> {
    const topics = this.#topics.close();
    if (!topics) return;
    // Unsettled leases go back at once (a nak) instead of waiting out AckWait.
    await Promise.all(topics.map((t) => t.close().catch(() => {})));
    await this.#nc.close().catch(() => {});
  }
}

export interface NatsTopicNames {
  stream: string;
  dlqStream: string;
  subjectPrefix: string;
  dlqSubject: string;
  bellSubject: string;
}

/** What the reply subject of a JetStream delivery tells (`$JS.ACK.<stream>.<consumer>.<dc>.<sseq>…`). */
interface AckInfo {
  deliveryCount: number;
  streamSeq: number;
}

function parseAckSubject(reply: string | undefined): AckInfo | undefined {
  if (!reply?.startsWith('$JS.ACK.')) return undefined;
  const t = reply.split('.');
  // v1: $JS.ACK.stream.consumer.dc.sseq.cseq.ts.pending (9); v2 adds domain and account hash.
  const at = t.length === 9 ? 4 : t.length >= 11 ? 6 : -1;
  if (at < 0) return undefined;
  const deliveryCount = Number(t[at]);
  const streamSeq = Number(t[at + 1]);
  if (!Number.isFinite(deliveryCount) || !Number.isFinite(streamSeq)) return undefined;
  return { deliveryCount, streamSeq };
}

const H_ID = 'Mocra-Id';
const H_KEY = 'Mocra-Key';
const H_PRIORITY = 'Mocra-Priority';
const H_PUBLISHED = 'Mocra-Published';
const H_ATTEMPTS = 'Mocra-Attempts';
const H_HEADERS = 'Mocra-Headers';
const H_NOT_BEFORE = 'Mocra-Not-Before';
const H_REASON = 'Mocra-Reason';
const H_DEAD_AT = 'Mocra-Dead-At';

interface MessageMeta {
  id: string;
  key: string | undefined;
  priority: number;
  publishedAt: number;
  /** Deliveries before the current stream message existed (replays reset it to 0). */
  attempts: number;
  headers: Record<string, string>;
}

class NatsQueue<T> implements LeaseQueue<T> {
  readonly name: string;
  readonly options: Readonly<Required<TopicOptions>>;
  readonly deadLetters: DeadLetterQueue<T>;
  readonly names: NatsTopicNames;
  readonly #backend: JetStreamBackend;
  #ready: Promise<void> | undefined;
  readonly #durables = new Map<string, Promise<void>>();
  readonly #waits = new Set<() => void>();
  #bell: { unsubscribe(): void } | undefined;
  readonly #deliveries = new Set<NatsDelivery<T>>();
  /** Capacity estimate: live messages at the last check plus what this process published since. */
  #approxSize = 0;
  #approxAt = 0;
  #lastPromote = 0;

  constructor(backend: JetStreamBackend, name: string, options: Required<TopicOptions>) {
    this.#backend = backend;
    this.name = name;
    this.options = Object.freeze(options);
    this.names = backend.namesOf(name);
    this.deadLetters = new NatsDeadLetters<T>(this, backend);
  }

  get backend(): JetStreamBackend {
    return this.#backend;
  }

  #checkOpen(): void {
    if (this.#backend.closed) throw new QueueClosedError(this.name);
  }

  /** Create the stream and the DLQ stream once (an existing one is used as it is). */
  ensureReady(): Promise<void> {
    if (!this.#ready) {
      const jsm = this.#backend.jsm;
      const storage = this.#backend.storage;
      const ensure = async (name: string, subjects: string[], workQueue: boolean) => {
        try {
          await jsm.streams.info(name);
          return;
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        try {
          await jsm.streams.add({
            name,
            subjects,
            retention: (workQueue ? 'workqueue' : 'limits') as never,
            storage: storage as never,
            num_replicas: this.#backend.replicas,
          });
        } catch (err) {
          // Another process created it between our info and add.
          if (!describe(err).includes('already in use')) throw err;
        }
      };
      this.#ready = Promise.all([
        ensure(this.names.stream, [`${this.names.subjectPrefix}.>`], true),
        ensure(this.names.dlqStream, [this.names.dlqSubject], false),
      ]).then(
        () => {},
        (err: unknown) => {
          this.#ready = undefined;
          throw natsFailure(`creating the streams of '${this.name}'`, err);
        },
      );
    }
    return this.#ready;
  }

  /** Create (once) the durable consumer `name` filtered to `subject`. */
  #ensureDurable(name: string, subject: string, ackWaitMs: number): Promise<void> {
    let ready = this.#durables.get(name);
    if (!ready) {
      const jsm = this.#backend.jsm;
      const config = {
        durable_name: name,
        filter_subject: subject,
        ack_policy: 'explicit' as never,
        deliver_policy: 'all' as never,
        ack_wait: Math.round(ackWaitMs * 1e6),
        max_deliver: -1,
        max_ack_pending: 20_000,
        max_waiting: 512,
      };
      ready = jsm.consumers
        .add(this.names.stream, config)
        .then(
          () => {},
          async (err: unknown) => {
            // It exists with another config (say a changed leaseMs): bring AckWait in line.
            if (describe(err).includes('already exists')) {
              await jsm.consumers.update(this.names.stream, name, { ack_wait: config.ack_wait });
              return;
            }
            if (describe(err).includes('not unique') || describe(err).includes('multiple non-filtered')) {
              throw new InvalidArgumentError(
                `NATS topic '${this.name}': ${describe(err)} — the stream is already consumed in the other mode ` +
                  `(with and without ownedPartitions); every process of a deployment must use the same mode`,
                { cause: err },
              );
            }
            throw err;
          },
        )
        .catch((err: unknown) => {
          this.#durables.delete(name);
          throw natsFailure(`creating consumer '${name}' of '${this.name}'`, err);
        });
      this.#durables.set(name, ready);
    }
    return ready;
  }

  /** The durables (name, subject) of one lane this process pulls from. */
  #durablesOf(lane: PriorityLane): { name: string; subject: string }[] {
    const owned = this.#backend.ownedPartitions();
    if (owned === undefined) return [{ name: lane, subject: `${this.names.subjectPrefix}.${lane}.*` }];
    return owned.map((p) => ({ name: `${lane}-p${p}`, subject: `${this.names.subjectPrefix}.${lane}.${p}` }));
  }

  // ── publish ──────────────────────────────────────────────────────────────────

  async publish(messages: readonly PublishMessage<T>[]): Promise<void> {
    this.#checkOpen();
    if (messages.length === 0) return;
    const backend = this.#backend;
    const prepared = await Promise.all(
      messages.map(async (m) => {
        const priority = checkPublish(this.name, m.priority, m.delayMs);
        const data = await backend.codec.encode(m.payload, this.name);
        if (data.length > backend.maxPayloadBytes) {
          throw new PayloadTooLargeError(this.name, data.length, backend.maxPayloadBytes);
        }
        return { m, priority, data, id: backend.nextId() };
      }),
    );
    await this.ensureReady();
    await this.#waitForRoom(prepared.length);
    const now = Date.now();
    try {
      // One connection keeps publish order; the acks are awaited together.
      await Promise.all(
        prepared.map(({ m, priority, data, id }) => {
          const h = backend.headers();
          writeMeta(h, {
            id,
            key: m.key,
            priority,
            publishedAt: now,
            attempts: 0,
            headers: m.headers ?? {},
          });
          const partition = partitionOf(m.key ?? id, backend.partitions);
          const delay = m.delayMs ?? 0;
          let subject: string;
          if (delay > 0) {
            h.set(H_NOT_BEFORE, String(now + delay));
            subject = `${this.names.subjectPrefix}.delayed.${partition}`;
          } else {
            subject = `${this.names.subjectPrefix}.${laneOf(priority)}.${partition}`;
          }
          return backend.js.publish(subject, data, {
            headers: h,
            msgID: id,
            timeout: backend.requestTimeoutMs,
          });
        }),
      );
    } catch (err) {
      this.#checkOpen();
      throw natsFailure(`publish to '${this.name}'`, err);
    }
    this.#approxSize += prepared.length;
    this.#ring();
  }

  /** Backpressure: wait while the stream holds capacity messages (approximate across publishers). */
  async #waitForRoom(n: number): Promise<void> {
    const need = Math.min(n, this.options.capacity);
    const fresh = Date.now() - this.#approxAt < this.#backend.pollMs;
    if (fresh && this.#approxSize + need <= this.options.capacity) return;
    let waited = false;
    for (;;) {
      this.#checkOpen();
      this.#approxSize = await this.#liveCount();
      this.#approxAt = Date.now();
      if (this.#approxSize + need <= this.options.capacity) return;
      if (!waited) publishBackpressure({ backend: 'nats', topic: this.name, queue: this });
      waited = true;
      await this.#pause(this.#backend.pollMs);
    }
  }

  async #liveCount(): Promise<number> {
    try {
      return (await this.#backend.jsm.streams.info(this.names.stream)).state.messages;
    } catch (err) {
      throw natsFailure(`reading the size of '${this.name}'`, err);
    }
  }

  #ring(): void {
    try {
      this.#backend.connection.publish(this.names.bellSubject);
    } catch {
      // A bell is only a hint; waiting consumers poll anyway.
    }
  }

  // ── consume ──────────────────────────────────────────────────────────────────

  async consume(options: ConsumeOptions): Promise<Delivery<T>[]> {
    if (this.#backend.closed) return [];
    const max = checkConsume(this.name, options.max);
    const leaseMs = options.leaseMs ?? this.options.leaseMs;
    const waitMs = options.waitMs ?? 1000;
    const signal = options.signal;
    const deadline = Date.now() + waitMs;
    await this.ensureReady();
    if (waitMs > 0) this.#listenToBell();
    for (;;) {
      if (this.#backend.closed) return [];
      await this.#promoteDelayed();
      const out: Delivery<T>[] = [];
      for (const lane of PRIORITY_LANES) {
        for (const durable of this.#durablesOf(lane)) {
          if (out.length >= max) break;
          await this.#ensureDurable(durable.name, durable.subject, this.options.leaseMs);
          for (const msg of await this.#pull(durable.name, max - out.length)) {
            const delivery = await this.#toDelivery(msg, leaseMs);
            if (delivery) out.push(delivery);
          }
        }
      }
      if (out.length > 0 || this.#backend.closed) return this.#backend.closed ? [] : out;
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted) return [];
      await this.#pause(Math.min(left, this.#backend.pollMs), signal);
    }
  }

  /** One `no_wait` pull: the server sends what it has now, then a 404/408 status. */
  #pull(durable: string, batch: number): Promise<Msg[]> {
    const nc = this.#backend.connection;
    const inbox = this.#backend.inbox();
    return new Promise<Msg[]>((resolve, reject) => {
      const out: Msg[] = [];
      let timer: NodeJS.Timeout | undefined;
      const finish = (err?: unknown) => {
        if (timer) clearTimeout(timer);
        timer = undefined;
        sub.unsubscribe();
        if (err && !this.#backend.closed) reject(natsFailure(`pull from '${this.name}'`, err));
        else resolve(err ? [] : out);
      };
      const sub = nc.subscribe(inbox, {
        callback: (err, msg) => {
          if (err) return finish(err);
          const code = msg.headers?.code ?? 0;
          if (code >= 400 || (!msg.reply && code !== 0)) {
            // 503 no responders / 409 consumer deleted: the durable is gone (deleted by an
            // operator?); forget it so the next consume creates it again.
            if (code === 503 || (code === 409 && /deleted/i.test(msg.headers?.description ?? ''))) {
              this.#durables.delete(durable);
            }
            return finish();
          }
          if (code === 100) return; // idle heartbeat: not a message
          out.push(msg);
          if (out.length >= batch) finish();
        },
      });
      try {
        nc.publish(
          `$JS.API.CONSUMER.MSG.NEXT.${this.names.stream}.${durable}`,
          JSON.stringify({ batch, no_wait: true }),
          { reply: inbox },
        );
      } catch (err) {
        finish(err);
        return;
      }
      // The server answers a no_wait pull at once; this only guards against a lost reply.
      timer = setTimeout(() => finish(), this.#backend.requestTimeoutMs);
    });
  }

  async #toDelivery(msg: Msg, leaseMs: number): Promise<Delivery<T> | undefined> {
    const info = parseAckSubject(msg.reply);
    if (!info || !msg.reply) return undefined; // not a JetStream delivery: nothing to settle
    const takenAt = Date.now();
    let meta: MessageMeta;
    let payload: T;
    try {
      meta = readMeta(msg.headers, `${this.names.stream}:${info.streamSeq}`, this.name);
      payload = (await this.#backend.codec.decode(msg.data, this.name)) as T;
    } catch (err) {
      const fallbackId = safeHeader(msg.headers, H_ID) ?? `${this.names.stream}:${info.streamSeq}`;
      publishPoison({ backend: 'nats', topic: this.name, messageId: fallbackId, error: err });
      await this.deadLetterRaw(msg, info, `poison: ${describe(err)}`, info.deliveryCount, undefined);
      return undefined;
    }
    const attempt = meta.attempts + info.deliveryCount;
    if (attempt > this.options.maxDeliveries) {
      // Delivered maxDeliveries times already and the last lease lapsed.
      const reason = `lease expired (after ${attempt - 1} deliveries)`;
      await this.deadLetterRaw(msg, info, reason, attempt - 1, meta);
      return undefined;
    }
    const delivery = new NatsDelivery<T>(this, msg, info, meta, payload, attempt, takenAt, leaseMs);
    this.#deliveries.add(delivery);
    return delivery;
  }

  /** Move `msg` to the DLQ stream, then ack it away from the work stream. */
  async deadLetterRaw(
    msg: Msg,
    info: AckInfo,
    reason: string,
    attempts: number,
    meta: MessageMeta | undefined,
  ): Promise<void> {
    const backend = this.#backend;
    const h = backend.headers();
    if (msg.headers) for (const [k, v] of msg.headers) if (v[0] !== undefined) h.set(k, v[0]);
    if (!h.get(H_ID)) h.set(H_ID, meta?.id ?? `${this.names.stream}:${info.streamSeq}`);
    h.set(H_ATTEMPTS, String(attempts));
    h.set(H_REASON, encodeURIComponent(reason));
    h.set(H_DEAD_AT, String(Date.now()));
    try {
      // The msgID makes a retried dead-lettering (say after a crash between the two steps) a
      // no-op; the message id in it keeps a recreated stream's reused sequences apart.
      await backend.js.publish(this.names.dlqSubject, msg.data, {
        headers: h,
        msgID: `dlq-${h.get(H_ID)}-${info.streamSeq}-${info.deliveryCount}`,
        timeout: backend.requestTimeoutMs,
      });
      if (msg.reply) await this.request(msg.reply, '+ACK');
    } catch (err) {
      this.#checkOpen();
      throw natsFailure(`dead-lettering on '${this.name}'`, err);
    }
    publishDeadLetter({ backend: 'nats', topic: this.name, messageId: h.get(H_ID), reason, attempts });
  }

  /** Move due messages from the delayed subjects to their lanes (at most once per pollMs). */
  async #promoteDelayed(): Promise<void> {
    const now = Date.now();
    if (now - this.#lastPromote < this.#backend.pollMs / 2) return;
    this.#lastPromote = now;
    await this.#ensureDurable('delayed', `${this.names.subjectPrefix}.delayed.*`, DELAYED_ACK_WAIT_MS);
    const backend = this.#backend;
    for (const msg of await this.#pull('delayed', 256)) {
      const info = parseAckSubject(msg.reply);
      if (!info || !msg.reply) continue;
      const notBefore = Number(safeHeader(msg.headers, H_NOT_BEFORE) ?? 0);
      const wait = notBefore - Date.now();
      if (wait > 0) {
        await this.request(msg.reply, `-NAK ${JSON.stringify({ delay: Math.round(wait * 1e6) })}`);
        continue;
      }
      const h = backend.headers();
      if (msg.headers)
        for (const [k, v] of msg.headers) if (k !== H_NOT_BEFORE && v[0] !== undefined) h.set(k, v[0]);
      const priority = Number(safeHeader(msg.headers, H_PRIORITY) ?? 0) || 0;
      const partition = msg.subject.slice(msg.subject.lastIndexOf('.') + 1);
      try {
        await backend.js.publish(`${this.names.subjectPrefix}.${laneOf(priority)}.${partition}`, msg.data, {
          headers: h,
          msgID: `promote-${safeHeader(msg.headers, H_ID) ?? ''}-${info.streamSeq}`,
          timeout: backend.requestTimeoutMs,
        });
        await this.request(msg.reply, '+ACK');
      } catch (err) {
        this.#checkOpen();
        throw natsFailure(`promoting a delayed message on '${this.name}'`, err);
      }
    }
  }

  /** An ack-kind request that the server confirms (so an acked message is really gone). */
  async request(subject: string, body: string): Promise<void> {
    this.#checkOpen();
    await this.#backend.connection.request(subject, body, { timeout: this.#backend.requestTimeoutMs });
  }

  #listenToBell(): void {
    if (this.#bell || this.#backend.closed) return;
    this.#bell = this.#backend.connection.subscribe(this.names.bellSubject, {
      callback: () => {
        for (const wake of this.#waits) wake();
      },
    });
  }

  #pause(ms: number, signal?: AbortSignal): Promise<void> {
    let wake: () => void = () => {};
    const interrupted = new Promise<void>((resolve) => {
      wake = resolve;
    });
    this.#waits.add(wake);
    return Promise.race([sleep(ms, signal), interrupted]).finally(() => this.#waits.delete(wake));
  }

  // ── stats, close ─────────────────────────────────────────────────────────────

  async stats(): Promise<QueueStats> {
    this.#checkOpen();
    await this.ensureReady();
    const jsm = this.#backend.jsm;
    try {
      const [stream, dlq, consumers] = await Promise.all([
        jsm.streams.info(this.names.stream, { subjects_filter: `${this.names.subjectPrefix}.delayed.*` }),
        jsm.streams.info(this.names.dlqStream),
        jsm.consumers.list(this.names.stream).next(),
      ]);
      const delayed = Object.values(stream.state.subjects ?? {}).reduce((a, b) => a + b, 0);
      let inflight = 0;
      for (const c of consumers) if (c.config.durable_name !== 'delayed') inflight += c.num_ack_pending;
      return {
        ready: Math.max(0, stream.state.messages - delayed - inflight),
        inflight,
        delayed,
        deadLettered: dlq.state.messages,
      };
    } catch (err) {
      throw natsFailure(`stats of '${this.name}'`, err);
    }
  }

  async close(): Promise<void> {
    for (const wake of this.#waits) wake();
    this.#waits.clear();
    this.#bell?.unsubscribe();
    this.#bell = undefined;
    const held = [...this.#deliveries];
    this.#deliveries.clear();
    for (const d of held) d.stopKeeper();
    const nc = this.#backend.connection;
    await Promise.all(
      held.map((d) =>
        nc.request(d.reply, '-NAK', { timeout: this.#backend.requestTimeoutMs }).catch(() => {}),
      ),
    );
  }

  forget(delivery: NatsDelivery<T>): void {
    this.#deliveries.delete(delivery);
  }

  /** Publish a dead letter's message to its lane again, with attempts starting over. */
  async republish(
    letter: DeadLetter<T>,
    data: Uint8Array,
    headers: Iterable<[string, string[]]>,
  ): Promise<void> {
    const backend = this.#backend;
    await this.ensureReady();
    const h = backend.headers();
    for (const [k, v] of headers) {
      if (k !== H_REASON && k !== H_DEAD_AT && k !== H_NOT_BEFORE && v[0] !== undefined) h.set(k, v[0]);
    }
    h.set(H_ATTEMPTS, '0');
    const partition = partitionOf(letter.key ?? letter.messageId, backend.partitions);
    await backend.js.publish(`${this.names.subjectPrefix}.${laneOf(letter.priority)}.${partition}`, data, {
      headers: h,
      msgID: `replay-${letter.messageId}-${letter.id}`,
      timeout: backend.requestTimeoutMs,
    });
    this.#ring();
  }
}

class NatsDelivery<T> implements Delivery<T> {
  readonly id: string;
  readonly topic: string;
  readonly payload: T;
  readonly key: string | undefined;
  readonly priority: number;
  readonly attempt: number;
  readonly publishedAt: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly #queue: NatsQueue<T>;
  /** The delivered message as received: its bytes go to the DLQ unchanged. */
  readonly #msg: Msg;
  readonly #reply: string;
  readonly #info: AckInfo;
  readonly #meta: MessageMeta;
  readonly #keeper: LeaseKeeper;
  #leaseDeadline: number;
  #settled = false;

  constructor(
    queue: NatsQueue<T>,
    msg: Msg,
    info: AckInfo,
    meta: MessageMeta,
    payload: T,
    attempt: number,
    takenAt: number,
    leaseMs: number,
  ) {
    this.#queue = queue;
    this.#msg = msg;
    const reply = msg.reply!;
    this.#reply = reply;
    this.#info = info;
    this.#meta = meta;
    this.id = meta.id;
    this.topic = queue.name;
    this.payload = payload;
    this.key = meta.key;
    this.priority = meta.priority;
    this.attempt = attempt;
    this.publishedAt = meta.publishedAt;
    this.headers = meta.headers;
    this.#leaseDeadline = takenAt + leaseMs;
    this.#keeper = new LeaseKeeper(
      queue.options.leaseMs,
      () => queue.request(reply, '+WPI'),
      () => {},
    );
    this.#keeper.arm(takenAt, this.#leaseDeadline);
  }

  get leaseDeadline(): number {
    return this.#leaseDeadline;
  }

  /** The JetStream ack subject of this delivery. */
  get reply(): string {
    return this.#reply;
  }

  stopKeeper(): void {
    this.#keeper.stop();
  }

  /**
   * JetStream accepts an ack for a delivery whose AckWait has passed (even one redelivered
   * elsewhere), so the lease is checked here: past it, the delivery can no longer settle.
   */
  #checkLease(): void {
    if (this.#queue.backend.closed) throw new QueueClosedError(this.topic);
    const end = Math.max(this.#leaseDeadline, this.#keeper.serverDeadline);
    if (this.#settled || Date.now() > end) {
      this.#finish();
      throw new LeaseExpiredError(this.topic, this.id);
    }
  }

  #finish(): void {
    this.#settled = true;
    this.#keeper.stop();
    this.#queue.forget(this);
  }

  async #settle(body: string): Promise<void> {
    this.#checkLease();
    this.#finish();
    try {
      await this.#queue.request(this.#reply, body);
    } catch (err) {
      throw natsFailure(`settling a delivery of '${this.topic}'`, err);
    }
  }

  ack(): Promise<void> {
    return this.#settle('+ACK');
  }

  async nack(options: { delayMs?: number; reason?: string } = {}): Promise<void> {
    const reason = options.reason ?? 'nack';
    if (this.attempt >= this.#queue.options.maxDeliveries) {
      await this.#deadLetter(`${reason} (after ${this.attempt} deliveries)`);
      return;
    }
    const delay = Math.max(0, Math.ceil(options.delayMs ?? 0));
    await this.#settle(delay > 0 ? `-NAK ${JSON.stringify({ delay: delay * 1e6 })}` : '-NAK');
  }

  deadLetter(reason: string): Promise<void> {
    return this.#deadLetter(reason);
  }

  async #deadLetter(reason: string): Promise<void> {
    this.#checkLease();
    this.#finish();
    await this.#queue.deadLetterRaw(this.#msg, this.#info, reason, this.attempt, this.#meta);
  }

  async extendLease(ms?: number): Promise<void> {
    this.#checkLease();
    const at = Date.now();
    try {
      await this.#queue.request(this.#reply, '+WPI');
    } catch (err) {
      throw natsFailure(`extending a lease on '${this.topic}'`, err);
    }
    this.#leaseDeadline = at + (ms ?? this.#queue.options.leaseMs);
    this.#keeper.arm(at, this.#leaseDeadline);
  }
}

class NatsDeadLetters<T> implements DeadLetterQueue<T> {
  readonly #queue: NatsQueue<T>;
  readonly #backend: JetStreamBackend;

  constructor(queue: NatsQueue<T>, backend: JetStreamBackend) {
    this.#queue = queue;
    this.#backend = backend;
  }

  /** Read the stored message at or after `seq` (STREAM.MSG.GET with next_by_subj). */
  async #getFrom(seq: number, exact: boolean): Promise<StoredLetter | undefined> {
    const body = exact ? { seq } : { seq, next_by_subj: this.#queue.names.dlqSubject };
    let reply: Msg;
    try {
      reply = await this.#backend.connection.request(
        `$JS.API.STREAM.MSG.GET.${this.#queue.names.dlqStream}`,
        JSON.stringify(body),
        { timeout: this.#backend.requestTimeoutMs },
      );
    } catch (err) {
      throw natsFailure(`reading the DLQ of '${this.#queue.name}'`, err);
    }
    const json = reply.json<{
      error?: { code: number; description: string };
      message?: { seq: number; hdrs?: string; data?: string };
    }>();
    if (json.error) {
      if (json.error.code === 404) return undefined;
      throw new BackendUnavailableError(FEATURE, `DLQ read failed: ${json.error.description}`);
    }
    const m = json.message!;
    return {
      seq: m.seq,
      headers: parseRawHeaders(m.hdrs ? Buffer.from(m.hdrs, 'base64').toString('utf8') : ''),
      data: m.data ? Buffer.from(m.data, 'base64') : Buffer.alloc(0),
    };
  }

  async *#entries(): AsyncGenerator<{ letter: DeadLetter<T>; stored: StoredLetter }> {
    await this.#queue.ensureReady();
    let seq = 1;
    for (;;) {
      const stored = await this.#getFrom(seq, false);
      if (!stored) return;
      yield { letter: await this.#toLetter(stored), stored };
      seq = stored.seq + 1;
    }
  }

  async #toLetter(stored: StoredLetter): Promise<DeadLetter<T>> {
    const h = stored.headers;
    const { payload, raw } = await letterPayload<T>(this.#backend.codec, stored.data, this.#queue.name);
    const id = String(stored.seq);
    const key = h.get(H_KEY);
    let headers: Record<string, string> = {};
    try {
      headers = parseUserHeaders(h.get(H_HEADERS), this.#queue.name);
    } catch {
      // Broken headers on a dead letter: still listed, headers unknown.
    }
    return {
      id,
      topic: this.#queue.name,
      messageId: h.get(H_ID) ?? id,
      payload,
      ...(raw === undefined ? {} : { raw }),
      key: key === undefined ? undefined : safeDecode(key),
      priority: Number(h.get(H_PRIORITY) ?? 0) || 0,
      headers,
      reason: safeDecode(h.get(H_REASON) ?? ''),
      attempts: Number(h.get(H_ATTEMPTS) ?? 0) || 0,
      publishedAt: Number(h.get(H_PUBLISHED) ?? 0) || 0,
      deadLetteredAt: Number(h.get(H_DEAD_AT) ?? 0) || 0,
    };
  }

  async list(
    options: { limit?: number; offset?: number; filter?: DeadLetterFilter } = {},
  ): Promise<DeadLetter<T>[]> {
    const entries = this.#entries();
    return pageOfLetters(
      (async function* () {
        for await (const { letter } of entries) yield letter;
      })(),
      options,
    );
  }

  async get(id: string): Promise<DeadLetter<T> | undefined> {
    if (!/^\d+$/.test(id)) return undefined;
    await this.#queue.ensureReady();
    const stored = await this.#getFrom(Number(id), true);
    return stored ? this.#toLetter(stored) : undefined;
  }

  async replay(filter?: DeadLetterFilter): Promise<number> {
    let n = 0;
    const picked: { letter: DeadLetter<T>; stored: StoredLetter }[] = [];
    for await (const entry of this.#entries())
      if (matchesDeadLetterFilter(entry.letter, filter)) picked.push(entry);
    for (const { letter, stored } of picked) {
      try {
        await this.#queue.republish(letter, stored.data, stored.headers);
        await this.#backend.jsm.streams.deleteMessage(this.#queue.names.dlqStream, stored.seq, false);
      } catch (err) {
        throw natsFailure(`replaying the DLQ of '${this.#queue.name}'`, err);
      }
      n++;
    }
    return n;
  }

  async purge(filter?: DeadLetterFilter): Promise<number> {
    const seqs: number[] = [];
    for await (const { letter, stored } of this.#entries())
      if (matchesDeadLetterFilter(letter, filter)) seqs.push(stored.seq);
    let n = 0;
    for (const seq of seqs) {
      try {
        if (await this.#backend.jsm.streams.deleteMessage(this.#queue.names.dlqStream, seq, false)) n++;
      } catch (err) {
        if (!isNotFound(err)) throw natsFailure(`purging the DLQ of '${this.#queue.name}'`, err);
      }
    }
    return n;
  }

  async size(): Promise<number> {
    await this.#queue.ensureReady();
    try {
      return (await this.#backend.jsm.streams.info(this.#queue.names.dlqStream)).state.messages;
    } catch (err) {
      throw natsFailure(`reading the DLQ size of '${this.#queue.name}'`, err);
    }
  }
}

interface StoredLetter {
  seq: number;
  headers: SimpleHeaders;
  data: Uint8Array;
}

/** Headers of a stored message as read from the raw STREAM.MSG.GET reply. */
class SimpleHeaders implements Iterable<[string, string[]]> {
  readonly #map = new Map<string, string[]>();
  add(k: string, v: string): void {
    const list = this.#map.get(k);
    if (list) list.push(v);
    else this.#map.set(k, [v]);
  }
  get(k: string): string | undefined {
    return this.#map.get(k)?.[0];
  }
  [Symbol.iterator](): Iterator<[string, string[]]> {
    return this.#map[Symbol.iterator]();
  }
}

function parseRawHeaders(text: string): SimpleHeaders {
  const h = new SimpleHeaders();
  const lines = text.split('\r\n');
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) h.add(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  return h;
}

// ── headers ↔ metadata ───────────────────────────────────────────────────────────

function writeMeta(h: MsgHdrs, meta: MessageMeta): void {
  h.set(H_ID, meta.id);
  if (meta.key !== undefined) h.set(H_KEY, encodeURIComponent(meta.key));
  h.set(H_PRIORITY, String(meta.priority));
  h.set(H_PUBLISHED, String(meta.publishedAt));
  h.set(H_ATTEMPTS, String(meta.attempts));
  if (Object.keys(meta.headers).length > 0)
    h.set(H_HEADERS, encodeURIComponent(JSON.stringify(meta.headers)));
}

/** Metadata of a delivered message; a message from a foreign producer (no headers) is accepted. */
function readMeta(h: MsgHdrs | undefined, fallbackId: string, topic: string): MessageMeta {
  const key = safeHeader(h, H_KEY);
  const priority = Number(safeHeader(h, H_PRIORITY) ?? 0);
  const attempts = Number(safeHeader(h, H_ATTEMPTS) ?? 0);
  if (!Number.isFinite(priority) || !Number.isFinite(attempts)) {
    throw new QueueDecodeError(topic, 'malformed Mocra-Priority or Mocra-Attempts header');
  }
  return {
    id: safeHeader(h, H_ID) ?? fallbackId,
    key: key === undefined ? undefined : decodeStrict(key, topic),
    priority,
    publishedAt: Number(safeHeader(h, H_PUBLISHED) ?? 0) || 0,
    attempts,
    headers: parseUserHeaders(safeHeader(h, H_HEADERS), topic),
  };
}

function parseUserHeaders(raw: string | undefined, topic: string): Record<string, string> {
  if (!raw) return {};
  let text: string;
  try {
    text = decodeURIComponent(raw);
  } catch (err) {
    throw new QueueDecodeError(topic, `Mocra-Headers is not URI-encoded: ${describe(err)}`, { cause: err });
  }
  return parseHeaderObject(text, topic, 'Mocra-Headers');
}

function safeHeader(h: MsgHdrs | undefined, name: string): string | undefined {
  if (!h?.has(name)) return undefined;
  return h.get(name);
}

function decodeStrict(value: string, topic: string): string {
  try {
    return decodeURIComponent(value);
  } catch (err) {
    throw new QueueDecodeError(topic, `malformed Mocra-Key header`, { cause: err });
  }
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

function isNotFound(err: unknown): boolean {
  const text = describe(err).toLowerCase();
  return text.includes('not found') || (err as { code?: unknown } | undefined)?.code === 404;
}

function natsFailure(what: string, err: unknown): Error {
  if (isMocraError(err)) return err;
  return new BackendUnavailableError(FEATURE, `${what} failed: ${describe(err)}`, { cause: err });
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
