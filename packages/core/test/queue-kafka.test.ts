// The Kafka backend against the queue conformance suite. No Kafka broker runs here, so by
// default it runs against FakeKafkaBroker (an in-memory model of the kafkajs surface the backend
// uses). Set MOCRA_TEST_KAFKA_BROKERS=host:9092[,host2:9092] to run the same suite against a
// real cluster (with longer timings: a group rebalance takes seconds there).
import { afterAll, describe, expect, test } from 'vitest';
import { hash32 } from '../src/queue/hash.js';
import type { KafkaLike } from '../src/queue/kafka-client.js';
import { createKafkaQueueBackend, type KafkaQueueBackend } from '../src/queue/kafka-queue.js';
import { FakeKafkaBroker, type FakeKafkaClient } from './fake-kafka-broker.js';
import { collect, type QueueCapabilities, queueConformance } from './queue-conformance.js';

const REAL_BROKERS = process.env.MOCRA_TEST_KAFKA_BROKERS?.split(',').filter(Boolean);

const capabilities: QueueCapabilities = {
  encodes: true,
  peers: true,
  exactPriority:
    'three lane topics per queue topic: high (> 0), normal (0), low (< 0); FIFO inside a partition',
  orderedPerKey: true,
  keyAffinity: true,
  peerJoinKeepsLeases:
    'a joining consumer triggers a rebalance: partitions that move take their in-flight messages along (the old holder can no longer settle them; the new owner reads them again from the last commit)',
  countsCrashedDeliveries:
    'attempts are persisted only when a message is nacked (republished to the retry topic); a delivery held by a consumer that dies is read again by the next owner with the count it had before',
  exactStats:
    'counts come from the group lag plus what this process holds; messages other consumers hold count as ready, retry-topic messages as delayed',
  nackDelayInStats: true,
};

if (REAL_BROKERS) {
  let kafkajs: typeof import('kafkajs') | undefined;
  queueConformance({
    name: `kafka (real: ${REAL_BROKERS.join(',')})`,
    capabilities,
    leaseMs: 500,
    redeliveryTimeoutMs: 30_000,
    async open({ namespace, topicDefaults, codec, maxPayloadBytes }) {
      return createKafkaQueueBackend({
        brokers: REAL_BROKERS,
        namespace,
        sessionTimeoutMs: 6_000,
        heartbeatIntervalMs: 500,
        pollMs: 100,
        partitions: 4,
        ...(topicDefaults ? { topicDefaults } : {}),
        ...(codec ? { codec } : {}),
        ...(maxPayloadBytes ? { maxPayloadBytes } : {}),
      });
    },
    async injectRaw(backend, topic, bytes) {
      const kafka = (backend as KafkaQueueBackend).kafka;
      const names = (backend as KafkaQueueBackend).namesOf(topic);
      await backend.topic(topic).stats(); // creates the topics
      const producer = kafka.producer();
      await producer.connect();
      await producer.send({ topic: names.lanes[1], messages: [{ value: bytes }] });
      await producer.disconnect();
    },
    async crash(backend) {
      // kafkajs heartbeats for as long as the process lives; leaving the group is the way to
      // hand its partitions over here.
      await backend.close();
    },
    async cleanup(namespace) {
      kafkajs ??= await import('kafkajs');
      const admin = new kafkajs.Kafka({ brokers: REAL_BROKERS, logLevel: kafkajs.logLevel.NOTHING }).admin();
      await admin.connect();
      const topics = (await admin.listTopics()).filter((t) => t.startsWith(`mocra.${namespace}.`));
      if (topics.length > 0) await admin.deleteTopics({ topics });
      await admin.disconnect();
    },
  });
} else {
  const broker = new FakeKafkaBroker({ defaultPartitions: 4 });
  const clients = new WeakMap<object, FakeKafkaClient>();
  afterAll(() => broker.shutdown());

  queueConformance({
    name: 'kafka (FakeKafkaBroker)',
    capabilities,
    leaseMs: 300,
    redeliveryTimeoutMs: 3_000,
    async open({ namespace, topicDefaults, codec, maxPayloadBytes }) {
      const client = broker.client();
      const backend = await createKafkaQueueBackend({
        kafka: client satisfies KafkaLike,
        namespace,
        sessionTimeoutMs: 300,
        heartbeatIntervalMs: 50,
        pollMs: 50,
        partitions: 4,
        ...(topicDefaults ? { topicDefaults } : {}),
        ...(codec ? { codec } : {}),
        ...(maxPayloadBytes ? { maxPayloadBytes } : {}),
      });
      clients.set(backend, client);
      return backend;
    },
    async injectRaw(backend, topic, bytes) {
      await backend.topic(topic).stats(); // creates the topics
      broker.appendRaw((backend as KafkaQueueBackend).namesOf(topic).lanes[1], bytes);
    },
    async crash(backend) {
      broker.crash(clients.get(backend)!);
    },
    async cleanup(namespace) {
      for (const topic of [...broker.topics.keys()])
        if (topic.startsWith(`mocra.${namespace}.`)) broker.topics.delete(topic);
      for (const group of [...broker.groups.keys()])
        if (group.startsWith(`mocra.${namespace}.`)) broker.groups.delete(group);
    },
  });
}

