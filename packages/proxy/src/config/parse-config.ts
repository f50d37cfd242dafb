import { isProxyProtocol, PROXY_PROTOCOLS, type ProxyProtocol, parseProxyAddress } from '../address/index.js';
import { ProxyAddressError, ProxyConfigError, type ProxyConfigIssue } from '../errors.js';
import { parseDuration } from './duration.js';
import type {
  FunctionProviderConfig,
  RateLimit,
  ResolvedProvider,
  ResolvedProxyConfig,
  ResolvedStaticProxy,
  ResolvedTunnel,
} from './types.js';

/**
 * Validation of untrusted configuration (a parsed TOML `[proxy]` section, JSON, or an object in
 * code). Every problem is collected with the dotted key it is about, and one
 * {@link ProxyConfigError} reports them all, so a user fixes a config in one pass.
 */

/** Configs this module produced; `createProxyPool` accepts them without validating twice. */
const RESOLVED = new WeakSet<object>();

export function isResolvedProxyConfig(value: unknown): value is ResolvedProxyConfig {
  return typeof value === 'object' && value !== null && RESOLVED.has(value);
}

/** Options of {@link parseProxyConfig}. */
export interface ParseProxyConfigOptions {
  /** Prefix of every key named in errors. @default 'proxy' */
  root?: string;
}

const DEFAULT_STATIC_PROVIDER = 'static';
const MAX_RATE_LIMIT = 100_000;

