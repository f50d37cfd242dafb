/**
 * FakeKafkaBroker: an in-memory stand-in for a Kafka cluster, speaking the kafkajs API surface
 * the Kafka queue backend uses (`src/queue/kafka-client.ts`). It exists only because no Kafka
 * broker runs here; the suite runs against a real broker when `MOCRA_TEST_KAFKA_BROKERS` is set.
 *
 * What it models, because the backend depends on it:
 * - topics with partitions and append-only logs; a keyed message always lands on the same
 *   partition, an unkeyed one goes round-robin;
 * - consumer groups: members join on `run`, leave on `stop`/`disconnect`, and are evicted when
 *   they miss heartbeats for `sessionTimeout` (a crashed process); every membership change is a
 *   rebalance: a new generation, partitions spread round-robin over the members, each member
 *   restarting at the group's committed offsets (the kafkajs behaviour — in-memory fetch
 *   positions are forgotten) and told through a `consumer.group_join` event;
 * - fetching: a running member's loop hands each non-paused assigned partition's new records
 *   to `eachBatch`; the fetch position moves past the last *resolved* offset only (kafkajs with
 *   `eachBatchAutoResolve: false`), so unresolved records are fetched again;
 * - commits: refused from a member that no longer owns the partition or is not in the current
 *   generation (the way a real coordinator refuses them after a rebalance);
 * - admin: create topics, high/low watermarks, committed offsets, delete groups.
 *
 * It does not model brokers, replication, retention, transactions or byte limits.
 */
import { hash32 } from '../src/queue/hash.js';
import type {
  KafkaAdminLike,
  KafkaConsumerLike,
  KafkaCrashEventLike,
  KafkaEachBatchPayloadLike,
  KafkaGroupJoinEventLike,
  KafkaIncomingMessage,
  KafkaLike,
  KafkaOutgoingMessage,
  KafkaProducerLike,
} from '../src/queue/kafka-client.js';

interface StoredRecord {
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer>;
  timestamp: string;
}

interface Group {
  generation: number;
  members: Map<string, FakeConsumer>;
  committed: Map<string, number>;
}

export interface FakeKafkaBrokerOptions {
  /** Partitions of topics created without a count (auto-created on produce). @default 3 */
  defaultPartitions?: number;
  /** Records per batch handed to eachBatch. @default 100 */
  maxBatchSize?: number;
}

export class FakeKafkaBroker {
  readonly topics = new Map<string, StoredRecord[][]>();
  readonly groups = new Map<string, Group>();
  readonly #defaultPartitions: number;
  readonly maxBatchSize: number;
  #roundRobin = 0;
  #memberSeq = 0;
  #reaper: NodeJS.Timeout | undefined;
  readonly #clients = new Set<FakeKafkaClient>();

  constructor(options: FakeKafkaBrokerOptions = {}) {
    this.#defaultPartitions = options.defaultPartitions ?? 3;
    this.maxBatchSize = options.maxBatchSize ?? 100;
  }

  /** A kafkajs-like client (`new Kafka(...)`). Each backend instance gets its own. */
  client(): FakeKafkaClient {
    const client = new FakeKafkaClient(this);
    this.#clients.add(client);
    return client;
  }

  /** The process behind `client` dies: its consumers stop heartbeating and fetching, nothing more. */
  crash(client: FakeKafkaClient): void {
    client.crashed = true;
    for (const consumer of client.consumers) consumer.halt();
  }

  createTopic(topic: string, partitions = this.#defaultPartitions): boolean {
    if (this.topics.has(topic)) return false;
    this.topics.set(
      topic,
      Array.from({ length: partitions }, () => []),
    );
    return true;
  }

  /** Append raw bytes to a topic (a producer outside mocra, or a corrupted record). */
  appendRaw(topic: string, value: Buffer, options: { key?: string; partition?: number } = {}): number {
    return this.produce(topic, {
      key: options.key ?? null,
      value,
      ...(options.partition === undefined ? {} : { partition: options.partition }),
    });
  }

