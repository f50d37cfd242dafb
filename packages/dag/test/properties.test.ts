/**
 * Property tests on random DAGs. Node bodies yield a random number of microtasks (never timers),
 * so runs are fast and every interleaving fast-check finds can be replayed from its seed.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  createDag,
  createMemoryRunStateStore,
  DagScheduler,
  ExecutionIncompleteError,
  jsonPayload,
  type NodeContext,
  readJson,
} from '../src/index.js';

interface GraphCase {
  ids: string[];
  after: string[][];
  /** Microtask yields per node attempt. */
  delays: number[];
}

/** Random DAGs: edges only go from a lower to a higher position of a random permutation. */
const graphArb: fc.Arbitrary<GraphCase> = fc
  .integer({ min: 1, max: 24 })
  .chain((n) =>
    fc.record({
      n: fc.constant(n),
      perm: fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }),
      edges: fc.array(fc.tuple(fc.nat(n - 1), fc.nat(n - 1)), { maxLength: n * 2 }),
      delays: fc.array(fc.nat(4), { minLength: n, maxLength: n }),
    }),
  )
  .map(({ n, perm, edges, delays }) => {
    const ids = Array.from({ length: n }, (_, i) => `v${String(i).padStart(2, '0')}`);
    const after: string[][] = Array.from({ length: n }, () => []);
    for (const [x, y] of edges) {
      if (x === y) continue;
      const [lo, hi] = x < y ? [x, y] : [y, x];
      const to = perm[hi] as number;
      const from = ids[perm[lo] as number] as string;
      if (!(after[to] as string[]).includes(from)) (after[to] as string[]).push(from);
    }
    return { ids, after, delays };
  });

const maxInFlightArb = fc.oneof(fc.integer({ min: 1, max: 6 }), fc.constant(Number.POSITIVE_INFINITY));

async function yieldTimes(k: number): Promise<void> {
  for (let i = 0; i < k; i++) await Promise.resolve();
}

/** Each node's output: 1 + the sum of its predecessors' outputs. */
function expectedValues(g: GraphCase): Map<string, number> {
  const value = new Map<string, number>();
  const pending = new Set(g.ids);
  while (pending.size > 0) {
    for (const id of pending) {
      const preds = g.after[g.ids.indexOf(id)] as string[];
      if (preds.every((p) => value.has(p))) {
        value.set(id, 1 + preds.reduce((s, p) => s + (value.get(p) as number), 0));
        pending.delete(id);
      }
    }
  }
  return value;
}

/** Records starts, finishes and concurrency of every attempt. */
function instrument(g: GraphCase, fail: (id: string, attempt: number) => boolean = () => false) {
  const starts: string[] = [];
  const successes = new Map<string, number>();
  const finished = new Set<string>();
  const violations: string[] = [];
  let active = 0;
  let peak = 0;
  const specs = g.ids.map((id, i) => ({
    id,
    after: g.after[i] as string[],
    run: async (ctx: NodeContext) => {
      for (const p of g.after[i] as string[])
        if (!finished.has(p)) violations.push(`${id} started before ${p} finished`);
      starts.push(id);
      active++;
      peak = Math.max(peak, active);
      try {
        await yieldTimes(g.delays[i] as number);
        if (fail(id, ctx.attempt)) throw new Error(`${id} attempt ${ctx.attempt} fails`);
        const sum = [...ctx.upstream.values()].reduce((s, p) => s + readJson<number>(p), 0);
        successes.set(id, (successes.get(id) ?? 0) + 1);
        finished.add(id);
        return jsonPayload(sum + 1);
      } finally {
        active--;
      }
    },
  }));
  return { specs, starts, successes, violations, peak: () => peak };
}

