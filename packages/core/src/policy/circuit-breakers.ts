/**
 * Circuit breakers per host and per module: stop sending work to a target that keeps failing,
 * let one probe through now and then, and resume when a probe succeeds.
 *
 * ```
 *        failures of failureThreshold distinct subjects in a row,
 *        and no success within recentSuccessMs
 *   closed ───────────────────────────────────────────▶ open ◀──────────────┐
 *     ▲                                                  │ openFor elapsed   │ probe fails:
 *     │ probe succeeds                                   ▼                   │ reopen, openFor × backoffFactor
 *     └──────────────────────────────────────────── half-open ──────────────┘   (capped at maxOpenMs)
 *                                                  one probe at a time; others wait
 * ```
 *
 * A failure is about a *subject* — the URL the work was for — as well as the target. One URL
 * that keeps failing (its own 503, a page that drops the connection) is one failure however
 * often it is retried: only failures spread over distinct subjects, with no success of the
 * target in between, say that the target itself is unhealthy. A target that succeeded within
 * `recentSuccessMs` is up, whatever failed since, so a burst of broken URLs right after a good
 * page opens nothing. In half-open the probe goes to work whose subject was not failing; a
 * failing subject probes only when no other work asked for `probeWaitMs`.
 *
 * Time is read from an injectable clock, and transitions happen lazily when the breaker is
 * consulted (no timers), so tests drive it with a hand-moved clock and an idle process costs
 * nothing. A probe that never reports back (its worker died) is presumed lost after
 * `probeTimeoutMs` and the next caller probes instead.
 *
 * `openCount` counts opens since the breaker last closed; once it reaches `maxOpens` the
 * target is considered down for good and `check` says `exhausted` to work that was tried
 * before, so the caller can give it up instead of deferring it forever (a crawl of a dead host
 * still ends). Work that was never tried is never given up by a breaker: an exhausted breaker
 * lets it run once, and its own failure decides.
 */
import { CircuitOpenError, InvalidArgumentError } from '../errors.js';
import type { Clock } from '../schedule/clock.js';
import { policyChannels } from './policy-channels.js';

export type BreakerScope = 'host' | 'module';
export type BreakerState = 'closed' | 'open' | 'half-open';

export interface CircuitBreakerOptions {
  /**
   * Failures in a row (no success in between) that open a closed breaker. Failures of one
   * subject count once; failures reported without a subject count one each. @default 10
   */
  failureThreshold?: number;
  /**
   * A target that succeeded within this many milliseconds is up: failures since then open its
   * breaker only once that success is this old (a burst of broken URLs next to good pages is
   * about the URLs). 0: only the failures in a row count. @default 5000
   */
  recentSuccessMs?: number;
  /** How long the first open lasts. @default 5000 */
  openMs?: number;
  /** Each reopen (a failed probe) lasts this much longer than the last. @default 2 */
  backoffFactor?: number;
  /** The longest an open lasts. @default 300000 */
  maxOpenMs?: number;
  /** Opens without a close in between after which `check` reports `exhausted`. 0: never. @default 8 */
  maxOpens?: number;
  /** A probe that has not reported after this long is presumed lost. @default 60000 */
  probeTimeoutMs?: number;
  /** How long a caller refused because a probe is out should wait. @default 1000 */
  probeWaitMs?: number;
  /** Breakers kept; beyond it, closed ones without failures are forgotten first. @default 10000 */
  maxBreakers?: number;
  /** @default the system clock */
  clock?: Pick<Clock, 'now'>;
  /** Called on every state change (also published on `mocra:policy:breaker`). */
  onTransition?: (transition: BreakerTransition) => void;
}

/** What `check` is asked about: the work that wants to run. */
export interface BreakerWork {
  /** What the work is about (its URL or fingerprint): see the module comment. */
  subject?: string | undefined;
  /**
   * Whether the work ran before (a retry). An exhausted breaker refuses only work that was
   * tried; work that never was runs once. @default true
   */
  tried?: boolean;
}