  produce(topic: string, message: KafkaOutgoingMessage): number {
    if (!this.topics.has(topic)) this.createTopic(topic);
    const partitions = this.topics.get(topic)!;
    const key = message.key === undefined || message.key === null ? null : toBuffer(message.key);
    let partition: number;
    if (message.partition !== undefined) partition = message.partition;
    else if (key) partition = hash32(key.toString('latin1')) % partitions.length;
    else partition = this.#roundRobin++ % partitions.length;
    const log = partitions[partition];
    if (!log) throw new Error(`fake kafka: topic ${topic} has no partition ${partition}`);
    const headers: Record<string, Buffer> = {};
    for (const [k, v] of Object.entries(message.headers ?? {})) headers[k] = toBuffer(v);
    log.push({
      key,
      value: message.value === null ? null : toBuffer(message.value),
      headers,
      timestamp: String(Date.now()),
    });
    return log.length - 1;
  }

  group(groupId: string): Group {
    let group = this.groups.get(groupId);
    if (!group) {
      group = { generation: 0, members: new Map(), committed: new Map() };
      this.groups.set(groupId, group);
    }
    return group;
  }

  nextMemberId(): string {
    return `member-${(this.#memberSeq++).toString().padStart(6, '0')}`;
  }

  join(groupId: string, member: FakeConsumer): void {
    this.group(groupId).members.set(member.memberId, member);
    this.rebalance(groupId);
    this.#armReaper();
  }

  leave(groupId: string, member: FakeConsumer): void {
    const group = this.groups.get(groupId);
    if (group?.members.delete(member.memberId)) this.rebalance(groupId);
  }

  /** New generation: spread every subscribed topic-partition round-robin over the members. */
  rebalance(groupId: string): void {
    const group = this.group(groupId);
    group.generation++;
    const members = [...group.members.values()].sort((a, b) => (a.memberId < b.memberId ? -1 : 1));
    const assignments = new Map<string, Record<string, number[]>>(members.map((m) => [m.memberId, {}]));
    const topics = [...new Set(members.flatMap((m) => m.subscribed))].sort();
    let i = 0;
    for (const topic of topics) {
      const count = this.topics.get(topic)?.length ?? 0;
      const subscribers = members.filter((m) => m.subscribed.includes(topic));
      if (subscribers.length === 0) continue;
      for (let p = 0; p < count; p++) {
        const member = subscribers[i++ % subscribers.length]!;
        const assignment = assignments.get(member.memberId)!;
        const list = assignment[topic] ?? [];
        list.push(p);
        assignment[topic] = list;
      }
    }
    for (const m of members) m.assign(group.generation, assignments.get(m.memberId)!);
  }

  /** Evict members that missed heartbeats for their session timeout. */
  #armReaper(): void {
    if (this.#reaper) return;
    this.#reaper = setInterval(() => {
      const now = Date.now();
      let anyMembers = false;
      for (const [groupId, group] of this.groups) {
        let changed = false;
        for (const m of [...group.members.values()]) {
          if (now - m.lastHeartbeat > m.sessionTimeout) {
            group.members.delete(m.memberId);
            changed = true;
          }
        }
        if (changed) this.rebalance(groupId);
        if (group.members.size > 0) anyMembers = true;
      }
      if (!anyMembers) this.#stopReaper();
    }, 20);
    this.#reaper.unref();
  }

  #stopReaper(): void {
    if (this.#reaper) clearInterval(this.#reaper);
    this.#reaper = undefined;
  }

  /** Stop every consumer loop (test teardown). */
  shutdown(): void {
    for (const client of this.#clients) for (const c of client.consumers) c.halt();
    this.#stopReaper();
  }
}

export class FakeKafkaClient implements KafkaLike {
  readonly broker: FakeKafkaBroker;
  readonly consumers = new Set<FakeConsumer>();
  crashed = false;

  constructor(broker: FakeKafkaBroker) {
    this.broker = broker;
  }

  producer(): KafkaProducerLike {
    const broker = this.broker;
    const client = this;
    let connected = false;
    return {
      async connect() {
        connected = true;
      },
      async disconnect() {
        connected = false;
      },
      async send(record) {
        if (!connected) throw new Error('fake kafka: producer is not connected');
        if (client.crashed) throw new Error('fake kafka: the process is gone');
        await Promise.resolve();
        return record.messages.map((m) => ({
          topicName: record.topic,
          offset: String(broker.produce(record.topic, m)),
        }));
      },
    };
  }

