// The Raft and Redis backends are listed by their subpath entries (src/entries/), not here:
// the root imports this file, and would load their code with it.
export type { CreateCoordinationOptions } from './create-coordination.js';
export { COORDINATION_URL_SCHEMES, createCoordination } from './create-coordination.js';
export { FencingGuard } from './fencing.js';
export type { LeaderElectionOptions, LeadershipState } from './leader.js';
export { createLeaderElection, LeaderElection, leaderChannel } from './leader.js';
export type { LocalCoordinationOptions } from './local-coordination.js';
export { createLocalCoordination, LocalCoordination, LocalCoordinationStore } from './local-coordination.js';
export type { PartitionOwnershipOptions } from './partitions.js';
export { createPartitionOwnership, PartitionOwnership, rendezvousOwner } from './partitions.js';
export type { Coordination, CoordinationKind, LockLease, Member } from './types.js';
