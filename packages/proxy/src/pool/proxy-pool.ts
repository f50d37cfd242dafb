import type { Dispatcher } from 'undici';
import { request } from 'undici';
import { type ProxyAddress, parseProxyAddress, parseProxyList } from '../address/index.js';
import { proxyChannels, publish } from '../channels.js';
import { type ClockTimer, type ProxyClock, systemClock } from '../clock.js';
import {
  type ProvidedProxy,
  type ProxyPoolConfig,
  parseInstant,
  parseProxyConfig,
  parseRateLimit,
  type RateLimit,
  type ResolvedProvider,
  type ResolvedProxyConfig,
} from '../config/index.js';
import { classifyProxyError } from '../dispatcher/classify-error.js';
import { ProxyDispatchers, type ProxyDispatchersOptions } from '../dispatcher/proxy-dispatchers.js';
import {
  ProxyClosedError,
  ProxyInvalidArgumentError,
  ProxyPoolEmptyError,
  ProxyProviderError,
  ProxyRateLimitedError,
} from '../errors.js';
import { PooledProxy } from './pooled-proxy.js';
import { TierTracker } from './tier-tracker.js';
import {
  type AcquireOptions,
  type HealthCheckReport,
  PROXY_FAILURE_REASONS,
  type ProviderStats,
  type ProxyFailureReason,
  ProxyInfo,
  type ProxyPoolStats,
  type ProxySelection,
  type RefillReport,
  type ReportFailureOptions,
  type ReportSuccessOptions,
} from './types.js';

/** Options of {@link createProxyPool} that are code, not configuration. */
export interface ProxyPoolOptions {
  /** Time source for expiry, rate limits, refill back-off and timers. @default systemClock */
  clock?: ProxyClock;
  /** Options for each per-proxy undici `ProxyAgent` handed out by `dispatcher()` and used by health checks. */
  agent?: ProxyDispatchersOptions['agent'];
  /** Dispatcher for fetching provider lists (directly, not through a proxy). @default undici's global dispatcher */
  fetchDispatcher?: Dispatcher;
}

/** Largest provider list body read, so a runaway provider cannot exhaust memory. */
const MAX_LIST_BYTES = 8 * 1024 * 1024;
/** Upper bound of the back-off after failed provider loads. */
const MAX_LOAD_BACKOFF_MS = 600_000;
/** Retired proxies remembered (for cooldown and stats); the oldest are forgotten first. */
const MAX_RETIRED = 10_000;
/**
 * Proxies scoring at least this fraction of the best are "good enough", and among them the
 * least recently used wins: load spreads over every good exit instead of hammering the single
 * best one. A proxy that just failed drops out of the band and drifts back in as its failure
 * penalty fades (about half a minute), gets retried, and is retired if it keeps failing.
 */
const SCORE_BAND = 0.5;
/** Sentinel session binding for the direct tier. */
const DIRECT = '';

type SourceKind = ProviderStats['kind'];

/** A provider in the broad sense: a static group, a tunnel, a text list or a function. Internal. */
interface Source {
  readonly name: string;
  readonly kind: SourceKind;
  readonly tier: number;
  readonly provider?: ResolvedProvider;
  readonly expiresAt?: number;
  active: number;
  retiredTotal: number;
  expiredTotal: number;
  requests: number;
  successes: number;
  failures: number;
  ended: boolean;
  loads: number;
  loadFailures: number;
  consecutiveLoadFailures: number;
  lastLoadAt?: number;
  nextLoadAt: number;
  lastLoadError?: string;
  invalidEntries: number;
  loading?: Promise<number> | undefined;
}

interface SelectionMeta {
  readonly entry: PooledProxy | undefined;
  readonly pinned: boolean;
  reported: boolean;
}

interface Sleeper {
  timer: ClockTimer;
  reject(err: unknown): void;
}

/**
 * A proxy pool: static proxies, tunnels and providers that load lists; quality-scored
 * selection, sticky sessions, tiered escalation per host, per-proxy rate limits, expiry,
 * refill and health checks. Time comes from an injectable clock; timers are unref'd;
 * {@link close} stops everything.
 *
 * ```
 *   acquire({ url, session }) ──▶ selection ──▶ dispatcher(selection) ──▶ request
 *                                    ▲                                       │
 *             tier per host ◀── reportSuccess(selection) / reportFailure(selection, reason)
 * ```
 */
