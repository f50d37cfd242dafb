import type { RateLimit } from '../config/index.js';
import { RateWindow } from './rate-window.js';
import type { ProxyFailureReason, ProxyInfo, ProxyStats } from './types.js';

/** Weight of the newest outcome in the success average. */
const HEALTH_ALPHA = 0.2;
/** New proxies start optimistic so they get tried, but below a proven one. */
const HEALTH_START = 0.8;
/** Weight of the newest sample in the latency average. */
const LATENCY_ALPHA = 0.3;
/** A proxy this fast scores half of an instant one. */
const LATENCY_REFERENCE_MS = 1_000;
/** A failure halves the score right after it happens, and the penalty fades over about this long. */
const FAILURE_MEMORY_MS = 60_000;

/** A proxy's life inside the pool: counters, quality score and rate window. Internal. */
export class PooledProxy {
  state: 'active' | 'retired' | 'expired' = 'active';
  requests = 0;
  successes = 0;
  failures = 0;
  consecutiveFailures = 0;
  /** Exponential moving average of outcomes (1 = success), i.e. a success rate that favours the recent. */
  health = HEALTH_START;
  latencyMs: number | undefined;
  lastUsedAt: number | undefined;
  /** Pool-wide sequence number of the last use: least-recently-used order that ties never blur. */
  lastUseSeq = 0;
  lastSuccessAt: number | undefined;
  lastFailureAt: number | undefined;
  lastFailureReason: ProxyFailureReason | undefined;
  lastError: string | undefined;
  retiredAt: number | undefined;
  retiredReason: ProxyFailureReason | undefined;
  readonly window: RateWindow | undefined;

  constructor(
    readonly info: ProxyInfo,
    readonly expiresAt: number | undefined,
    readonly rateLimit: RateLimit | undefined,
  ) {
    this.window = rateLimit && new RateWindow(rateLimit.limit, rateLimit.interval);
  }

  readyAt(now: number): number {
    return this.window?.readyAt(now) ?? now;
  }

  expired(now: number): boolean {
    return this.expiresAt !== undefined && this.expiresAt <= now;
  }

  /**
   * Quality in [0, 1]: success rate (recent outcomes weigh more) × a latency factor × a
   * penalty for a recent failure that fades with time. Two proxies with the same record
   * differ by speed; a proxy that failed a moment ago waits its turn.
   */
  score(now: number): number {
    // Unknown latency scores as fast: a new proxy must get tried to be measured at all.
    const speed =
      this.latencyMs === undefined ? 1 : LATENCY_REFERENCE_MS / (LATENCY_REFERENCE_MS + this.latencyMs);
    const since = this.lastFailureAt === undefined ? Number.POSITIVE_INFINITY : now - this.lastFailureAt;
    const recency = 1 - 0.5 * Math.exp(-Math.max(0, since) / FAILURE_MEMORY_MS);
    return this.health * speed * recency;
  }

  use(now: number, seq: number): void {
    this.requests++;
    this.lastUsedAt = now;
    this.lastUseSeq = seq;
    this.window?.record(now);
  }

  succeed(now: number, latencyMs: number | undefined): void {
    this.successes++;
    this.consecutiveFailures = 0;
    this.lastSuccessAt = now;
    this.health += HEALTH_ALPHA * (1 - this.health);
    if (latencyMs !== undefined) {
      this.latencyMs =
        this.latencyMs === undefined
          ? latencyMs
          : this.latencyMs + LATENCY_ALPHA * (latencyMs - this.latencyMs);
    }
  }

  /** @param counts whether the failure counts towards retirement */
  fail(now: number, reason: ProxyFailureReason, counts: boolean, error: string | undefined): void {
    this.failures++;
    if (counts) this.consecutiveFailures++;
    this.lastFailureAt = now;
    this.lastFailureReason = reason;
    if (error !== undefined) this.lastError = error;
    this.health += HEALTH_ALPHA * (0 - this.health);
  }

  /** Back from retirement: on probation, with a clean failure streak and a modest score. */
  revive(): void {
    this.state = 'active';
    this.consecutiveFailures = 0;
    this.health = HEALTH_START / 2;
    this.retiredAt = undefined;
    this.retiredReason = undefined;
  }

  stats(now: number): ProxyStats {
    const opt = <K extends string, V>(key: K, value: V | undefined) =>
      (value === undefined ? {} : { [key]: value }) as Partial<Record<K, V>>;
    return {
      id: this.info.id,
      url: this.info.displayUrl,
      provider: this.info.provider,
      tier: this.info.tier,
      kind: this.info.kind,
      state: this.state === 'retired' ? 'retired' : 'active',
      score: Math.round(this.score(now) * 1000) / 1000,
      requests: this.requests,
      successes: this.successes,
      failures: this.failures,
      consecutiveFailures: this.consecutiveFailures,
      ...opt('latencyMs', this.latencyMs === undefined ? undefined : Math.round(this.latencyMs)),
      ...opt('rateUsed', this.window?.used(now)),
      ...opt('rateLimit', this.rateLimit),
      ...opt('lastUsedAt', this.lastUsedAt),
      ...opt('lastSuccessAt', this.lastSuccessAt),
      ...opt('lastFailureAt', this.lastFailureAt),
      ...opt('lastFailureReason', this.lastFailureReason),
      ...opt('lastError', this.lastError),
      ...opt('expiresAt', this.expiresAt),
      ...opt('retiredAt', this.retiredAt),
      ...opt('retiredReason', this.retiredReason),
    };
  }
}