  consumer(config: {
    groupId: string;
    sessionTimeout?: number;
    maxWaitTimeInMs?: number;
  }): KafkaConsumerLike {
    const consumer = new FakeConsumer(
      this,
      config.groupId,
      config.sessionTimeout ?? 30_000,
      config.maxWaitTimeInMs ?? 100,
    );
    this.consumers.add(consumer);
    return consumer;
  }

  admin(): KafkaAdminLike {
    const broker = this.broker;
    return {
      async connect() {},
      async disconnect() {},
      async createTopics({ topics }) {
        let created = false;
        for (const t of topics) created = broker.createTopic(t.topic, t.numPartitions) || created;
        return created;
      },
      async fetchTopicOffsets(topic) {
        const partitions = broker.topics.get(topic);
        if (!partitions) throw new Error(`fake kafka: unknown topic ${topic}`);
        return partitions.map((log, partition) => ({
          partition,
          offset: String(log.length),
          high: String(log.length),
          low: '0',
        }));
      },
      async fetchOffsets({ groupId, topics }) {
        const group = broker.groups.get(groupId);
        return (topics ?? []).map((topic) => ({
          topic,
          partitions: (broker.topics.get(topic) ?? []).map((_, partition) => ({
            partition,
            offset: String(group?.committed.get(`${topic}:${partition}`) ?? -1),
          })),
        }));
      },
      async deleteGroups(groupIds) {
        for (const id of groupIds) {
          const group = broker.groups.get(id);
          if (group && group.members.size > 0) throw new Error(`fake kafka: group ${id} is not empty`);
          broker.groups.delete(id);
        }
        return groupIds.map((groupId) => ({ groupId, errorCode: 0 }));
      },
    };
  }
}

type EachBatch = (payload: KafkaEachBatchPayloadLike) => Promise<void>;

export class FakeConsumer implements KafkaConsumerLike {
  readonly memberId: string;
  readonly sessionTimeout: number;
  readonly #client: FakeKafkaClient;
  readonly #groupId: string;
  readonly #maxWait: number;
  subscribed: string[] = [];
  #fromBeginning = false;
  #eachBatch: EachBatch | undefined;
  #running = false;
  #halted = false;
  #generation = 0;
  #pendingAssignment: { generation: number; assignment: Record<string, number[]> } | undefined;
  #assignment: Record<string, number[]> = {};
  /** Next offset to fetch per "topic:partition". */
  readonly #positions = new Map<string, number>();
  readonly #paused = new Set<string>();
  readonly #joinListeners: ((event: KafkaGroupJoinEventLike) => void)[] = [];
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  lastHeartbeat = Date.now();

  constructor(client: FakeKafkaClient, groupId: string, sessionTimeout: number, maxWait: number) {
    this.#client = client;
    this.#groupId = groupId;
    this.sessionTimeout = sessionTimeout;
    this.#maxWait = Math.min(maxWait, 50);
    this.memberId = client.broker.nextMemberId();
  }

  async connect(): Promise<void> {}