/** What `check` answered. */
export type BreakerPermit =
  | {
      allowed: true;
      state: BreakerState /** This call is the half-open probe: report its outcome. */;
      probe: boolean;
    }
  | {
      allowed: false;
      state: BreakerState;
      /** When to ask again. */
      retryAfterMs: number;
      /** The breaker opened `maxOpens` times without closing: the target looks down for good. */
      exhausted: boolean;
    };

export interface BreakerSnapshot {
  scope: BreakerScope;
  key: string;
  state: BreakerState;
  /** Failures in a row (closed), reset by a success. */
  consecutiveFailures: number;
  /** Opens since the breaker last closed. */
  openCount: number;
  /** Epoch ms of the last change of state. */
  since: number;
  /** Epoch ms at which an open breaker lets a probe through. */
  retryAt?: number;
  probeInFlight: boolean;
  failures: number;
  successes: number;
}

/** `mocra:policy:breaker` — a breaker changed state. */
export interface BreakerTransition {
  scope: BreakerScope;
  key: string;
  from: BreakerState;
  to: BreakerState;
  at: number;
  consecutiveFailures: number;
  openCount: number;
  retryAt?: number;
}

interface Breaker {
  scope: BreakerScope;
  key: string;
  state: BreakerState;
  /** Failing subjects, oldest first → the `successes` count when each last failed (see #counts). */
  failing: Map<string, number>;
  lastSuccessAt: number | undefined;
  consecutiveFailures: number;
  openCount: number;
  since: number;
  retryAt: number;
  probeStartedAt: number | undefined;
  failures: number;
  successes: number;
}

export class CircuitBreakers {
  readonly #threshold: number;
  readonly #recentSuccessMs: number;
  readonly #maxSubjects: number;
  readonly #openMs: number;
  readonly #factor: number;
  readonly #maxOpenMs: number;
  readonly #maxOpens: number;
  readonly #probeTimeoutMs: number;
  readonly #probeWaitMs: number;
  readonly #maxBreakers: number;
  readonly #clock: Pick<Clock, 'now'>;
  readonly #onTransition: ((t: BreakerTransition) => void) | undefined;
  readonly #breakers = new Map<string, Breaker>();

