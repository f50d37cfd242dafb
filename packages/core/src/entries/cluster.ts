/**
 * Running one crawl over many processes: the distributed runtime, the partitioned cluster run and
 * its router, the Raft coordination backend, and distributed DAG jobs on the cluster. The builder
 * (`mocra`) wires these from its queue and cluster settings; this subpath is for programs that
 * assemble a cluster themselves.
 *
 * @module @mocra/core/cluster
 */
export type {
  CoordinationFencingStore,
  CoordinationFencingStoreOptions,
  CoordinationIdempotencyStoreOptions,
  CoordinationRunGuardOptions,
  CoordinationRunStateStoreOptions,
  CronOwnership,
  CronOwnershipOptions,
  DagJobOptions,
  DagJobResult,
  DagJobsAttachOptions,
  DagJobsOptions,
  DagReplyMessage,
  DagTaskMessage,
  DagWorkerOptions,
  DagWorkerStats,
  QueueDagDispatcherOptions,
  RaftClusterInfoOptions,
  RemoteErrorInfo,
} from '../cluster/index.js';
export {
  clusterInfoOf,
  createCoordinationFencingStore,
  createCoordinationIdempotencyStore,
  createCoordinationRunGuard,
  createCoordinationRunStateStore,
  createCronOwnership,
  createDagJobs,
  createDagWorker,
  createQueueDagDispatcher,
  createRaftClusterInfo,
  DAG_REPLY_TOPIC_PREFIX,
  DAG_TASK_TOPIC_PREFIX,
  DagJobs,
  DagWorker,
  dagTaskTopic,
  QueueDagDispatcher,
} from '../cluster/index.js';
export type { RaftCoordination, RaftCoordinationOptions } from '../coordination/raft-coordination.js';
export { createRaftCoordination, RaftCoordinationClient } from '../coordination/raft-coordination.js';
export type { RaftUrlOptions } from '../coordination/raft-url.js';
export { raftConfigFromUrl } from '../coordination/raft-url.js';
export type {
  ClusterRunOptions,
  DistributedOptions,
  ForwardBody,
  ForwardMessage,
  MemberActivity,
  PartitionRouterOptions,
  SeedOutcome,
} from '../distributed/index.js';
export {
  accountPartitionKey,
  ClusterRun,
  connectDistributed,
  createClusterRun,
  DistributedRuntime,
  forwardChannel,
  hostPartitionKey,
  PartitionRouter,
} from '../distributed/index.js';