export class ProxyPool {
  // Private: the resolved config holds proxy passwords, and a public field ends up in logs.
  readonly #config: ResolvedProxyConfig;
  readonly #clock: ProxyClock;
  readonly #fetchDispatcher: Dispatcher | undefined;
  readonly #dispatchers: ProxyDispatchers;
  readonly #sources = new Map<string, Source>();
  readonly #active = new Map<string, PooledProxy>();
  readonly #byTier = new Map<number, Set<PooledProxy>>();
  readonly #retired = new Map<string, PooledProxy>();
  readonly #sessions = new Map<string, string>();
  readonly #selections = new WeakMap<ProxySelection, SelectionMeta>();
  readonly #tiers: TierTracker;
  readonly #direct = { requests: 0, successes: 0, failures: 0 };
  readonly #sleepers = new Set<Sleeper>();
  readonly #abort = new AbortController();
  #maintenanceTimer: ClockTimer | undefined;
  #healthTimer: ClockTimer | undefined;
  #healthRun: Promise<HealthCheckReport> | undefined;
  #useSeq = 0;
  #closing: Promise<void> | undefined;

  constructor(config: ProxyPoolConfig | ResolvedProxyConfig, options: ProxyPoolOptions = {}) {
    this.#config = parseProxyConfig(config);
    this.#clock = options.clock ?? systemClock;
    this.#fetchDispatcher = options.fetchDispatcher;
    this.#dispatchers = new ProxyDispatchers(options.agent === undefined ? {} : { agent: options.agent });
    const now = this.#clock.now();

    const ladder = new Set<number>(this.#config.direct ? [0] : []);
    for (const p of this.#config.proxies) {
      const source = this.#source(p.provider, 'static', p.tier);
      this.#admit(this.#entry(parseProxyAddress(p.url), source, 'static', p.expiresAt, p.rateLimit), now);
      ladder.add(p.tier);
    }
    for (const t of this.#config.tunnels) {
      const source = this.#source(t.name, 'tunnel', t.tier, undefined, t.expiresAt);
      this.#admit(this.#entry(parseProxyAddress(t.url), source, 'tunnel', t.expiresAt, t.rateLimit), now);
      ladder.add(t.tier);
    }
    for (const p of this.#config.providers) {
      this.#source(p.name, p.kind, p.tier, p, p.expiresAt);
      ladder.add(p.tier);
    }
    this.#tiers = new TierTracker(
      [...ladder].sort((a, b) => a - b),
      this.#config.tiers,
    );
    this.#scheduleMaintenance();
    this.#scheduleHealthCheck();
  }

  /** Proxies in the pool right now (retired and expired ones excluded). */
  get size(): number {
    return this.#active.size;
  }

  /** Tiers in escalation order; `0` is the direct tier when `direct` is on. */
  get tiers(): readonly number[] {
    return this.#tiers.ladder;
  }