  constructor(options: CircuitBreakerOptions = {}) {
    this.#threshold = int('failureThreshold', options.failureThreshold, 10, 1);
    this.#recentSuccessMs = int('recentSuccessMs', options.recentSuccessMs, 5_000, 0);
    // Enough to count a threshold's worth of distinct failures and to remember the URLs that
    // failed last; small, as every target (up to maxBreakers) may hold that many.
    this.#maxSubjects = Math.max(16, 2 * this.#threshold);
    this.#openMs = int('openMs', options.openMs, 5_000, 0);
    this.#maxOpenMs = int('maxOpenMs', options.maxOpenMs, 300_000, 0);
    this.#maxOpens = int('maxOpens', options.maxOpens, 8, 0);
    this.#probeTimeoutMs = int('probeTimeoutMs', options.probeTimeoutMs, 60_000, 1);
    this.#probeWaitMs = int('probeWaitMs', options.probeWaitMs, 1_000, 0);
    this.#maxBreakers = int('maxBreakers', options.maxBreakers, 10_000, 1);
    this.#factor = options.backoffFactor ?? 2;
    if (!(this.#factor >= 1))
      throw new InvalidArgumentError(`backoffFactor must be ≥ 1, got ${this.#factor}`);
    this.#clock = options.clock ?? { now: () => Date.now() };
    this.#onTransition = options.onTransition;
  }

  /**
   * May work for this target run now? In half-open, the first caller gets `probe: true` and
   * must report with `success`, `failure` or `release`; the others are refused until it does.
   */
  check(scope: BreakerScope, key: string, work: BreakerWork = {}): BreakerPermit {
    const b = this.#breakers.get(id(scope, key));
    if (!b) return { allowed: true, state: 'closed', probe: false };
    const now = this.#clock.now();
    this.#refresh(b, now);
    if (b.state === 'closed') return { allowed: true, state: 'closed', probe: false };
    if (
      b.state === 'half-open' &&
      b.probeStartedAt === undefined &&
      // A subject that was failing proves little about the target: others probe first.
      (work.subject === undefined || !b.failing.has(work.subject) || now - b.since >= this.#probeWaitMs)
    ) {
      b.probeStartedAt = now;
      return { allowed: true, state: 'half-open', probe: true };
    }
    const exhausted = this.#maxOpens > 0 && b.openCount >= this.#maxOpens;
    // Down for good, but this work never had its own try: it gets one.
    if (exhausted && work.tried === false) return { allowed: true, state: b.state, probe: false };
    return {
      allowed: false,
      state: b.state,
      retryAfterMs: b.state === 'open' ? Math.max(0, b.retryAt - now) : this.#probeWaitMs,
      exhausted,
    };
  }

  /**
   * Work for the target succeeded: a half-open (or open) breaker closes; failures in a row
   * reset, and `subject` is no longer failing.
   */
  success(scope: BreakerScope, key: string, subject?: string): void {
    const now = this.#clock.now();
    // Remembered even before any failure: a recent success keeps the breaker closed.
    const b = this.#getOrCreate(scope, key, now);
    b.successes++;
    b.lastSuccessAt = now;
    b.consecutiveFailures = 0;
    b.probeStartedAt = undefined;
    if (subject !== undefined) b.failing.delete(subject);
    if (b.state !== 'closed') {
      b.openCount = 0;
      this.#move(b, 'closed', now);
    }
  }

  /** Work for the target (about `subject`) failed in a way that says it may be unhealthy. */
  failure(scope: BreakerScope, key: string, subject?: string): void {
    const now = this.#clock.now();
    const b = this.#getOrCreate(scope, key, now);
    b.failures++;
    this.#refresh(b, now);
    if (this.#counts(b, subject)) b.consecutiveFailures++;
    switch (b.state) {
      case 'closed':
        if (
          b.consecutiveFailures >= this.#threshold &&
          (b.lastSuccessAt === undefined || now - b.lastSuccessAt >= this.#recentSuccessMs)
        ) {
          this.#open(b, now);
        }
        break;
      case 'half-open':
        this.#open(b, now);
        break;
      case 'open':
        // Work that started before the breaker opened; the open stands as it is.
        break;
    }
  }

  /** A probe ended without saying anything about the target (aborted, deferred): let another probe go. */
  release(scope: BreakerScope, key: string): void {
    const b = this.#breakers.get(id(scope, key));
    if (b) b.probeStartedAt = undefined;
  }

  /** Run `fn` through the breaker: refused with `CircuitOpenError`, outcome reported by whether `fn` throws. */
  async run<T>(scope: BreakerScope, key: string, fn: () => Promise<T> | T): Promise<T> {
    const permit = this.check(scope, key);
    if (!permit.allowed) throw new CircuitOpenError(scope, key, permit.retryAfterMs);
    try {
      const result = await fn();
      this.success(scope, key);
      return result;
    } catch (err) {
      this.failure(scope, key);
      throw err;
    }
  }

  /** One breaker, or undefined when it never failed (it is closed). */
  get(scope: BreakerScope, key: string): BreakerSnapshot | undefined {
    const b = this.#breakers.get(id(scope, key));
    if (!b || b.failures === 0) return undefined;
    this.#refresh(b, this.#clock.now());
    return snapshot(b);
  }

  /** Every breaker that has seen a failure, open ones first (for the engine API and the dashboard). */
  list(filter: { scope?: BreakerScope; state?: BreakerState } = {}): BreakerSnapshot[] {
    const now = this.#clock.now();
    const order: Record<BreakerState, number> = { open: 0, 'half-open': 1, closed: 2 };
    const out: BreakerSnapshot[] = [];
    for (const b of this.#breakers.values()) {
      if (b.failures === 0) continue;
      this.#refresh(b, now);
      if (filter.scope !== undefined && b.scope !== filter.scope) continue;
      if (filter.state !== undefined && b.state !== filter.state) continue;
      out.push(snapshot(b));
    }
    return out.sort((a, b) => order[a.state] - order[b.state] || a.key.localeCompare(b.key));
  }

  /** Forget a breaker (or all): it is closed again. */
  reset(scope?: BreakerScope, key?: string): void {
    if (scope === undefined) this.#breakers.clear();
    else if (key === undefined) {
      for (const [k, b] of this.#breakers) if (b.scope === scope) this.#breakers.delete(k);
    } else this.#breakers.delete(id(scope, key));
  }

  get size(): number {
    return this.#breakers.size;
  }

  /**
   * Whether this failure adds to the failures in a row: the first of its subject since the
   * last success (a subject's entry holds the `successes` count of its last failure). The
   * subject is remembered as failing either way, most recent last, at most #maxSubjects.
   */
  #counts(b: Breaker, subject: string | undefined): boolean {
    if (subject === undefined) return true;
    const fresh = b.failing.get(subject) !== b.successes;
    b.failing.delete(subject);
    b.failing.set(subject, b.successes);
    if (b.failing.size > this.#maxSubjects) b.failing.delete(b.failing.keys().next().value as string);
    return fresh;
  }

  /** Open → half-open once its time is up (half-open since then); a lost probe frees the slot. */
  #refresh(b: Breaker, now: number): void {
    if (b.state === 'open' && now >= b.retryAt) this.#move(b, 'half-open', b.retryAt);
    if (
      b.state === 'half-open' &&
      b.probeStartedAt !== undefined &&
      now - b.probeStartedAt >= this.#probeTimeoutMs
    ) {
      b.probeStartedAt = undefined;
    }
  }

  #open(b: Breaker, now: number): void {
    b.openCount++;
    const ms = Math.min(this.#maxOpenMs, this.#openMs * this.#factor ** (b.openCount - 1));
    b.retryAt = now + ms;
    b.probeStartedAt = undefined;
    this.#move(b, 'open', now);
  }

  #move(b: Breaker, to: BreakerState, now: number): void {
    const from = b.state;
    if (from === to) return;
    b.state = to;
    b.since = now;
    const transition: BreakerTransition = {
      scope: b.scope,
      key: b.key,
      from,
      to,
      at: now,
      consecutiveFailures: b.consecutiveFailures,
      openCount: b.openCount,
      ...(to === 'open' ? { retryAt: b.retryAt } : {}),
    };
    if (policyChannels.breaker.hasSubscribers) policyChannels.breaker.publish(transition);
    this.#onTransition?.(transition);
  }

  #getOrCreate(scope: BreakerScope, key: string, now: number): Breaker {
    const k = id(scope, key);
    let b = this.#breakers.get(k);
    if (!b) {
      if (this.#breakers.size >= this.#maxBreakers) this.#evict();
      b = {
        scope,
        key,
        state: 'closed',
        failing: new Map(),
        lastSuccessAt: undefined,
        consecutiveFailures: 0,
        openCount: 0,
        since: now,
        retryAt: 0,
        probeStartedAt: undefined,
        failures: 0,
        successes: 0,
      };
      this.#breakers.set(k, b);
    }
    return b;
  }

  /** Drop closed breakers with no failures in a row (they hold nothing); else the oldest closed one. */
  #evict(): void {
    let fallback: string | undefined;
    for (const [k, b] of this.#breakers) {
      if (b.state !== 'closed') continue;
      if (b.consecutiveFailures === 0) {
        this.#breakers.delete(k);
        if (this.#breakers.size < this.#maxBreakers) return;
      } else fallback ??= k;
    }
    if (this.#breakers.size >= this.#maxBreakers && fallback !== undefined) this.#breakers.delete(fallback);
  }
}

export function createCircuitBreakers(options: CircuitBreakerOptions = {}): CircuitBreakers {
  return new CircuitBreakers(options);
}

function id(scope: BreakerScope, key: string): string {
  return `${scope}\u0000${key}`;
}

function snapshot(b: Breaker): BreakerSnapshot {
  return {
    scope: b.scope,
    key: b.key,
    state: b.state,
    consecutiveFailures: b.consecutiveFailures,
    openCount: b.openCount,
    since: b.since,
    ...(b.state === 'open' ? { retryAt: b.retryAt } : {}),
    probeInFlight: b.probeStartedAt !== undefined,
    failures: b.failures,
    successes: b.successes,
  };
}

function int(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}, got ${value}`);
  }
  return value;
}
