// One worker process of the distributed e2e tests (distributed-*.test.ts). The cluster is chosen
// by configuration only — MOCRA_QUEUE, MOCRA_COORDINATION, MOCRA_RUN_ID, MOCRA_NAME — exactly as
// a user would deploy it; the spider code knows nothing about it.
//
//   SITE_URL        origin of the fixture site
//   SINK_REDIS      redis:// of the item sink; SINK_KEY its key prefix
//   HOST_MAX        per-host concurrency for the whole cluster; HOST_GAP_MS gap between starts
//
// Items go to a Redis hash keyed by itemId (HSETNX: a sink that dedupes on itemId), and every
// write is counted (HINCRBY) so the test sees redeliveries. Prints one JSON summary on stdout.
import { Redis } from 'ioredis';
import { defineSpider, Mocra } from 'mocra';
import { printSummary } from './worker-summary.js';

const env = process.env;
const site = env.SITE_URL!;
const sinkKey = env.SINK_KEY!;
const sink = new Redis(env.SINK_REDIS ?? 'redis://127.0.0.1:6379');

interface Book {
  id: number;
  title: string;
  price: string;
}

const spider = defineSpider<Book>({
  name: 'catalog',
  startUrls: [`${site}/books/page/1`],
  parse(res, cx) {
    const $ = res.$;
    for (const a of $('a[href]').toArray()) {
      const href = a.attribs.href!;
      if (href.startsWith('/book')) cx.follow(href);
    }
    const book = $('article.product');
    if (book.length === 0) return;
    cx.emit({
      id: Number(book.attr('data-id')),
      title: book.find('h1').text(),
      price: book.find('p.price').text(),
    });
  },
});

const summary = await Mocra.builder()
  .spider(spider, {
    async write(item, meta) {
      await sink
        .multi()
        .hsetnx(`${sinkKey}:items`, meta.itemId, JSON.stringify(item))
        .hincrby(`${sinkKey}:writes`, meta.itemId, 1)
        .exec();
    },
  })
  .concurrency(8)
  .cluster({
    queueOptions: { topicDefaults: { leaseMs: 2_000 }, pollMs: 100 },
    coordinationOptions: { memberTtlMs: 2_000 },
    completion: { pollMs: 100, checkEveryMs: 300 },
    ...(env.HOST_MAX
      ? {
          politeness: {
            maxConcurrency: Number(env.HOST_MAX),
            delayMs: Number(env.HOST_GAP_MS ?? 0),
            jitter: 0,
            leaseTtlMs: 2_000,
          },
        }
      : {}),
  })
  .logging({ level: (env.WORKER_LOG_LEVEL as 'warn' | undefined) ?? 'warn' })
  .run();

await sink.quit();
printSummary(summary);
