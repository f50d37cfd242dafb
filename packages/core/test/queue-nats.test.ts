// The NATS JetStream backend against the queue conformance suite, on the real local server.

import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll } from 'vitest';
import { createNatsQueueBackend, type JetStreamBackend } from '../src/queue/nats-queue.js';
import { queueConformance } from './queue-conformance.js';

const NATS_URL = process.env.MOCRA_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
const PARTITIONS = 8;

let admin: NatsConnection | undefined;
afterAll(async () => {
  await admin?.close();
});

queueConformance({
  name: 'nats',
  capabilities: {
    encodes: true,
    peers: true,
    exactPriority: 'three lanes (subjects) per topic: high (> 0), normal (0), low (< 0); FIFO inside a lane',
    orderedPerKey: true,
    keyAffinity: true,
    peerJoinKeepsLeases: true,
    countsCrashedDeliveries: true,
    exactStats: true,
    nackDelayInStats:
      'a nak with delay stays with the consumer (JetStream counts it as ack-pending), so it shows as inflight',
  },
  leaseMs: 300,
  redeliveryTimeoutMs: 3_000,
  async open({ namespace, topicDefaults, codec, maxPayloadBytes, member }) {
    return createNatsQueueBackend({
      servers: NATS_URL,
      namespace,
      pollMs: 50,
      partitions: PARTITIONS,
      storage: 'memory',
      ...(member
        ? {
            ownedPartitions: Array.from({ length: PARTITIONS }, (_, p) => p).filter(
              (p) => p % member.of === member.index,
            ),
          }
        : {}),
      ...(topicDefaults ? { topicDefaults } : {}),
      ...(codec ? { codec } : {}),
      ...(maxPayloadBytes ? { maxPayloadBytes } : {}),
    });
  },
  async injectRaw(backend, topic, bytes) {
    const nats = backend as JetStreamBackend;
    await nats.topic(topic).stats(); // creates the streams
    await nats.js.publish(`${nats.namesOf(topic).subjectPrefix}.normal.0`, bytes);
  },
  async crash(backend) {
    // A crashed process just goes away: its unacked messages come back after AckWait.
    await (backend as JetStreamBackend).connection.close();
  },
  async cleanup(namespace) {
    admin ??= await connect({ servers: NATS_URL });
    const jsm = await jetstreamManager(admin);
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(`mocra~${namespace}~`)) await jsm.streams.delete(name);
    }
  },
});
