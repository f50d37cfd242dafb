// Crawls of the fixture site through real proxies on loopback: tinyproxy (its own log shows
// every request) and `proxy` npm servers (their own counters). The engine routes the default
// HTTP downloader through the pool and reports every outcome back to it.

import { createProxyPool } from '@mocra/proxy';
import {
  catalogBooks,
  expectedCounts,
  type FixtureSite,
  startFixtureSite,
  startHostileSite,
} from '@mocra/testkit';
import { defineSpider, Mocra, Request, type RunSummary } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type CountingProxy,
  deadProxyUrl,
  startCountingProxy,
  startTinyproxy,
  type Tinyproxy,
} from './e2e-proxy-servers.js';

const CATALOG = { catalog: { books: 40, perPage: 20, categories: 2 } } as const;
const LISTING = expectedCounts(CATALOG).catalog.listingPages;
const BOOKS = 40;

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite(CATALOG);
});
afterAll(() => site.close());

/** Follows the listing pager and every book; emits each book's title. */
function catalogSpider(name: string, extra: { proxy?: false | { provider: string } } = {}) {
  return defineSpider<{ title: string }>({
    name,
    startUrls: [`${site.url}/books/page/1`],
    ...(extra.proxy === undefined ? {} : { proxy: extra.proxy }),
    parse(res, cx) {
      for (const a of res.$('a[href]').toArray()) {
        const href = a.attribs.href!;
        if (href.startsWith('/book/') || href.startsWith('/books/page/')) cx.follow(href);
      }
      const title = res.$('article.product h1').text();
      if (title) cx.emit({ title });
    },
  });
}

const titles = catalogBooks(CATALOG)
  .map((b) => b.title)
  .sort();

