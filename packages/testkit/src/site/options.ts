/**
 * Options of {@link startFixtureSite} and of the data helpers (`catalogBooks`, `quoteList`,
 * `expectedCounts`…), which take the same object so that a test can pass one value to both.
 */

import { GENRES, TAGS } from '../content/words.js';
import { FixtureOptionError } from '../errors.js';

/** The book catalog: `books` books spread round-robin over `categories` categories. */
export interface CatalogOptions {
  /** Number of books (ids 1…books). @default 1000 */
  books?: number;
  /** Number of categories; book `id` is in category `(id - 1) % categories`. @default 20 */
  categories?: number;
  /** Books per listing page and per category page. @default 20 */
  perPage?: number;
}

/** The quotes site. */
export interface QuotesOptions {
  /** Number of quotes (ids 1…count), at most 1,000,000. @default 100 */
  count?: number;
  /** Quotes per listing page, tag page and JSON API page. @default 10 */
  perPage?: number;
  /** Number of authors; quote `id` is by author `(id - 1) % authors`. At most 1,600. @default 20 */
  authors?: number;
  /** Number of distinct tags, at most 20. @default 12 */
  tags?: number;
}

/** The login form of the quotes site. */
export interface LoginOptions {
  /** Accounts that can log in: username → password. @default { user: 'password' } */
  users?: Record<string, string>;
  /** Lifetime of a session cookie in milliseconds; 0 keeps sessions until invalidated. @default 0 */
  sessionTtlMs?: number;
}

/** Rules for the generated robots.txt. */
export interface RobotsRules {
  /** `Disallow:` lines of the `User-agent: *` group. @default ['/private/'] */
  disallow?: string[];
  /** `Allow:` lines of the `User-agent: *` group (listed first). @default ['/private/public/'] */
  allow?: string[];
  /** `Crawl-delay:` of the `User-agent: *` group in seconds; none when undefined. @default undefined */
  crawlDelay?: number;
  /**
   * Also emit a `User-agent: fixture-slowbot` group (Crawl-delay 5, Disallow /books/), so parsers
   * meet a second group and a Crawl-delay even when the `*` group has none.
   * @default true
   */
  slowbotGroup?: boolean;
  /** Append `Sitemap:` lines for `/sitemap.xml` and `/sitemap.txt`. @default true */
  sitemaps?: boolean;
  /** HTTP status of `/robots.txt` (e.g. 404 = no rules, 503 = unreachable; RFC 9309 §2.3.1). @default 200 */
  status?: number;
}

/**
 * What `/robots.txt` serves: generated {@link RobotsRules}, a literal string (`{origin}` is
 * replaced by the requested origin, e.g. `http://127.0.0.2:41234`), or `false` for a 404.
 */
export type RobotsOption = RobotsRules | string | false;

export interface FixtureSiteOptions {
  /** TCP port; 0 picks a free one. Every host listens on the same port when it can. @default 0 */
  port?: number;
  /**
   * Number of hosts. Host `i` (0-based) listens on `127.0.0.(i+1)`: `hosts: 3` serves
   * 127.0.0.1, 127.0.0.2 and 127.0.0.3, all with the same content (Linux routes 127/8 to loopback).
   * @default 1
   */
  hosts?: number;
  /** Seed of all generated content. Same seed and options, same bytes. @default 1 */
  seed?: number;
  /** Size of the book catalog. @default { books: 1000, categories: 20, perPage: 20 } */
  catalog?: CatalogOptions;
  /** Size of the quotes site. @default { count: 100, perPage: 10, authors: 20, tags: 12 } */
  quotes?: QuotesOptions;
  /** Accounts and session lifetime of the quotes login. @default { users: { user: 'password' }, sessionTtlMs: 0 } */
  login?: LoginOptions;
  /** What `/robots.txt` serves (see {@link RobotsRules}). Changeable later with `site.setRobots()`. @default {} */
  robots?: RobotsOption;
  /** URLs per XML sitemap file (`/sitemaps/books-N.xml`). At most 50,000. @default 500 */
  sitemapUrlsPerFile?: number;
  /** Latency added before every request is handled, in ms. Changeable with `site.setLatency()`. @default 0 */
  latencyMs?: number;
  /** Random extra latency in `[0, latencyJitterMs)` added to `latencyMs`. @default 0 */
  latencyJitterMs?: number;
  /** Default size of `/huge`, in bytes. @default 200_000_000 */
  hugeBodyBytes?: number;
  /** Default decompressed size of `/bomb/gzip` and `/bomb/deflate`, in bytes. @default 1_073_741_824 */
  bombBytes?: number;
  /** Entries kept in the request log (a ring buffer; older entries are dropped). @default 10_000 */
  requestLogSize?: number;
  /** Distinct paths counted one by one in `stats().paths`; requests past it count in `untrackedPathRequests`. @default 10_000 */
  maxTrackedPaths?: number;
  /** Serve `/__fixture/stats`, `/__fixture/reset` and `/__fixture/invalidate-sessions` (not counted in stats). @default true */
  controlRoutes?: boolean;
}

export interface ResolvedRobotsRules {
  disallow: string[];
  allow: string[];
  crawlDelay: number | undefined;
  slowbotGroup: boolean;
  sitemaps: boolean;
  status: number;
}

export type ResolvedRobots = ResolvedRobotsRules | string | false;

/** Options with every default filled in, as `site.options` shows them. */
export interface ResolvedFixtureSiteOptions {
  port: number;
  hosts: number;
  seed: number;
  catalog: Required<CatalogOptions>;
  quotes: Required<QuotesOptions>;
  login: { users: Record<string, string>; sessionTtlMs: number };
  robots: ResolvedRobots;
  sitemapUrlsPerFile: number;
  latencyMs: number;
  latencyJitterMs: number;
  hugeBodyBytes: number;
  bombBytes: number;
  requestLogSize: number;
  maxTrackedPaths: number;
  controlRoutes: boolean;
}

