/**
 * A slow crawl of the offline fixture book shop with the live dashboard.
 *
 *   node --import tsx --conditions=@mocra/source examples/dashboard.ts
 *
 * Open the printed URL: throughput, latency, queues, hosts, logs, pause/resume (the API key is
 * printed too). It stops by itself after DURATION_MS (default 60 s) or on Ctrl-C, and exits 0.
 * PORT picks the port (default: a free one).
 */
import { randomBytes } from 'node:crypto';
import { startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';

const durationMs = Math.min(Math.max(Number(process.env.DURATION_MS ?? 60_000), 1_000), 3_600_000);
const port = Number(process.env.PORT ?? 0);
const apiKey = process.env.MOCRA_API__API_KEY ?? randomBytes(12).toString('base64url');

// 1000 books on an offline site that answers in 80–200 ms: slow enough to watch.
const site = await startFixtureSite({ catalog: { books: 1000 } });
site.setLatency(80, 120);

const books = defineSpider<{ title: string; price: string }>({
  name: 'books',
  startUrls: [`${site.url}/books/page/1`],
  parse(res, cx) {
    const $ = res.$;
    $('article.product_pod h3 a, li.next a').each((_, a) => {
      cx.follow($(a).attr('href')!);
    });
    const book = $('article.product');
    if (book.length > 0) cx.emit({ title: book.find('h1').text(), price: book.find('.price').text() });
  },
});

const stop = AbortSignal.timeout(durationMs);
const summary = await Mocra.builder()
  .spider(books, () => {})
  .concurrency(3)
  .signal(stop)
  .dashboard({
    port,
    apiKey,
    // Keep the dashboard up for the whole demo, even once every book is in.
    keepAlive: true,
    onListen(url) {
      console.log(`dashboard: ${url}/`);
      console.log(`API key (pause, resume, dead letters): ${apiKey}`);
      console.log(`stopping in ${Math.round(durationMs / 1000)} s, or press Ctrl-C`);
    },
  })
  .run();

console.log(
  `${summary.items} books from ${summary.pages} pages in ${summary.durationMs} ms (${summary.reason})`,
);
await site.close();
