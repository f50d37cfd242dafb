// The browser downloader end to end through a spider: the fixture's JavaScript-only quotes
// pages, rendered in the system Chromium, followed page by page through the rendered pager.
import { createBrowserDownloader } from '@mocra/core/browser';
import { createProxyPool } from '@mocra/proxy';
import { type FixtureSite, quoteList, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTinyproxy } from './e2e-proxy-servers.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

interface Quote {
  text: string;
  author: string;
  tags: string[];
}

describe('browser downloader through a spider', () => {
  test('crawls every JavaScript-rendered quotes page by following the rendered pager', async () => {
    const quotes: Quote[] = [];
    const spider = defineSpider<Quote>({
      name: 'js-quotes',
      downloader: 'browser',
      startUrls: [`${site.url}/quotes/js/page/1`],
      parse(res, cx) {
        for (const el of res.$('div.quote').toArray()) {
          const q = res.$(el);
          cx.emit({
            text: q.find('span.text').text(),
            author: q.find('small.author').text(),
            tags: q
              .find('a.tag')
              .map((_, t) => res.$(t).text())
              .get(),
          });
        }
        const next = res.$('li.next a').attr('href');
        if (next) cx.follow(next); // the spider's downloader applies to its follow-ups too
      },
    });
    const browser = createBrowserDownloader({
      maxPages: 2,
      render: { waitForSelector: 'body[data-rendered=true]' },
    });
    const summary = await Mocra.builder()
      .spider(spider, (q) => void quotes.push(q))
      .downloader(browser)
      .handleSignals(false)
      .run();
    const expected = quoteList();
    expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: expected.length / 10 });
    expect(quotes.map((q) => q.text).sort()).toEqual(expected.map((q) => `“${q.text}”`).sort());
    expect(quotes.every((q) => q.author !== '' && q.tags.length > 0)).toBe(true);
    // The engine closed the downloader when the run ended.
    expect(browser.pool.closed).toBe(true);
    expect(browser.stats()).toMatchObject({ launches: 1, renders: expected.length / 10, failures: 0 });
  });

  test('an infinite-scroll page, selected per request, next to plain HTTP requests', async () => {
    const counts: Record<string, number> = {};
    const spider = defineSpider<{ url: string; quotes: number }>({
      name: 'mixed',
      start(seeds) {
        seeds.get(`${site.url}/quotes/scroll`, {
          downloader: 'chromium',
          meta: { browser: { scroll: { until: 'body[data-complete=true]' } } },
        });
        seeds.get(`${site.url}/quotes/page/1`); // the default HTTP downloader
      },
      parse(res, cx) {
        cx.emit({ url: new URL(res.url).pathname, quotes: res.$('div.quote').length });
      },
    });
    await Mocra.builder()
      .spider(spider, (x) => {
        counts[x.url] = x.quotes;
      })
      .downloader(createBrowserDownloader({ name: 'chromium', maxPages: 1 }))
      .handleSignals(false)
      .run();
    expect(counts).toEqual({ '/quotes/scroll': quoteList().length, '/quotes/page/1': 10 });
  });

  test('renders through the proxy the pool chose: tinyproxy logs the browser’s requests', async () => {
    const tinyproxy = await startTinyproxy();
    try {
      const pool = createProxyPool({ proxies: [tinyproxy.url] });
      const counts: number[] = [];
      const summary = await Mocra.builder()
        .spider(
          defineSpider<number>({
            name: 'proxied-browser',
            downloader: 'browser',
            startUrls: [1, 2].map((n) => `${site.url}/quotes/js/page/${n}?via=proxy`),
            parse: (res, cx) => cx.emit(res.$('div.quote').length),
          }),
          (n) => void counts.push(n),
        )
        .downloader(
          createBrowserDownloader({ maxPages: 1, render: { waitForSelector: 'body[data-rendered=true]' } }),
        )
        .proxies(pool)
        .handleSignals(false)
        .run();
      expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: 2 });
      expect(counts).toEqual([10, 10]);
      // Chromium forwards plain-http requests through the proxy: each page shows in its log.
      const lines = tinyproxy.requestLines();
      for (const n of [1, 2])
        expect(lines).toContain(`GET ${site.url}/quotes/js/page/${n}?via=proxy HTTP/1.1`);
      expect(pool.stats().proxies[0]).toMatchObject({ requests: 2, successes: 2 });
      await pool.close();
    } finally {
      await tinyproxy.close();
    }
  });
});
