import type { ProxyProtocol } from '../address/index.js';
import type { Duration } from './duration.js';

/**
 * How many requests one proxy may start per interval: a number is requests per second,
 * an object sets both (`{ limit: 100, interval: '1m' }`).
 */
export type RateLimitInput = number | { limit: number; interval?: Duration };

/** A rate limit after validation: at most `limit` acquisitions in any window of `interval` ms. */
export interface RateLimit {
  readonly limit: number;
  readonly interval: number;
}

/** A point in time: an RFC 3339 string, epoch milliseconds, or a `Date`. */
export type Instant = string | number | Date;

/** One fixed proxy. TOML: `proxies = ["http://1.2.3.4:8080"]` or `[[proxy.proxies]]` tables. */
export interface StaticProxyConfig {
  /** `scheme://[user:pass@]host:port` (http, https, socks5) or `host:port[:user:pass]` (http). */
  url: string;
  /** Provider group the proxy belongs to, for stats and `acquire({ provider })`. @default 'static' */
  provider?: string;
  /** Escalation tier; higher tiers are tried after lower ones fail. @default 1 */
  tier?: number;
  /** Per-proxy rate limit. @default the pool's `rateLimit` (none) */
  rateLimit?: RateLimitInput;
  /** The proxy leaves the pool at this instant. @default never */
  expiresAt?: Instant;
}

/**
 * A rotating tunnel: one endpoint whose exit IP changes per connection on the provider's side.
 * Because the exit changes, a blocked or timed-out request says nothing about the next one, so
 * only connection and authentication failures count towards retiring a tunnel.
 */
export interface TunnelConfig {
  /** Unique name; also the tunnel's provider name in stats. */
  name: string;
  /** `scheme://host:port` or `host:port`. */
  endpoint: string;
  /** Overrides a user name in `endpoint`. */
  username?: string;
  /** Overrides a password in `endpoint`. */
  password?: string;
  /** @default 1 */
  tier?: number;
  /** @default the pool's `rateLimit` (none) */
  rateLimit?: RateLimitInput;
  /** @default never */
  expiresAt?: Instant;
}

/** Settings shared by providers that load proxies (text-list URL or function). */
export interface ProviderConfigBase {
  /** Unique name, used in stats and `acquire({ provider })`. */
  name: string;
  /** @default 1 */
  tier?: number;
  /** Scheme for entries given as `host:port[:user:pass]`. @default 'http' */
  protocol?: ProxyProtocol;
  /** Each loaded proxy expires this long after it was loaded. @default no expiry */
  proxyTtl?: Duration;
  /** The provider itself stops at this instant: its proxies leave and it loads no more. @default never */
  expiresAt?: Instant;
  /** Per-proxy rate limit for the proxies it loads. @default the pool's `rateLimit` (none) */
  rateLimit?: RateLimitInput;
  /** Refill from this provider when it has fewer active proxies than this. @default the pool's `minSize` */
  minSize?: number;
  /** Never hold more active proxies from this provider. @default the pool's `maxSize` */
  maxSize?: number;
  /**
   * Least time between two loads. After a failed load the wait doubles per failure (up to 10
   * minutes), so a broken provider is not hammered. @default '10s'
   */
  minLoadInterval?: Duration;
}

/** A provider that serves a text list, one `ip:port[:user:pass]` (or URL) per line. */
export interface ListProviderConfig extends ProviderConfigBase {
  /** http(s) URL of the list; fetched with undici, not through a proxy. */
  url: string;
  /** Extra request headers (an API key, say). */
  headers?: Record<string, string>;
  /** Time allowed to fetch the list. @default '10s' */
  timeout?: Duration;
}

/** One proxy returned by a function provider. */
export interface ProvidedProxy {
  url: string;
  expiresAt?: Instant;
  rateLimit?: RateLimitInput;
}

/** What a function provider is told when it is asked for proxies. */
export interface ProviderLoadContext {
  /** The provider's name. */
  readonly provider: string;
  /** How many more proxies the pool can take from this provider right now. */
  readonly want: number;
  /** Aborted when the pool closes. */
  readonly signal: AbortSignal;
}

/** A provider backed by your own code (a vendor API, a database...). Code only, not TOML. */
export interface FunctionProviderConfig extends ProviderConfigBase {
  load(
    context: ProviderLoadContext,
  ): Iterable<string | ProvidedProxy> | Promise<Iterable<string | ProvidedProxy>>;
}

export type ProviderConfig = ListProviderConfig | FunctionProviderConfig;

/** Health checks request `url` through every active proxy on an interval. */
export interface HealthCheckConfig {
  /** http(s) URL to request through each proxy; any 2xx or 3xx answer counts as healthy. */
  url: string;
  /** Time between two rounds; `0` turns the timer off (`checkHealth()` still works). @default '5m' */
  interval?: Duration;
  /** Time allowed per check. @default '10s' */
  timeout?: Duration;
  /** Checks in flight at once. @default 4 */
  concurrency?: number;
}

