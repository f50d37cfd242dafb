// robots.txt against the fixture site: rules, user-agent groups, one fetch per origin, RFC 9309's
// unavailable/unreachable cases (on a fake clock), and Crawl-delay enforced by the scheduler.
import { startFixtureSite, startHostileSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { HostScheduler } from '../src/frontier/politeness/host-scheduler.js';
import { createResourceFetcher, readLimited } from '../src/frontier/robots/resource-fetcher.js';
import { RobotsCache } from '../src/frontier/robots/robots-cache.js';
import { Request } from '../src/model/request.js';
import { ManualClock } from '../src/schedule/clock.js';

let site: Awaited<ReturnType<typeof startFixtureSite>>;
beforeAll(async () => {
  site = await startFixtureSite({ hosts: 3 });
});
afterAll(() => site.close());

const u = (path: string, host = 0) => new URL(`${site.hostUrl(host)}${path}`);
const robotsFetches = () => site.stats().paths['/robots.txt'] ?? 0;

describe('RobotsCache', () => {
  test('allow/disallow of the * group, Allow overriding a broader Disallow, sitemaps listed', async () => {
    site.resetStats();
    const robots = new RobotsCache();
    expect((await robots.check(u('/private/secret'))).allowed).toBe(false);
    expect((await robots.check(u('/private/public/notice'))).allowed).toBe(true);
    expect((await robots.check(u('/books/page/1'))).allowed).toBe(true);
    expect(await robots.sitemaps(site.url)).toEqual([`${site.url}/sitemap.xml`, `${site.url}/sitemap.txt`]);
    expect(robotsFetches()).toBe(1);
  });

  test('our product token selects its own group (case-insensitive), with its Crawl-delay', async () => {
    const robots = new RobotsCache({ userAgent: 'Fixture-SlowBot' });
    const v = await robots.check(u('/books/page/1'));
    expect(v).toEqual({ allowed: false, crawlDelayMs: 5000 });
    expect((await robots.check(u('/private/secret'))).allowed).toBe(true); // its group has no /private rule
  });

  test('fetched once per origin, also under concurrent checks; cached answers are synchronous', async () => {
    site.resetStats();
    const robots = new RobotsCache();
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => robots.check(u(i % 2 ? '/private/x' : '/books/page/1', i % 3))),
    );
    expect(answers.filter((a) => a.allowed)).toHaveLength(20);
    expect(robots.fetches).toBe(3);
    for (let i = 0; i < 3; i++) expect(site.stats().hosts[new URL(site.hostUrl(i)).host]!.requests).toBe(1);
    const again = robots.check(u('/books/page/2'));
    expect(again).not.toBeInstanceOf(Promise);
    expect(robots.fetches).toBe(3);
  });

  test('404 (unavailable): everything is allowed', async () => {
    site.setRobots(false, 1);
    try {
      const robots = new RobotsCache();
      expect(await robots.check(u('/private/secret', 1))).toEqual({ allowed: true, crawlDelayMs: undefined });
      expect((await robots.entry(site.hostUrl(1))).status).toBe('unavailable');
    } finally {
      site.setRobots({}, 1);
    }
  });

  test('503 and 429 (unreachable): nothing is allowed, retried later, and after 30 days assumed absent', async () => {
    const clock = new ManualClock();
    const robots = new RobotsCache({ clock, unreachableRetryMs: 60_000 });
    for (const status of [503, 429]) {
      robots.clear();
      site.setRobots({ status }, 2);
      expect((await robots.check(u('/books/page/1', 2))).allowed).toBe(false);
      expect((await robots.entry(site.hostUrl(2))).status).toBe('unreachable');
    }
    // Still failing on retry: the outage keeps its start time; after 30 days it counts as "no robots.txt".
    await clock.advance(60_000);
    expect((await robots.check(u('/books/page/1', 2))).allowed).toBe(false);
    await clock.advance(30 * 86_400_000);
    expect((await robots.check(u('/books/page/1', 2))).allowed).toBe(true);
    // Back up: the rules apply again after the retry interval.
    site.setRobots({}, 2);
    robots.clear();
    expect((await robots.check(u('/books/page/1', 2))).allowed).toBe(true);
    expect((await robots.check(u('/private/x', 2))).allowed).toBe(false);
  });

  test('a network failure is unreachable too', async () => {
    const robots = new RobotsCache();
    const closed = new URL('http://127.0.0.1:9/x'); // discard port: nothing listens
    expect(await robots.check(closed)).toMatchObject({ allowed: false, crawlDelayMs: undefined });
    expect((await robots.check(closed)).reason).toMatch(
      /robots\.txt of http:\/\/127\.0\.0\.1:9 is unreachable/,
    );
    expect((await robots.entry('http://127.0.0.1:9')).error).toBeTruthy();
  });

  test('entries expire after ttlMs and the cache is bounded', async () => {
    const clock = new ManualClock();
    const robots = new RobotsCache({ clock, ttlMs: 1000, maxEntries: 2 });
    await robots.check(u('/', 0));
    await clock.advance(1000);
    await robots.check(u('/', 0));
    expect(robots.fetches).toBe(2);
    await robots.check(u('/', 1));
    await robots.check(u('/', 2));
    expect(robots.size).toBe(2);
  });

  test('literal robots.txt and a body over maxBytes: the rules read so far apply', async () => {
    const rules = `User-agent: *\nDisallow: /a\n# ${'x'.repeat(2000)}\nDisallow: /b\n`;
    site.setRobots(rules, 1);
    try {
      const robots = new RobotsCache({ maxBytes: 100 });
      expect((await robots.check(u('/a', 1))).allowed).toBe(false);
      expect((await robots.check(u('/b', 1))).allowed).toBe(true);
    } finally {
      site.setRobots({}, 1);
    }
  });
});

