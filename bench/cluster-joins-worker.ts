/**
 * One worker of bench/cluster-joins.ts: a module whose entry node fans out UNITS requests per
 * run into a join. The cluster's seeded run submits RUNS runs. Prints one JSON line: its join
 * firings, and its join-credit writes per run and what made them (from `mocra:module:credit-flush`).
 *
 *   BASE=<origin> RUNS=20 UNITS=1000 MOCRA_QUEUE=redis://… MOCRA_NAME=… node … cluster-joins-worker.ts
 */
import diagnostics_channel from 'node:diagnostics_channel';
import { defineModule, type Engine, graph, Mocra, Request } from 'mocra';

const env = process.env;
const base = env.BASE!;
const runs = Number(env.RUNS ?? 20);
const units = Number(env.UNITS ?? 1000);

const writesByRun: Record<string, number> = {};
const triggers: Record<string, number> = {};
let flushes = 0;
diagnostics_channel.subscribe('mocra:module:credit-flush', (message) => {
  const m = message as { runId: string; wrote: boolean; trigger: string };
  flushes++;
  if (!m.wrote) return;
  writesByRun[m.runId] = (writesByRun[m.runId] ?? 0) + 1;
  triggers[m.trigger] = (triggers[m.trigger] ?? 0) + 1;
});

const fired: string[] = [];
let engine: Engine | undefined;
const module = defineModule({
  name: 'fanin',
  graph: graph()
    .edge(
      {
        id: 'fan',
        async generate(ctx) {
          if (ctx.params.run === undefined) {
            for (let r = 0; r < runs; r++)
              await engine!.submit({ module: 'fanin', runId: `${ctx.runId}-r${r}`, params: { run: r } });
            return [];
          }
          const run = String(ctx.params.run);
          return Array.from({ length: units }, (_, u) => new Request(`${base}/run/${run}/unit/${u}`));
        },
        parse(_res, cx) {
          cx.next({});
        },
      },
      {
        id: 'merge',
        join: true,
        generate(ctx) {
          fired.push(ctx.runId);
          return [];
        },
        parse() {},
      },
    )
    .build(),
});

const startedAt = Date.now();
const summary = await Mocra.builder()
  .module(module, { write() {} })
  .onStart((e) => {
    engine = e;
  })
  .concurrency(Number(env.CONCURRENCY ?? 32))
  .cluster({ completion: { pollMs: 100, checkEveryMs: 300 } })
  .logging({ level: 'warn' })
  .run();
process.stdout.write(
  `${JSON.stringify({ reason: summary.reason, pages: summary.pages, startedAt, endedAt: Date.now(), flushes, writesByRun, triggers, fired })}\n`,
);
