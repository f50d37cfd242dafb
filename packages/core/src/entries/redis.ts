/**
 * The Redis backends: the Redis Streams queue, Redis coordination, the shared dedup set and the
 * cluster-wide host budget. ioredis loads on the first connect. `createQueueBackend('redis://…')`
 * and `createCoordination('redis://…')` at the root reach them without this import.
 *
 * @module @mocra/core/redis
 */
export type { RedisCoordination, RedisCoordinationOptions } from '../coordination/redis-coordination.js';
export { createRedisCoordination } from '../coordination/redis-coordination.js';
export type { RedisHostBudgetOptions } from '../distributed/host-budget.js';
export { createRedisHostBudget, RedisHostBudget } from '../distributed/host-budget.js';
export type { RedisDeduplicatorOptions } from '../frontier/dedup/redis-deduplicator.js';
export {
  createRedisDeduplicator,
  dedupKeyBytes,
  RedisDeduplicator,
} from '../frontier/dedup/redis-deduplicator.js';
export type { RedisQueueBackend, RedisQueueBackendOptions, RedisTopicKeys } from '../queue/redis-queue.js';
export { createRedisQueueBackend } from '../queue/redis-queue.js';
