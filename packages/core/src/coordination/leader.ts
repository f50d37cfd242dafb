/**
 * Leader election on any {@link Coordination} backend: the leader is whoever holds a lease lock
 * and keeps renewing it. Built once here so local, Redis and Raft behave the same.
 *
 * ```
 *   follower ──acquire ok──▶ leader ──renew ok──▶ leader …
 *      ▲                       │ renew refused / failed / no answer within the lease
 *      └───────── step down ◀──┘   (isLeader() turns false *before* the lease can lapse)
 * ```
 *
 * The fencing token of the lease comes with leadership: leader-only writes carry it so a
 * resource can refuse a deposed leader that does not know it yet (see {@link FencingGuard}).
 */

import { randomBytes } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import { InvalidArgumentError } from '../errors.js';
import type { Coordination, LockLease } from './types.js';

/** `mocra:coordination:leader` — `{ name, nodeId, leader, token }` on every change. */
export const leaderChannel = diagnostics.channel('mocra:coordination:leader');

export interface LeaderElectionOptions {
  /** Name of the lock (one election per name). @default 'leader' */
  name?: string;
  /** Lease length: how long a dead leader keeps the role. @default 10000 */
  ttlMs?: number;
  /** How often the leader renews and followers try to take over. @default ttlMs / 3 */
  renewEveryMs?: number;
}

export interface LeadershipState {
  leader: boolean;
  /** The fencing token of the current lease while leader. */
  token: number | undefined;
}

export function createLeaderElection(
  coordination: Coordination,
  options: LeaderElectionOptions = {},
): LeaderElection {
  return new LeaderElection(coordination, options);
}

export class LeaderElection {
  readonly name: string;
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  readonly #coordination: Coordination;
  /** Distinct per election object, so two elections on one client never both win. */
  readonly #owner: string;
  #lease: LockLease | undefined;
  /** performance.now() at which the current lease was *requested*: it cannot lapse sooner than ttl after. */
  #confirmedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #expiry: NodeJS.Timeout | undefined;
  #running = false;
  #tick: Promise<void> | undefined;
  readonly #listeners = new Set<(state: LeadershipState) => void>();

  constructor(coordination: Coordination, options: LeaderElectionOptions = {}) {
    this.#coordination = coordination;
    this.name = options.name ?? 'leader';
    this.ttlMs = options.ttlMs ?? 10_000;
    this.renewEveryMs = options.renewEveryMs ?? Math.max(1, Math.floor(this.ttlMs / 3));
    if (!(this.ttlMs > 0)) throw new InvalidArgumentError(`ttlMs must be > 0, got ${this.ttlMs}`);
    if (!(this.renewEveryMs > 0 && this.renewEveryMs < this.ttlMs)) {
      throw new InvalidArgumentError(`renewEveryMs must be > 0 and < ttlMs, got ${this.renewEveryMs}`);
    }
    this.#owner = `${coordination.nodeId}#${randomBytes(4).toString('hex')}`;
  }

  /** Campaign now and keep campaigning (or renewing) every `renewEveryMs`. */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    await this.#runTick();
  }

  /** Stop campaigning; a leader releases the lock (unless `release: false`) so a follower takes over at once. */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    this.#running = false;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#tick;
    const lease = this.#lease;
    this.#stepDown();
    if (lease && (options.release ?? true)) await this.#coordination.releaseLock(lease).catch(() => false);
  }

  /** True while this process holds an unexpired lease (checked against the local clock too). */
  isLeader(): boolean {
    return this.#lease !== undefined && performance.now() < this.#confirmedAt + this.#safeTtl();
  }

  get token(): number | undefined {
    return this.isLeader() ? this.#lease?.token : undefined;
  }

  get lease(): LockLease | undefined {
    return this.isLeader() ? this.#lease : undefined;
  }

  /** Called with the new state on every gain or loss of leadership. Returns an unsubscribe function. */
  onChange(listener: (state: LeadershipState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Margin for clock-rate drift between this process and the backend. */
  #safeTtl(): number {
    return this.ttlMs - Math.min(this.ttlMs / 20, 500);
  }

  #runTick(): Promise<void> {
    this.#tick = this.#campaign().finally(() => {
      this.#tick = undefined;
      if (this.#running) {
        this.#timer = setTimeout(() => void this.#runTick(), this.renewEveryMs);
        this.#timer.unref();
      }
    });
    return this.#tick;
  }

  async #campaign(): Promise<void> {
    const sentAt = performance.now();
    try {
      if (this.#lease) {
        const renewed = await this.#coordination.renewLock(this.#lease, this.ttlMs);
        if (renewed) this.#confirm(renewed, sentAt);
        else this.#stepDown();
      } else {
        const lease = await this.#coordination.acquireLock(this.name, {
          ttlMs: this.ttlMs,
          owner: this.#owner,
        });
        if (lease && !this.#running) {
          await this.#coordination.releaseLock(lease).catch(() => false);
        } else if (lease) {
          this.#confirm(lease, sentAt);
        }
      }
    } catch {
      // The backend did not answer: nobody can confirm the lease, so stop acting as leader.
      this.#stepDown();
    }
  }

  #confirm(lease: LockLease, sentAt: number): void {
    const was = this.#lease !== undefined;
    this.#lease = lease;
    this.#confirmedAt = sentAt;
    // If renewals stall, leadership ends on the local clock before the lease can lapse.
    if (this.#expiry) clearTimeout(this.#expiry);
    this.#expiry = setTimeout(
      () => this.#stepDown(),
      Math.max(0, sentAt + this.#safeTtl() - performance.now()),
    );
    this.#expiry.unref();
    if (!was) this.#emit();
  }

  #stepDown(): void {
    if (this.#expiry) clearTimeout(this.#expiry);
    this.#expiry = undefined;
    if (this.#lease === undefined) return;
    this.#lease = undefined;
    this.#emit();
  }

  #emit(): void {
    const state: LeadershipState = { leader: this.#lease !== undefined, token: this.#lease?.token };
    if (leaderChannel.hasSubscribers) {
      leaderChannel.publish({ name: this.name, nodeId: this.#coordination.nodeId, ...state });
    }
    for (const listener of this.#listeners) {
      try {
        listener(state);
      } catch {
        // A listener's failure is its own; leadership bookkeeping goes on.
      }
    }
  }
}