  /** Whether {@link close} was called. */
  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * Picks a proxy (or the direct tier) for one request and counts it against the proxy's rate
   * limit. Tier: the host's current tier (see `tiers` in the config) unless `provider` or `tier`
   * pins it; a tier with no proxy left falls through to the next tier up, then down. Within a
   * tier: the session's sticky proxy if it has one, else the best-scoring proxy, the least
   * recently used among near-equals. When every proxy of the tier is at its rate limit, waits
   * (up to `maxWait`) for the first to free up.
   *
   * @throws {ProxyPoolEmptyError} nothing can serve the request, even after a refill
   * @throws {ProxyRateLimitedError} (retryable) the wait would exceed `maxWait`
   * @throws {ProxyInvalidArgumentError} unknown `provider` or `tier`
   */
  async acquire(options: AcquireOptions = {}): Promise<ProxySelection> {
    this.#assertOpen();
    this.#checkAcquireOptions(options);
    const scope = scopeOf(options);
    const maxWait = options.maxWait ?? this.#config.maxWait;
    const started = this.#clock.now();
    let refilled = false;
    for (;;) {
      options.signal?.throwIfAborted();
      this.#assertOpen();
      const now = this.#clock.now();
      const picked = this.#pick(options, scope, now);
      if (picked.selection) {
        this.#refillBelowThreshold(now);
        return picked.selection;
      }
      if (picked.readyAt !== undefined) {
        if (picked.readyAt - started > maxWait) throw new ProxyRateLimitedError(picked.readyAt - now, scope);
        await this.#sleep(picked.readyAt - now, options.signal);
        continue;
      }
      if (!refilled && this.#canLoad(options, now)) {
        refilled = true;
        await this.refill();
        continue;
      }
      throw new ProxyPoolEmptyError(this.#emptyMessage(options), scope, { retryable: this.#mayRecover() });
    }
  }

  /**
   * The undici dispatcher that sends a request through the selection's proxy (a `ProxyAgent`
   * pooled per proxy URL), or `undefined` for the direct tier: use your default dispatcher.
   */
  dispatcher(target: ProxySelection | ProxyInfo): Dispatcher | undefined {
    this.#assertOpen();
    const info = target instanceof ProxyInfo ? target : target.proxy;
    return info === undefined ? undefined : this.#dispatchers.get(info.url);
  }

  /**
   * Records a success: raises the proxy's score and latency average, clears its failure
   * streak, and counts towards stepping the host down a tier. A second report of the same
   * selection, or any report after `close()`, is ignored.
   */
  reportSuccess(target: ProxySelection | ProxyInfo, options: ReportSuccessOptions = {}): void {
    if (options.latencyMs !== undefined && !(Number.isFinite(options.latencyMs) && options.latencyMs >= 0)) {
      throw new ProxyInvalidArgumentError(`latencyMs must be a finite number ≥ 0, got ${options.latencyMs}`);
    }
    if (this.closed) return;
    const now = this.#clock.now();
    const resolved = this.#resolveTarget(target);
    if (resolved === undefined) return;
    const { entry, selection, meta } = resolved;
    const latency = options.latencyMs ?? (selection ? Math.max(0, now - selection.acquiredAt) : undefined);
    if (entry) {
      entry.succeed(now, latency);
      const source = this.#sources.get(entry.info.provider);
      if (source) source.successes++;
    } else {
      this.#direct.successes++;
    }
    if (selection && meta && !meta.pinned)
      this.#tierChanged(this.#tiers.onSuccess(selection.scope, selection.tier));
  }

  /**
   * Records a failure with its reason (see {@link ProxyFailureReason}; {@link classifyProxyError}
   * maps undici errors). The proxy's score drops; after `maxErrors` failures in a row it is
   * retired (`auth` retires at once). For a tunnel only `connect` and `auth` count towards
   * retiring, since its exit IP changes per connection. `blocked`, `timeout` and `error` count
   * towards moving the host up a tier (for the direct tier, every reason does); `connect` and
   * `auth` blame the proxy, not the tier.
   */
  reportFailure(
    target: ProxySelection | ProxyInfo,
    reason: ProxyFailureReason,
    options: ReportFailureOptions = {},
  ): void {
    if (!PROXY_FAILURE_REASONS.includes(reason)) {
      throw new ProxyInvalidArgumentError(
        `reason must be one of ${PROXY_FAILURE_REASONS.join(', ')}, got ${JSON.stringify(reason)}`,
      );
    }
    if (this.closed) return;
    const now = this.#clock.now();
    const resolved = this.#resolveTarget(target);
    if (resolved === undefined) return;
    const { entry, selection, meta } = resolved;
    const message =
      options.error instanceof Error
        ? options.error.message
        : options.status !== undefined
          ? `HTTP ${options.status}`
          : undefined;
    if (entry) this.#recordFailure(entry, reason, now, message);
    else this.#direct.failures++;
    if (selection && meta && !meta.pinned) {
      const escalates = entry === undefined || (reason !== 'connect' && reason !== 'auth');
      if (escalates) this.#tierChanged(this.#tiers.onFailure(selection.scope, selection.tier));
    }
  }

  /** The tier a host (or other scope) would use now. */
  tierFor(scope: string): number {
    return this.#tiers.current(scope);
  }

  /**
   * Loads from every list or function provider that has room (fewer than `maxSize` active) and
   * is not waiting out a back-off (`force` ignores the back-off and `minLoadInterval`). Loads
   * already running are joined, not repeated. Failures are returned, recorded in `stats()` and
   * published on `mocra:proxy:loaded`; they do not throw.
   */
  async refill(options: { force?: boolean } = {}): Promise<RefillReport> {
    this.#assertOpen();
    const now = this.#clock.now();
    const jobs: Promise<number>[] = [];
    for (const source of this.#sources.values()) {
      if (source.provider === undefined) continue;
      this.#endIfExpired(source, now);
      if (source.ended) continue;
      if (source.loading) jobs.push(source.loading);
      else if (source.active < source.provider.maxSize && (options.force || source.nextLoadAt <= now)) {
        jobs.push(this.#load(source));
      }
    }
    const results = await Promise.allSettled(jobs);
    let added = 0;
    const errors: Error[] = [];
    for (const r of results) {
      if (r.status === 'fulfilled') added += r.value;
      else errors.push(r.reason instanceof Error ? r.reason : new Error(String(r.reason)));
    }
    return { added, errors };
  }

  /**
   * One round of health checks now: requests the configured check URL through every active
   * proxy (bounded concurrency) and records each outcome like a report, so a dead proxy is
   * retired after `maxErrors` failed rounds. Joins a round already running.
   *
   * @throws {ProxyInvalidArgumentError} when no `healthCheck` is configured
   */
  checkHealth(): Promise<HealthCheckReport> {
    this.#assertOpen();
    const hc = this.#config.healthCheck;
    if (hc === undefined) throw new ProxyInvalidArgumentError('no healthCheck is configured');
    this.#healthRun ??= this.#runHealthCheck(hc).finally(() => {
      this.#healthRun = undefined;
    });
    return this.#healthRun;
  }

