// One worker process of the cluster-join journey (journeys/dag-joins.test.ts). The cluster is
// chosen by configuration only (MOCRA_QUEUE, MOCRA_COORDINATION, MOCRA_NAME), as a user deploys it.
//
//   SITE_URL   origin of the test's HTTP server
//   SINK_KEY   Redis key prefix for the evidence; RUNS runs of UNITS units each
//   WORKER     this worker's name (in the evidence)
//
// The module: `fan` (entry) makes UNITS requests per run; each parsed response is recorded in a
// Redis set of the run and handed on to `merge`, a join. merge's generate records that it fired
// and how many units of its run had been parsed by then. The seeded run submits the RUNS runs.
// Prints one JSON line: the run summary's reason and this process's join-credit writes per run.
import diagnostics_channel from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { defineModule, type Engine, graph, Mocra, Request } from 'mocra';

const env = process.env;
const site = env.SITE_URL!;
const key = env.SINK_KEY!;
const runs = Number(env.RUNS);
const units = Number(env.UNITS);
const worker = env.WORKER ?? String(process.pid);
const sink = new Redis(env.SINK_REDIS ?? 'redis://127.0.0.1:6379');

// Join-credit writes this process made, per run (the cost the design promises to keep O(1)).
const writesByRun = new Map<string, number>();
let flushes = 0;
diagnostics_channel.subscribe('mocra:module:credit-flush', (message) => {
  const m = message as { runId: string; wrote: boolean };
  flushes++;
  if (env.DJ_DEBUG === '1') process.stderr.write(`flush ${JSON.stringify(message)} at ${Date.now()}\n`);
  if (m.wrote) writesByRun.set(m.runId, (writesByRun.get(m.runId) ?? 0) + 1);
});

let engine: Engine | undefined;

const fanIn = defineModule({
  name: 'fanin',
  graph: graph()
    .edge(
      {
        id: 'fan',
        async generate(ctx) {
          const run = ctx.params.run;
          if (run === undefined) {
            // The cluster's seeded run starts the journey's runs, from inside its task (so the
            // cluster is busy until they are queued), and has no units of its own.
            for (let r = 0; r < runs; r++)
              await engine!.submit({ module: 'fanin', runId: `${ctx.runId}-r${r}`, params: { run: r } });
            return [];
          }
          return Array.from(
            { length: units },
            (_, u) => new Request(`${site}/run/${String(run)}/unit/${u}`, { meta: { u } }),
          );
        },
        async parse(res, cx) {
          await sink.sadd(`${key}:units:${cx.runId}`, String(res.request.meta.u));
          cx.next({ u: res.request.meta.u });
        },
      },
      {
        id: 'merge',
        join: true,
        async generate(ctx) {
          const seen = await sink.scard(`${key}:units:${ctx.runId}`);
          await sink.rpush(
            `${key}:fired`,
            JSON.stringify({
              runId: ctx.runId,
              seen,
              worker,
              inputs: (ctx.params.inputs as unknown[]).length,
            }),
          );
          return [];
        },
        parse() {},
      },
    )
    .build(),
});

const summary = await Mocra.builder()
  .module(fanIn, { write() {} })
  .onStart((e) => {
    engine = e;
  })
  .concurrency(16)
  .cluster({
    queueOptions: { topicDefaults: { leaseMs: 2_000 }, pollMs: 100 },
    coordinationOptions: { memberTtlMs: 2_000 },
    completion: { pollMs: 100, checkEveryMs: 300 },
  })
  .logging({ level: (env.WORKER_LOG_LEVEL as 'warn' | undefined) ?? 'warn' })
  .run();

await sink.quit();
process.stdout.write(
  `${JSON.stringify({
    reason: summary.reason,
    pages: summary.pages,
    errors: summary.errors,
    errorsByCode: summary.errorsByCode,
    pending: summary.pending,
    flushes,
    writesByRun: Object.fromEntries(writesByRun),
  })}\n`,
);
