/**
 * The injected interfaces that make a DAG run safe to distribute. Each is async, takes and
 * returns plain data (payloads travel as envelopes, tokens are explicit numbers), and has an
 * in-memory implementation in this package. A Redis- or Raft-backed implementation can be
 * written against them without touching the scheduler.
 *
 * ```
 *   run guard ──token──▶ ctx.fencingToken ──▶ fencing store.commit(token, output)
 *       │                                 └─▶ run-state store.save(token, output)
 *       └─ renewed every ttl/3 (± jitter); lost ⇒ the run stops (RunGuardLostError)
 * ```
 */
import type { Payload } from '../payload/payload.js';

// ── run guard ────────────────────────────────────────────────────────────────────────────────

/** A held run guard. `token` is a fencing token: strictly increasing per key, never reused. */
export interface RunGuardLease {
  readonly key: string;
  readonly owner: string;
  readonly token: number;
  /** Epoch ms (by the guard's clock) at which the guard lapses unless renewed. */
  readonly expiresAt: number;
}

/**
 * One run of a key at a time. Same semantics as mocra's coordination locks, so a lock from a
 * cluster (Raft, Redis) adapts in a few lines.
 */
export interface RunGuard {
  /** Takes the guard for `ttlMs` if it is free or lapsed. Resolves `undefined` when another owner holds it. */
  acquire(key: string, owner: string, ttlMs: number): Promise<RunGuardLease | undefined>;
  /** Extends a held guard (same token). Resolves `undefined` when it was lost (expired and taken, or released). */
  renew(lease: RunGuardLease, ttlMs: number): Promise<RunGuardLease | undefined>;
  /** Releases a held guard; a stale lease is ignored. Resolves whether it was released. */
  release(lease: RunGuardLease): Promise<boolean>;
}

// ── fencing store ────────────────────────────────────────────────────────────────────────────

/** One node output written under the run's fencing token. */
export interface FencedCommit {
  readonly resource: string;
  readonly token: number;
  readonly runId: string;
  readonly nodeId: string;
  readonly output: Payload;
}

/**
 * Where node outputs are committed so that a run that lost its guard (a paused process, a
 * partitioned node) cannot overwrite the work of the run that replaced it.
 */
export interface FencingStore {
  /**
   * Accepts the commit when `token` is at least the highest token seen for `resource`;
   * otherwise rejects with `FencingTokenRejectedError` and changes nothing.
   */
  commit(commit: FencedCommit): Promise<void>;
}

// ── run-state store (checkpoints) ────────────────────────────────────────────────────────────

/** What a restarted run needs: the run it continues and the outputs of nodes that succeeded. */
export interface RunCheckpoint {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly outputs: ReadonlyMap<string, Payload>;
}

/** One node's success, saved before its successors are released. */
export interface CheckpointEntry {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly nodeId: string;
  readonly output: Payload;
}

/**
 * Checkpoints, saved incrementally: one `save` per succeeded node (a cluster store writes one
 * hash field or key per node, not the whole snapshot each time). A run that fails keeps its
 * checkpoint; a run that succeeds clears it.
 */
export interface RunStateStore {
  load(key: string): Promise<RunCheckpoint | undefined>;
  /**
   * Adds one node's output. A store that tracks tokens should reject (with
   * `FencingTokenRejectedError`) an entry whose token is lower than one it has seen for `key`.
   */
  save(key: string, entry: CheckpointEntry): Promise<void>;
  /** Drops the checkpoint. Same token rule as `save`. */
  clear(key: string, fencingToken: number | undefined): Promise<void>;
}

// ── idempotency / singleflight across runs and processes ─────────────────────────────────────

export type IdempotencyBegin =
  /** The caller now owns the key and must `complete` or `abandon` it. */
  | { readonly status: 'claimed' }
  /** The work was done before: use this output (a cache hit). */
  | { readonly status: 'done'; readonly output: Payload }
  /** Another owner is doing it right now: `wait` for it. */
  | { readonly status: 'busy' };

/**
 * Singleflight and result cache for idempotency keys, shared by every run (and, with a cluster
 * backend, every process) that uses the store. Claims expire after their TTL so a crashed owner
 * does not block a key forever.
 */
export interface IdempotencyStore {
  begin(key: string, owner: string, claimTtlMs: number): Promise<IdempotencyBegin>;
  /** Records the output of a claimed key and wakes its waiters. */
  complete(key: string, owner: string, output: Payload): Promise<void>;
  /** Gives up a claim (the work failed) so that a waiter may claim the key. */
  abandon(key: string, owner: string): Promise<void>;
  /**
   * Resolves with the output once the key is done, or `undefined` when there is nothing to wait
   * for any more (the claim was abandoned or lapsed, or `signal` aborted): call `begin` again.
   */
  wait(key: string, signal: AbortSignal): Promise<Payload | undefined>;
}