  /** A JSON-safe snapshot for the dashboard and metrics: per proxy, per provider, tiers, sessions. */
  stats(): ProxyPoolStats {
    const now = this.#clock.now();
    const retiredBySource = new Map<string, number>();
    for (const e of this.#retired.values()) {
      retiredBySource.set(e.info.provider, (retiredBySource.get(e.info.provider) ?? 0) + 1);
    }
    const providers: ProviderStats[] = [...this.#sources.values()].map((s) => {
      const loaded = s.provider !== undefined;
      return {
        name: s.name,
        kind: s.kind,
        tier: s.tier,
        active: s.active,
        retired: retiredBySource.get(s.name) ?? 0,
        retiredTotal: s.retiredTotal,
        expiredTotal: s.expiredTotal,
        requests: s.requests,
        successes: s.successes,
        failures: s.failures,
        ended: s.ended,
        ...(s.expiresAt === undefined ? {} : { expiresAt: s.expiresAt }),
        ...(loaded
          ? {
              loads: s.loads,
              loadFailures: s.loadFailures,
              nextLoadAt: s.nextLoadAt,
              invalidEntries: s.invalidEntries,
              ...(s.lastLoadAt === undefined ? {} : { lastLoadAt: s.lastLoadAt }),
              ...(s.lastLoadError === undefined ? {} : { lastLoadError: s.lastLoadError }),
            }
          : {}),
      };
    });
    return {
      at: now,
      active: this.#active.size,
      retired: this.#retired.size,
      ...(this.#config.direct ? { direct: { ...this.#direct } } : {}),
      providers,
      proxies: [...this.#active.values(), ...this.#retired.values()].map((e) => e.stats(now)),
      tiers: {
        ladder: this.#tiers.ladder,
        scopes: this.#tiers.size,
        scopesByTier: this.#tiers.distribution(),
      },
      sessions: this.#sessions.size,
    };
  }

  /**
   * Stops timers, aborts provider loads and health checks, rejects waiting `acquire()` calls
   * with {@link ProxyClosedError}, and closes every proxy agent. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    if (this.#maintenanceTimer !== undefined) this.#clock.clearTimeout(this.#maintenanceTimer);
    if (this.#healthTimer !== undefined) this.#clock.clearTimeout(this.#healthTimer);
    this.#maintenanceTimer = undefined;
    this.#healthTimer = undefined;
    this.#abort.abort(new ProxyClosedError());
    for (const sleeper of this.#sleepers) {
      this.#clock.clearTimeout(sleeper.timer);
      sleeper.reject(new ProxyClosedError());
    }
    this.#sleepers.clear();
    const pending = [...this.#sources.values()].flatMap((s) => (s.loading ? [s.loading] : []));
    if (this.#healthRun) pending.push(this.#healthRun.then(() => 0));
    await Promise.allSettled(pending);
    await this.#dispatchers.close();
  }

  // ── selection ────────────────────────────────────────────────────────────────────────────

  #checkAcquireOptions(options: AcquireOptions): void {
    if (options.provider !== undefined && !this.#sources.has(options.provider)) {
      throw new ProxyInvalidArgumentError(
        `unknown provider '${options.provider}' (known: ${[...this.#sources.keys()].join(', ') || 'none'})`,
      );
    }
    if (options.tier !== undefined && !this.#tiers.ladder.includes(options.tier)) {
      throw new ProxyInvalidArgumentError(
        `unknown tier ${options.tier} (tiers: ${this.#tiers.ladder.join(', ')})`,
      );
    }
    if (options.maxWait !== undefined && !(Number.isFinite(options.maxWait) && options.maxWait >= 0)) {
      throw new ProxyInvalidArgumentError(`maxWait must be a finite number ≥ 0, got ${options.maxWait}`);
    }
  }

  /** Tiers to try, in order: the scope's tier, then up, then down; or the pinned one. */
  #tierOrder(options: AcquireOptions, scope: string): number[] {
    if (options.tier !== undefined) return [options.tier];
    if (options.provider !== undefined) return [this.#sources.get(options.provider)!.tier];
    const ladder = this.#tiers.ladder;
    const at = ladder.indexOf(this.#tiers.current(scope));
    return [...ladder.slice(at), ...ladder.slice(0, at).reverse()];
  }

  #pick(
    options: AcquireOptions,
    scope: string,
    now: number,
  ): { selection?: ProxySelection; readyAt?: number } {
    const session = options.session;
    const bound = session === undefined ? undefined : this.#sessions.get(session);
    const pinned = options.tier !== undefined || options.provider !== undefined;
    for (const tier of this.#tierOrder(options, scope)) {
      if (tier === 0 && this.#config.direct && options.provider === undefined) {
        return { selection: this.#select(undefined, tier, scope, session, pinned, now) };
      }
      const candidates = this.#byTier.get(tier);
      if (candidates === undefined) continue;
      let any = false;
      let readyAt = Number.POSITIVE_INFINITY;
      let best: PooledProxy | undefined;
      let bestScore = -1;
      const ready: Array<{ entry: PooledProxy; score: number }> = [];
      // Deleting the current element while iterating a Set is safe (expiry below does).
      for (const entry of candidates) {
        if (options.provider !== undefined && entry.info.provider !== options.provider) continue;
        if (entry.expired(now)) {
          this.#expire(entry);
          continue;
        }
        any = true;
        const at = entry.readyAt(now);
        if (entry.info.id === bound) {
          // Sticky: keep the session on its proxy even when it must wait for it.
          if (at > now) return { readyAt: at };
          return { selection: this.#select(entry, tier, scope, session, pinned, now) };
        }
        if (at > now) {
          readyAt = Math.min(readyAt, at);
          continue;
        }
        const score = entry.score(now);
        ready.push({ entry, score });
        if (score > bestScore) bestScore = score;
      }
      if (!any) continue;
      for (const c of ready) {
        if (c.score < bestScore * SCORE_BAND) continue;
        if (best === undefined || c.entry.lastUseSeq < best.lastUseSeq) best = c.entry;
      }
      if (best !== undefined) return { selection: this.#select(best, tier, scope, session, pinned, now) };
      return { readyAt };
    }
    return {};
  }

  #select(
    entry: PooledProxy | undefined,
    tier: number,
    scope: string,
    session: string | undefined,
    pinned: boolean,
    now: number,
  ): ProxySelection {
    if (entry) {
      entry.use(now, ++this.#useSeq);
      const source = this.#sources.get(entry.info.provider);
      if (source) source.requests++;
    } else {
      this.#direct.requests++;
    }
    if (session !== undefined) this.#bind(session, entry?.info.id ?? DIRECT);
    const selection: ProxySelection = Object.freeze({
      proxy: entry?.info,
      tier,
      scope,
      session,
      acquiredAt: now,
    });
    this.#selections.set(selection, { entry, pinned, reported: false });
    return selection;
  }

  #bind(session: string, id: string): void {
    this.#sessions.delete(session);
    this.#sessions.set(session, id);
    if (this.#sessions.size > this.#config.maxSessions) {
      const oldest = this.#sessions.keys().next();
      if (!oldest.done) this.#sessions.delete(oldest.value);
    }
  }

  #resolveTarget(
    target: ProxySelection | ProxyInfo,
  ): { entry: PooledProxy | undefined; selection?: ProxySelection; meta?: SelectionMeta } | undefined {
    if (target instanceof ProxyInfo) {
      const entry = this.#active.get(target.id) ?? this.#retired.get(target.id);
      return entry === undefined ? undefined : { entry };
    }
    const meta = this.#selections.get(target);
    if (meta === undefined) {
      if (target.proxy === undefined) return undefined;
      return this.#resolveTarget(target.proxy);
    }
    if (meta.reported) return undefined;
    meta.reported = true;
    return { entry: meta.entry, selection: target, meta };
  }

  /** @returns whether the failure retired the proxy */
  #recordFailure(
    entry: PooledProxy,
    reason: ProxyFailureReason,
    now: number,
    message: string | undefined,
  ): boolean {
    // A tunnel's exit IP changes per connection: only failures of the tunnel itself count.
    const counts = entry.info.kind !== 'tunnel' || reason === 'connect' || reason === 'auth';
    entry.fail(now, reason, counts, message);
    const source = this.#sources.get(entry.info.provider);
    if (source) source.failures++;
    if (
      entry.state === 'active' &&
      (reason === 'auth' || entry.consecutiveFailures >= this.#config.maxErrors)
    ) {
      this.#retire(entry, reason, now);
      return true;
    }
    return false;
  }

  #tierChanged(change: { scope: string; from: number; to: number } | undefined): void {
    if (change) publish(proxyChannels.tierChanged, change);
  }

  #emptyMessage(options: AcquireOptions): string {
    const what =
      options.provider !== undefined
        ? `provider '${options.provider}'`
        : options.tier !== undefined
          ? `tier ${options.tier}`
          : 'any tier';
    return `no proxy available for ${what}: ${this.#active.size} active, ${this.#retired.size} retired`;
  }