describe('the resource fetcher', () => {
  test('follows redirects, gives up after maxRedirects', async () => {
    const fetch = createResourceFetcher({ maxRedirects: 5 });
    const ok = await fetch(`${site.url}/redirect/3`);
    expect(ok.status).toBe(200);
    expect(ok.url).toBe(`${site.url}/redirect/0`);
    await ok.discard();
    await expect(fetch(`${site.url}/redirect-loop/3/0`)).rejects.toMatchObject({
      name: 'TooManyResourceRedirects',
    });
    const big = await fetch(`${site.url}/huge?bytes=1000000`);
    const { bytes, truncated } = await readLimited(big, 1000);
    expect(bytes.length).toBe(1000);
    expect(truncated).toBe(true);
  });

  test('a deadline for the whole fetch: a silent server and a body that trickles in', async () => {
    const hostile = await startHostileSite();
    try {
      const fetch = createResourceFetcher({ timeoutMs: 30_000, requestTimeoutMs: 400 });
      await expect(fetch(`${hostile.url}/silent/robots`)).rejects.toMatchObject({
        code: 'MOCRA_ERR_TIMEOUT',
        phase: 'request',
      });
      const slow = await fetch(`${hostile.url}/slow-body/1000?intervalMs=50`);
      await expect(readLimited(slow, 10_000)).rejects.toMatchObject({ code: 'MOCRA_ERR_TIMEOUT' });
      // A fetch read to its end within the deadline is not cut later.
      const fine = await fetch(`${hostile.url}/linked/3`);
      expect((await readLimited(fine, 100_000)).bytes.length).toBeGreaterThan(0);
    } finally {
      await hostile.close();
    }
  });
});

describe('Crawl-delay from the real robots.txt, enforced on a fake clock', () => {
  test('the scheduler spaces requests by the host’s Crawl-delay', async () => {
    site.setRobots({ crawlDelay: 2 }, 1);
    try {
      const clock = new ManualClock();
      const robots = new RobotsCache({ clock });
      const scheduler = new HostScheduler({ robots, clock, maxConcurrency: 4, jitter: 0 });
      const enter = (path: string) => scheduler.enter(new Request(`${site.hostUrl(1)}${path}`));
      expect(await enter('/book/1')).toBeUndefined();
      let second: unknown = 'pending';
      const p = Promise.resolve(enter('/book/2')).then((d) => {
        second = d;
      });
      await clock.advance(1999);
      expect(second).toBe('pending');
      await clock.advance(1);
      await p;
      expect(second).toBeUndefined();
      expect(scheduler.host(new URL(site.hostUrl(1)).hostname)!.crawlDelayMs).toBe(2000);
      expect(await enter('/private/secret')).toEqual({ drop: 'disallowed by robots.txt: /private/secret' });
    } finally {
      site.setRobots({}, 1);
    }
  });
});
