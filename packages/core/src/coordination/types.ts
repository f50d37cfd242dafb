/**
 * The coordination contract. One interface, three implementations: local
 * (one process), Redis, and Raft (`@mocra/cluster`). All of them pass the one conformance
 * suite in `packages/core/test/coordination-conformance.ts`.
 *
 * Leader election, partition ownership and cron/seed gating are built once, on top of these
 * primitives, in `coordination/leader.ts` and `coordination/partitions.ts`, so every backend
 * gets the same semantics.
 */

/** A held lock. `token` is the fencing token: strictly increasing per lock name, never reused. */
export interface LockLease {
  readonly name: string;
  readonly owner: string;
  readonly token: number;
  /** Epoch ms (by the backend's clock) at which the lock lapses unless renewed. */
  readonly expiresAt: number;
}

export interface Member {
  readonly id: string;
  /** Where the member can be reached (its control API), if it has one. */
  readonly addr?: string;
  /** Free-form facts shown in `/nodes` (version, hostname, roles). */
  readonly meta: Readonly<Record<string, string>>;
  /** Epoch ms of the last heartbeat the backend saw. */
  readonly lastSeen: number;
}

export type CoordinationKind = 'local' | 'redis' | 'raft';

export interface Coordination {
  readonly kind: CoordinationKind;
  /** This process's member id. */
  readonly nodeId: string;

  // ── key-value with compare-and-set ────────────────────────────────────────────
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, options?: { ttlMs?: number }): Promise<void>;
  /** Returns whether the key existed. */
  delete(key: string): Promise<boolean>;
  /**
   * Atomically replace the value when it equals `expected` (`undefined` = the key is absent).
   * `next === undefined` deletes. Returns whether the swap happened.
   */
  compareAndSet(
    key: string,
    expected: string | undefined,
    next: string | undefined,
    options?: { ttlMs?: number },
  ): Promise<boolean>;
  /** Atomic counter; returns the new value. */
  increment(key: string, by?: number): Promise<number>;

  // ── fenced locks ──────────────────────────────────────────────────────────────
  /**
   * Take `name` for `ttlMs` if it is free or lapsed (or already held by `owner`, which renews
   * it under a new token). Returns undefined when someone else holds it.
   */
  acquireLock(name: string, options: { ttlMs: number; owner?: string }): Promise<LockLease | undefined>;
  /** Extend a held lock. Returns the renewed lease (same token), or undefined if it was lost. */
  renewLock(lease: LockLease, ttlMs: number): Promise<LockLease | undefined>;
  /** Release a held lock; a stale token is ignored. Returns whether the lock was released. */
  releaseLock(lease: LockLease): Promise<boolean>;

  // ── membership ────────────────────────────────────────────────────────────────
  /** Announce this node (and keep announcing it with heartbeats until `leave`/`close`). */
  join(member: { addr?: string; meta?: Record<string, string> }): Promise<void>;
  leave(): Promise<void>;
  /** Live members, ordered by id. A member that missed heartbeats for its TTL is not live. */
  members(): Promise<Member[]>;

  close(): Promise<void>;
}
