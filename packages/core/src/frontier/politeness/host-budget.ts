/**
 * The per-host budget: how many requests may run against a host at once, how soon the next
 * one may start, and until when the host is off limits (429/503 backoff). The
 * {@link HostScheduler} decides the rules (delays with jitter, Crawl-delay, autothrottle,
 * backoff lengths); the budget only enforces them, so a cluster-wide budget (one shared
 * token bucket per host, e.g. in Redis, so the limits hold for all workers together) can
 * replace this in-process one without touching the rules.
 *
 * ```
 *   tryAcquire(host, { maxConcurrency, gapMs }, now)
 *      now < blockedUntil          ─▶ { ok: false, retryAt: blockedUntil }
 *      now < nextStart             ─▶ { ok: false, retryAt: nextStart }
 *      active ≥ maxConcurrency     ─▶ { ok: false, retryAt: Infinity }   (wait for a release)
 *      else active++, nextStart = now + gapMs ─▶ { ok: true }
 *   release(host, now)             ─▶ active--
 *   blockUntil(host, until)        ─▶ blockedUntil = max(blockedUntil, until)
 * ```
 *
 * Any method may return a promise (a remote budget); the in-process one never does.
 */

export interface AcquirePolicy {
  /** Requests that may run against the host at once. */
  maxConcurrency: number;
  /** Milliseconds the next start must wait after this one (delay, jitter and Crawl-delay applied). */
  gapMs: number;
}

export type AcquireResult = { ok: true } | { ok: false; retryAt: number };

export interface HostBudgetState {
  host: string;
  active: number;
  nextStart: number;
  blockedUntil: number;
}

export interface HostBudget {
  tryAcquire(host: string, policy: AcquirePolicy, now: number): AcquireResult | Promise<AcquireResult>;
  release(host: string, now: number): void | Promise<void>;
  /** Nobody may start a request against `host` before `until` (epoch ms). Never shortens a block. */
  blockUntil(host: string, until: number): void | Promise<void>;
  /** The state of one host, when known. */
  state(host: string): HostBudgetState | undefined | Promise<HostBudgetState | undefined>;
}

export interface LocalHostBudgetOptions {
  /** Idle hosts are forgotten past this many known hosts. @default 10_000 */
  maxHosts?: number;
}

interface Slot {
  active: number;
  nextStart: number;
  blockedUntil: number;
}

/** The in-process budget: one small record per host, idle records evicted (bounded memory). */
export class LocalHostBudget implements HostBudget {
  readonly #hosts = new Map<string, Slot>();
  readonly #maxHosts: number;

  constructor(options: LocalHostBudgetOptions = {}) {
    this.#maxHosts = options.maxHosts ?? 10_000;
  }

  get size(): number {
    return this.#hosts.size;
  }

  tryAcquire(host: string, policy: AcquirePolicy, now: number): AcquireResult {
    let slot = this.#hosts.get(host);
    if (!slot) {
      slot = { active: 0, nextStart: 0, blockedUntil: 0 };
      this.#hosts.set(host, slot);
      if (this.#hosts.size > this.#maxHosts) this.#evict(now);
    }
    if (now < slot.blockedUntil) return { ok: false, retryAt: slot.blockedUntil };
    if (now < slot.nextStart) return { ok: false, retryAt: slot.nextStart };
    if (slot.active >= policy.maxConcurrency) return { ok: false, retryAt: Number.POSITIVE_INFINITY };
    slot.active++;
    slot.nextStart = now + Math.max(0, policy.gapMs);
    return { ok: true };
  }

  release(host: string): void {
    const slot = this.#hosts.get(host);
    if (slot && slot.active > 0) slot.active--;
  }

  blockUntil(host: string, until: number): void {
    let slot = this.#hosts.get(host);
    if (!slot) {
      slot = { active: 0, nextStart: 0, blockedUntil: 0 };
      this.#hosts.set(host, slot);
    }
    if (until > slot.blockedUntil) slot.blockedUntil = until;
  }

  state(host: string): HostBudgetState | undefined {
    const slot = this.#hosts.get(host);
    return slot && { host, ...slot };
  }

  /** Forget idle hosts (nothing running, no delay or block pending), oldest first. */
  #evict(now: number): void {
    for (const [host, slot] of this.#hosts) {
      if (this.#hosts.size <= this.#maxHosts) return;
      if (slot.active === 0 && slot.nextStart <= now && slot.blockedUntil <= now) this.#hosts.delete(host);
    }
  }
}
