// The Redis Streams backend against the queue conformance suite, on the real local Redis.
import { afterAll } from 'vitest';
import { connectRedis, type RedisClient } from '../src/queue/redis-connection.js';
import { createRedisQueueBackend, type RedisStreamsBackend } from '../src/queue/redis-queue.js';
import { queueConformance } from './queue-conformance.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const KEY_PREFIX = 'mocra-test:q:';

let admin: RedisClient | undefined;
async function adminClient(): Promise<RedisClient> {
  admin ??= await connectRedis({ url: REDIS_URL, feature: 'queue-redis.test' });
  return admin;
}

afterAll(async () => {
  await admin?.quit();
});

queueConformance({
  name: 'redis',
  capabilities: {
    encodes: true,
    peers: true,
    exactPriority: 'three lanes (streams) per topic: high (> 0), normal (0), low (< 0); FIFO inside a lane',
    orderedPerKey: true,
    keyAffinity: 'one stream per lane shared by all consumers (competing consumers); no partitions',
    peerJoinKeepsLeases: true,
    countsCrashedDeliveries: true,
    exactStats: true,
    nackDelayInStats: true,
  },
  leaseMs: 300,
  redeliveryTimeoutMs: 3_000,
  async open({ namespace, topicDefaults, codec, maxPayloadBytes }) {
    return createRedisQueueBackend({
      url: REDIS_URL,
      namespace,
      keyPrefix: KEY_PREFIX,
      pollMs: 50,
      ...(topicDefaults ? { topicDefaults } : {}),
      ...(codec ? { codec } : {}),
      ...(maxPayloadBytes ? { maxPayloadBytes } : {}),
    });
  },
  async injectRaw(backend, topic, bytes) {
    const client = await adminClient();
    await client.xadd((backend as RedisStreamsBackend).keysOf(topic).normal, '*', 'p', bytes);
  },
  async crash(backend) {
    // A crashed process just stops talking: its PEL entries stay until their idle time passes.
    (backend as RedisStreamsBackend).client.disconnect();
  },
  async cleanup(namespace) {
    const client = await adminClient();
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${KEY_PREFIX}{${namespace}:*`, 'COUNT', 500);
      if (keys.length > 0) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  },
});
