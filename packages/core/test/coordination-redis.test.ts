// The Redis backend against the coordination conformance suite, on the real local Redis. Each
// client is its own connection; a test's clients share one namespace.
import { afterAll } from 'vitest';
import { createRedisCoordination, type RedisCoordination } from '../src/coordination/redis-coordination.js';
import { connectRedis, type RedisClient } from '../src/queue/redis-connection.js';
import { coordinationConformance } from './coordination-conformance.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const KEY_PREFIX = 'mocra-test:coord:';

let admin: RedisClient | undefined;
afterAll(async () => {
  await admin?.quit();
});

coordinationConformance({
  name: 'redis',
  async open(scope, nodeId, { memberTtlMs }) {
    return createRedisCoordination({
      url: REDIS_URL,
      namespace: scope,
      keyPrefix: KEY_PREFIX,
      nodeId,
      memberTtlMs,
    });
  },
  async crash(client) {
    await (client as RedisCoordination).close({ leave: false });
  },
  async cleanup(scope) {
    admin ??= await connectRedis({ url: REDIS_URL, feature: 'coordination-redis.test' });
    let cursor = '0';
    do {
      const [next, keys] = await admin.scan(cursor, 'MATCH', `${KEY_PREFIX}${scope}:*`, 'COUNT', 500);
      if (keys.length > 0) await admin.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  },
});