describe('properties of runs on random DAGs', () => {
  test('every node runs exactly once, only after all its predecessors, and maxInFlight is never exceeded', async () => {
    await fc.assert(
      fc.asyncProperty(graphArb, maxInFlightArb, async (g, maxInFlight) => {
        const probe = instrument(g);
        const dag = createDag(probe.specs);
        const report = await new DagScheduler(dag, { maxInFlight }).run();
        expect(probe.violations).toEqual([]);
        expect([...probe.starts].sort()).toEqual([...g.ids].sort());
        expect(probe.peak()).toBeLessThanOrEqual(maxInFlight);
        const expected = expectedValues(g);
        for (const id of g.ids) expect(readJson(report.output(id)!)).toBe(expected.get(id));
        if (maxInFlight === 1) expect(probe.starts).toEqual(dag.topologicalOrder);
      }),
      { numRuns: 150 },
    );
  });

  test('with retries, every node eventually succeeds exactly once, after its predecessors', async () => {
    await fc.assert(
      fc.asyncProperty(
        graphArb,
        maxInFlightArb,
        fc.array(fc.nat(2), { minLength: 24, maxLength: 24 }),
        async (g, maxInFlight, failures) => {
          const failCount = new Map(g.ids.map((id, i) => [id, failures[i] as number]));
          const probe = instrument(g, (id, attempt) => attempt <= (failCount.get(id) as number));
          const report = await new DagScheduler(createDag(probe.specs), {
            maxInFlight,
            defaultPolicy: { retry: { maxRetries: 2 } },
          }).run();
          expect(probe.violations).toEqual([]);
          expect(probe.peak()).toBeLessThanOrEqual(maxInFlight);
          for (const r of report.results) {
            expect(probe.successes.get(r.nodeId)).toBe(1);
            expect(r.attempts).toBe((failCount.get(r.nodeId) as number) + 1);
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  test('a failing node: none of its descendants starts, and every succeeded node had all predecessors succeed', async () => {
    await fc.assert(
      fc.asyncProperty(graphArb, maxInFlightArb, fc.nat(), async (g, maxInFlight, pick) => {
        const bad = g.ids[pick % g.ids.length] as string;
        const probe = instrument(g, (id) => id === bad);
        const dag = createDag(probe.specs);
        let err: unknown;
        try {
          await new DagScheduler(dag, { maxInFlight }).run();
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(ExecutionIncompleteError);
        const inc = err as ExecutionIncompleteError;
        const descendants = new Set<string>();
        const stack = [bad];
        while (stack.length > 0) {
          for (const s of dag.successors(stack.pop() as string)) {
            if (!descendants.has(s)) {
              descendants.add(s);
              stack.push(s);
            }
          }
        }
        for (const d of descendants) expect(probe.starts).not.toContain(d);
        expect(inc.unfinishedNodes).toContain(bad);
        for (const d of descendants) expect(inc.unfinishedNodes).toContain(d);
        for (const [id, state] of inc.report.states) {
          if (state === 'succeeded')
            for (const p of dag.predecessors(id)) expect(inc.report.states.get(p)).toBe('succeeded');
        }
        expect(probe.violations).toEqual([]);
      }),
      { numRuns: 150 },
    );
  });

  test('resume: across a failed run and its restart, every node succeeds exactly once and outputs are right', async () => {
    await fc.assert(
      fc.asyncProperty(graphArb, maxInFlightArb, fc.nat(), async (g, maxInFlight, pick) => {
        const bad = g.ids[pick % g.ids.length] as string;
        let broken = true;
        const probe = instrument(g, (id) => broken && id === bad);
        const store = createMemoryRunStateStore();
        const scheduler = new DagScheduler(createDag(probe.specs), {
          maxInFlight,
          key: 'job',
          runState: { store },
          cancelInFlightOnFailure: false,
          defaultPolicy: { retry: { maxRetries: 0 } },
        });
        await expect(scheduler.run()).rejects.toBeInstanceOf(ExecutionIncompleteError);
        broken = false;
        const report = await scheduler.run();
        for (const id of g.ids) expect(probe.successes.get(id)).toBe(1);
        const expected = expectedValues(g);
        for (const id of g.ids) expect(readJson(report.output(id)!)).toBe(expected.get(id));
        expect(store.keys()).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });
});