// Kafka-specific behaviour the conformance suite cannot see: which offsets get committed, and
// what a rebalance does to leases. Only on the fake, where the broker's state is visible.
describe.skipIf(REAL_BROKERS !== undefined)(
  'kafka backend on FakeKafkaBroker: offsets and rebalances',
  () => {
    const broker = new FakeKafkaBroker({ defaultPartitions: 2 });
    afterAll(() => broker.shutdown());
    let n = 0;

    async function open(namespace: string, partitions: number) {
      return createKafkaQueueBackend({
        kafka: broker.client(),
        namespace,
        sessionTimeoutMs: 300,
        heartbeatIntervalMs: 50,
        pollMs: 20,
        partitions,
      });
    }

    test('only the contiguous acked prefix of a partition is committed', async () => {
      const ns = `offsets${n++}`;
      const backend = await open(ns, 1);
      const q = backend.topic<number>('jobs');
      await q.publish([0, 1, 2, 3, 4].map((payload) => ({ payload })));
      const got = await collect(q, 5, 3_000);
      expect(got.map((d) => d.payload)).toEqual([0, 1, 2, 3, 4]);
      const committed = () =>
        broker.groups.get(`mocra.${ns}.jobs`)?.committed.get(`mocra.${ns}.jobs.normal:0`);
      await got[1]!.ack();
      await got[2]!.ack();
      expect(committed()).toBeUndefined(); // offset 0 is still in flight
      await got[0]!.ack();
      expect(committed()).toBe(3);
      await got[4]!.ack();
      expect(committed()).toBe(3);
      await got[3]!.ack();
      expect(committed()).toBe(5);
      await backend.close();
    });

    test('a rebalance takes a moved partition’s leases away; the new owner gets the message', async () => {
      const ns = `rebalance${n++}`;
      const a = await open(ns, 2);
      const qa = a.topic<string>('jobs', { leaseMs: 5_000 });
      // Members are ordered by id and partitions dealt round-robin: a keeps partition 0, a later
      // member gets partition 1. Pick a key that the fake broker puts on partition 1.
      let key = 'k0';
      for (let i = 0; hash32(key) % 2 !== 1; i++) key = `k${i}`;
      await qa.publish([{ payload: 'moves', key }]);
      const [held] = await collect(qa, 1, 3_000);
      expect(held?.payload).toBe('moves');
      const b = await open(ns, 2);
      const qb = b.topic<string>('jobs', { leaseMs: 5_000 });
      const [moved] = await collect(qb, 1, 3_000);
      expect(moved).toMatchObject({ id: held!.id, payload: 'moves' });
      // a learns of the rebalance on its own next fetch turn; until then its lease looks fine
      // (an ack racing a rebalance is accepted locally and the message still comes to b).
      const deadline = Date.now() + 3_000;
      let revoked = false;
      while (!revoked && Date.now() < deadline) {
        revoked = await held!.extendLease().then(
          () => false,
          (err: { code?: string }) => err.code === 'MOCRA_ERR_LEASE_EXPIRED',
        );
        if (!revoked) await new Promise((r) => setTimeout(r, 20));
      }
      expect(revoked).toBe(true);
      await expect(held!.ack()).rejects.toMatchObject({ code: 'MOCRA_ERR_LEASE_EXPIRED' });
      await moved!.ack();
      await a.close();
      await b.close();
    });
  },
);
