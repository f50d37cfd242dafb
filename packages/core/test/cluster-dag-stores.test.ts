// @mocra/dag's store conformance suites against the coordination-backed stores, on three
// backends: local (its time is the suite's manual clock, so the expiry cases run too), the real
// local Redis, and a real 3-node Raft cluster in this process.
import { randomBytes } from 'node:crypto';
import type { ManualClock, RunGuard } from '@mocra/dag';
import { createDag, DagScheduler, ExecutionIncompleteError, jsonPayload, readJson } from '@mocra/dag';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
// @mocra/dag's own conformance suites (its test folder: they import vitest, so no export of the
// package carries them; scripts/check-deps.mjs allows tests exactly this reach).
import * as suites from '../../dag/test/conformance.js';
import { createCoordinationFencingStore } from '../src/cluster/dag-fencing-store.js';
import { createCoordinationIdempotencyStore } from '../src/cluster/dag-idempotency-store.js';
import { createCoordinationRunGuard } from '../src/cluster/dag-run-guard.js';
import { createCoordinationRunStateStore } from '../src/cluster/dag-run-state-store.js';
import { LocalCoordination, LocalCoordinationStore } from '../src/coordination/local-coordination.js';
import { createRaftCoordination } from '../src/coordination/raft-coordination.js';
import {
  createRedisCoordination,
  type RedisCoordinationClient,
} from '../src/coordination/redis-coordination.js';
import type { Coordination } from '../src/coordination/types.js';
import { type InProcessCluster, startInProcessCluster } from './cluster-harness.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const run = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
let n = 0;
/** A fresh key prefix per store, so the suites' tests (which reuse key names) never meet. */
const prefix = (what: string) => `t${run}:${n++}:${what}:`;

function describeAll(name: string, coordination: () => Coordination, controlsTime: boolean): void {
  suites.describeRunGuardConformance(
    name,
    (clock) => followClock(clock, createCoordinationRunGuard(coordination(), { prefix: prefix('run') })),
    { controlsTime },
  );
  suites.describeFencingStoreConformance(name, () =>
    createCoordinationFencingStore(coordination(), { prefix: prefix('fence') }),
  );
  suites.describeRunStateStoreConformance(name, () =>
    createCoordinationRunStateStore(coordination(), { prefix: prefix('state') }),
  );
  suites.describeIdempotencyStoreConformance(name, (clock: ManualClock) =>
    createCoordinationIdempotencyStore(coordination(), { prefix: prefix('idem'), clock, pollMs: 20 }),
  );
}

/**
 * Redis and Raft keep their own (millisecond) time, which the suite's manual clock cannot move.
 * When the suite advances its clock between two calls, let a little real time pass before the
 * next call too, so "later" on the suite's clock is also later on the backend's.
 */
function followClock(clock: ManualClock, guard: RunGuard): RunGuard {
  let seen = clock.now();
  const catchUp = async () => {
    if (clock.now() > seen) await new Promise((r) => setTimeout(r, Math.min(5, clock.now() - seen)));
    seen = clock.now();
  };
  return {
    async acquire(...args) {
      await catchUp();
      return guard.acquire(...args);
    },
    async renew(...args) {
      await catchUp();
      return guard.renew(...args);
    },
    async release(...args) {
      await catchUp();
      return guard.release(...args);
    },
  };
}

// ── local: one store per factory call, on the suite's clock ─────────────────────────────

function localOn(clock?: ManualClock): Coordination {
  const store = new LocalCoordinationStore(clock ? { now: () => clock.now() } : {});
  return new LocalCoordination({ nodeId: 'local', store });
}
suites.describeRunGuardConformance('coordination (local)', (clock) =>
  createCoordinationRunGuard(localOn(clock)),
);
suites.describeFencingStoreConformance('coordination (local)', () =>
  createCoordinationFencingStore(localOn()),
);
suites.describeRunStateStoreConformance('coordination (local)', () =>
  createCoordinationRunStateStore(localOn()),
);
suites.describeIdempotencyStoreConformance('coordination (local)', (clock) =>
  createCoordinationIdempotencyStore(localOn(clock), { clock, pollMs: 20 }),
);

// ── Redis and Raft: one shared backend, a fresh prefix per factory call ─────────────────

let redis: RedisCoordinationClient | undefined;
let cluster: InProcessCluster | undefined;
let raft: Coordination | undefined;

