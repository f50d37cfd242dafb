/**
 * @mocra/dag on its own, for a job that has nothing to do with crawling: a small ETL over
 * generated sales data.
 *
 *   extract:<region> ─▶ validate:<region> ─┐
 *   (one per region: fan-out)              ├─▶ aggregate ─▶ load
 *   fx-rates (flaky: retried with backoff) ┘   (fan-in)
 *
 * The first run finds the warehouse offline, so `load` fails and the run stops with
 * ExecutionIncompleteError. Every node that did succeed was checkpointed; the second run
 * restores them and runs only `load`. A run guard gives each run a fencing token, and every
 * output is committed to a fencing store under it.
 *
 *   pnpm --filter @mocra/dag build && pnpm exec tsx examples/dag-standalone.ts
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  createDagBuilder,
  createMemoryEventSink,
  createMemoryFencingStore,
  createMemoryRunGuard,
  createMemoryRunStateStore,
  DagScheduler,
  ExecutionIncompleteError,
  jsonPayload,
  PermanentNodeError,
  RetryableNodeError,
  readJson,
  textPayload,
} from '@mocra/dag';

interface Sale {
  id: number;
  region: string;
  currency: 'EUR' | 'USD' | 'JPY';
  amount: number;
}
interface Summary {
  byRegion: Record<string, { count: number; totalEur: number }>;
  rejected: number;
}

const REGIONS = ['americas', 'asia', 'europe'] as const;
const SALES_PER_REGION = 5_000;

/** Deterministic data: a tiny linear congruential generator, seeded per region. */
function generateSales(region: string, seed: number): Sale[] {
  let state = seed;
  const next = () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
  const currencies = ['EUR', 'USD', 'JPY'] as const;
  return Array.from({ length: SALES_PER_REGION }, (_, i) => ({
    id: i,
    region,
    currency: currencies[Math.floor(next() * 3)] ?? 'EUR',
    // about 2 % of rows are broken (negative amounts) and must be rejected by validation
    amount: next() < 0.02 ? -1 : Math.round(next() * 100_000) / 100,
  }));
}

const RATES_TO_EUR = { EUR: 1, USD: 0.92, JPY: 0.0059 };

// ── the graph ──────────────────────────────────────────────────────────────────────────────

let ratesCalls = 0;
let warehouseOnline = false;
const outFile = path.join(os.tmpdir(), `mocra-dag-example-${process.pid}.csv`);
const executed: string[] = [];

const builder = createDagBuilder();
builder.addNode(
  'fx-rates',
  async (ctx) => {
    executed.push(ctx.nodeId);
    ratesCalls++;
    // The rates service answers 503 twice before it works.
    if (ratesCalls <= 2) throw new RetryableNodeError(`rates service: 503 (call ${ratesCalls})`);
    return jsonPayload(RATES_TO_EUR);
  },
  {
    retry: {
      maxRetries: 4,
      backoff: { kind: 'exponential', initialDelayMs: 20, maxDelayMs: 200 },
      jitter: 0.2,
    },
    timeoutMs: 2_000,
  },
);
REGIONS.forEach((region, i) => {
  builder.addChain([
    {
      id: `extract:${region}`,
      run: async (ctx) => {
        executed.push(ctx.nodeId);
        return jsonPayload(generateSales(region, 42 + i));
      },
    },
    {
      id: `validate:${region}`,
      run: async (ctx) => {
        executed.push(ctx.nodeId);
        const sales = readJson<Sale[]>(ctx.input(`extract:${region}`));
        const valid = sales.filter((s) => s.amount >= 0);
        return jsonPayload(valid, { metadata: { rejected: String(sales.length - valid.length) } });
      },
    },
  ]);
});
builder.fanIn(['fx-rates', ...REGIONS.map((r) => `validate:${r}`)], {
  id: 'aggregate',
  run: async (ctx) => {
    executed.push(ctx.nodeId);
    const rates = readJson<typeof RATES_TO_EUR>(ctx.input('fx-rates'));
    const summary: Summary = { byRegion: {}, rejected: 0 };
    for (const region of REGIONS) {
      const input = ctx.input(`validate:${region}`);
      const sales = readJson<Sale[]>(input);
      const totalEur = sales.reduce((sum, s) => sum + s.amount * rates[s.currency], 0);
      summary.byRegion[region] = { count: sales.length, totalEur: Math.round(totalEur * 100) / 100 };
      summary.rejected += Number(input.metadata.rejected);
    }
    return jsonPayload(summary);
  },
});
builder.addNode(
  'load',
  async (ctx) => {
    executed.push(ctx.nodeId);
    if (!warehouseOnline) throw new PermanentNodeError('warehouse is offline');
    const summary = readJson<Summary>(ctx.input('aggregate'));
    const csv = [
      'region,count,total_eur',
      ...Object.entries(summary.byRegion).map(([r, s]) => `${r},${s.count},${s.totalEur.toFixed(2)}`),
    ].join('\n');
    // A real job would pass ctx.fencingToken to the warehouse so that it rejects stale writers.
    fs.writeFileSync(outFile, `${csv}\n`);
    return textPayload(outFile, { metadata: { fencingToken: String(ctx.fencingToken) } });
  },
  { after: ['aggregate'] },
);
const dag = builder.build();

