// Tiered proxies driven by what the engine reports: direct first, and when the target blocks
// (403, 429, a captcha page) the host moves up to the proxy tier — on the fixture's
// `/status/403` and on a small origin that blocks only direct (127.0.0.1) traffic.
import { createProxyPool } from '@mocra/proxy';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type CountingProxy,
  type GatedOrigin,
  startCountingProxy,
  startGatedOrigin,
} from './e2e-proxy-servers.js';

let site: FixtureSite;
let origin: GatedOrigin;
let proxy: CountingProxy;
beforeAll(async () => {
  site = await startFixtureSite();
  origin = await startGatedOrigin();
  proxy = await startCountingProxy('127.0.0.2');
});
afterAll(async () => {
  await proxy.close();
  await origin.close();
  await site.close();
});

interface Page {
  url: string;
  status: number;
  h1: string;
  title: string;
}

/** direct (tier 0) below one proxy (tier 1); two failures in a row move a host up. */
function tieredPool() {
  return createProxyPool({
    direct: true,
    proxies: [{ url: proxy.url, provider: 'datacenter', tier: 1 }],
    tiers: { escalateAfter: 2, deescalateAfter: 100 },
    // Blocks count against a static proxy too (3 in a row retire it by default); keep it here.
    maxErrors: 10,
  });
}

function pathsSpider(name: string, urls: string[]) {
  return defineSpider<Page>({
    name,
    startUrls: urls,
    parse(res, cx) {
      cx.emit({ url: res.url, status: res.status, h1: res.$('h1').text(), title: res.$('title').text() });
    },
  });
}

describe('tier escalation', () => {
  test('a host that answers 403 moves from direct to the proxy tier (fixture /status/403)', async () => {
    const pool = tieredPool();
    const before = proxy.counts.connects;
    const statuses: number[] = [];
    const urls = Array.from({ length: 6 }, (_, i) => `${site.url}/status/403?n=${i}`);
    const summary = await Mocra.builder()
      .spider(
        defineSpider<number>({ name: 'forbidden', startUrls: urls, parse: (res, cx) => cx.emit(res.status) }),
        (s) => void statuses.push(s),
      )
      .proxies(pool)
      .handleSignals(false)
      .concurrency(1) // one at a time: each report is about the host's current tier
      .run();
    expect(summary.reason).toBe('idle');
    expect(statuses).toEqual([403, 403, 403, 403, 403, 403]); // 403 is a response, not retried by default
    const stats = pool.stats();
    // Two blocked reports on the direct tier escalated the host; the other four went through the proxy.
    expect(stats.direct).toEqual({ requests: 2, successes: 0, failures: 2 });
    expect(stats.proxies[0]).toMatchObject({ requests: 4, failures: 4, lastFailureReason: 'blocked' });
    expect(pool.tierFor('127.0.0.1')).toBe(1);
    expect(proxy.counts.connects).toBeGreaterThan(before);
    await pool.close();
  });

  test('blocked direct traffic is retried through the proxy and the crawl completes', async () => {
    origin.byExit.clear();
    const pool = tieredPool();
    const items: Page[] = [];
    const urls = Array.from({ length: 8 }, (_, i) => `${origin.url}/blocked/${i}`);
    const summary = await Mocra.builder()
      .spider(pathsSpider('gated', urls), (x) => void items.push(x))
      .proxies(pool)
      .retry({ retryStatuses: [403, 429], maxRetries: 3, baseDelayMs: 1, maxDelayMs: 5, jitter: false })
      .handleSignals(false)
      .concurrency(1)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', deadLettered: 0, retries: 2 });
    expect(items.map((i) => i.status)).toEqual(Array(8).fill(200));
    expect(items.map((i) => i.h1).sort()).toEqual(urls.map((u) => new URL(u).pathname).sort());
    // The origin saw 2 direct requests (both 403) and 8 from the proxy's exit address.
    expect(Object.fromEntries(origin.byExit)).toEqual({ '127.0.0.1': 2, '127.0.0.2': 8 });
    expect(pool.tierFor('127.0.0.1')).toBe(1);
    await pool.close();
  });

  test('a captcha page served with 200 counts as blocked too, and blocked.retry re-downloads it', async () => {
    origin.byExit.clear();
    const pool = tieredPool();
    const items: Page[] = [];
    const urls = Array.from({ length: 4 }, (_, i) => `${origin.url}/captcha/${i}`);
    const summary = await Mocra.builder()
      .spider(pathsSpider('captcha', urls), (x) => void items.push(x))
      .proxies(pool, { blocked: { retry: true } })
      .retry({ maxRetries: 3, baseDelayMs: 1, maxDelayMs: 5, jitter: false })
      .handleSignals(false)
      .concurrency(1)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', deadLettered: 0, retries: 2 });
    expect(summary.errorsByCode).toEqual({ MOCRA_ERR_BLOCKED: 2 });
    // No captcha page reached parse: each was retried, and the retries went through the proxy.
    expect(items.map((i) => i.title)).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect(pool.stats().direct).toMatchObject({ failures: 2 });
    expect(Object.fromEntries(origin.byExit)).toEqual({ '127.0.0.1': 2, '127.0.0.2': 4 });
    await pool.close();
  });

  test('blocked detection is configurable: off, or your own judgement', async () => {
    const off = tieredPool();
    await Mocra.builder()
      .spider(
        defineSpider({
          name: 'no-detection',
          startUrls: [0, 1, 2].map((i) => `${site.url}/status/403?off=${i}`),
          parse: () => {},
        }),
        () => {},
      )
      .proxies(off, { blocked: false })
      .handleSignals(false)
      .concurrency(1)
      .run();
    // A 403 is just a response now: successes, no escalation.
    expect(off.stats().direct).toEqual({ requests: 3, successes: 3, failures: 0 });
    expect(off.tierFor('127.0.0.1')).toBe(0);
    await off.close();

    const own = tieredPool();
    await Mocra.builder()
      .spider(
        defineSpider({
          name: 'own-detection',
          startUrls: [0, 1, 2].map((i) => `${site.url}/quotes/page/${i + 1}`),
          parse: () => {},
        }),
        () => {},
      )
      .proxies(own, { blocked: { detect: (res) => res.$('div.quote').length > 0 } })
      .handleSignals(false)
      .concurrency(1)
      .run();
    expect(own.stats().direct).toMatchObject({ requests: 2, failures: 2 });
    expect(own.tierFor('127.0.0.1')).toBe(1);
    await own.close();
  });
});
