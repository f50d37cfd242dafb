/**
 * Politeness per host, as the engine's download gate: every download asks `enter` first and
 * reports to `leave` after. Per host (by hostname) it enforces
 *
 *   - at most `maxConcurrency` requests at once;
 *   - a minimum gap between request starts: `delayMs` with jitter added on top (the delay is
 *     a floor, never shortened), robots.txt `Crawl-delay`, and optionally an autothrottle
 *     delay that follows the host's latency;
 *   - after a 429 or 503: nothing until `Retry-After` (seconds or HTTP-date) or, without
 *     one, an exponential backoff — for that host only, the others go on. A 429 is about the
 *     client's rate, so it always counts; a 503 from a host that answered another request
 *     well within `recentSuccessMs` is that URL's own trouble (the failure policy retries it)
 *     and blocks nothing. A response to a request sent before the current backoff began tells
 *     nothing new: it neither lengthens nor escalates the backoff;
 *   - robots.txt (when a {@link RobotsGuard} is given): disallowed URLs are dropped.
 *
 * ```
 *  enter(req) ─▶ robots? ── disallowed ─────────────────────────────▶ { drop }
 *                  │ allowed (Crawl-delay noted)
 *                  ▼
 *              budget.tryAcquire(host) ── ok ──────────────────────▶ undefined  (download now)
 *                  │ not now: estimated wait ≤ maxWaitMs?
 *                  ├── yes: wait in the host's FIFO, woken by leave() or the host's timer
 *                  └── no:  { deferMs }  back to the queue, spread so a backlog does not
 *                           return all at once
 *  leave(req, outcome) ─▶ release, latency EMA, 429/503 ⇒ budget.blockUntil(host, …), wake waiters
 * ```
 *
 * The slot bookkeeping lives in a {@link HostBudget}, in process by default; a cluster-wide
 * budget can replace it (see `host-budget.ts`). Memory is bounded: idle hosts are forgotten
 * past `maxHosts`. Time comes from an injected {@link Clock}.
 */
import diagnostics from 'node:diagnostics_channel';
import { InvalidArgumentError } from '../../errors.js';
import type { Request } from '../../model/request.js';
import { parseRetryAfterMs } from '../../policy/backoff.js';
import { type Clock, systemClock, type TimerHandle } from '../../schedule/clock.js';
import { requestUrl } from '../fingerprint.js';
import type { DownloadGate, DownloadOutcome, GateDecision } from '../gate.js';
import { type AcquireResult, type HostBudget, LocalHostBudget } from './host-budget.js';

/** What robots.txt says about one URL. */
export interface RobotsVerdict {
  allowed: boolean;
  /** Crawl-delay of the matching group, in milliseconds. */
  crawlDelayMs: number | undefined;
  /** Why a URL is not allowed when it is not the rules' doing (robots.txt unreachable). */
  reason?: string;
}

/** Anything that can answer robots.txt questions (the RobotsCache does). */
export interface RobotsGuard {
  check(url: URL, signal?: AbortSignal): RobotsVerdict | Promise<RobotsVerdict>;
}

export interface AutoThrottleOptions {
  /** Requests the autothrottle aims to have in flight per host: delay ≈ latency / target. @default 1 */
  targetConcurrency?: number;
  /** Delay before any latency is known. @default 1000 */
  startDelayMs?: number;
  /** The autothrottle never goes below this (the configured `delayMs` is a floor too). @default 0 */
  minDelayMs?: number;
  /** Nor above this. @default 60000 */
  maxDelayMs?: number;
}

export interface HostBackoffOptions {
  /** Statuses that put the host in backoff. @default [429, 503] */
  statuses?: readonly number[];
  /** Backoff when the response has no usable Retry-After: base × 2^(n−1) for the n-th in a row. @default 1000 */
  baseMs?: number;
  /** Longest backoff, also the cap on Retry-After. @default 600000 (10 min) */
  maxMs?: number;
  /**
   * A listed status other than 429 backs the host off only when the host gave no good answer
   * (below 500, not listed) for this many milliseconds: next to good pages, one URL's 503 is
   * that URL's. 0: every listed status backs the host off. @default 5000
   */
  recentSuccessMs?: number;
}

/** The outcome of a download, as the engine reports it to `leave`. */
export interface HostOutcome extends DownloadOutcome {
  /** Response headers (for Retry-After). */
  headers?: Readonly<Record<string, string | string[] | undefined>>;
  /** Retry-After already parsed, in milliseconds. */
  retryAfterMs?: number;
}

