// Public entry of @mocra/cluster: an embedded Raft control plane on LevelDB. Exports are listed
// explicitly so the public surface is reviewed, not accidental. The Raft core, storage and
// transport building blocks (no semver promise) are in `@mocra/cluster/internal`.

export type { ClusterConfigOptions, ClusterMode } from './config/cluster-config.js';
export { ClusterConfig } from './config/cluster-config.js';
export type { ClusterErrorCode, ClusterErrorOptions, SerializedClusterError } from './errors.js';
export {
  CLUSTER_ERROR_CODES,
  ClusterArgumentError,
  ClusterClosedError,
  ClusterConfigError,
  ClusterError,
  ClusterStorageError,
  ClusterTimeoutError,
  ClusterUnauthorizedError,
  CommandFailedError,
  ConfigChangePendingError,
  FencingRejectedError,
  IdentityMismatchError,
  InvalidClusterMessageError,
  JoinFailedError,
  NodeIdRetiredError,
  NodeRemovedError,
  NodeStartingError,
  NoLeaderError,
  NotLeaderError,
  SessionExpiredError,
  StorageCorruptError,
  TransferFailedError,
  UnknownNodeError,
  VoterDataLostError,
} from './errors.js';
export { FencingGuard } from './fencing/fencing-guard.js';
export type {
  AnnounceOptions,
  CloseOptions,
  ClusterMemberStatus,
  ClusterNodeDeps,
  ClusterNodeOptions,
  ClusterRole,
  ClusterStatus,
  LockLease,
  Member,
  ReadOptions,
} from './node/cluster-node.js';
export { ClusterNode } from './node/cluster-node.js';
export { createClusterNode, systemClock } from './node/create-cluster-node.js';
export type { ClusterEvent, ClusterEventType } from './node/events.js';
export type { Clock, NodeRequest, NodeResponse, PeerHandler, PeerTransport } from './node/ports.js';
export {
  DEFAULT_PARTITION_COUNT,
  partitionOf,
  partitionsOwnedBy,
  rendezvousOwner,
  rendezvousScore,
} from './state/partition.js';
