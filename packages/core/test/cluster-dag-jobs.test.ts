// DAG jobs in the engine: a @mocra/dag graph run as a module — seeded like one, its remote nodes
// run by the node's worker through the engine's queue, resumed from a checkpoint without redoing
// finished nodes, and not run twice once done. One engine on the in-memory backend here; the
// multi-process test (packages/tests/test/cluster-raft.test.ts) does it across a Raft cluster.
import { createDag, type Dag, jsonPayload, readJson } from '@mocra/dag';
import { expect, test } from 'vitest';
import { createDagJobs, type DagJobResult } from '../src/cluster/dag-jobs.js';
import { createCoordinationRunStateStore } from '../src/cluster/dag-run-state-store.js';
import { LocalCoordination, LocalCoordinationStore } from '../src/coordination/local-coordination.js';
import { createEngine } from '../src/engine/engine.js';
import type { ItemMeta } from '../src/model/item.js';

function graph(ran: string[]): Dag {
  const step = (id: string) => async () => {
    ran.push(id);
    return jsonPayload({ step: id });
  };
  return createDag([
    { id: 'extract', run: step('extract') },
    {
      id: 'enrich',
      after: ['extract'],
      placement: { kind: 'remote', workerGroup: 'cpu' },
      run: step('enrich'),
    },
    {
      id: 'publish',
      after: ['enrich'],
      run: async (ctx) => {
        ran.push('publish');
        return jsonPayload({
          got: readJson<{ step: string }>(ctx.input('enrich')).step,
          token: ctx.fencingToken,
        });
      },
    },
  ]);
}

function sinkOf(items: { item: DagJobResult; meta: ItemMeta }[]) {
  return { write: (item: DagJobResult, meta: ItemMeta) => void items.push({ item, meta }) };
}

test('a DAG job runs once per crawl run; its remote node runs on a worker through the queue', async () => {
  const ran: string[] = [];
  const items: { item: DagJobResult; meta: ItemMeta }[] = [];
  const jobs = createDagJobs();
  const engine = createEngine({ runId: 'run-1', handleSignals: false });
  engine.register(
    jobs.module('report', () => graph(ran)),
    sinkOf(items),
  );
  const coordination = new LocalCoordination({ nodeId: 'solo' });
  jobs.attach({ engine, coordination });
  const summary = await engine.run();
  await jobs.close();
  expect(summary.reason).toBe('idle');
  expect(ran).toEqual(['extract', 'enrich', 'publish']);
  expect(items).toHaveLength(1);
  const { item, meta } = items[0]!;
  expect(meta).toMatchObject({ itemId: 'dag:report:run-1', module: 'report', runId: 'run-1' });
  expect(item).toMatchObject({ job: 'report', key: 'run-1', restored: [] });
  expect(item.outputs.publish).toEqual({ got: 'enrich', token: item.fencingToken });
  expect(item.fencingToken).toBeGreaterThan(0);
  // Done is remembered: the same task delivered again writes the item again, runs nothing.
  const again = createEngine({ runId: 'run-1', handleSignals: false });
  const jobs2 = createDagJobs();
  again.register(
    jobs2.module('report', () => graph(ran)),
    sinkOf(items),
  );
  jobs2.attach({ engine: again, coordination });
  await again.run();
  await jobs2.close();
  expect(ran).toEqual(['extract', 'enrich', 'publish']);
  expect(items.map((i) => i.meta.itemId)).toEqual(['dag:report:run-1', 'dag:report:run-1']);
  await coordination.close();
});

test('a run that a dead node left half done resumes from its checkpoint, under a higher token', async () => {
  const store = new LocalCoordinationStore();
  const coordination = new LocalCoordination({ nodeId: 'survivor', store });
  // What the dead holder left: its guard (token 1, lapsed by now) and two finished nodes.
  const dead = new LocalCoordination({ nodeId: 'dead', store });
  const lease = (await dead.acquireLock('dag:run:report:day-1', { ttlMs: 1, owner: 'dead#x' }))!;
  const checkpoints = createCoordinationRunStateStore(dead);
  for (const nodeId of ['extract', 'enrich']) {
    await checkpoints.save('report:day-1', {
      runId: 'first-run',
      fencingToken: lease.token,
      nodeId,
      output: jsonPayload({ step: nodeId }),
    });
  }
  await new Promise((r) => setTimeout(r, 5));

  const ran: string[] = [];
  const items: { item: DagJobResult; meta: ItemMeta }[] = [];
  const jobs = createDagJobs();
  const engine = createEngine({ handleSignals: false, autoSeed: false, endWhenIdle: false });
  engine.register(
    jobs.module('report', () => graph(ran)),
    sinkOf(items),
  );
  jobs.attach({ engine, coordination });
  const running = engine.run();
  await engine.submit({ module: 'report', params: { key: 'day-1' } });
  for (let i = 0; i < 200 && items.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  await engine.stop();
  await running;
  await jobs.close();
  expect(ran).toEqual(['publish']);
  expect(items).toHaveLength(1);
  const result = items[0]!.item;
  expect(result.runId).toBe('first-run');
  expect([...result.restored].sort()).toEqual(['enrich', 'extract']);
  expect(result.fencingToken).toBeGreaterThan(lease.token);
  expect(result.outputs.publish).toEqual({ got: 'enrich', token: result.fencingToken });
  // The checkpoint is gone once the run finished.
  expect(await checkpoints.load('report:day-1')).toBeUndefined();
  await coordination.close();
  await dead.close();
});

test('a DAG job on an engine whose jobs were not attached fails clearly', async () => {
  const jobs = createDagJobs();
  const engine = createEngine({ handleSignals: false, retry: { maxRetries: 0 } });
  engine.register(
    jobs.module('report', () => graph([])),
    { write() {} },
  );
  const summary = await engine.run();
  expect(summary.errorsByCode).toEqual({ MOCRA_ERR_INVALID_ARGUMENT: 1 });
  expect(() => jobs.module('report', () => graph([]))).toThrow(
    expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
  );
});