export interface HostSchedulerOptions {
  /** Requests that may run against one host at once. @default 2 */
  maxConcurrency?: number;
  /** Minimum milliseconds between two request starts on one host. @default 0 */
  delayMs?: number;
  /** Random extra delay, as a fraction of `delayMs`: each gap is delayMs × (1 + jitter × U[0,1)). @default 0.5 */
  jitter?: number;
  /** Latency-based delay (Scrapy's AutoThrottle algorithm); off unless given. */
  autoThrottle?: boolean | AutoThrottleOptions;
  /** 429/503 handling. */
  backoff?: HostBackoffOptions;
  /** robots.txt: disallowed URLs are dropped, Crawl-delay is honoured. @default none */
  robots?: RobotsGuard;
  /** Longest Crawl-delay honoured; a larger one is capped (and still honoured at the cap). @default 60000 */
  maxCrawlDelayMs?: number;
  /** A request that would wait longer than this for its host is deferred to the queue instead. @default 5000 */
  maxWaitMs?: number;
  /** Shortest defer. @default 100 */
  minDeferMs?: number;
  /** Hosts whose state is kept; idle ones are forgotten beyond this. @default 10000 */
  maxHosts?: number;
  /** Where the slots are kept. @default an in-process LocalHostBudget */
  budget?: HostBudget;
  clock?: Clock;
  /** Random source for the jitter, in [0, 1). @default Math.random */
  random?: () => number;
}

/** One host as `hosts()` reports it (dashboards, the control API, tests). */
export interface HostSnapshot {
  host: string;
  active: number;
  waiting: number;
  /** The gap currently enforced between starts (before jitter). */
  delayMs: number;
  crawlDelayMs: number | undefined;
  /** Latency EMA in ms, once a response was seen. */
  latencyMs: number | undefined;
  /** Epoch ms until which the host is in backoff (0 = not). */
  blockedUntil: number;
  /** 429/503 responses in a row. */
  consecutiveBackoffs: number;
}

/** `mocra:frontier:backoff` — a host went into backoff after a 429/503. */
export interface BackoffMessage {
  host: string;
  status: number;
  /** Epoch ms it stays blocked until. */
  until: number;
  /** True when the length came from Retry-After. */
  retryAfter: boolean;
}

export const backoffChannel = diagnostics.channel('mocra:frontier:backoff');

interface Waiter {
  resolve: (decision: GateDecision) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

interface HostState {
  host: string;
  active: number;
  waiters: Waiter[];
  crawlDelayMs: number | undefined;
  autoDelayMs: number;
  latencyEma: number | undefined;
  consecutiveBackoffs: number;
  blockedUntil: number;
  /** When the current backoff began (requests sent before it carry no news). */
  blockedSince: number;
  /** When the host last gave a good answer (status below 500, not a backoff status). */
  lastOkAt: number | undefined;
  /** Where the next deferred request of this host is placed (spreads a backlog). */
  deferCursor: number;
  timer: TimerHandle | undefined;
  timerAt: number;
  pumping: boolean;
}

const LATENCY_ALPHA = 0.3;

export class HostScheduler implements DownloadGate {
  readonly #maxConcurrency: number;
  readonly #delayMs: number;
  readonly #jitter: number;
  readonly #auto: Required<AutoThrottleOptions> | undefined;
  readonly #backoffStatuses: ReadonlySet<number>;
  readonly #backoffBase: number;
  readonly #backoffMax: number;
  readonly #recentSuccessMs: number;
  readonly #robots: RobotsGuard | undefined;
  readonly #maxCrawlDelay: number;
  readonly #maxWait: number;
  readonly #minDefer: number;
  readonly #maxHosts: number;
  readonly #budget: HostBudget;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #hosts = new Map<string, HostState>();
  /** The last state `#state` returned: the end of the LRU order while it is in `#hosts`. */
  #recent: HostState | undefined;

