// One node of the queue-less Raft cluster journeys (raft-partitioned.test.ts), configured as a
// user deploys one: `ClusterConfig.fromEnv()` (MOCRA_NODE_ID, MOCRA_HTTP_ADDR, MOCRA_DATA_DIR,
// MOCRA_SEEDS) and MOCRA_QUEUE=none — no queue service; each node runs on its own queues and
// crawls the hosts it owns.
//
//   SITES       comma-separated origins the spider starts on (one start page each); a
//               `/start_work` task's `params.sites` replaces them
//   SINK_REDIS  redis:// of the evidence; SINK_KEY its key prefix
//   API_KEY     key of this node's control API (it prints `api <url>` on stdout)
//   SERVICE     '1': a service node (stays up until SIGTERM); else a finite crawl
//   PERSIST     directory of `.persist()` (crash-safe queues and dedup set), when set
//   PAUSED      '1': start paused (the test resumes every node once all are in)
//
// Evidence, in Redis (read by the test after the run):
//   {SINK_KEY}:items           itemId → book JSON (HSETNX)
//   {SINK_KEY}:writes          itemId → writes (HINCRBY)
//   {SINK_KEY}:pages:{node}    host → pages this node parsed (HINCRBY)
//   {SINK_KEY}:visits          account → the node that ran its `visit` task (HSET)
// Prints one JSON summary on stdout when the run ends.
import { Redis } from 'ioredis';
import { ClusterConfig, defineModule, defineSpider, Mocra, Request } from 'mocra';
import { printSummary } from '../worker-summary.js';

const env = process.env;
const me = env.MOCRA_NODE_ID!;
const sinkKey = env.SINK_KEY!;
const sink = new Redis(env.SINK_REDIS ?? 'redis://127.0.0.1:6379');

interface Book {
  id: number;
  host: string;
  node: string;
}

const catalog = defineSpider<Book>({
  name: 'catalog',
  start(seeds) {
    const sites = Array.isArray(seeds.params.sites)
      ? (seeds.params.sites as string[])
      : env.SITES!.split(',');
    for (const site of sites) seeds.get(`${site}/books/page/1`);
  },
  async parse(res, cx) {
    const host = new URL(res.url).host;
    await sink.hincrby(`${sinkKey}:pages:${me}`, host, 1);
    for (const a of res.$('a[href]').toArray()) {
      const href = a.attribs.href!;
      if (href.startsWith('/book')) cx.follow(href);
    }
    const book = res.$('article.product');
    if (book.length > 0) cx.emit({ id: Number(book.attr('data-id')), host, node: me });
  },
});

// A module, partitioned by account: a `/start_work` task `{ module: 'visit', account, params: { url } }`
// runs on the owner of its account, which fetches the URL.
const visit = defineModule<{ account: string; node: string }>({
  name: 'visit',
  nodes: [
    {
      id: 'get',
      generate: (ctx) =>
        typeof ctx.params.url === 'string'
          ? [new Request(ctx.params.url, { meta: { account: ctx.account } })]
          : [],
      parse(res, cx) {
        cx.emit({ account: res.request.meta.account as string, node: me });
      },
    },
  ],
});

let builder = Mocra.builder()
  .module(visit, {
    async write(item) {
      await sink.hset(`${sinkKey}:visits`, item.account, item.node);
    },
  })
  .spider(catalog, {
    async write(item, meta) {
      await sink
        .multi()
        .hsetnx(`${sinkKey}:items`, meta.itemId, JSON.stringify(item))
        .hincrby(`${sinkKey}:writes`, meta.itemId, 1)
        .exec();
    },
  })
  .concurrency(4)
  .cluster(
    ClusterConfig.fromEnv(env, {
      node: {
        tickMs: 20,
        electionTicks: 15,
        heartbeatTicks: 3,
        sweepIntervalMs: 100,
        requestTimeoutMs: 8_000,
      },
    }),
    {
      coordinationOptions: { memberTtlMs: 2_000 },
      completion: { pollMs: 100, checkEveryMs: 300 },
      cronOwnershipMs: 250,
      service: env.SERVICE === '1',
    },
  )
  .dashboard({ port: 0, apiKey: env.API_KEY!, onListen: (url) => process.stdout.write(`api ${url}\n`) })
  .logging({ level: 'warn' });
if (env.PERSIST) builder = builder.persist(env.PERSIST);
if (env.PAUSED === '1') builder = builder.onStart((engine) => engine.pause());

const summary = await builder.run();
await sink.quit();
printSummary(summary);