/** Tiered escalation: per host, move to the next tier after failures, back down after successes. */
export interface TierConfig {
  /** Consecutive failures at the current tier before a host moves up one tier. @default 2 */
  escalateAfter?: number;
  /**
   * Consecutive successes at a tier before the host tries one tier lower again (a probe: one
   * failure there sends it straight back up). `0` never steps down. @default 20
   */
  deescalateAfter?: number;
  /** Hosts (or keys) whose tier is remembered; the least recently used are forgotten. @default 10000 */
  maxScopes?: number;
}

/**
 * The `[proxy]` section of mocra's TOML config, or the same object in code. Keys may be written
 * camelCase or snake_case (`min_size`); durations take milliseconds or strings with units.
 */
export interface ProxyPoolConfig {
  /** Fixed proxies, as URL strings or tables. */
  proxies?: Array<string | StaticProxyConfig>;
  /** Rotating tunnels. */
  tunnels?: TunnelConfig[];
  /** Providers that load lists: `url` for a text list, `load` (code only) for your own function. */
  providers?: ProviderConfig[];
  /**
   * Add tier 0, "no proxy", below every proxy tier: requests go direct first and escalate to
   * proxies only when a host starts failing (proxy tiers must then be ≥ 1). @default false
   */
  direct?: boolean;
  /** Default `minSize` of each provider. @default 5 */
  minSize?: number;
  /** Default `maxSize` of each provider. @default 50 */
  maxSize?: number;
  /**
   * A provider refills when its active proxies drop below
   * `max(minSize, refillThreshold × maxSize)`. @default 0.3
   */
  refillThreshold?: number;
  /** Consecutive failures that retire a proxy. An `auth` failure retires at once. @default 3 */
  maxErrors?: number;
  /**
   * How long a retired proxy stays out. After it, a static proxy or tunnel comes back on
   * probation and a provider may hand the address out again. `0` keeps retired proxies out
   * for good. @default '30m'
   */
  retiredCooldown?: Duration;
  /** Default per-proxy rate limit. @default none */
  rateLimit?: RateLimitInput;
  /** Longest `acquire()` waits for a rate-limited proxy before it throws. @default '30s' */
  maxWait?: Duration;
  /** Period of the sweep that expires proxies, revives retired ones and refills. @default '1s' */
  maintenanceInterval?: Duration;
  /** @default none (no health checks) */
  healthCheck?: HealthCheckConfig;
  tiers?: TierConfig;
  /** Sticky session keys remembered; the least recently used are forgotten. @default 10000 */
  maxSessions?: number;
}

/** A static proxy after validation. */
export interface ResolvedStaticProxy {
  readonly url: string;
  readonly provider: string;
  readonly tier: number;
  readonly rateLimit?: RateLimit;
  readonly expiresAt?: number;
}

export interface ResolvedTunnel {
  readonly name: string;
  /** Dialable URL including the credentials. */
  readonly url: string;
  readonly tier: number;
  readonly rateLimit?: RateLimit;
  readonly expiresAt?: number;
}

interface ResolvedProviderBase {
  readonly name: string;
  readonly tier: number;
  readonly protocol: ProxyProtocol;
  readonly proxyTtl?: number;
  readonly expiresAt?: number;
  readonly rateLimit?: RateLimit;
  readonly minSize: number;
  readonly maxSize: number;
  readonly minLoadInterval: number;
}

export interface ResolvedListProvider extends ResolvedProviderBase {
  readonly kind: 'list';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeout: number;
}

export interface ResolvedFunctionProvider extends ResolvedProviderBase {
  readonly kind: 'function';
  readonly load: FunctionProviderConfig['load'];
}

export type ResolvedProvider = ResolvedListProvider | ResolvedFunctionProvider;

/** A validated config: every default filled in, durations in ms, instants in epoch ms. */
export interface ResolvedProxyConfig {
  readonly proxies: readonly ResolvedStaticProxy[];
  readonly tunnels: readonly ResolvedTunnel[];
  readonly providers: readonly ResolvedProvider[];
  readonly direct: boolean;
  readonly minSize: number;
  readonly maxSize: number;
  readonly refillThreshold: number;
  readonly maxErrors: number;
  readonly retiredCooldown: number;
  readonly rateLimit?: RateLimit;
  readonly maxWait: number;
  readonly maintenanceInterval: number;
  readonly healthCheck?: {
    readonly url: string;
    readonly interval: number;
    readonly timeout: number;
    readonly concurrency: number;
  };
  readonly tiers: {
    readonly escalateAfter: number;
    readonly deescalateAfter: number;
    readonly maxScopes: number;
  };
  readonly maxSessions: number;
}
