import { InvalidOptionsError } from '../errors.js';
import { type Clock, systemClock } from '../time/clock.js';
import type { RunGuard, RunGuardLease } from './types.js';

export interface MemoryRunGuardOptions {
  /** @default systemClock */
  clock?: Clock;
}

export interface MemoryRunGuard extends RunGuard {
  /** The live lease of `key`, if any (lapsed leases are not live). */
  holder(key: string): RunGuardLease | undefined;
}

/**
 * A run guard for one process. Tokens increase per key across acquisitions and never repeat,
 * so they work as fencing tokens for stores in the same process.
 */
export function createMemoryRunGuard(options: MemoryRunGuardOptions = {}): MemoryRunGuard {
  const clock = options.clock ?? systemClock;
  const leases = new Map<string, RunGuardLease>();
  const lastToken = new Map<string, number>();

  const live = (key: string): RunGuardLease | undefined => {
    const lease = leases.get(key);
    if (lease === undefined) return undefined;
    if (lease.expiresAt <= clock.now()) {
      leases.delete(key);
      return undefined;
    }
    return lease;
  };
  const checkTtl = (ttlMs: number) => {
    if (!Number.isFinite(ttlMs) || ttlMs <= 0)
      throw new InvalidOptionsError('ttlMs', `must be a positive number, got ${ttlMs}`);
  };

  return {
    async acquire(key, owner, ttlMs) {
      checkTtl(ttlMs);
      const current = live(key);
      if (current !== undefined && current.owner !== owner) return undefined;
      // Re-acquiring as the same owner still gets a fresh token: a new run is a new writer.
      const token = (lastToken.get(key) ?? 0) + 1;
      lastToken.set(key, token);
      const lease: RunGuardLease = Object.freeze({ key, owner, token, expiresAt: clock.now() + ttlMs });
      leases.set(key, lease);
      return lease;
    },
    async renew(lease, ttlMs) {
      checkTtl(ttlMs);
      const current = live(lease.key);
      if (current === undefined || current.token !== lease.token || current.owner !== lease.owner)
        return undefined;
      const renewed: RunGuardLease = Object.freeze({ ...current, expiresAt: clock.now() + ttlMs });
      leases.set(lease.key, renewed);
      return renewed;
    },
    async release(lease) {
      const current = leases.get(lease.key);
      if (current === undefined || current.token !== lease.token) return false;
      leases.delete(lease.key);
      return current.expiresAt > clock.now();
    },
    holder: live,
  };
}