describe('crawling through proxies', () => {
  let tinyproxy: Tinyproxy;
  beforeAll(async () => {
    tinyproxy = await startTinyproxy();
  });
  afterAll(() => tinyproxy.close());

  test('every request of the crawl goes through tinyproxy: its own log lists each one', async () => {
    site.resetStats();
    const items: string[] = [];
    const summary = await Mocra.builder()
      .spider(catalogSpider('via-tinyproxy'), (b) => void items.push(b.title))
      .proxies({ proxies: [tinyproxy.url] }, { pool: { agent: { proxyTunnel: false } } })
      .handleSignals(false)
      .concurrency(4)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: LISTING + BOOKS });
    expect(items.sort()).toEqual(titles);
    // Forwarded (not tunnelled) plain-http requests: tinyproxy logs each request line.
    const lines = tinyproxy.requestLines().filter((l) => l.includes(`${site.url}/book`));
    expect(lines).toHaveLength(LISTING + BOOKS);
    expect(new Set(lines).size).toBe(LISTING + BOOKS);
    expect(lines.every((l) => l.startsWith(`GET ${site.url}/`))).toBe(true);
    expect(site.stats().requests).toBe(LISTING + BOOKS);
  });

  test('CONNECT tunnels through two npm proxies: both carry the crawl, the pool counts every outcome', async () => {
    const a = await startCountingProxy('127.0.0.2');
    const b = await startCountingProxy('127.0.0.3');
    try {
      const pool = createProxyPool({ proxies: [a.url, b.url] });
      const items: string[] = [];
      const summary = await Mocra.builder()
        .spider(catalogSpider('via-npm-proxies'), (x) => void items.push(x.title))
        .proxies(pool)
        .handleSignals(false)
        .concurrency(4)
        .run();
      expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: LISTING + BOOKS });
      expect(items.sort()).toEqual(titles);
      // Each proxy saw at least one tunnel; the pool heard of every request, all successes.
      expect(a.counts.connects).toBeGreaterThan(0);
      expect(b.counts.connects).toBeGreaterThan(0);
      const stats = pool.stats();
      const requests = stats.proxies.reduce((n, p) => n + p.requests, 0);
      const successes = stats.proxies.reduce((n, p) => n + p.successes, 0);
      expect(requests).toBe(LISTING + BOOKS);
      expect(successes).toBe(LISTING + BOOKS);
      expect(stats.proxies.every((p) => p.latencyMs !== undefined && p.state === 'active')).toBe(true);
      // A pool passed in is the caller's: the engine did not close it.
      expect(pool.closed).toBe(false);
      await pool.close();
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('failing proxies', () => {
  let live: CountingProxy[];
  beforeAll(async () => {
    live = [await startCountingProxy('127.0.0.2'), await startCountingProxy('127.0.0.3')];
  });
  afterAll(async () => {
    for (const p of live) await p.close();
  });

  // max_errors = 1: a proxy that failed drops out of the selection band for ~30 s (its score
  // is halved), so within a short crawl it would not be tried a second time.
  test('a dead proxy is retired and the crawl goes on through the others', async () => {
    const dead = await deadProxyUrl();
    const pool = createProxyPool({ proxies: [dead, live[0]!.url, live[1]!.url], maxErrors: 1 });
    const items: string[] = [];
    const summary: RunSummary = await Mocra.builder()
      .spider(catalogSpider('dead-proxy'), (x) => void items.push(x.title))
      .proxies(pool)
      .retry({ maxRetries: 5, baseDelayMs: 1, maxDelayMs: 5, jitter: false })
      .handleSignals(false)
      .concurrency(2)
      .run();
    expect(summary.reason).toBe('idle');
    expect(items.sort()).toEqual(titles); // nothing lost: every failed attempt was retried elsewhere
    expect(summary.deadLettered).toBe(0);
    const deadStats = pool.stats().proxies.find((p) => p.url === dead)!;
    expect(deadStats).toMatchObject({ state: 'retired', lastFailureReason: 'connect', successes: 0 });
    expect(deadStats.failures).toBeGreaterThanOrEqual(1);
    // The only failures of the run are the attempts that went to the dead proxy (each retried).
    expect(summary.errors).toBe(deadStats.failures);
    expect(Object.keys(summary.errorsByCode)).toEqual(['MOCRA_ERR_CONNECTION']);
    expect(live[0]!.counts.connects + live[1]!.counts.connects).toBeGreaterThan(0);
    await pool.close();
  });

  test('a proxy that refuses CONNECT (502) is reported as a proxy failure and retired', async () => {
    // The hostile site, used as a proxy, answers every CONNECT with 502 Bad Gateway.
    const refusing = await startHostileSite();
    const refusingUrl = `http://127.0.0.1:${refusing.port}`;
    const pool = createProxyPool({ proxies: [refusingUrl, live[0]!.url, live[1]!.url], maxErrors: 1 });
    const items: string[] = [];
    try {
      const summary: RunSummary = await Mocra.builder()
        .spider(catalogSpider('refusing-proxy'), (x) => void items.push(x.title))
        .proxies(pool)
        .retry({ maxRetries: 5, baseDelayMs: 1, maxDelayMs: 5, jitter: false })
        .handleSignals(false)
        .concurrency(2)
        .run();
      expect(summary.reason).toBe('idle');
      expect(items.sort()).toEqual(titles);
      expect(summary.deadLettered).toBe(0);
      const stats = pool.stats().proxies.find((p) => p.url.startsWith(refusingUrl))!;
      expect(stats).toMatchObject({ state: 'retired', lastFailureReason: 'connect', successes: 0 });
      expect(stats.failures).toBeGreaterThanOrEqual(1);
      const tunnels = Object.entries(refusing.stats()).filter(([k]) => k.startsWith('CONNECT '));
      expect(tunnels.reduce((n, [, c]) => n + c, 0)).toBe(stats.failures);
      // A refused tunnel is a connection failure, not an abort.
      expect(Object.keys(summary.errorsByCode)).toEqual(['MOCRA_ERR_CONNECTION']);
    } finally {
      await pool.close();
      await refusing.close();
    }
  });

  test('a proxy that dies in the middle of a crawl is retired; the crawl completes through the other', async () => {
    const doomed = await startCountingProxy('127.0.0.4');
    const survivor = live[0]!;
    const pool = createProxyPool({ proxies: [doomed.url, survivor.url], maxErrors: 1 });
    const items: string[] = [];
    let killed = false;
    const summary = await Mocra.builder()
      .spider(catalogSpider('dying-proxy'), (x) => {
        items.push(x.title);
        if (items.length === 10 && !killed) {
          killed = true;
          return doomed.close();
        }
        return undefined;
      })
      .proxies(pool, { pool: { agent: { keepAliveTimeout: 1 } } })
      .retry({ maxRetries: 5, baseDelayMs: 1, maxDelayMs: 5, jitter: false })
      .handleSignals(false)
      .concurrency(2)
      .run();
    expect(summary.reason).toBe('idle');
    expect(items.sort()).toEqual(titles);
    expect(summary.deadLettered).toBe(0);
    const stats = pool.stats().proxies;
    expect(stats.find((p) => p.url === doomed.url)?.state).toBe('retired');
    expect(stats.find((p) => p.url === survivor.url)?.state).toBe('active');
    await pool.close();
  });
});

describe('turning proxies on and off, pinning a provider', () => {
  test('a module with proxy: false goes direct; a request can pin a provider', async () => {
    const a = await startCountingProxy('127.0.0.2');
    const b = await startCountingProxy('127.0.0.3');
    try {
      const pool = createProxyPool({
        proxies: [
          { url: a.url, provider: 'cheap' },
          { url: b.url, provider: 'premium', tier: 2 },
        ],
      });
      site.resetStats();
      const direct: string[] = [];
      const pinned: number[] = [];
      const pinnedSpider = defineSpider<number>({
        name: 'pinned',
        start(seeds) {
          for (let i = 1; i <= 5; i++)
            seeds.add(new Request(`${site.url}/quotes/page/${i}`, { proxy: { provider: 'premium' } }));
        },
        parse(res, cx) {
          cx.emit(res.status);
        },
      });
      const summary = await Mocra.builder()
        .spider(catalogSpider('no-proxy', { proxy: false }), (x) => void direct.push(x.title))
        .spider(pinnedSpider, (s) => void pinned.push(s))
        .proxies(pool)
        .handleSignals(false)
        .concurrency(2)
        .run();
      expect(summary).toMatchObject({ reason: 'idle', errors: 0 });
      expect(direct.sort()).toEqual(titles);
      expect(pinned).toEqual([200, 200, 200, 200, 200]);
      const byProvider = Object.fromEntries(pool.stats().providers.map((p) => [p.name, p.requests]));
      // Only the pinned spider's 5 requests used the pool, all on 'premium'; the other spider went direct.
      expect(byProvider).toEqual({ cheap: 0, premium: 5 });
      expect(a.counts.connects).toBe(0);
      expect(b.counts.connects).toBeGreaterThan(0);
      await pool.close();
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('bad proxy settings are typed errors before anything runs', async () => {
    expect(() =>
      Mocra.builder()
        .proxies({ proxies: ['ftp://nope'] })
        .spider(catalogSpider('x'), () => {})
        .build(),
    ).toThrow(expect.objectContaining({ code: 'MOCRA_ERR_PROXY_CONFIG' }));
    expect(() =>
      Mocra.builder()
        .spider(catalogSpider('pin-without-pool', { proxy: { provider: 'x' } }), () => {})
        .build(),
    ).toThrow(/no proxy pool is configured/);
  });
});
