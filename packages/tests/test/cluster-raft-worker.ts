// One node of the Raft cluster e2e test (cluster-raft.test.ts). The cluster is configured the way
// a user deploys one: `ClusterConfig.fromEnv()` (MOCRA_NODE_ID, MOCRA_HTTP_ADDR, MOCRA_DATA_DIR,
// MOCRA_SEEDS) for the Raft control plane and MOCRA_QUEUE for the data plane; the spider, cron
// module and DAG job know nothing about it.
//
//   SITE_URL        origin of the fixture site
//   SINK_REDIS      redis:// of the evidence; SINK_KEY its key prefix
//   API_KEY         key of this node's control API (it prints `api <url>` on stdout)
//
// Evidence, all in Redis (each process writes its own lines; the test reads them after):
//   {SINK_KEY}:items / :writes     catalog items by itemId (HSETNX) and every write (HINCRBY)
//   {SINK_KEY}:ticks / :tickwrites cron items by itemId, and writes
//   {SINK_KEY}:fires               every cron firing: `{scheduledAt}|{node}` (RPUSH, at fire time)
//   {SINK_KEY}:starts              every run of the catalog spider's start (seeding): the node
//   {SINK_KEY}:dag                 every finished DAG node: `{node}|{ran on}|{token}`
//   {SINK_KEY}:dagresult           the DAG job's result item (HSET by itemId)
import diagnostics_channel from 'node:diagnostics_channel';
import { createDag, jsonPayload, readJson } from '@mocra/dag';
import { Redis } from 'ioredis';
import { ClusterConfig, defineModule, defineSpider, Mocra, Request } from 'mocra';
import { printSummary } from './worker-summary.js';

const env = process.env;
const site = env.SITE_URL!;
const sinkKey = env.SINK_KEY!;
const me = env.MOCRA_NODE_ID!;
const sink = new Redis(env.SINK_REDIS ?? 'redis://127.0.0.1:6379');

interface Book {
  id: number;
  title: string;
}

const catalog = defineSpider<Book>({
  name: 'catalog',
  async start(seeds) {
    await sink.rpush(`${sinkKey}:starts`, me);
    seeds.get(`${site}/books/page/1`);
  },
  parse(res, cx) {
    const $ = res.$;
    for (const a of $('a[href]').toArray()) {
      const href = a.attribs.href!;
      if (href.startsWith('/book')) cx.follow(href);
    }
    const book = $('article.product');
    if (book.length === 0) return;
    cx.emit({ id: Number(book.attr('data-id')), title: book.find('h1').text() });
  },
});

// A cron module: one task per second; each task fetches a page unique to its tick.
const ticker = defineModule<{ tick: number }>({
  name: 'ticker',
  cron: '* * * * * *',
  nodes: [
    {
      id: 'tick',
      generate: (ctx) => {
        const tick = (ctx.params.cron as { scheduledAt: number }).scheduledAt;
        return [new Request(`${site}/?tick=${tick}`, { meta: { tick } })];
      },
      parse(res, cx) {
        cx.emit({ tick: res.request.meta.tick as number });
      },
    },
  ],
});
diagnostics_channel.subscribe('mocra:schedule:fire', (message) => {
  const firing = message as { jobId: string; scheduledAt: number };
  if (firing.jobId.startsWith('ticker:')) void sink.rpush(`${sinkKey}:fires`, `${firing.scheduledAt}|${me}`);
});

// A DAG job: a chain of local and remote-placed steps; `hold` is long, so a run can be caught in it.
const step =
  (id: string, ms: number) => async (ctx: { fencingToken: number | undefined; signal: AbortSignal }) => {
    // Started: its predecessors' outputs are checkpointed by then (the executor commits a
    // node's output before its successors may start).
    await sink.rpush(`${sinkKey}:dagstart`, `${id}|${me}|${ctx.fencingToken}`);
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, ms);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(t);
        reject(ctx.signal.reason);
      });
    });
    await sink.rpush(`${sinkKey}:dag`, `${id}|${me}|${ctx.fencingToken}`);
    return jsonPayload({ step: id, by: me });
  };
const report = () =>
  createDag([
    { id: 'extract', run: step('extract', 400) },
    {
      id: 'enrich',
      after: ['extract'],
      placement: { kind: 'remote', workerGroup: 'cpu' },
      run: step('enrich', 400),
    },
    { id: 'hold', after: ['enrich'], run: step('hold', Number(env.DAG_HOLD_MS ?? 6000)) },
    {
      id: 'score',
      after: ['hold'],
      placement: { kind: 'remote', workerGroup: 'cpu' },
      run: step('score', 300),
    },
    {
      id: 'publish',
      after: ['score'],
      run: async (ctx) => {
        await sink.rpush(`${sinkKey}:dag`, `publish|${me}|${ctx.fencingToken}`);
        return jsonPayload({ published: readJson<{ step: string }>(ctx.input('score')).step });
      },
    },
  ]);

const summary = await Mocra.builder()
  .spider(catalog, {
    async write(item, meta) {
      await sink
        .multi()
        .hsetnx(`${sinkKey}:items`, meta.itemId, JSON.stringify(item))
        .hincrby(`${sinkKey}:writes`, meta.itemId, 1)
        .exec();
    },
  })
  .module(ticker, {
    async write(item, meta) {
      await sink
        .multi()
        .hsetnx(`${sinkKey}:ticks`, meta.itemId, JSON.stringify(item))
        .hincrby(`${sinkKey}:tickwrites`, meta.itemId, 1)
        .exec();
    },
  })
  .dag('report', report, {
    guardTtlMs: 3_000,
    sink: async (result, meta) => {
      await sink.hset(`${sinkKey}:dagresult`, meta.itemId, JSON.stringify(result));
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
      queueOptions: { topicDefaults: { leaseMs: 2_000 }, pollMs: 100 },
      coordinationOptions: { memberTtlMs: 2_000 },
      completion: { pollMs: 100, checkEveryMs: 300 },
      cronOwnershipMs: 250,
      // A finite crawl that also has a cron module: it ends with the crawl instead of staying up.
      service: false,
    },
  )
  .dashboard({ port: 0, apiKey: env.API_KEY!, onListen: (url) => process.stdout.write(`api ${url}\n`) })
  .logging({ level: (env.WORKER_LOG_LEVEL as 'warn' | undefined) ?? 'warn' })
  .run();

await sink.quit();
printSummary(summary);
