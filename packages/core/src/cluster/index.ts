export type { CronOwnership, CronOwnershipOptions } from './cron-ownership.js';
export { createCronOwnership } from './cron-ownership.js';
export type { CoordinationFencingStore, CoordinationFencingStoreOptions } from './dag-fencing-store.js';
export { createCoordinationFencingStore } from './dag-fencing-store.js';
export type { CoordinationIdempotencyStoreOptions } from './dag-idempotency-store.js';
export { createCoordinationIdempotencyStore } from './dag-idempotency-store.js';
export type { DagJobOptions, DagJobResult, DagJobsAttachOptions, DagJobsOptions } from './dag-jobs.js';
export { createDagJobs, DagJobs } from './dag-jobs.js';
export type {
  DagReplyMessage,
  DagTaskMessage,
  DagWorkerOptions,
  DagWorkerStats,
  QueueDagDispatcherOptions,
  RemoteErrorInfo,
} from './dag-queue-dispatch.js';
export {
  createDagWorker,
  createQueueDagDispatcher,
  DAG_REPLY_TOPIC_PREFIX,
  DAG_TASK_TOPIC_PREFIX,
  DagWorker,
  dagTaskTopic,
  QueueDagDispatcher,
} from './dag-queue-dispatch.js';
export type { CoordinationRunGuardOptions } from './dag-run-guard.js';
export { createCoordinationRunGuard } from './dag-run-guard.js';
export type { CoordinationRunStateStoreOptions } from './dag-run-state-store.js';
export { createCoordinationRunStateStore } from './dag-run-state-store.js';
export type { RaftClusterInfoOptions } from './raft-cluster-info.js';
export { clusterInfoOf, createRaftClusterInfo } from './raft-cluster-info.js';
