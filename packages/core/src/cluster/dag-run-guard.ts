/**
 * `@mocra/dag`'s {@link RunGuard} on a coordination lock: one run of a key at a time across the
 * cluster, and the run's fencing token is the lock's (on Raft, the index of the committed
 * acquire; on Redis, the lock's fence counter).
 */
import type { RunGuard, RunGuardLease } from '@mocra/dag';
import type { Coordination, LockLease } from '../coordination/types.js';

export interface CoordinationRunGuardOptions {
  /** Prefix of the lock names. @default 'dag:run:' */
  prefix?: string;
}

export function createCoordinationRunGuard(
  coordination: Coordination,
  options: CoordinationRunGuardOptions = {},
): RunGuard {
  const prefix = options.prefix ?? 'dag:run:';
  const toLock = (lease: RunGuardLease): LockLease => ({
    name: `${prefix}${lease.key}`,
    owner: lease.owner,
    token: lease.token,
    expiresAt: lease.expiresAt,
  });
  const toGuard = (key: string, lease: LockLease | undefined): RunGuardLease | undefined =>
    lease && { key, owner: lease.owner, token: lease.token, expiresAt: lease.expiresAt };
  return {
    async acquire(key, owner, ttlMs) {
      return toGuard(key, await coordination.acquireLock(`${prefix}${key}`, { ttlMs, owner }));
    },
    async renew(lease, ttlMs) {
      return toGuard(lease.key, await coordination.renewLock(toLock(lease), ttlMs));
    },
    release(lease) {
      return coordination.releaseLock(toLock(lease));
    },
  };
}
