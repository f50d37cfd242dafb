/**
 * Cron in a cluster: each job fires on the owner of its key's partition (rendezvous hashing over
 * the live members), and a partition's times move with it. With the scheduler's per-tick claim
 * (a compare-and-set in coordination) this gives:
 *
 * ```
 *   at most once per scheduled time   the claim — whatever the members' views say during a move
 *   on the owner                      the gate below
 *   at least once while a node lives  the scheduler asks the gate again about refused times
 *                                     (recheckRefusedMs): when the owner died before firing, its
 *                                     partitions' new owner fires them late, within the tolerance
 * ```
 *
 * A node that is not a member (not joined yet, or membership unused) lets every job through:
 * the claim alone decides then, as on one node.
 */
import { createPartitionOwnership, type PartitionOwnership } from '../coordination/partitions.js';
import type { Coordination } from '../coordination/types.js';

export interface CronOwnershipOptions {
  /** How often the member list is read again. @default 1000 */
  refreshMs?: number;
}

export interface CronOwnership {
  /** The scheduler's gate: this node owns the job's key (or is not a member). */
  gate(job: { id: string; key: string }): boolean;
  /** Read the members now and keep reading them. */
  start(): Promise<void>;
  stop(): void;
  readonly partitions: PartitionOwnership;
}

export function createCronOwnership(
  coordination: Coordination,
  options: CronOwnershipOptions = {},
): CronOwnership {
  const partitions = createPartitionOwnership(coordination, { refreshMs: options.refreshMs ?? 1_000 });
  return {
    partitions,
    gate(job) {
      if (!partitions.members().includes(coordination.nodeId)) return true;
      return partitions.owns(job.key);
    },
    start: () => partitions.start(),
    stop: () => partitions.stop(),
  };
}
