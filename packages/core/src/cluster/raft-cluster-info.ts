/**
 * The cluster view of a Raft-coordinated engine (`/observability/cluster`, the dashboard's
 * cluster panel), from this node's `ClusterNode.status()`: who leads, each member's Raft role,
 * the term and indexes, and which member owns which partition.
 *
 * Roles: `leader`; `voter` (a follower that votes); `learner` (catching up, promoted to voter
 * automatically); `client` (a coordination member whose id is not a Raft node — it reaches the
 * cluster through another node).
 */
import type { ClusterInfo, ClusterInfoSource } from '../api/types.js';
import { rendezvousOwner } from '../coordination/partitions.js';
import type { RaftCoordination } from '../coordination/raft-coordination.js';
import type { Coordination } from '../coordination/types.js';

export interface RaftClusterInfoOptions {
  /** Partitions shown in the partition map (those of `PartitionOwnership.ownedPartitions`). @default 16 */
  partitions?: number;
}

export function createRaftClusterInfo(
  coordination: RaftCoordination,
  options: RaftClusterInfoOptions = {},
): ClusterInfoSource {
  const count = options.partitions ?? 16;
  return {
    describe(members): ClusterInfo {
      const s = coordination.status();
      const roles: Record<string, string> = {};
      const roleOf = (id: string): string =>
        id === s.leaderId
          ? 'leader'
          : s.voters.includes(id)
            ? 'voter'
            : s.learners.includes(id)
              ? 'learner'
              : 'client';
      for (const m of members) roles[m.id] = roleOf(m.id);
      const details: ClusterInfo['details'] = {
        'raft role (this node)': s.role,
        'raft term': s.term,
        'raft leader': s.leaderId,
        'raft leader address': s.leaderAddr,
        'commit index': s.commitIndex,
        'applied index': s.appliedIndex,
        'last log index': s.lastIndex,
        'snapshot index': s.snapshotIndex,
        'raft nodes': s.members.map((m) => `${m.id}@${m.addr} (${roleOf(m.id)})`).join(', '),
      };
      // The partition map: the owner of each partition among the live members (what cron's gate
      // and the NATS partitions use).
      const ids = members.map((m) => m.id).sort();
      const owned = new Map<string, number[]>(ids.map((id) => [id, []]));
      for (let p = 0; p < count; p++) {
        const owner = rendezvousOwner(`partition:${p}`, ids);
        if (owner !== undefined) owned.get(owner)!.push(p);
      }
      for (const [id, parts] of owned) details[`partitions · ${id}`] = parts.join(' ') || '–';
      return { leader: s.leaderId, roles, details };
    },
  };
}

/** The cluster info source a coordination backend has of its own (Raft), if any. */
export function clusterInfoOf(coordination: Coordination): ClusterInfoSource | undefined {
  if (coordination.kind !== 'raft' || typeof (coordination as RaftCoordination).status !== 'function')
    return undefined;
  return createRaftClusterInfo(coordination as RaftCoordination);
}