// ── running it ─────────────────────────────────────────────────────────────────────────────

const events = createMemoryEventSink();
const fencing = createMemoryFencingStore();
const scheduler = new DagScheduler(dag, {
  key: 'sales-etl:2024-06-01',
  maxInFlight: 4,
  runGuard: { guard: createMemoryRunGuard(), ttlMs: 10_000 },
  fencing: { store: fencing },
  runState: { store: createMemoryRunStateStore() },
  eventSink: events,
});

console.log(`graph: ${dag.size} nodes in ${dag.layers.length} layers`);
for (const [i, layer] of dag.layers.entries()) console.log(`  layer ${i}: ${layer.join(', ')}`);

let failures = 0;
const check = (ok: boolean, what: string) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
};

try {
  await scheduler.run({ runId: 'sales-etl-run-1' });
  check(false, 'the first run should have stopped at load');
} catch (err) {
  if (!(err instanceof ExecutionIncompleteError)) throw err;
  console.log(`\nrun 1 stopped: ${err.message}`);
  check(err.unfinishedNodes.join() === 'load', 'run 1 left only load unfinished');
}
const retries = events.ofType('node-retry-scheduled').filter((e) => e.nodeId === 'fx-rates');
console.log(
  `fx-rates was retried ${retries.length} times (waits: ${retries.map((e) => Math.round(e.delayMs)).join(' ms, ')} ms)`,
);

warehouseOnline = true;
executed.length = 0;
const report = await scheduler.run();
console.log(
  `\nrun 2 resumed run '${report.runId}' (fencing token ${report.fencingToken}) and ran: ${executed.join(', ')}`,
);
console.log(
  `restored from the checkpoint: ${report.results
    .filter((r) => r.source === 'checkpoint')
    .map((r) => r.nodeId)
    .join(', ')}`,
);

// ── checking the result against a direct computation ───────────────────────────────────────

const summary = readJson<Summary>(report.output('aggregate')!);
let expectedRejected = 0;
REGIONS.forEach((region, i) => {
  const valid = generateSales(region, 42 + i).filter((s) => s.amount >= 0);
  expectedRejected += SALES_PER_REGION - valid.length;
  const total =
    Math.round(valid.reduce((sum, s) => sum + s.amount * RATES_TO_EUR[s.currency], 0) * 100) / 100;
  check(
    summary.byRegion[region]?.totalEur === total,
    `${region}: ${valid.length} sales, ${total.toFixed(2)} EUR`,
  );
});
check(summary.rejected === expectedRejected, `${expectedRejected} broken rows rejected`);
check(executed.join() === 'load', 'run 2 executed only load');
check(ratesCalls === 3, 'fx-rates succeeded on its third call and was not called again');
check(
  fencing.committed('sales-etl:2024-06-01', 'load')?.token === report.fencingToken,
  'load was committed under run 2’s token',
);
console.log(`\n${fs.readFileSync(outFile, 'utf8')}`);
fs.rmSync(outFile, { force: true });

const counts = new Map<string, number>();
for (const e of events.events) counts.set(e.type, (counts.get(e.type) ?? 0) + 1);
console.log(`events: ${[...counts].map(([type, n]) => `${type}×${n}`).join(', ')}`);

if (failures > 0) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
