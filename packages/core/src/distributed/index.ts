export type { ClusterRunOptions, MemberActivity, SeedOutcome } from './cluster-run.js';
export { ClusterRun, createClusterRun } from './cluster-run.js';
export type { DistributedOptions } from './distributed-runtime.js';
export { connectDistributed, DistributedRuntime } from './distributed-runtime.js';
export type { RedisHostBudgetOptions } from './host-budget.js';
export { createRedisHostBudget, RedisHostBudget } from './host-budget.js';
export type { ForwardBody, ForwardMessage, PartitionRouterOptions } from './partition-router.js';
export {
  accountPartitionKey,
  forwardChannel,
  hostPartitionKey,
  PartitionRouter,
} from './partition-router.js';
export { markSeenThroughCache, SeenCache } from './seen-cache.js';