  /** Whether waiting can bring proxies back: a provider that may load, or a retiree that may return. */
  #mayRecover(): boolean {
    for (const source of this.#sources.values())
      if (source.provider !== undefined && !source.ended) return true;
    if (this.#config.retiredCooldown === 0) return false;
    for (const entry of this.#retired.values()) if (entry.info.kind !== 'provided') return true;
    return false;
  }

  #sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.#clock.clearTimeout(sleeper.timer);
        this.#sleepers.delete(sleeper);
        reject(signal?.reason);
      };
      const sleeper: Sleeper = {
        timer: this.#clock.setTimeout(
          () => {
            this.#sleepers.delete(sleeper);
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
          Math.max(0, ms),
        ),
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      this.#sleepers.add(sleeper);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  // ── membership: admit, retire, expire, revive ───────────────────────────────────────────

  #source(
    name: string,
    kind: SourceKind,
    tier: number,
    provider?: ResolvedProvider,
    expiresAt?: number,
  ): Source {
    let source = this.#sources.get(name);
    if (source === undefined) {
      source = {
        name,
        kind,
        tier,
        ...(provider === undefined ? {} : { provider }),
        ...(expiresAt === undefined ? {} : { expiresAt }),
        active: 0,
        retiredTotal: 0,
        expiredTotal: 0,
        requests: 0,
        successes: 0,
        failures: 0,
        ended: false,
        loads: 0,
        loadFailures: 0,
        consecutiveLoadFailures: 0,
        nextLoadAt: 0,
        invalidEntries: 0,
      };
      this.#sources.set(name, source);
    }
    return source;
  }

  #entry(
    address: ProxyAddress,
    source: Source,
    kind: 'static' | 'tunnel' | 'provided',
    expiresAt: number | undefined,
    rateLimit: RateLimit | undefined,
  ): PooledProxy {
    const info = new ProxyInfo({
      url: address.url,
      id: address.id,
      displayUrl: address.displayUrl,
      protocol: address.protocol,
      host: address.host,
      port: address.port,
      provider: source.name,
      tier: source.tier,
      kind,
    });
    return new PooledProxy(info, expiresAt, rateLimit);
  }

