// One node of the service-node e2e tests (service-nodes.test.ts): a node that stays up, fed by
// `/start_work` and by cron, configured the way a user deploys one — MOCRA_QUEUE,
// MOCRA_COORDINATION, MOCRA_NAME, and with RAFT=1 the embedded Raft cluster from
// `ClusterConfig.fromEnv()` (MOCRA_NODE_ID, MOCRA_HTTP_ADDR, MOCRA_DATA_DIR, MOCRA_SEEDS).
//
//   SITE_URL     origin of the fixture site
//   SINK_REDIS   redis:// of the evidence; SINK_KEY its key prefix
//   API_KEY      key of this node's control API (it prints `api <url>` on stdout)
//   MODE         'keepalive': the dashboard's keepAlive makes it a service node
//                'cron': a module with a cron (every second) does
//   NODE         this node's name in the evidence
//
// Evidence, in Redis: {SINK_KEY}:items (itemId → `{url|tick, node}`, HSETNX), {SINK_KEY}:writes
// (HINCRBY per itemId), {SINK_KEY}:fires (`{scheduledAt}|{node}|{firedAt}`, RPUSH at fire time),
// {SINK_KEY}:skips (`{scheduledAt}|{node}|{reason}|{count}`: ticks skipped for a reason other
// than another node's ownership or claim).
// Prints one JSON summary on stdout when the run ends.
import diagnostics_channel from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { ClusterConfig, defineModule, Mocra, Request } from 'mocra';
import { printSummary } from './worker-summary.js';

const env = process.env;
const site = env.SITE_URL!;
const sinkKey = env.SINK_KEY!;
const me = env.NODE ?? env.MOCRA_NODE_ID ?? String(process.pid);
const sink = new Redis(env.SINK_REDIS ?? 'redis://127.0.0.1:6379');

// Fetches the URL a `/start_work` task names, marked with the node that fetches it (its seed,
// with no URL, fetches nothing).
const fetchPage = defineModule<{ url: string; node: string }>({
  name: 'fetch',
  nodes: [
    {
      id: 'get',
      generate: (ctx) => {
        const url = ctx.params.url;
        return typeof url === 'string' ? [new Request(`${url}?by=${me}`, { meta: { url } })] : [];
      },
      parse(res, cx) {
        cx.emit({ url: res.request.meta.url as string, node: me });
      },
    },
  ],
});

// A cron module: one task per second, each fetching a page unique to its tick.
const ticker = defineModule<{ tick: number; node: string }>({
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
        cx.emit({ tick: res.request.meta.tick as number, node: me });
      },
    },
  ],
});
diagnostics_channel.subscribe('mocra:schedule:fire', (message) => {
  const firing = message as { jobId: string; scheduledAt: number; firedAt: number };
  if (firing.jobId.startsWith('ticker'))
    void sink.rpush(`${sinkKey}:fires`, `${firing.scheduledAt}|${me}|${firing.firedAt}`);
});

diagnostics_channel.subscribe('mocra:schedule:skip', (message) => {
  const skip = message as { jobId: string; scheduledAt: number; reason: string; count?: number };
  if (skip.jobId.startsWith('ticker') && skip.reason !== 'not-owner' && skip.reason !== 'claimed')
    void sink.rpush(`${sinkKey}:skips`, `${skip.scheduledAt}|${me}|${skip.reason}|${skip.count ?? 1}`);
});

const write = async (item: unknown, meta: { itemId: string }) => {
  await sink
    .multi()
    .hsetnx(`${sinkKey}:items`, meta.itemId, JSON.stringify(item))
    .hincrby(`${sinkKey}:writes`, meta.itemId, 1)
    .exec();
};

const builder = Mocra.builder().module(fetchPage, write);
if (env.MODE === 'cron') builder.module(ticker, write);
const timing = {
  queueOptions: { topicDefaults: { leaseMs: 2_000 }, pollMs: 100 },
  coordinationOptions: { memberTtlMs: 1_500 },
  completion: { pollMs: 100, checkEveryMs: 300 },
  cronOwnershipMs: 250,
};
if (env.RAFT === '1') {
  builder.cluster(
    ClusterConfig.fromEnv(env, {
      node: {
        tickMs: 20,
        electionTicks: 15,
        heartbeatTicks: 3,
        sweepIntervalMs: 100,
        requestTimeoutMs: 3_000,
      },
    }),
    timing,
  );
} else {
  builder.cluster({ ...timing, nodeId: me });
}
const summary = await builder
  .concurrency(4)
  .dashboard({
    port: 0,
    apiKey: env.API_KEY!,
    keepAlive: env.MODE === 'keepalive',
    onListen: (url) => process.stdout.write(`api ${url}\n`),
  })
  .logging({ level: (env.WORKER_LOG_LEVEL as 'warn' | undefined) ?? 'warn' })
  .run();

await sink.quit();
printSummary(summary);