function camel(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** A config table with keys normalised to camelCase, remembering how the user spelled them. */
class Table {
  readonly #entries = new Map<string, { raw: string; value: unknown }>();

  constructor(
    readonly path: string,
    readonly issues: ProxyConfigIssue[],
    value: Record<string, unknown>,
    known: readonly string[],
  ) {
    for (const [raw, v] of Object.entries(value)) {
      if (v === undefined) continue;
      const key = camel(raw);
      if (!known.includes(key)) {
        issues.push({ key: this.keyOf(raw), message: `unknown key (expected one of: ${known.join(', ')})` });
        continue;
      }
      const previous = this.#entries.get(key);
      if (previous) {
        issues.push({ key: this.keyOf(raw), message: `given twice (also as '${previous.raw}')` });
        continue;
      }
      this.#entries.set(key, { raw, value: v });
    }
  }

  keyOf(raw: string): string {
    return /^[A-Za-z_][A-Za-z0-9_]*$/.test(raw) ? `${this.path}.${raw}` : `${this.path}["${raw}"]`;
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /** The raw value and the dotted key as the user wrote it. */
  get(key: string): { value: unknown; key: string } | undefined {
    const entry = this.#entries.get(key);
    return entry && { value: entry.value, key: this.keyOf(entry.raw) };
  }

  issue(key: string, message: string): void {
    const entry = this.#entries.get(key);
    this.issues.push({ key: entry ? this.keyOf(entry.raw) : `${this.path}.${key}`, message });
  }

  string(key: string, options: { required?: boolean; nonEmpty?: boolean } = {}): string | undefined {
    const entry = this.get(key);
    if (entry === undefined) {
      if (options.required) this.issues.push({ key: `${this.path}.${key}`, message: 'is required' });
      return undefined;
    }
    if (typeof entry.value !== 'string') return this.#bad(entry.key, 'a string', entry.value);
    if (options.nonEmpty !== false && entry.value.trim() === '') {
      this.issues.push({ key: entry.key, message: 'must not be empty' });
      return undefined;
    }
    return entry.value;
  }

  boolean(key: string): boolean | undefined {
    const entry = this.get(key);
    if (entry === undefined) return undefined;
    if (typeof entry.value !== 'boolean') return this.#bad(entry.key, 'true or false', entry.value);
    return entry.value;
  }

  number(key: string, range: { min?: number; max?: number; integer?: boolean }): number | undefined {
    const entry = this.get(key);
    if (entry === undefined) return undefined;
    return checkNumber(entry.value, entry.key, range, this.issues);
  }

  duration(key: string, options: { positive?: boolean } = {}): number | undefined {
    const entry = this.get(key);
    if (entry === undefined) return undefined;
    const ms = parseDuration(entry.value);
    if (ms === undefined) {
      return this.#bad(
        entry.key,
        "a duration (milliseconds, or a string like '30s', '5m', '1h')",
        entry.value,
      );
    }
    if (options.positive && ms <= 0) {
      this.issues.push({ key: entry.key, message: 'must be greater than zero' });
      return undefined;
    }
    return ms;
  }

  instant(key: string): number | undefined {
    const entry = this.get(key);
    if (entry === undefined) return undefined;
    return checkInstant(entry.value, entry.key, this.issues);
  }

  rateLimit(key: string): RateLimit | undefined {
    const entry = this.get(key);
    if (entry === undefined) return undefined;
    return checkRateLimit(entry.value, entry.key, this.issues);
  }

  httpUrl(key: string, options: { required?: boolean } = {}): string | undefined {
    const text = this.string(key, options);
    if (text === undefined) return undefined;
    return checkHttpUrl(text, this.get(key)!.key, this.issues);
  }

  #bad(key: string, expected: string, value: unknown): undefined {
    this.issues.push({ key, message: `expected ${expected}, got ${describe(value)}` });
    return undefined;
  }
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (value instanceof Date) return 'a date';
  if (typeof value === 'string') return `'${value.length > 40 ? `${value.slice(0, 40)}…` : value}'`;
  if (typeof value === 'object') return 'a table';
  return `${typeof value} ${String(value)}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Date)
    return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function table(
  value: unknown,
  path: string,
  issues: ProxyConfigIssue[],
  known: readonly string[],
): Table | undefined {
  if (!isPlainObject(value)) {
    issues.push({ key: path, message: `expected a table, got ${describe(value)}` });
    return undefined;
  }
  return new Table(path, issues, value, known);
}

function checkNumber(
  value: unknown,
  key: string,
  range: { min?: number; max?: number; integer?: boolean },
  issues: ProxyConfigIssue[],
): number | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    issues.push({
      key,
      message: `expected ${range.integer ? 'an integer' : 'a number'}, got ${describe(value)}`,
    });
    return undefined;
  }
  if (range.integer && !Number.isInteger(value)) {
    issues.push({ key, message: `expected an integer, got ${value}` });
    return undefined;
  }
  if (range.min !== undefined && value < range.min) {
    issues.push({ key, message: `must be at least ${range.min}, got ${value}` });
    return undefined;
  }
  if (range.max !== undefined && value > range.max) {
    issues.push({ key, message: `must be at most ${range.max}, got ${value}` });
    return undefined;
  }
  return value;
}

function checkInstant(value: unknown, key: string, issues: ProxyConfigIssue[]): number | undefined {
  let ms: number | undefined;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'number') ms = value;
  else if (typeof value === 'string' && /^\d{4}-\d{2}-\d{2}/.test(value)) ms = Date.parse(value);
  if (ms === undefined || !Number.isFinite(ms)) {
    issues.push({
      key,
      message: `expected an instant (RFC 3339 string, epoch milliseconds or a date), got ${describe(value)}`,
    });
    return undefined;
  }
  return ms;
}

function checkRateLimit(value: unknown, key: string, issues: ProxyConfigIssue[]): RateLimit | undefined {
  if (typeof value === 'number') {
    const limit = checkNumber(value, key, { min: 1, max: MAX_RATE_LIMIT, integer: true }, issues);
    return limit === undefined ? undefined : { limit, interval: 1_000 };
  }
  const t = table(value, key, issues, ['limit', 'interval']);
  if (t === undefined) return undefined;
  if (!t.has('limit')) {
    issues.push({ key: `${key}.limit`, message: 'is required' });
    return undefined;
  }
  const limit = t.number('limit', { min: 1, max: MAX_RATE_LIMIT, integer: true });
  const interval = t.has('interval') ? t.duration('interval', { positive: true }) : 1_000;
  return limit === undefined || interval === undefined ? undefined : { limit, interval };
}

function checkHttpUrl(text: string, key: string, issues: ProxyConfigIssue[]): string | undefined {
  try {
    const url = new URL(text);
    if (url.protocol === 'http:' || url.protocol === 'https:') return url.href;
  } catch {
    // reported below
  }
  issues.push({ key, message: `expected an http(s) URL, got ${describe(text)}` });
  return undefined;
}

function checkProxyUrl(text: string, key: string, issues: ProxyConfigIssue[], protocol?: ProxyProtocol) {
  try {
    return parseProxyAddress(text, protocol);
  } catch (err) {
    if (!(err instanceof ProxyAddressError)) throw err;
    issues.push({ key, message: err.message });
    return undefined;
  }
}

const TOP_KEYS = [
  'proxies',
  'tunnels',
  'providers',
  'direct',
  'minSize',
  'maxSize',
  'refillThreshold',
  'maxErrors',
  'retiredCooldown',
  'rateLimit',
  'maxWait',
  'maintenanceInterval',
  'healthCheck',
  'tiers',
  'maxSessions',
] as const;
const STATIC_KEYS = ['url', 'provider', 'tier', 'rateLimit', 'expiresAt'] as const;
const TUNNEL_KEYS = ['name', 'endpoint', 'username', 'password', 'tier', 'rateLimit', 'expiresAt'] as const;
const PROVIDER_KEYS = [
  'name',
  'url',
  'load',
  'headers',
  'timeout',
  'tier',
  'protocol',
  'proxyTtl',
  'expiresAt',
  'rateLimit',
  'minSize',
  'maxSize',
  'minLoadInterval',
] as const;
const HEALTH_KEYS = ['url', 'interval', 'timeout', 'concurrency'] as const;
const TIER_KEYS = ['escalateAfter', 'deescalateAfter', 'maxScopes'] as const;

function list(value: unknown, key: string, issues: ProxyConfigIssue[]): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    issues.push({ key, message: `expected an array, got ${describe(value)}` });
    return [];
  }
  return value;
}

/**
 * Turns unknown input — a parsed TOML `[proxy]` section, JSON, or an object in code — into a
 * typed, fully defaulted config.
 *
 * @throws {ProxyConfigError} listing every problem with the key it is about
 *   (`proxy.providers[1].min_size: must be at least 0, got -1`).
 */
export function parseProxyConfig(input: unknown, options: ParseProxyConfigOptions = {}): ResolvedProxyConfig {
  if (isResolvedProxyConfig(input)) return input;
  const root = options.root ?? 'proxy';
  const issues: ProxyConfigIssue[] = [];
  const top = table(input ?? {}, root, issues, TOP_KEYS);
  if (top === undefined) throw new ProxyConfigError(issues);

  const minSize = top.number('minSize', { min: 0, max: 100_000, integer: true }) ?? 5;
  const maxSize = top.number('maxSize', { min: 1, max: 100_000, integer: true }) ?? 50;
  if (minSize > maxSize) top.issue('minSize', `must not exceed the max size (${maxSize}), got ${minSize}`);
  const rateLimit = top.rateLimit('rateLimit');
  const direct = top.boolean('direct') ?? false;
  // With `direct`, tier 0 means "no proxy", so proxy tiers start at 1.
  const readTier = (t: Table): number => {
    const entry = t.get('tier');
    if (entry === undefined) return 1;
    if (direct && entry.value === 0) {
      issues.push({ key: entry.key, message: 'must be at least 1: tier 0 is the direct tier' });
      return 1;
    }
    return checkNumber(entry.value, entry.key, { min: 0, max: 1_000, integer: true }, issues) ?? 1;
  };

  // Provider names are the unit of stats and pinning, so they are unique across kinds; static
  // proxies share a name (a group), and one name has one tier.
  const names = new Map<string, { kind: 'static' | 'tunnel' | 'provider'; tier: number }>();
  const claim = (name: string, key: string, kind: 'static' | 'tunnel' | 'provider', tier: number): void => {
    const existing = names.get(name);
    if (existing === undefined) {
      names.set(name, { kind, tier });
    } else if (existing.kind !== 'static' || kind !== 'static') {
      issues.push({ key, message: `provider name '${name}' is already used` });
    } else if (existing.tier !== tier) {
      issues.push({
        key,
        message: `provider '${name}' already has tier ${existing.tier}; give proxies of another tier their own provider name`,
      });
    }
  };

  const proxies: ResolvedStaticProxy[] = [];
  const seen = new Map<string, string>();
  const proxiesEntry = top.get('proxies');
  list(proxiesEntry?.value, proxiesEntry?.key ?? `${root}.proxies`, issues).forEach((item, i) => {
    const key = `${proxiesEntry!.key}[${i}]`;
    let url: string | undefined;
    let provider = DEFAULT_STATIC_PROVIDER;
    let tier = 1;
    let limit: RateLimit | undefined;
    let expiresAt: number | undefined;
    let urlKey = key;
    if (typeof item === 'string') {
      url = item;
    } else {
      const t = table(item, key, issues, STATIC_KEYS);
      if (t === undefined) return;
      url = t.string('url', { required: true });
      urlKey = t.get('url')?.key ?? urlKey;
      provider = t.string('provider') ?? provider;
      tier = readTier(t);
      limit = t.rateLimit('rateLimit');
      expiresAt = t.instant('expiresAt');
    }
    if (url === undefined) return;
    const address = checkProxyUrl(url, urlKey, issues);
    if (address === undefined) return;
    const previous = seen.get(address.id);
    if (previous !== undefined) {
      issues.push({ key: urlKey, message: `duplicate proxy (also at ${previous})` });
      return;
    }
    seen.set(address.id, urlKey);
    claim(provider, key, 'static', tier);
    proxies.push({
      url: address.url,
      provider,
      tier,
      ...((limit ?? rateLimit) === undefined ? {} : { rateLimit: (limit ?? rateLimit)! }),
      ...(expiresAt === undefined ? {} : { expiresAt }),
    });
  });

  const tunnels: ResolvedTunnel[] = [];
  const tunnelsEntry = top.get('tunnels');
  list(tunnelsEntry?.value, tunnelsEntry?.key ?? `${root}.tunnels`, issues).forEach((item, i) => {
    const key = `${tunnelsEntry!.key}[${i}]`;
    const t = table(item, key, issues, TUNNEL_KEYS);
    if (t === undefined) return;
    const name = t.string('name', { required: true });
    const endpoint = t.string('endpoint', { required: true });
    const username = t.string('username', { nonEmpty: true });
    const password = t.string('password', { nonEmpty: false });
    const tier = readTier(t);
    const limit = t.rateLimit('rateLimit');
    const expiresAt = t.instant('expiresAt');
    if (name !== undefined) claim(name, t.get('name')!.key, 'tunnel', tier);
    if (endpoint === undefined || name === undefined) return;
    const address = checkProxyUrl(endpoint, t.get('endpoint')!.key, issues);
    if (address === undefined) return;
    if (password !== undefined && username === undefined && address.username === undefined) {
      t.issue('password', 'needs a username');
      return;
    }
    const user = username ?? address.username;
    const pass = password ?? address.password;
    const host = address.host.includes(':') ? `[${address.host}]` : address.host;
    const auth =
      user === undefined
        ? ''
        : `${encodeURIComponent(user)}${pass === undefined ? '' : `:${encodeURIComponent(pass)}`}@`;
    const url = `${address.protocol}://${auth}${host}:${address.port}`;
    // Identity ignores the password, so two entries differing only by password are one proxy.
    const id = parseProxyAddress(url).id;
    const previous = seen.get(id);
    if (previous !== undefined) {
      issues.push({ key: t.get('endpoint')!.key, message: `duplicate proxy (also at ${previous})` });
      return;
    }
    seen.set(id, t.get('endpoint')!.key);
    tunnels.push({
      name,
      url,
      tier,
      ...((limit ?? rateLimit) === undefined ? {} : { rateLimit: (limit ?? rateLimit)! }),
      ...(expiresAt === undefined ? {} : { expiresAt }),
    });
  });

  const providers: ResolvedProvider[] = [];
  const providersEntry = top.get('providers');
  list(providersEntry?.value, providersEntry?.key ?? `${root}.providers`, issues).forEach((item, i) => {
    const key = `${providersEntry!.key}[${i}]`;
    const t = table(item, key, issues, PROVIDER_KEYS);
    if (t === undefined) return;
    const name = t.string('name', { required: true });
    const tier = readTier(t);
    if (name !== undefined) claim(name, t.get('name')!.key, 'provider', tier);
    const protocolText = t.string('protocol');
    let protocol: ProxyProtocol = 'http';
    if (protocolText !== undefined) {
      if (isProxyProtocol(protocolText)) protocol = protocolText;
      else t.issue('protocol', `expected one of ${PROXY_PROTOCOLS.join(', ')}, got '${protocolText}'`);
    }
    const pMax = t.number('maxSize', { min: 1, max: 100_000, integer: true }) ?? maxSize;
    const ownMin = t.number('minSize', { min: 0, max: 100_000, integer: true });
    if (ownMin !== undefined && ownMin > pMax)
      t.issue('minSize', `must not exceed the max size (${pMax}), got ${ownMin}`);
    // A provider that only lowers its max size inherits a min size that fits under it.
    const pMin = ownMin ?? Math.min(minSize, pMax);
    const proxyTtl = t.duration('proxyTtl', { positive: true });
    const expiresAt = t.instant('expiresAt');
    const limit = t.rateLimit('rateLimit') ?? rateLimit;
    const minLoadInterval = t.duration('minLoadInterval') ?? 10_000;
    const base = {
      name: name ?? '',
      tier,
      protocol,
      minSize: pMin,
      maxSize: pMax,
      minLoadInterval,
      ...(proxyTtl === undefined ? {} : { proxyTtl }),
      ...(expiresAt === undefined ? {} : { expiresAt }),
      ...(limit === undefined ? {} : { rateLimit: limit }),
    };
    const load = t.get('load');
    const hasUrl = t.has('url');
    if (load !== undefined && hasUrl) {
      t.issue('url', "give either 'url' (a text list) or 'load' (a function), not both");
      return;
    }
    if (load !== undefined) {
      if (typeof load.value !== 'function') {
        issues.push({ key: load.key, message: `expected a function, got ${describe(load.value)}` });
        return;
      }
      for (const k of ['headers', 'timeout'] as const) {
        if (t.has(k)) t.issue(k, "only applies to a text-list provider ('url')");
      }
      providers.push({ ...base, kind: 'function', load: load.value as FunctionProviderConfig['load'] });
      return;
    }
    if (!hasUrl) {
      issues.push({ key: `${key}.url`, message: "is required (or, in code, a 'load' function)" });
      return;
    }
    const url = t.httpUrl('url');
    const timeout = t.duration('timeout', { positive: true }) ?? 10_000;
    const headers: Record<string, string> = {};
    const headersEntry = t.get('headers');
    if (headersEntry !== undefined) {
      if (!isPlainObject(headersEntry.value)) {
        issues.push({
          key: headersEntry.key,
          message: `expected a table of strings, got ${describe(headersEntry.value)}`,
        });
      } else {
        for (const [h, v] of Object.entries(headersEntry.value)) {
          if (typeof v === 'string') headers[h] = v;
          else
            issues.push({
              key: `${headersEntry.key}.${h}`,
              message: `expected a string, got ${describe(v)}`,
            });
        }
      }
    }
    if (url !== undefined) providers.push({ ...base, kind: 'list', url, headers, timeout });
  });

  let healthCheck: ResolvedProxyConfig['healthCheck'];
  const hcEntry = top.get('healthCheck');
  if (hcEntry !== undefined) {
    const t = table(hcEntry.value, hcEntry.key, issues, HEALTH_KEYS);
    if (t !== undefined) {
      const url = t.httpUrl('url', { required: true });
      const interval = t.duration('interval') ?? 300_000;
      const timeout = t.duration('timeout', { positive: true }) ?? 10_000;
      const concurrency = t.number('concurrency', { min: 1, max: 1_000, integer: true }) ?? 4;
      if (url !== undefined) healthCheck = { url, interval, timeout, concurrency };
    }
  }

  let tiers = { escalateAfter: 2, deescalateAfter: 20, maxScopes: 10_000 };
  const tiersEntry = top.get('tiers');
  if (tiersEntry !== undefined) {
    const t = table(tiersEntry.value, tiersEntry.key, issues, TIER_KEYS);
    if (t !== undefined) {
      tiers = {
        escalateAfter:
          t.number('escalateAfter', { min: 1, max: 1_000_000, integer: true }) ?? tiers.escalateAfter,
        deescalateAfter:
          t.number('deescalateAfter', { min: 0, max: 1_000_000, integer: true }) ?? tiers.deescalateAfter,
        maxScopes: t.number('maxScopes', { min: 1, max: 10_000_000, integer: true }) ?? tiers.maxScopes,
      };
    }
  }

  const config: ResolvedProxyConfig = {
    proxies,
    tunnels,
    providers,
    direct,
    minSize,
    maxSize,
    refillThreshold: top.number('refillThreshold', { min: 0, max: 1 }) ?? 0.3,
    maxErrors: top.number('maxErrors', { min: 1, max: 1_000_000, integer: true }) ?? 3,
    retiredCooldown: top.duration('retiredCooldown') ?? 1_800_000,
    ...(rateLimit === undefined ? {} : { rateLimit }),
    maxWait: top.duration('maxWait') ?? 30_000,
    maintenanceInterval: top.duration('maintenanceInterval', { positive: true }) ?? 1_000,
    ...(healthCheck === undefined ? {} : { healthCheck }),
    tiers,
    maxSessions: top.number('maxSessions', { min: 1, max: 10_000_000, integer: true }) ?? 10_000,
  };

  if (issues.length === 0 && !direct && proxies.length + tunnels.length + providers.length === 0) {
    issues.push({
      key: root,
      message: 'configure at least one of proxies, tunnels, providers, or direct = true',
    });
  }
  if (issues.length > 0) throw new ProxyConfigError(issues);
  RESOLVED.add(config);
  return Object.freeze(config);
}

/** Validates one rate limit outside a config (a function provider's entry). @throws {ProxyConfigError} */
export function parseRateLimit(value: unknown, key = 'rateLimit'): RateLimit {
  const issues: ProxyConfigIssue[] = [];
  const limit = checkRateLimit(value, key, issues);
  if (limit === undefined) throw new ProxyConfigError(issues);
  return limit;
}

/** Validates one instant outside a config (a function provider's entry). @throws {ProxyConfigError} */
export function parseInstant(value: unknown, key = 'expiresAt'): number {
  const issues: ProxyConfigIssue[] = [];
  const at = checkInstant(value, key, issues);
  if (at === undefined) throw new ProxyConfigError(issues);
  return at;
}