  #admit(entry: PooledProxy, now: number): boolean {
    if (this.#active.has(entry.info.id) || entry.expired(now)) return false;
    this.#active.set(entry.info.id, entry);
    let tier = this.#byTier.get(entry.info.tier);
    if (tier === undefined) {
      tier = new Set();
      this.#byTier.set(entry.info.tier, tier);
    }
    tier.add(entry);
    this.#sources.get(entry.info.provider)!.active++;
    return true;
  }

  #remove(entry: PooledProxy): void {
    if (!this.#active.delete(entry.info.id)) return;
    this.#byTier.get(entry.info.tier)?.delete(entry);
    this.#sources.get(entry.info.provider)!.active--;
    void this.#dispatchers.release(entry.info.url).catch(() => {});
  }

  #retire(entry: PooledProxy, reason: ProxyFailureReason, now: number): void {
    this.#remove(entry);
    entry.state = 'retired';
    entry.retiredAt = now;
    entry.retiredReason = reason;
    this.#retired.delete(entry.info.id);
    this.#retired.set(entry.info.id, entry);
    if (this.#retired.size > MAX_RETIRED) {
      const oldest = this.#retired.keys().next();
      if (!oldest.done) this.#retired.delete(oldest.value);
    }
    this.#sources.get(entry.info.provider)!.retiredTotal++;
    publish(proxyChannels.retired, {
      id: entry.info.id,
      provider: entry.info.provider,
      reason,
      consecutiveFailures: entry.consecutiveFailures,
    });
    this.#refillBelowThreshold(now);
  }

  #expire(entry: PooledProxy): void {
    this.#remove(entry);
    entry.state = 'expired';
    this.#sources.get(entry.info.provider)!.expiredTotal++;
    publish(proxyChannels.expired, { id: entry.info.id, provider: entry.info.provider });
  }

  #endIfExpired(source: Source, now: number): void {
    if (source.ended || source.expiresAt === undefined || source.expiresAt > now) return;
    source.ended = true;
    for (const entry of [...this.#active.values()])
      if (entry.info.provider === source.name) this.#expire(entry);
  }

  // ── maintenance: expiry, revival, refill ────────────────────────────────────────────────

  #scheduleMaintenance(): void {
    if (this.closed) return;
    this.#maintenanceTimer = this.#clock.setTimeout(() => {
      this.#maintenanceTimer = undefined;
      if (this.closed) return;
      this.#maintain(this.#clock.now());
      this.#scheduleMaintenance();
    }, this.#config.maintenanceInterval);
  }

  #maintain(now: number): void {
    for (const source of this.#sources.values()) this.#endIfExpired(source, now);
    for (const entry of [...this.#active.values()]) if (entry.expired(now)) this.#expire(entry);
    const cooldown = this.#config.retiredCooldown;
    if (cooldown > 0) {
      // Insertion order is retirement order, so the first entry not yet due ends the scan.
      for (const entry of [...this.#retired.values()]) {
        if (entry.retiredAt! + cooldown > now) break;
        this.#retired.delete(entry.info.id);
        const source = this.#sources.get(entry.info.provider)!;
        if (entry.info.kind === 'provided' || source.ended || entry.expired(now)) continue;
        entry.revive();
        if (this.#admit(entry, now))
          publish(proxyChannels.revived, { id: entry.info.id, provider: source.name });
      }
    }
    this.#refillBelowThreshold(now);
  }

  /** Starts (without awaiting) a load from each provider below its refill threshold. */
  #refillBelowThreshold(now: number): void {
    if (this.closed) return;
    for (const source of this.#sources.values()) {
      const p = source.provider;
      if (p === undefined || source.loading || source.nextLoadAt > now) continue;
      this.#endIfExpired(source, now);
      if (source.ended) continue;
      const threshold = Math.max(p.minSize, Math.ceil(this.#config.refillThreshold * p.maxSize));
      if (source.active < threshold) this.#load(source).catch(() => {});
    }
  }

  #canLoad(options: AcquireOptions, now: number): boolean {
    for (const source of this.#sources.values()) {
      if (source.provider === undefined || source.ended) continue;
      if (options.provider !== undefined && source.name !== options.provider) continue;
      if (options.tier !== undefined && source.tier !== options.tier) continue;
      if (source.expiresAt !== undefined && source.expiresAt <= now) continue;
      if (source.loading || source.nextLoadAt <= now) return true;
    }
    return false;
  }

  #load(source: Source): Promise<number> {
    if (source.loading) return source.loading;
    const provider = source.provider!;
    const want = provider.maxSize - source.active;
    if (want <= 0) return Promise.resolve(0);
    const run = async (): Promise<number> => {
      try {
        const loaded =
          provider.kind === 'list'
            ? await this.#fetchList(provider)
            : {
                items: await provider.load({ provider: provider.name, want, signal: this.#abort.signal }),
                invalid: 0,
              };
        if (this.closed) return 0;
        const now = this.#clock.now();
        const added = this.#addLoaded(source, provider, loaded.items, now);
        added.invalid += loaded.invalid;
        source.invalidEntries += added.invalid;
        source.loads++;
        source.lastLoadAt = now;
        source.consecutiveLoadFailures = 0;
        source.nextLoadAt = now + provider.minLoadInterval;
        publish(proxyChannels.loaded, { provider: source.name, added: added.added, invalid: added.invalid });
        return added.added;
      } catch (err) {
        const error =
          err instanceof ProxyProviderError
            ? err
            : new ProxyProviderError(
                source.name,
                err instanceof Error ? err.message : String(err),
                undefined,
                {
                  cause: err,
                },
              );
        const now = this.#clock.now();
        source.loadFailures++;
        source.consecutiveLoadFailures++;
        source.lastLoadError = error.message;
        const backoff = Math.max(1_000, provider.minLoadInterval) * 2 ** (source.consecutiveLoadFailures - 1);
        source.nextLoadAt = now + Math.min(MAX_LOAD_BACKOFF_MS, backoff);
        publish(proxyChannels.loaded, { provider: source.name, added: 0, invalid: 0, error: error.message });
        throw error;
      }
    };
    // `finally` runs as a later microtask, after `loading` is assigned, even when `load` throws
    // synchronously; so a finished load can never stay behind as the "running" one.
    const loading: Promise<number> = run().finally(() => {
      if (source.loading === loading) source.loading = undefined;
    });
    source.loading = loading;
    return loading;
  }

  async #fetchList(
    provider: ResolvedProvider & { kind: 'list' },
  ): Promise<{ items: string[]; invalid: number }> {
    const signal = AbortSignal.any([this.#abort.signal, AbortSignal.timeout(provider.timeout)]);
    const res = await request(provider.url, {
      method: 'GET',
      headers: provider.headers,
      signal,
      headersTimeout: provider.timeout,
      bodyTimeout: provider.timeout,
      ...(this.#fetchDispatcher === undefined ? {} : { dispatcher: this.#fetchDispatcher }),
    });
    if (res.statusCode < 200 || res.statusCode >= 300) {
      await res.body.dump().catch(() => {});
      throw new ProxyProviderError(provider.name, `list URL answered HTTP ${res.statusCode}`, res.statusCode);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > MAX_LIST_BYTES) {
        res.body.destroy();
        throw new ProxyProviderError(provider.name, `list is larger than ${MAX_LIST_BYTES} bytes`);
      }
      chunks.push(buf);
    }
    const parsed = parseProxyList(Buffer.concat(chunks).toString('utf8'), provider.protocol);
    return { items: parsed.proxies.map((p) => p.url), invalid: parsed.invalid };
  }

  #addLoaded(
    source: Source,
    provider: ResolvedProvider,
    items: Iterable<string | ProvidedProxy>,
    now: number,
  ): { added: number; invalid: number } {
    let added = 0;
    let invalid = 0;
    const room = provider.maxSize - source.active;
    for (const item of items) {
      if (added >= room) break;
      let address: ProxyAddress;
      let expiresAt = provider.proxyTtl === undefined ? provider.expiresAt : now + provider.proxyTtl;
      let rateLimit = provider.rateLimit;
      try {
        if (typeof item === 'string') {
          address = parseProxyAddress(item, provider.protocol);
        } else {
          // Entries from user code are untrusted input too: validate them like config.
          address = parseProxyAddress(item.url, provider.protocol);
          if (item.expiresAt !== undefined) expiresAt = parseInstant(item.expiresAt);
          if (item.rateLimit !== undefined) rateLimit = parseRateLimit(item.rateLimit);
        }
      } catch {
        invalid++;
        continue;
      }
      if (this.#retired.has(address.id) || this.#active.has(address.id)) continue;
      if (provider.expiresAt !== undefined && (expiresAt === undefined || expiresAt > provider.expiresAt)) {
        expiresAt = provider.expiresAt;
      }
      if (this.#admit(this.#entry(address, source, 'provided', expiresAt, rateLimit), now)) added++;
    }
    return { added, invalid };
  }

  // ── health checks ───────────────────────────────────────────────────────────────────────

  #scheduleHealthCheck(): void {
    const hc = this.#config.healthCheck;
    if (hc === undefined || hc.interval <= 0 || this.closed) return;
    this.#healthTimer = this.#clock.setTimeout(() => {
      this.#healthTimer = undefined;
      if (this.closed) return;
      // The next round is scheduled when this one ends, so slow rounds never overlap.
      this.checkHealth()
        .catch(() => {})
        .finally(() => this.#scheduleHealthCheck());
    }, hc.interval);
  }

  async #runHealthCheck(hc: NonNullable<ResolvedProxyConfig['healthCheck']>): Promise<HealthCheckReport> {
    const queue = [...this.#active.values()];
    let healthy = 0;
    let failed = 0;
    const retired: string[] = [];
    const worker = async () => {
      for (let entry = queue.shift(); entry !== undefined; entry = queue.shift()) {
        if (this.closed) return;
        const outcome = await this.#probe(entry, hc);
        if (this.closed || entry.state !== 'active') continue;
        const now = this.#clock.now();
        if (outcome.ok) {
          healthy++;
          entry.succeed(now, outcome.latencyMs);
        } else {
          failed++;
          if (this.#recordFailure(entry, outcome.reason, now, outcome.message)) retired.push(entry.info.id);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(hc.concurrency, queue.length) }, worker));
    const report = { checked: healthy + failed, healthy, failed, retired };
    publish(proxyChannels.healthCheck, report);
    return report;
  }

  async #probe(
    entry: PooledProxy,
    hc: NonNullable<ResolvedProxyConfig['healthCheck']>,
  ): Promise<{ ok: true; latencyMs: number } | { ok: false; reason: ProxyFailureReason; message: string }> {
    // Latency is network time, so it is measured on the monotonic clock, not the pool clock.
    const started = performance.now();
    try {
      const res = await request(hc.url, {
        method: 'GET',
        dispatcher: this.#dispatchers.get(entry.info.url),
        signal: AbortSignal.any([this.#abort.signal, AbortSignal.timeout(hc.timeout)]),
        headersTimeout: hc.timeout,
        bodyTimeout: hc.timeout,
      });
      await res.body.dump({ limit: 1024 * 1024 }).catch(() => {});
      if (res.statusCode >= 200 && res.statusCode < 400) {
        return { ok: true, latencyMs: performance.now() - started };
      }
      return {
        ok: false,
        reason: res.statusCode === 407 ? 'auth' : 'error',
        message: `health check answered HTTP ${res.statusCode}`,
      };
    } catch (err) {
      return {
        ok: false,
        reason: classifyProxyError(err),
        message: err instanceof Error ? err.message : String(err),
      };
    }
  }

  #assertOpen(): void {
    if (this.closed) throw new ProxyClosedError();
  }
}

function scopeOf(options: AcquireOptions): string {
  if (options.host !== undefined) return options.host.toLowerCase();
  if (options.url !== undefined) {
    try {
      return (typeof options.url === 'string' ? new URL(options.url) : options.url).hostname;
    } catch {
      throw new ProxyInvalidArgumentError(`url is not a valid URL: ${String(options.url)}`);
    }
  }
  return options.session ?? '*';
}

/** Creates a pool from a config object (validated: see `parseProxyConfig`) and code options. */
export function createProxyPool(
  config: ProxyPoolConfig | ResolvedProxyConfig,
  options: ProxyPoolOptions = {},
): ProxyPool {
  return new ProxyPool(config, options);
}
