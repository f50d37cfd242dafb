// The frontier end to end on the fixture site: cx.enqueueLinks (scope, globs, depth, page
// limit), seeds from sitemaps, robots.txt and per-host politeness through the engine — with
// exact page counts from the testkit and politeness checked by the server's own counters.
import {
  expectedCounts,
  type FixtureSite,
  fixtureSitemaps,
  maxConcurrency,
  startFixtureSite,
} from '@mocra/testkit';
import { defineSpider, type EnqueueLinksOptions, Mocra } from 'mocra';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ hosts: 3 });
});
beforeEach(() => site.resetStats());
afterAll(async () => {
  await site.close();
});

interface Page {
  url: string;
  depth: number;
  title: string | undefined;
  found: number;
  label: unknown;
}

async function crawl(
  start: string | string[],
  links: EnqueueLinksOptions = {},
  configure = (b: ReturnType<typeof Mocra.builder>) => b,
) {
  const pages: Page[] = [];
  const spider = defineSpider<Page>({
    name: 'crawl',
    startUrls: typeof start === 'string' ? [start] : start,
    parse(res, cx) {
      const r = cx.enqueueLinks(links);
      cx.emit({ url: res.url, depth: cx.depth, title: r.title, found: r.found, label: cx.meta.label });
    },
  });
  const summary = await configure(Mocra.builder().concurrency(8))
    .spider(spider, (p) => void pages.push(p))
    .run();
  return { pages, summary };
}

const paths = (pages: Page[]) => pages.map((p) => new URL(p.url).pathname).sort();

describe('cx.enqueueLinks', () => {
  test('a same-host crawl from / fetches exactly the whole site once (1,169 pages)', async () => {
    const { pages, summary } = await crawl(`${site.url}/`);
    expect(summary).toMatchObject({ reason: 'idle', errors: 0, pending: 0 });
    expect(pages).toHaveLength(expectedCounts().site.pages);
    expect(new Set(pages.map((p) => p.url)).size).toBe(pages.length);
    expect(site.stats().requests).toBe(expectedCounts().site.pages);
    expect(site.hostStats(1).requests + site.hostStats(2).requests).toBe(0); // never left host 0
    const home = pages.find((p) => p.url === `${site.url}/`)!;
    expect(home).toMatchObject({ depth: 0, found: 4 });
  });

  test('include / exclude globs and a regex narrow the crawl to the catalog listing and detail pages', async () => {
    const { pages } = await crawl(`${site.url}/books/page/1`, {
      include: ['/books/page/*', /\/book\/\d+$/],
      exclude: ['/book/1??'], // books 100–199
    });
    const counts = expectedCounts().catalog;
    const books = paths(pages).filter((p) => p.startsWith('/book/'));
    expect(paths(pages).filter((p) => p.startsWith('/books/page/'))).toHaveLength(counts.listingPages);
    expect(books).toHaveLength(1000 - 100);
    expect(books.some((p) => /^\/book\/1\d\d$/.test(p))).toBe(false);
    expect(paths(pages).some((p) => p.startsWith('/books/category/'))).toBe(false);
  });

  test('maxDepth of enqueueLinks and the frontier’s maxPages are exact', async () => {
    const spec = { pages: 10_000, fanout: 5, bytes: 0 };
    const { pages } = await crawl(site.graphUrl(spec, 0), { maxDepth: 2 });
    // Depth 0: page 0; depth 1: its 5 children; depth 2: theirs (tree links 6–30) plus cross links.
    expect(Math.max(...pages.map((p) => p.depth))).toBe(2);
    expect(pages.filter((p) => p.depth === 1)).toHaveLength(5);
    const limited = await crawl(site.graphUrl(spec, 0), {}, (b) => b.frontier({ maxPages: 137 }));
    expect(limited.pages).toHaveLength(137);
    expect(limited.summary).toMatchObject({ reason: 'idle', pending: 0 });
    expect(limited.summary.frontier.overLimit).toBeGreaterThan(0);
  });

  test('labels travel with the links; a transform can rewrite or skip them', async () => {
    const { pages } = await crawl(`${site.url}/quotes/page/1`, {
      include: '/quotes/page/*',
      label: 'listing',
      transform: (link) => (link.url.endsWith('/page/3') ? false : link),
    });
    expect(paths(pages)).toEqual(['/quotes/page/1', '/quotes/page/2']);
    expect(pages.find((p) => p.url.endsWith('/page/2'))!.label).toBe('listing');
  });

  test('scope any with include patterns, and the prefix scope', async () => {
    const start = `${site.url}/`;
    const { pages } = await crawl(start, {
      scope: 'any',
      include: [`${site.hostUrl(1)}/quotes/page/1`, '/'],
    });
    expect(pages.some((p) => p.url.startsWith(site.hostUrl(1)))).toBe(false); // no link goes there
    const prefix = await crawl(`${site.url}/books/page/1`, { scope: 'prefix', prefix: `${site.url}/books/` });
    expect(paths(prefix.pages).every((p) => p.startsWith('/books/'))).toBe(true);
    expect(paths(prefix.pages)).toHaveLength(expectedCounts().catalog.listingPages + 60);
  });
});

