// A DAG job's run guard contended by another node, then its output fenced off by a newer token
// (this node is the zombie): the engine's metrics count both under pipeline="dag".
import { createDag, jsonPayload } from '@mocra/dag';
import { expect, test } from 'vitest';
import { createCoordinationFencingStore } from '../src/cluster/dag-fencing-store.js';
import { createDagJobs } from '../src/cluster/dag-jobs.js';
import { LocalCoordination, LocalCoordinationStore } from '../src/coordination/local-coordination.js';
import { createEngine } from '../src/engine/engine.js';
import { attachEngineTelemetry } from '../src/observability/metrics/engine-telemetry.js';
import { createMetrics } from '../src/observability/metrics/mocra-metrics.js';

test('a contended run guard and a fenced-off output are counted', async () => {
  const store = new LocalCoordinationStore();
  const coordination = new LocalCoordination({ nodeId: 'zombie', store });
  const other = new LocalCoordination({ nodeId: 'other', store });
  // Another node holds the run, and a newer holder has already committed under a higher token.
  const held = (await other.acquireLock('dag:run:report:k', { ttlMs: 60_000, owner: 'other#1' }))!;
  await createCoordinationFencingStore(other).commit({
    resource: 'report:k',
    token: 1_000_000,
    runId: 'newer',
    nodeId: 'extract',
    output: jsonPayload('newer'),
  });

  const jobs = createDagJobs();
  const engine = createEngine({ handleSignals: false, autoSeed: false, endWhenIdle: false });
  engine.register(
    jobs.module('report', () => createDag([{ id: 'extract', run: async () => jsonPayload('stale') }]), {
      guardTtlMs: 200,
    }),
    { write() {} },
  );
  jobs.attach({ engine, coordination });
  const metrics = createMetrics({ node: 't', processMetrics: false, system: false });
  const telemetry = attachEngineTelemetry(engine, { metrics });
  const running = engine.run();
  try {
    await engine.submit({ module: 'report', params: { key: 'k' } });
    const guard = (event: string) => metrics.value('mocra_dag_run_guard_total', { pipeline: 'dag', event });
    for (let i = 0; i < 200 && (await guard('contended')) === undefined; i++) await sleep(10);
    expect(await guard('contended')).toBeGreaterThanOrEqual(1);
    expect(telemetry.dag().runGuard.contended).toBeGreaterThanOrEqual(1);
    await other.releaseLock(held);

    const rejected = () => metrics.value('mocra_dag_fencing_rejections_total', { pipeline: 'dag' });
    for (let i = 0; i < 300 && (await rejected()) === undefined; i++) await sleep(10);
    expect(await rejected()).toBeGreaterThanOrEqual(1);
    expect(await guard('acquired')).toBeGreaterThanOrEqual(1);
    expect(
      await metrics.value('mocra_errors_total', {
        pipeline: 'dag',
        stage: 'run',
        code: 'MOCRA_ERR_DAG_FENCING_REJECTED',
      }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      await metrics.value('mocra_throughput_total', { pipeline: 'dag', stage: 'run', result: 'failure' }),
    ).toBeGreaterThanOrEqual(1);
    expect(telemetry.dag().fencingRejections).toBeGreaterThanOrEqual(1);
  } finally {
    await engine.stop();
    await running;
    telemetry.close();
    await jobs.close();
    await coordination.close();
    await other.close();
  }
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