  constructor(options: HostSchedulerOptions = {}) {
    this.#maxConcurrency = positiveInt('maxConcurrency', options.maxConcurrency ?? 2);
    this.#delayMs = nonNegative('delayMs', options.delayMs ?? 0);
    this.#jitter = nonNegative('jitter', options.jitter ?? 0.5);
    const auto = options.autoThrottle;
    if (auto) {
      const o = auto === true ? {} : auto;
      this.#auto = {
        targetConcurrency: positive('autoThrottle.targetConcurrency', o.targetConcurrency ?? 1),
        startDelayMs: nonNegative('autoThrottle.startDelayMs', o.startDelayMs ?? 1000),
        minDelayMs: nonNegative('autoThrottle.minDelayMs', o.minDelayMs ?? 0),
        maxDelayMs: nonNegative('autoThrottle.maxDelayMs', o.maxDelayMs ?? 60_000),
      };
    }
    this.#backoffStatuses = new Set(options.backoff?.statuses ?? [429, 503]);
    this.#backoffBase = nonNegative('backoff.baseMs', options.backoff?.baseMs ?? 1000);
    this.#backoffMax = nonNegative('backoff.maxMs', options.backoff?.maxMs ?? 600_000);
    this.#recentSuccessMs = nonNegative('backoff.recentSuccessMs', options.backoff?.recentSuccessMs ?? 5_000);
    this.#robots = options.robots;
    this.#maxCrawlDelay = nonNegative('maxCrawlDelayMs', options.maxCrawlDelayMs ?? 60_000);
    this.#maxWait = nonNegative('maxWaitMs', options.maxWaitMs ?? 5000);
    this.#minDefer = nonNegative('minDeferMs', options.minDeferMs ?? 100);
    this.#maxHosts = positiveInt('maxHosts', options.maxHosts ?? 10_000);
    this.#budget = options.budget ?? new LocalHostBudget({ maxHosts: this.#maxHosts });
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? Math.random;
  }

  /** Hosts with state, for observability. */
  hosts(): HostSnapshot[] {
    return [...this.#hosts.values()].map((s) => this.#snapshot(s));
  }

  host(host: string): HostSnapshot | undefined {
    const s = this.#hosts.get(host);
    return s && this.#snapshot(s);
  }

  enter(request: Request, signal?: AbortSignal): GateDecision | Promise<GateDecision> {
    let url: URL;
    try {
      url = requestUrl(request);
    } catch {
      return undefined; // not ours to judge: the downloader reports the bad URL
    }
    const state = this.#state(url.hostname);
    if (this.#robots) {
      const verdict = this.#robots.check(url, signal);
      if (verdict instanceof Promise) {
        return verdict.then(
          (v) => this.#afterRobots(state, url, v, signal),
          () => this.#acquire(state, signal),
        );
      }
      return this.#afterRobots(state, url, verdict, signal);
    }
    return this.#acquire(state, signal);
  }

  leave(request: Request, outcome: HostOutcome): void {
    let host: string;
    try {
      host = requestUrl(request).hostname;
    } catch {
      return;
    }
    const state = this.#state(host);
    const now = this.#clock.now();
    if (state.active > 0) state.active--;
    const released = this.#budget.release(host, now);
    const status = outcome.status;
    if (status !== undefined && this.#backoffStatuses.has(status)) {
      const sentAt = now - (outcome.durationMs ?? 0);
      const answeredWell = state.lastOkAt !== undefined && now - state.lastOkAt < this.#recentSuccessMs;
      if (sentAt >= state.blockedSince && (status === 429 || !answeredWell)) {
        this.#backOff(state, status, outcome, now);
      }
    } else if (status !== undefined) {
      state.consecutiveBackoffs = 0;
      if (status < 500) state.lastOkAt = now;
      this.#observeLatency(state, status, outcome.durationMs);
    }
    if (released instanceof Promise)
      void released.then(
        () => this.#pump(state),
        () => this.#pump(state),
      );
    else this.#pump(state);
  }

  /** Cancel every waiting request (they are deferred back to the queue) and timers. */
  close(): void {
    for (const state of this.#hosts.values()) {
      if (state.timer !== undefined) this.#clock.clearTimeout(state.timer);
      state.timer = undefined;
      for (const w of state.waiters.splice(0)) this.#settle(w, { deferMs: 0 });
    }
  }

  // ── internals ────────────────────────────────────────────────────────────────

  #afterRobots(
    state: HostState,
    url: URL,
    verdict: RobotsVerdict,
    signal: AbortSignal | undefined,
  ): GateDecision | Promise<GateDecision> {
    state.crawlDelayMs =
      verdict.crawlDelayMs === undefined ? undefined : Math.min(verdict.crawlDelayMs, this.#maxCrawlDelay);
    if (!verdict.allowed) return { drop: verdict.reason ?? `disallowed by robots.txt: ${url.pathname}` };
    return this.#acquire(state, signal);
  }

  #acquire(state: HostState, signal: AbortSignal | undefined): GateDecision | Promise<GateDecision> {
    // Requests already waiting for this host go first (FIFO).
    if (state.waiters.length === 0) {
      const now = this.#clock.now();
      const res = this.#budget.tryAcquire(state.host, this.#policy(state), now);
      if (res instanceof Promise) {
        return res.then((r) => (r.ok ? this.#granted(state) : this.#waitOrDefer(state, r, signal)));
      }
      if (res.ok) return this.#granted(state);
      return this.#waitOrDefer(state, res, signal);
    }
    return this.#waitOrDefer(state, { ok: false, retryAt: Number.POSITIVE_INFINITY }, signal);
  }

  #granted(state: HostState): undefined {
    state.active++;
    return undefined;
  }

  #waitOrDefer(
    state: HostState,
    res: Extract<AcquireResult, { ok: false }>,
    signal: AbortSignal | undefined,
  ): GateDecision | Promise<GateDecision> {
    const now = this.#clock.now();
    const wait = this.#estimateWait(state, res.retryAt, now, state.waiters.length);
    if (wait <= this.#maxWait && !signal?.aborted) {
      return new Promise<GateDecision>((resolve) => {
        const waiter: Waiter = { resolve, signal, onAbort: undefined };
        if (signal) {
          waiter.onAbort = () => {
            const i = state.waiters.indexOf(waiter);
            if (i >= 0) state.waiters.splice(i, 1);
            this.#settle(waiter, { deferMs: 0 });
          };
          signal.addEventListener('abort', waiter.onAbort, { once: true });
        }
        state.waiters.push(waiter);
        this.#armTimer(state, res.retryAt);
      });
    }
    // Defer: place it after the backlog already deferred for this host.
    const earliest = now + Math.max(this.#minDefer, Number.isFinite(wait) ? wait : this.#maxWait);
    const interval = Math.max(this.#minDefer / 10, this.#intervalOf(state));
    state.deferCursor = Math.max(earliest, state.deferCursor + interval);
    return { deferMs: Math.round(state.deferCursor - now) };
  }

  /** Milliseconds until a request behind `ahead` waiters would likely get a slot. */
  #estimateWait(state: HostState, retryAt: number, now: number, ahead: number): number {
    const interval = this.#intervalOf(state);
    const base = Number.isFinite(retryAt) ? Math.max(0, retryAt - now) : interval;
    return base + ahead * interval;
  }

  /** Typical time between two starts on this host: the gap, or latency / concurrency. */
  #intervalOf(state: HostState): number {
    const gap = this.#baseGap(state);
    const latency = state.latencyEma ?? 100;
    return Math.max(gap, latency / this.#maxConcurrency);
  }

  #baseGap(state: HostState): number {
    let gap = this.#delayMs;
    if (state.crawlDelayMs !== undefined && state.crawlDelayMs > gap) gap = state.crawlDelayMs;
    if (this.#auto && state.autoDelayMs > gap) gap = state.autoDelayMs;
    return gap;
  }

  #policy(state: HostState): { maxConcurrency: number; gapMs: number } {
    const base = this.#baseGap(state);
    // Jitter only adds: the configured delay and Crawl-delay stay minimums.
    const gapMs = base > 0 && this.#jitter > 0 ? base + this.#delayMs * this.#jitter * this.#random() : base;
    return { maxConcurrency: this.#maxConcurrency, gapMs };
  }

  #armTimer(state: HostState, at: number): void {
    if (!Number.isFinite(at)) return;
    if (state.timer !== undefined && state.timerAt <= at) return;
    if (state.timer !== undefined) this.#clock.clearTimeout(state.timer);
    state.timerAt = at;
    state.timer = this.#clock.setTimeout(
      () => {
        state.timer = undefined;
        state.timerAt = Number.POSITIVE_INFINITY;
        this.#pump(state);
      },
      Math.max(0, at - this.#clock.now()),
    );
  }