describe('sitemaps as seeds', () => {
  test('seeds.sitemap(index) fetches every listed page once; seeds.sitemaps(site) adds the text sitemap', async () => {
    const layout = fixtureSitemaps();
    const fetched: string[] = [];
    const spider = defineSpider<string>({
      name: 'sitemap',
      start(seeds) {
        seeds.sitemaps(site.url);
      },
      parse(res, cx) {
        cx.emit(new URL(res.url).pathname);
      },
    });
    const summary = await Mocra.builder()
      .spider(spider, (p) => void fetched.push(p))
      .run();
    expect(summary).toMatchObject({ reason: 'idle', errors: 0 });
    expect(fetched.sort()).toEqual([...layout.pages].sort());
    expect(site.stats().paths['/robots.txt']).toBe(1);
  });
});

describe('politeness through the engine', () => {
  test('robots.txt: disallowed pages are dropped, not fetched; the Allow exception is fetched', async () => {
    const { pages, summary } = await crawl(`${site.url}/`, { include: ['/', '/private/**'] }, (b) =>
      b.politeness({ robots: true, maxConcurrency: 4 }),
    );
    expect(paths(pages)).toEqual(['/', '/private/public/notice']);
    expect(summary.dropped).toBe(1);
    expect(site.stats().paths['/private/secret']).toBeUndefined();
    expect(site.stats().paths['/robots.txt']).toBe(1);
  });

  test('per-host concurrency is never exceeded across three hosts (server counters), all hosts progress', async () => {
    site.setLatency(4, 4);
    try {
      const starts = site.urls.map((origin) => `${origin}/books/page/1`);
      const { pages } = await crawl(starts, { include: ['/books/page/*', '/book/*'] }, (b) =>
        b.concurrency(24).politeness({ maxConcurrency: 2 }),
      );
      const perHost = expectedCounts().catalog.listingPages + 1000;
      expect(pages).toHaveLength(3 * perHost);
      const stats = site.stats({ log: true });
      for (let i = 0; i < 3; i++) {
        expect(site.hostStats(i).requests).toBe(perHost);
        expect(site.hostStats(i).maxInFlight).toBeLessThanOrEqual(2);
        expect(maxConcurrency(stats.log, { hostIndex: i })).toBeLessThanOrEqual(2);
      }
      expect(stats.maxInFlight).toBeGreaterThan(2);
    } finally {
      site.setLatency(0, 0);
    }
  }, 120_000);

  test('429 with Retry-After: that host waits it out, the page is fetched on the retry', async () => {
    const fetched: { url: string; status: number }[] = [];
    const spider = defineSpider<{ url: string; status: number }>({
      name: 'backoff',
      startUrls: [`${site.url}/flaky/bo/1?status=429&retry-after=1`, `${site.hostUrl(1)}/book/1`],
      parse(res, cx) {
        cx.emit({ url: res.url, status: res.status });
      },
    });
    const started = Date.now();
    const summary = await Mocra.builder()
      .politeness({ maxConcurrency: 1 })
      .spider(spider, (p) => void fetched.push(p))
      .run();
    expect(summary).toMatchObject({ reason: 'idle', retries: 1 });
    expect(fetched.map((f) => f.status)).toEqual([200, 200]);
    const log = site.stats({ log: true }).log.filter((e) => e.url.startsWith('/flaky/bo/'));
    expect(log.map((e) => e.status)).toEqual([429, 200]);
    // The second attempt came after Retry-After (1 s), measured by the server's own clock.
    expect(log[1]!.start - log[0]!.end).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });
});