export const DEFAULT_SEED = 1;
/** Authors get unique names from the invented first × last name lists. */
export const MAX_AUTHORS = 1600;
export const MAX_TAGS = TAGS.length;
export const MAX_CATEGORIES = GENRES.length * 100;

function int(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new FixtureOptionError(name, `expected an integer, got ${describe(value)}`);
  }
  if (value < min || value > max) {
    throw new FixtureOptionError(name, `expected ${min} … ${max}, got ${value}`);
  }
  return value;
}

function bool(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean')
    throw new FixtureOptionError(name, `expected a boolean, got ${describe(value)}`);
  return value;
}

function object(name: string, value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new FixtureOptionError(name, `expected an object, got ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

function paths(name: string, value: unknown, fallback: string[]): string[] {
  if (value === undefined) return fallback;
  if (!Array.isArray(value) || value.some((p) => typeof p !== 'string' || /[\r\n]/.test(p))) {
    throw new FixtureOptionError(name, 'expected an array of single-line strings');
  }
  return [...(value as string[])];
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return String(value);
  return typeof value;
}

export function resolveRobots(value: unknown, name = 'robots'): ResolvedRobots {
  if (value === false) return false;
  if (typeof value === 'string') return value;
  const o = object(name, value);
  const crawlDelay = o.crawlDelay;
  if (
    crawlDelay !== undefined &&
    (typeof crawlDelay !== 'number' || !(crawlDelay >= 0) || !Number.isFinite(crawlDelay))
  ) {
    throw new FixtureOptionError(
      `${name}.crawlDelay`,
      `expected a non-negative number of seconds, got ${describe(crawlDelay)}`,
    );
  }
  return {
    disallow: paths(`${name}.disallow`, o.disallow, ['/private/']),
    allow: paths(`${name}.allow`, o.allow, ['/private/public/']),
    crawlDelay: crawlDelay as number | undefined,
    slowbotGroup: bool(`${name}.slowbotGroup`, o.slowbotGroup, true),
    sitemaps: bool(`${name}.sitemaps`, o.sitemaps, true),
    status: int(`${name}.status`, o.status, 200, 200, 599),
  };
}

/**
 * Fills in defaults and validates every option. Throws {@link FixtureOptionError}
 * (`MOCRA_ERR_TESTKIT_INVALID_OPTION`) naming the first bad option.
 */
export function resolveFixtureOptions(options: FixtureSiteOptions = {}): ResolvedFixtureSiteOptions {
  const o = object('options', options) as FixtureSiteOptions;
  const catalog = object('catalog', o.catalog);
  const quotes = object('quotes', o.quotes);
  const login = object('login', o.login);
  const books = int('catalog.books', catalog.books, 1000, 1, 100_000_000);
  const quoteCount = int('quotes.count', quotes.count, 100, 1, 1_000_000);
  const users = login.users === undefined ? { user: 'password' } : object('login.users', login.users);
  const userNames = Object.keys(users);
  if (userNames.length === 0) throw new FixtureOptionError('login.users', 'expected at least one account');
  for (const name of userNames) {
    if (typeof users[name] !== 'string') {
      throw new FixtureOptionError(
        `login.users.${name}`,
        `expected a password string, got ${describe(users[name])}`,
      );
    }
    if (!/^[\w.@+-]{1,64}$/.test(name)) {
      throw new FixtureOptionError(
        'login.users',
        `username ${JSON.stringify(name)} must be 1-64 of [A-Za-z0-9_.@+-]`,
      );
    }
  }
  return {
    port: int('port', o.port, 0, 0, 65_535),
    hosts: int('hosts', o.hosts, 1, 1, 254),
    seed: int('seed', o.seed, DEFAULT_SEED, 0, 0xffff_ffff),
    catalog: {
      books,
      categories: int(
        'catalog.categories',
        catalog.categories,
        Math.min(20, books),
        1,
        Math.min(books, MAX_CATEGORIES),
      ),
      perPage: int('catalog.perPage', catalog.perPage, 20, 1, 1000),
    },
    quotes: {
      count: quoteCount,
      perPage: int('quotes.perPage', quotes.perPage, 10, 1, 1000),
      authors: int(
        'quotes.authors',
        quotes.authors,
        Math.min(20, quoteCount),
        1,
        Math.min(quoteCount, MAX_AUTHORS),
      ),
      tags: int('quotes.tags', quotes.tags, 12, 1, MAX_TAGS),
    },
    login: {
      users: { ...(users as Record<string, string>) },
      sessionTtlMs: int('login.sessionTtlMs', login.sessionTtlMs, 0, 0, 2 ** 31),
    },
    robots: resolveRobots(o.robots),
    sitemapUrlsPerFile: int('sitemapUrlsPerFile', o.sitemapUrlsPerFile, 500, 1, 50_000),
    latencyMs: int('latencyMs', o.latencyMs, 0, 0, 600_000),
    latencyJitterMs: int('latencyJitterMs', o.latencyJitterMs, 0, 0, 600_000),
    hugeBodyBytes: int('hugeBodyBytes', o.hugeBodyBytes, 200_000_000, 0, Number.MAX_SAFE_INTEGER),
    bombBytes: int('bombBytes', o.bombBytes, 1_073_741_824, 0, 2 ** 40),
    requestLogSize: int('requestLogSize', o.requestLogSize, 10_000, 0, 10_000_000),
    maxTrackedPaths: int('maxTrackedPaths', o.maxTrackedPaths, 10_000, 0, 10_000_000),
    controlRoutes: bool('controlRoutes', o.controlRoutes, true),
  };
}