  /** Hand free slots to waiting requests, in order. */
  #pump(state: HostState): void {
    if (state.pumping) return;
    state.pumping = true;
    const step = (): void => {
      while (state.waiters.length > 0) {
        const res = this.#budget.tryAcquire(state.host, this.#policy(state), this.#clock.now());
        if (res instanceof Promise) {
          void res.then(
            (r) => {
              if (this.#afterPump(state, r)) step();
              else state.pumping = false;
            },
            () => {
              state.pumping = false;
            },
          );
          return;
        }
        if (!this.#afterPump(state, res)) break;
      }
      state.pumping = false;
    };
    step();
  }

  /** Apply one acquire result of the pump; true to keep pumping. */
  #afterPump(state: HostState, res: AcquireResult): boolean {
    if (!res.ok) {
      this.#armTimer(state, res.retryAt);
      return false;
    }
    const waiter = state.waiters.shift();
    if (!waiter) {
      // Nobody left to take it (aborted meanwhile): give the slot back.
      void this.#budget.release(state.host, this.#clock.now());
      return false;
    }
    state.active++;
    this.#settle(waiter, undefined);
    return true;
  }

  #settle(waiter: Waiter, decision: GateDecision): void {
    if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    waiter.resolve(decision);
  }

  #backOff(state: HostState, status: number, outcome: HostOutcome, now: number): void {
    state.consecutiveBackoffs++;
    let ms = outcome.retryAfterMs;
    if (ms === undefined && outcome.headers) {
      const raw = outcome.headers['retry-after'];
      ms = parseRetryAfterMs(Array.isArray(raw) ? raw[0] : raw, now);
    }
    const fromHeader = ms !== undefined;
    if (ms === undefined) ms = this.#backoffBase * 2 ** Math.min(30, state.consecutiveBackoffs - 1);
    ms = Math.min(ms, this.#backoffMax);
    const until = now + ms;
    state.blockedSince = now;
    if (until > state.blockedUntil) state.blockedUntil = until;
    void this.#budget.blockUntil(state.host, until);
    if (this.#auto) {
      state.autoDelayMs = Math.min(
        this.#auto.maxDelayMs,
        Math.max(state.autoDelayMs * 2, this.#auto.startDelayMs),
      );
    }
    if (backoffChannel.hasSubscribers) {
      const message: BackoffMessage = { host: state.host, status, until, retryAfter: fromHeader };
      backoffChannel.publish(message);
    }
  }

  /** Latency EMA and the autothrottle delay (Scrapy's AutoThrottle rule). */
  #observeLatency(state: HostState, status: number, durationMs: number | undefined): void {
    if (durationMs === undefined || !(durationMs >= 0)) return;
    state.latencyEma =
      state.latencyEma === undefined
        ? durationMs
        : state.latencyEma + LATENCY_ALPHA * (durationMs - state.latencyEma);
    const auto = this.#auto;
    if (!auto) return;
    const target = state.latencyEma / auto.targetConcurrency;
    let next = (state.autoDelayMs + target) / 2;
    next = Math.max(target, next);
    next = Math.min(Math.max(auto.minDelayMs, next), auto.maxDelayMs);
    // Error pages are small and fast: they must not talk the delay down.
    if (status >= 400 && next < state.autoDelayMs) return;
    state.autoDelayMs = next;
  }

  #state(host: string): HostState {
    // The host used last is already at the end of the LRU order (a crawl of one site asks for
    // the same host twice per request).
    if (this.#recent?.host === host) return this.#recent;
    let state = this.#hosts.get(host);
    if (state) {
      // LRU order: a used host moves to the end.
      this.#hosts.delete(host);
      this.#hosts.set(host, state);
      this.#recent = state;
      return state;
    }
    state = {
      host,
      active: 0,
      waiters: [],
      crawlDelayMs: undefined,
      autoDelayMs: this.#auto ? Math.max(this.#auto.startDelayMs, this.#auto.minDelayMs) : 0,
      latencyEma: undefined,
      consecutiveBackoffs: 0,
      blockedUntil: 0,
      blockedSince: Number.NEGATIVE_INFINITY,
      lastOkAt: undefined,
      deferCursor: 0,
      timer: undefined,
      timerAt: Number.POSITIVE_INFINITY,
      pumping: false,
    };
    this.#hosts.set(host, state);
    this.#recent = state;
    if (this.#hosts.size > this.#maxHosts) this.#evict();
    return state;
  }

  /** Forget idle hosts, least recently used first. */
  #evict(): void {
    const now = this.#clock.now();
    for (const [host, s] of this.#hosts) {
      if (this.#hosts.size <= this.#maxHosts) return;
      if (s.active === 0 && s.waiters.length === 0 && s.blockedUntil <= now && s.deferCursor <= now) {
        if (s.timer !== undefined) this.#clock.clearTimeout(s.timer);
        this.#hosts.delete(host);
        if (this.#recent === s) this.#recent = undefined;
      }
    }
  }

  #snapshot(s: HostState): HostSnapshot {
    return {
      host: s.host,
      active: s.active,
      waiting: s.waiters.length,
      delayMs: this.#baseGap(s),
      crawlDelayMs: s.crawlDelayMs,
      latencyMs: s.latencyEma,
      blockedUntil: s.blockedUntil,
      consecutiveBackoffs: s.consecutiveBackoffs,
    };
  }
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new InvalidArgumentError(`${name} must be an integer ≥ 1, got ${value}`);
  return value;
}

function positive(name: string, value: number): number {
  if (!(value > 0 && Number.isFinite(value)))
    throw new InvalidArgumentError(`${name} must be > 0, got ${value}`);
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!(value >= 0)) throw new InvalidArgumentError(`${name} must be ≥ 0, got ${value}`);
  return value;
}

export function createHostScheduler(options: HostSchedulerOptions = {}): HostScheduler {
  return new HostScheduler(options);
}