beforeAll(async () => {
  redis = (await createRedisCoordination({
    url: REDIS_URL,
    namespace: `dagstores${run}`,
    keyPrefix: 'mocra-test:',
  })) as RedisCoordinationClient;
  cluster = await startInProcessCluster();
  raft = await createRaftCoordination({ node: cluster.nodes[1]!, namespace: `dagstores${run}` });
}, 60_000);

afterAll(async () => {
  if (redis) {
    const keys = await redis.client.keys(`mocra-test:dagstores${run}:*`);
    if (keys.length > 0) await redis.client.del(...keys);
    await redis.close();
  }
  await raft?.close();
  await cluster?.close();
});

describeAll('coordination (redis)', () => redis!, false);
describeAll('coordination (raft)', () => raft!, false);

// ── a whole run, interrupted and resumed elsewhere ──────────────────────────────────────

describe('a DAG run on cluster stores', () => {
  test('resumed on another node: finished nodes are restored, not redone; the new run has a higher token', async () => {
    const c = cluster!;
    const nodeA = await createRaftCoordination({ node: c.nodes[0]!, namespace: `resume${run}` });
    const nodeB = await createRaftCoordination({ node: c.nodes[2]!, namespace: `resume${run}` });
    const ran: string[] = [];
    let failLoad = true;
    const graph = () =>
      createDag([
        {
          id: 'extract',
          run: async (ctx) => {
            ran.push(`extract@${ctx.fencingToken}`);
            return jsonPayload([1, 2, 3]);
          },
        },
        {
          id: 'load',
          after: ['extract'],
          run: async (ctx) => {
            ran.push(`load@${ctx.fencingToken}`);
            if (failLoad) throw new Error('the process running this run dies here');
            return jsonPayload({
              rows: readJson<number[]>(ctx.input('extract')).length,
              token: ctx.fencingToken,
            });
          },
          retry: { maxRetries: 0 },
        },
      ]);
    const stores = (coordination: Coordination) => ({
      key: 'etl:day-1',
      runGuard: { guard: createCoordinationRunGuard(coordination), ttlMs: 5_000 },
      fencing: { store: createCoordinationFencingStore(coordination) },
      runState: { store: createCoordinationRunStateStore(coordination) },
    });
    const first = new DagScheduler(graph(), stores(nodeA));
    const err = await first.run().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutionIncompleteError);
    failLoad = false;
    const second = new DagScheduler(graph(), stores(nodeB));
    const report = await second.run();
    const [firstToken, secondToken] = [Number(ran[0]!.split('@')[1]), report.fencingToken!];
    expect(secondToken).toBeGreaterThan(firstToken);
    expect(ran).toEqual([`extract@${firstToken}`, `load@${firstToken}`, `load@${secondToken}`]);
    expect(readJson(report.output('load')!)).toEqual({ rows: 3, token: secondToken });
    expect(report.runId).toBe((err as ExecutionIncompleteError).report.runId);
    // The checkpoint was cleared by the successful run, and a stale holder is fenced off.
    expect(await createCoordinationRunStateStore(nodeA).load('etl:day-1')).toBeUndefined();
    await expect(
      createCoordinationFencingStore(nodeA).commit({
        resource: 'etl:day-1',
        token: firstToken,
        runId: report.runId,
        nodeId: 'load',
        output: jsonPayload('stale'),
      }),
    ).rejects.toMatchObject({ code: 'MOCRA_ERR_DAG_FENCING_REJECTED' });
    await nodeA.close();
    await nodeB.close();
  });

  test('singleflight across nodes: two runs on two nodes share one execution of a keyed node', async () => {
    const c = cluster!;
    const nodes = await Promise.all(
      [0, 2].map((i) => createRaftCoordination({ node: c.nodes[i]!, namespace: `single${run}` })),
    );
    let executions = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const graph = () =>
      createDag([
        {
          id: 'rates',
          idempotencyKey: 'rates:2024-06-01',
          run: async () => {
            executions++;
            await gate;
            return jsonPayload({ eur: 1.08 });
          },
        },
      ]);
    const runs = nodes.map((coordination) =>
      new DagScheduler(graph(), {
        idempotency: { store: createCoordinationIdempotencyStore(coordination, { pollMs: 20 }) },
      }).run(),
    );
    await new Promise((r) => setTimeout(r, 300));
    release();
    const reports = await Promise.all(runs);
    expect(executions).toBe(1);
    expect(reports.map((r) => readJson(r.output('rates')!))).toEqual([{ eur: 1.08 }, { eur: 1.08 }]);
    expect(reports.flatMap((r) => r.results.map((x) => x.source)).sort()).toEqual(['run', 'singleflight']);
    for (const x of nodes) await x.close();
  });
});
