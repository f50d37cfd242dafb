/**
 * robots.txt, fetched once per origin and cached (bounded), parsed and matched by
 * `robots-txt.ts` (RFC 9309), and handled the way RFC 9309 says when it cannot be read:
 *
 * | robots.txt answer                     | what the crawler may do                            |
 * | ------------------------------------- | -------------------------------------------------- |
 * | 2xx                                   | what the rules say (group of our product token, else `*`) |
 * | 3xx beyond 5 redirects, or without Location | unavailable: anything (RFC 9309 §2.3.1.2)     |
 * | 4xx (but 429)                         | unavailable: anything (§2.3.1.3)                    |
 * | 5xx, 429, network error, timeout      | unreachable: nothing (§2.3.1.4), retried after `unreachableRetryMs`; after `assumeAllowAfterMs` of being unreachable, anything |
 *
 * 429 counts as unreachable rather than unavailable: a server that is shedding load must not
 * be read as "no rules" (the RFC leaves 4xx to the crawler; large crawlers do the same).
 * Entries live `ttlMs` (24 h, the RFC's upper bound); the body is read up to `maxBytes`
 * (500 KiB, the RFC's minimum). Concurrent checks of one origin share one fetch.
 *
 * `Crawl-delay` (not in the RFC, but widely used) comes back with every verdict, in
 * milliseconds, for the scheduler to honour.
 */
import { InvalidArgumentError } from '../../errors.js';
import { type Clock, systemClock } from '../../schedule/clock.js';
import type { RobotsGuard, RobotsVerdict } from '../politeness/host-scheduler.js';
import { createResourceFetcher, type ResourceFetcher, readLimited } from './resource-fetcher.js';
import { compileRobotsTxt, productToken, type RobotsRules } from './robots-txt.js';

type ParsedRobots = RobotsRules;

export type RobotsStatus = 'parsed' | 'unavailable' | 'unreachable';

/** What is known about one origin's robots.txt. */
export interface RobotsEntry {
  origin: string;
  status: RobotsStatus;
  /** HTTP status of the last fetch (0 when it failed before a response). */
  httpStatus: number;
  /** Epoch ms of the fetch. */
  fetchedAt: number;
  /** Epoch ms after which it is fetched again. */
  expiresAt: number;
  /** Since when the origin has been unreachable without interruption (status 'unreachable'). */
  unreachableSince: number | undefined;
  /** Sitemap URLs listed (`Sitemap:` lines). */
  sitemaps: string[];
  /** Crawl-delay for our user agent, ms. */
  crawlDelayMs: number | undefined;
  /** Why it could not be read, for 'unreachable'. */
  error: string | undefined;
}

export interface RobotsCacheOptions {
  /**
   * Product token matched against `User-agent:` lines (case-insensitive). A User-Agent string is
   * accepted too: its leading token is used (`MyBot/1.0 (+https://…)` matches `User-agent: mybot`).
   * @default 'mocra'
   */
  userAgent?: string;
  /** How robots.txt is fetched. @default an undici GET with 5 redirects */
  fetch?: ResourceFetcher;
  /** Origins kept (least recently used dropped). @default 10000 */
  maxEntries?: number;
  /** How long a fetched robots.txt is used. @default 86400000 (24 h) */
  ttlMs?: number;
  /** How long an unreachable robots.txt (disallow everything) is kept before fetching again. @default 60000 */
  unreachableRetryMs?: number;
  /** After this long unreachable, the origin is treated as having no robots.txt. @default 2592000000 (30 days) */
  assumeAllowAfterMs?: number;
  /** Bytes of robots.txt read. @default 512000 */
  maxBytes?: number;
  clock?: Clock;
}

export class RobotsCache implements RobotsGuard {
  readonly #userAgent: string;
  readonly #fetch: ResourceFetcher;
  readonly #maxEntries: number;
  readonly #ttl: number;
  readonly #retry: number;
  readonly #assumeAllowAfter: number;
  readonly #maxBytes: number;
  readonly #clock: Clock;
  readonly #entries = new Map<string, { entry: RobotsEntry; rules: ParsedRobots | undefined }>();
  readonly #inflight = new Map<string, Promise<{ entry: RobotsEntry; rules: ParsedRobots | undefined }>>();
  #fetches = 0;

  constructor(options: RobotsCacheOptions = {}) {
    const token = productToken((options.userAgent ?? 'mocra').trim());
    if (token === '') {
      throw new InvalidArgumentError(
        `robots userAgent '${options.userAgent}' has no product token (letters, '-' and '_' at its start)`,
      );
    }
    this.#userAgent = token;
    this.#fetch = options.fetch ?? createResourceFetcher();
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#ttl = options.ttlMs ?? 86_400_000;
    this.#retry = options.unreachableRetryMs ?? 60_000;
    this.#assumeAllowAfter = options.assumeAllowAfterMs ?? 30 * 86_400_000;
    this.#maxBytes = options.maxBytes ?? 512_000;
    this.#clock = options.clock ?? systemClock;
  }

