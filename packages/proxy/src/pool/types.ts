import type { ProxyProtocol } from '../address/index.js';

/** Why a request through a proxy (or direct) failed. */
export type ProxyFailureReason =
  /** The proxy could not be reached, reset the connection, or refused the tunnel. */
  | 'connect'
  /** The proxy rejected the credentials (HTTP 407, SOCKS5 auth). Retires the proxy at once. */
  | 'auth'
  /** Connecting, waiting for headers or reading the body took too long. */
  | 'timeout'
  /** The target refused this exit (403, 429, a captcha page): the caller's judgement. */
  | 'blocked'
  /** Anything else. */
  | 'error';

export const PROXY_FAILURE_REASONS: readonly ProxyFailureReason[] = [
  'connect',
  'auth',
  'timeout',
  'blocked',
  'error',
];

/** Where a proxy came from. */
export type ProxyKind = 'static' | 'tunnel' | 'provided';

/** Options of `ProxyPool.acquire()`. */
export interface AcquireOptions {
  /**
   * Sticky key (a session or an account): while its proxy stays in the pool and on the tier
   * the scope uses, the key gets the same proxy, waiting for it if it is rate-limited.
   */
  session?: string;
  /** The request's URL; its host is the tier scope unless `host` is given. */
  url?: string | URL;
  /** Tier scope: escalation is tracked per host. @default host of `url`, else `session`, else '*' */
  host?: string;
  /** Only proxies of this provider (no tier escalation). */
  provider?: string;
  /** Only this tier (no escalation); `0` is the direct tier when `direct` is on. */
  tier?: number;
  /** Aborts a wait for a rate-limited proxy. */
  signal?: AbortSignal;
  /** Longest wait for a rate-limited proxy, in ms. @default the pool's `maxWait` */
  maxWait?: number;
}

/** What `acquire()` hands out: report its outcome with `reportSuccess` / `reportFailure`. */
export interface ProxySelection {
  /** The proxy to use, or `undefined` for the direct tier (no proxy). */
  readonly proxy: ProxyInfo | undefined;
  readonly tier: number;
  /** The tier scope the outcome is counted against. */
  readonly scope: string;
  readonly session: string | undefined;
  /** Pool clock time of the acquisition; latency defaults to the time since. */
  readonly acquiredAt: number;
}

export interface ReportSuccessOptions {
  /** Request latency. @default pool clock time since `acquiredAt` */
  latencyMs?: number;
}

export interface ReportFailureOptions {
  /** HTTP status that made it a failure, for stats. */
  status?: number;
  /** The error, for stats (its message is kept, never the object). */
  error?: unknown;
}

/** What `JSON.stringify` shows of a {@link ProxyInfo}: everything but the credentials. */
export interface ProxyInfoJSON {
  readonly id: string;
  readonly displayUrl: string;
  readonly protocol: ProxyProtocol;
  readonly host: string;
  readonly port: number;
  readonly provider: string;
  readonly tier: number;
  readonly kind: ProxyKind;
}

/**
 * One proxy. The dialable URL (with its password) is reachable only through the `url` getter:
 * `JSON.stringify`, `console.log` and the dashboard see `displayUrl`, so credentials do not leak
 * into logs by accident.
 */
export class ProxyInfo {
  readonly id: string;
  readonly displayUrl: string;
  readonly protocol: ProxyProtocol;
  readonly host: string;
  readonly port: number;
  readonly provider: string;
  readonly tier: number;
  readonly kind: ProxyKind;
  readonly #url: string;

  constructor(fields: {
    url: string;
    id: string;
    displayUrl: string;
    protocol: ProxyProtocol;
    host: string;
    port: number;
    provider: string;
    tier: number;
    kind: ProxyKind;
  }) {
    this.#url = fields.url;
    this.id = fields.id;
    this.displayUrl = fields.displayUrl;
    this.protocol = fields.protocol;
    this.host = fields.host;
    this.port = fields.port;
    this.provider = fields.provider;
    this.tier = fields.tier;
    this.kind = fields.kind;
    Object.freeze(this);
  }

  /** Dialable URL including credentials, e.g. for `new ProxyAgent(info.url)`. */
  get url(): string {
    return this.#url;
  }

  toString(): string {
    return this.displayUrl;
  }

  toJSON(): ProxyInfoJSON {
    return {
      id: this.id,
      displayUrl: this.displayUrl,
      protocol: this.protocol,
      host: this.host,
      port: this.port,
      provider: this.provider,
      tier: this.tier,
      kind: this.kind,
    };
  }
}

/** One proxy in `stats()`. */
export interface ProxyStats {
  readonly id: string;
  readonly url: string;
  readonly provider: string;
  readonly tier: number;
  readonly kind: ProxyKind;
  readonly state: 'active' | 'retired';
  /** Quality score in [0, 1] from success rate, latency and recent failures. */
  readonly score: number;
  readonly requests: number;
  readonly successes: number;
  readonly failures: number;
  readonly consecutiveFailures: number;
  /** Moving average of reported latencies. */
  readonly latencyMs?: number;
  /** Requests started inside the current rate-limit window. */
  readonly rateUsed?: number;
  readonly rateLimit?: { readonly limit: number; readonly interval: number };
  readonly lastUsedAt?: number;
  readonly lastSuccessAt?: number;
  readonly lastFailureAt?: number;
  readonly lastFailureReason?: ProxyFailureReason;
  readonly lastError?: string;
  readonly expiresAt?: number;
  readonly retiredAt?: number;
  readonly retiredReason?: ProxyFailureReason;
}

/** One provider (static group, tunnel, text list or function) in `stats()`. */
export interface ProviderStats {
  readonly name: string;
  readonly kind: 'static' | 'tunnel' | 'list' | 'function';
  readonly tier: number;
  readonly active: number;
  /** Retired proxies still cooling down. */
  readonly retired: number;
  /** Proxies retired since the pool started. */
  readonly retiredTotal: number;
  /** Proxies expired since the pool started. */
  readonly expiredTotal: number;
  readonly requests: number;
  readonly successes: number;
  readonly failures: number;
  /** The provider passed its `expiresAt`. */
  readonly ended: boolean;
  readonly expiresAt?: number;
  /** Loads (list and function providers). */
  readonly loads?: number;
  readonly loadFailures?: number;
  readonly lastLoadAt?: number;
  readonly nextLoadAt?: number;
  readonly lastLoadError?: string;
  /** Entries skipped because they did not parse. */
  readonly invalidEntries?: number;
}

/** A JSON-safe snapshot for the dashboard and metrics. */
export interface ProxyPoolStats {
  /** Pool clock time of the snapshot. */
  readonly at: number;
  readonly active: number;
  readonly retired: number;
  readonly direct?: { readonly requests: number; readonly successes: number; readonly failures: number };
  readonly providers: readonly ProviderStats[];
  readonly proxies: readonly ProxyStats[];
  readonly tiers: {
    readonly ladder: readonly number[];
    /** Scopes (hosts) remembered, and how many sit on each tier. */
    readonly scopes: number;
    readonly scopesByTier: Readonly<Record<number, number>>;
  };
  readonly sessions: number;
}

/** Result of `refill()`. */
export interface RefillReport {
  readonly added: number;
  readonly errors: readonly Error[];
}

/** Result of `checkHealth()`. */
export interface HealthCheckReport {
  readonly checked: number;
  readonly healthy: number;
  readonly failed: number;
  /** Ids of proxies the round retired. */
  readonly retired: readonly string[];
}
