// The README's "testing a spider offline" example, run for real. `scrapeBooks` stands in for the
// user's spider: any code that crawls a start URL and returns items.
import { request } from 'undici';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { agent } from './__fixtures__/http.js';
import { catalogBooks, expectedCounts, maxConcurrency, startFixtureSite } from './index.js';

interface ScrapedBook {
  title: string;
  price: string;
}

/** A minimal spider: listing pages → detail pages, `concurrency` requests at a time. */
async function scrapeBooks(
  startUrl: string,
  { concurrency }: { concurrency: number },
): Promise<ScrapedBook[]> {
  const queue = [startUrl];
  const seen = new Set(queue);
  const items: ScrapedBook[] = [];
  async function worker(): Promise<void> {
    for (let url = queue.shift(); url !== undefined; url = queue.shift()) {
      const res = await request(url, { dispatcher: agent });
      const html = await res.body.text();
      const title = /<article class="product"[^>]*>\s*<h1>([^<]*)<\/h1>/.exec(html)?.[1];
      const price = /<p class="price[^"]*">([^<]*)<\/p>/.exec(html)?.[1];
      if (title !== undefined && price !== undefined) items.push({ title, price });
      const links = [...html.matchAll(/<(?:h3|li class="next")><a href="([^"]+)"/g)].map(
        (m) => new URL(m[1]!, url).href,
      );
      for (const link of links) {
        if (seen.has(link)) continue;
        seen.add(link);
        queue.push(link);
      }
    }
  }
  // Workers stop when the queue is momentarily empty; run rounds until nothing is left.
  while (queue.length > 0) await Promise.all(Array.from({ length: concurrency }, worker));
  return items;
}

// ---- The README example from here on ----

let site: Awaited<ReturnType<typeof startFixtureSite>>;
beforeAll(async () => {
  site = await startFixtureSite({ catalog: { books: 100 } });
});
afterAll(() => site.close());

test('my spider scrapes every book exactly once, politely', async () => {
  const items = await scrapeBooks(`${site.url}/books/page/1`, { concurrency: 4 });

  const expected = catalogBooks({ catalog: { books: 100 } }).map(({ title, price }) => ({ title, price }));
  const byTitle = (a: ScrapedBook, b: ScrapedBook) =>
    a.title.localeCompare(b.title) || a.price.localeCompare(b.price);
  expect(items.sort(byTitle)).toEqual(expected.sort(byTitle));

  // The server's own counters: 5 listing pages + 100 detail pages, never more than 4 at once.
  const stats = site.stats();
  expect(stats.requests).toBe(expectedCounts({ catalog: { books: 100 } }).catalog.listingPages + 100);
  expect(site.hostStats(0).maxInFlight).toBeLessThanOrEqual(4);
  expect(maxConcurrency(stats.log)).toBeLessThanOrEqual(4);
});