  /** robots.txt fetches done so far (tests check "once per host"). */
  get fetches(): number {
    return this.#fetches;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** May our user agent fetch `url`? Synchronous when the origin's robots.txt is cached. */
  check(url: URL, signal?: AbortSignal): RobotsVerdict | Promise<RobotsVerdict> {
    const cached = this.#fresh(url.origin);
    if (cached) return this.#verdict(cached, url);
    return this.#load(url.origin, signal).then((loaded) => this.#verdict(loaded, url));
  }

  /** Allowed or not, always as a promise. */
  async isAllowed(url: string | URL): Promise<boolean> {
    const u = typeof url === 'string' ? new URL(url) : url;
    return (await this.check(u)).allowed;
  }

  /** The robots.txt entry of an origin (fetched when not cached). */
  async entry(origin: string, signal?: AbortSignal): Promise<RobotsEntry> {
    const o = new URL(origin).origin;
    return (this.#fresh(o) ?? (await this.#load(o, signal))).entry;
  }

  /** `Sitemap:` URLs of an origin's robots.txt. */
  async sitemaps(origin: string, signal?: AbortSignal): Promise<string[]> {
    return (await this.entry(origin, signal)).sitemaps;
  }

  /** Forget everything (or one origin). */
  clear(origin?: string): void {
    if (origin === undefined) this.#entries.clear();
    else this.#entries.delete(new URL(origin).origin);
  }

  #fresh(origin: string): { entry: RobotsEntry; rules: ParsedRobots | undefined } | undefined {
    const hit = this.#entries.get(origin);
    if (!hit) return undefined;
    if (this.#clock.now() >= hit.entry.expiresAt) return undefined;
    // LRU: move to the end.
    this.#entries.delete(origin);
    this.#entries.set(origin, hit);
    return hit;
  }

  #load(
    origin: string,
    signal?: AbortSignal,
  ): Promise<{ entry: RobotsEntry; rules: ParsedRobots | undefined }> {
    let pending = this.#inflight.get(origin);
    if (!pending) {
      pending = this.#fetchRobots(origin, signal).finally(() => this.#inflight.delete(origin));
      this.#inflight.set(origin, pending);
    }
    return pending;
  }

  async #fetchRobots(
    origin: string,
    signal: AbortSignal | undefined,
  ): Promise<{ entry: RobotsEntry; rules: ParsedRobots | undefined }> {
    this.#fetches++;
    const robotsUrl = `${origin}/robots.txt`;
    const previous = this.#entries.get(origin)?.entry;
    const now = () => this.#clock.now();
    let result: { entry: RobotsEntry; rules: ParsedRobots | undefined };
    try {
      const res = await this.#fetch(robotsUrl, signal ? { signal } : {});
      const status = res.status;
      if (status >= 200 && status < 300) {
        const { bytes } = await readLimited(res, this.#maxBytes);
        // Rules apply to URLs of this origin, even after a redirect to another host
        // (RFC 9309 §2.3.1.2): the cache is keyed by the origin asked for.
        const rules = compileRobotsTxt(bytes, this.#userAgent);
        const delay = rules.crawlDelaySeconds;
        result = {
          rules,
          entry: this.#entry(origin, 'parsed', status, now(), this.#ttl, {
            sitemaps: [...rules.sitemaps],
            crawlDelayMs: delay === undefined ? undefined : delay * 1000,
          }),
        };
      } else {
        await res.discard().catch(() => {});
        // A 3xx reaching here had no usable Location (or too many hops): unavailable, like a 4xx.
        if (status >= 300 && status < 500 && status !== 429) {
          result = { rules: undefined, entry: this.#entry(origin, 'unavailable', status, now(), this.#ttl) };
        } else {
          result = this.#unreachable(origin, status, `HTTP ${status}`, previous);
        }
      }
    } catch (err) {
      if (err instanceof Error && err.name === 'TooManyResourceRedirects') {
        result = { rules: undefined, entry: this.#entry(origin, 'unavailable', 0, now(), this.#ttl) };
      } else {
        result = this.#unreachable(origin, 0, err instanceof Error ? err.message : String(err), previous);
      }
    }
    this.#store(origin, result);
    return result;
  }

  #unreachable(
    origin: string,
    httpStatus: number,
    error: string,
    previous: RobotsEntry | undefined,
  ): { entry: RobotsEntry; rules: ParsedRobots | undefined } {
    const now = this.#clock.now();
    const since = previous?.status === 'unreachable' ? (previous.unreachableSince ?? now) : now;
    const entry = this.#entry(origin, 'unreachable', httpStatus, now, this.#retry, {
      unreachableSince: since,
      error,
    });
    return { entry, rules: undefined };
  }

  #entry(
    origin: string,
    status: RobotsStatus,
    httpStatus: number,
    now: number,
    ttl: number,
    extra: Partial<RobotsEntry> = {},
  ): RobotsEntry {
    return {
      origin,
      status,
      httpStatus,
      fetchedAt: now,
      expiresAt: now + ttl,
      unreachableSince: undefined,
      sitemaps: [],
      crawlDelayMs: undefined,
      error: undefined,
      ...extra,
    };
  }

  #store(origin: string, value: { entry: RobotsEntry; rules: ParsedRobots | undefined }): void {
    this.#entries.delete(origin);
    this.#entries.set(origin, value);
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }

  #verdict(loaded: { entry: RobotsEntry; rules: ParsedRobots | undefined }, url: URL): RobotsVerdict {
    const { entry, rules } = loaded;
    switch (entry.status) {
      case 'parsed':
        return {
          allowed: rules!.isAllowed(url),
          crawlDelayMs: entry.crawlDelayMs,
        };
      case 'unavailable':
        return { allowed: true, crawlDelayMs: undefined };
      case 'unreachable': {
        const since = entry.unreachableSince ?? entry.fetchedAt;
        if (this.#clock.now() - since >= this.#assumeAllowAfter)
          return { allowed: true, crawlDelayMs: undefined };
        return {
          allowed: false,
          crawlDelayMs: undefined,
          reason: `robots.txt of ${entry.origin} is unreachable (${entry.error ?? `HTTP ${entry.httpStatus}`}): nothing is allowed until it can be read`,
        };
      }
    }
  }
}

export function createRobotsCache(options: RobotsCacheOptions = {}): RobotsCache {
  return new RobotsCache(options);
}