  async subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void> {
    if (this.#running) throw new Error('fake kafka: cannot subscribe while running');
    for (const t of subscription.topics) if (!this.subscribed.includes(t)) this.subscribed.push(t);
    this.#fromBeginning = subscription.fromBeginning ?? false;
  }

  async run(config: { eachBatch: EachBatch }): Promise<void> {
    if (this.#running) throw new Error('fake kafka: already running');
    this.#eachBatch = config.eachBatch;
    this.#running = true;
    this.lastHeartbeat = Date.now();
    this.#client.broker.join(this.#groupId, this);
    this.#schedule(0);
  }

  on(eventName: 'consumer.group_join', listener: (event: KafkaGroupJoinEventLike) => void): () => void;
  on(eventName: 'consumer.crash', listener: (event: KafkaCrashEventLike) => void): () => void;
  on(eventName: string, listener: (event: never) => void): () => void {
    // The fake never crashes a consumer on its own; only group joins are reported.
    if (eventName === 'consumer.group_join') {
      this.#joinListeners.push(listener as (event: KafkaGroupJoinEventLike) => void);
    }
    return () => {};
  }

  /** Called by the broker on every rebalance; adopted at the start of the next loop turn. */
  assign(generation: number, assignment: Record<string, number[]>): void {
    this.#pendingAssignment = { generation, assignment };
  }

  async commitOffsets(offsets: { topic: string; partition: number; offset: string }[]): Promise<void> {
    const group = this.#client.broker.groups.get(this.#groupId);
    if (this.#client.crashed) throw new Error('fake kafka: the process is gone');
    if (
      !group?.members.has(this.memberId) ||
      this.#pendingAssignment ||
      group.generation !== this.#generation
    ) {
      throw new Error('fake kafka: REBALANCE_IN_PROGRESS — the member is not in the current generation');
    }
    for (const o of offsets) {
      if (!(this.#assignment[o.topic] ?? []).includes(o.partition)) {
        throw new Error(`fake kafka: ${o.topic}:${o.partition} is not assigned to ${this.memberId}`);
      }
    }
    for (const o of offsets) group.committed.set(`${o.topic}:${o.partition}`, Number(o.offset));
  }

  async stop(): Promise<void> {
    this.#stopLoop();
    if (this.#running) {
      this.#running = false;
      this.#client.broker.leave(this.#groupId, this);
    }
  }

  async disconnect(): Promise<void> {
    await this.stop();
  }

  /** The process died: no more heartbeats or fetches; the broker evicts it after the session timeout. */
  halt(): void {
    this.#halted = true;
    this.#stopLoop();
  }

  #stopLoop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(ms: number): void {
    if (this.#halted || !this.#running) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#busy = true;
      this.#turn().then(
        (fetched) => {
          this.#busy = false;
          this.#schedule(fetched ? 0 : this.#maxWait);
        },
        () => {
          this.#busy = false;
          this.#schedule(this.#maxWait);
        },
      );
    }, ms);
    this.#timer.unref();
  }

  /** One fetch round over the assigned partitions; true if any batch was handed out. */
  async #turn(): Promise<boolean> {
    this.lastHeartbeat = Date.now();
    const broker = this.#client.broker;
    const pending = this.#pendingAssignment;
    if (pending) {
      this.#pendingAssignment = undefined;
      this.#generation = pending.generation;
      this.#assignment = pending.assignment;
      this.#positions.clear();
      this.#paused.clear();
      const group = broker.group(this.#groupId);
      for (const [topic, partitions] of Object.entries(pending.assignment)) {
        for (const p of partitions) {
          const committed = group.committed.get(`${topic}:${p}`);
          const end = broker.topics.get(topic)?.[p]?.length ?? 0;
          this.#positions.set(`${topic}:${p}`, committed ?? (this.#fromBeginning ? 0 : end));
        }
      }
      for (const listener of this.#joinListeners) {
        listener({ payload: { memberAssignment: structuredClone(pending.assignment) } });
      }
    }
    let fetched = false;
    const generation = this.#generation;
    for (const [topic, partitions] of Object.entries(this.#assignment)) {
      for (const partition of partitions) {
        const tp = `${topic}:${partition}`;
        if (this.#halted || !this.#running || this.#pendingAssignment) return fetched;
        if (this.#paused.has(tp)) continue;
        const log = broker.topics.get(topic)?.[partition] ?? [];
        const from = this.#positions.get(tp) ?? 0;
        if (from >= log.length) continue;
        const records = log.slice(from, from + broker.maxBatchSize);
        const messages: KafkaIncomingMessage[] = records.map((r, i) => ({
          key: r.key,
          value: r.value,
          offset: String(from + i),
          timestamp: r.timestamp,
          headers: { ...r.headers },
        }));
        let resolved = -1;
        fetched = true;
        await this.#eachBatch!({
          batch: { topic, partition, highWatermark: String(log.length), messages },
          resolveOffset: (offset) => {
            resolved = Math.max(resolved, Number(offset));
          },
          heartbeat: async () => {
            this.lastHeartbeat = Date.now();
          },
          pause: () => {
            this.#paused.add(tp);
            return () => {
              this.#paused.delete(tp);
              if (!this.#timer && !this.#busy) this.#schedule(0);
            };
          },
          isRunning: () => this.#running && !this.#halted,
          isStale: () => this.#pendingAssignment !== undefined || this.#generation !== generation,
        });
        if (resolved >= 0 && this.#generation === generation && !this.#pendingAssignment) {
          this.#positions.set(tp, resolved + 1);
        }
      }
    }
    return fetched;
  }
}

function toBuffer(value: Buffer | string): Buffer {
  return Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8');
}
