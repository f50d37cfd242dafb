/**
 * Scheduler overhead per node: @mocra/dag's DagScheduler against a naive Promise-based
 * topological runner, on the same graphs of no-op nodes.
 *
 *   node --import tsx --conditions=@mocra/source bench/dag-overhead.ts [--nodes 100000] [--reps 5]
 *
 * The naive runner is what one writes by hand: walk the topological order and chain each node
 * on its predecessor's promise (`Promise.all` of them when there are several). It has none of the scheduler's features
 * (no maxInFlight, retries, timeouts, cancellation, events, report). Both runners get the graph
 * already built (validation and ordering are timed separately) and call the same no-op node.
 * Each cell is the median of `--reps` timed runs after one warm-up run; runs alternate between
 * runners so that drift hits both. Bounded: 3 shapes × 4 runners × (1 + reps) runs.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { createDag, DagScheduler, EMPTY_PAYLOAD, type Payload } from '@mocra/dag';
import { deep, layered, type Shape, wide } from './dag-shapes.js';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '100000' },
    reps: { type: 'string', default: '5' },
  },
});
const N = Math.min(Math.max(Number(values.nodes), 10), 1_000_000);
const REPS = Math.min(Math.max(Number(values.reps), 1), 20);

const noop = async (): Promise<Payload> => EMPTY_PAYLOAD;

/** The hand-written baseline: one Promise.all per node over its predecessors' promises. */
async function naiveRun(order: readonly number[], preds: readonly (readonly number[])[]): Promise<void> {
  const promises: Promise<Payload>[] = new Array(order.length);
  for (const i of order) {
    const ps = preds[i] as readonly number[];
    promises[i] =
      ps.length === 0
        ? noop()
        : ps.length === 1
          ? (promises[ps[0] as number] as Promise<Payload>).then(noop)
          : Promise.all(ps.map((p) => promises[p] as Promise<Payload>)).then(noop);
  }
  await Promise.all(promises);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

async function time(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

interface Row {
  shape: string;
  description: string;
  buildUs: number;
  naiveUs: number;
  dagUs: number;
  dagLimitedUs: number;
  dagPolicyUs: number;
}

async function measure(shape: Shape): Promise<Row> {
  const t0 = performance.now();
  const dag = createDag(shape.nodes.map((n) => ({ id: n.id, after: n.after, run: noop })));
  const buildMs = performance.now() - t0;
  const index = new Map(dag.topologicalOrder.map((id, i) => [id, i]));
  const order = dag.topologicalOrder.map((_, i) => i);
  const preds = dag.topologicalOrder.map((id) => dag.predecessors(id).map((p) => index.get(p) as number));
  const scheduler = new DagScheduler(dag);
  const limited = new DagScheduler(dag, { maxInFlight: 64 });
  // Every attempt arms (and clears) a real timeout timer; no node actually fails.
  const policed = new DagScheduler(dag, {
    defaultPolicy: { timeoutMs: 60_000, retry: { maxRetries: 2, backoff: { kind: 'fixed', delayMs: 10 } } },
  });

  await naiveRun(order, preds);
  await scheduler.run();
  await limited.run();
  await policed.run();
  const naive: number[] = [];
  const full: number[] = [];
  const capped: number[] = [];
  const withPolicy: number[] = [];
  for (let r = 0; r < REPS; r++) {
    naive.push(await time(() => naiveRun(order, preds)));
    full.push(await time(() => scheduler.run()));
    capped.push(await time(() => limited.run()));
    withPolicy.push(await time(() => policed.run()));
  }
  const perNode = (ms: number) => (ms * 1000) / dag.size;
  return {
    shape: shape.name,
    description: shape.description,
    buildUs: perNode(buildMs),
    naiveUs: perNode(median(naive)),
    dagUs: perNode(median(full)),
    dagLimitedUs: perNode(median(capped)),
    dagPolicyUs: perNode(median(withPolicy)),
  };
}

const shapes = [wide(N), deep(N), layered(N, 100)];
const rows: Row[] = [];
for (const shape of shapes) rows.push(await measure(shape));

const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
console.log(`DAG scheduler overhead — ${N.toLocaleString('en')} no-op nodes, median of ${REPS} runs`);
console.log(`${cpu} × ${os.cpus().length}, Node ${process.version}, ${os.platform()} ${os.arch()}\n`);
const f = (x: number) => x.toFixed(3);
console.log(
  '| shape | graph | build µs/node | naive µs/node | dag µs/node | dag ÷ naive | dag, maxInFlight 64 | dag, retry + timeout per node |',
);
console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
let worst = 0;
for (const r of rows) {
  const ratio = r.dagUs / r.naiveUs;
  worst = Math.max(worst, ratio);
  console.log(
    `| ${r.shape} | ${r.description} | ${f(r.buildUs)} | ${f(r.naiveUs)} | ${f(r.dagUs)} | ${ratio.toFixed(2)}× | ${f(r.dagLimitedUs)} | ${f(r.dagPolicyUs)} |`,
  );
}
console.log(`\nworst dag ÷ naive: ${worst.toFixed(2)}× (target: ≤ 2×) — ${worst <= 2 ? 'met' : 'NOT met'}`);
