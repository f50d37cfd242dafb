/**
 * End-of-run checks shared by the multi-process tests: the cluster converges, every node serves
 * every acknowledged unique write, and the whole client history is linearizable.
 */
import { performance } from 'node:perf_hooks';
import { expect } from 'vitest';
import type { ClusterStatus } from '../../src/index.js';
import { checkLinearizable, kvModel } from '../sim/lincheck.js';
import { eventually, type ProcessCluster } from './process-cluster.js';
import type { KvWorkload } from './workload.js';

export async function waitConverged(cluster: ProcessCluster, timeoutMs = 30_000): Promise<ClusterStatus[]> {
  return eventually(
    'every member to apply the same index under one leader',
    async () => {
      const leader = await cluster.agreedLeader();
      if (!leader) return undefined;
      const lead = await cluster.status(leader);
      if (!lead) return undefined;
      const members = new Set(lead.members.map((m) => m.id));
      const statuses: ClusterStatus[] = [];
      for (const id of members) {
        const st = cluster.nodes.get(id)?.state === 'up' ? await cluster.status(id) : undefined;
        if (!st || st.appliedIndex < lead.commitIndex || st.leaderId !== leader) return undefined;
        statuses.push(st);
      }
      return statuses;
    },
    timeoutMs,
    200,
  );
}

export async function verifyWorkload(cluster: ProcessCluster, workload: KvWorkload): Promise<void> {
  const statuses = await waitConverged(cluster);
  // Final linearizable reads of the shared keys, from every member, join the history.
  for (const st of statuses) {
    for (const key of ['k0', 'k1', 'k2', 'ctr']) {
      const call = performance.now();
      const r = await cluster.op(st.id, { op: 'get', key });
      expect(r.ok, `final read of ${key} on ${st.id}: ${JSON.stringify(r)}`).toBe(true);
      if (r.ok) {
        workload.history.push({
          client: `final-${st.id}`,
          input: { op: 'get', key },
          output: r.value as string | null,
          call,
          ret: performance.now(),
        });
      }
    }
  }
  // No acknowledged write is lost: every acked unique key is readable from every member.
  const lost: string[] = [];
  for (const st of statuses) {
    for (const [key, value] of workload.acked) {
      const r = await cluster.op(st.id, { op: 'get', key });
      if (!r.ok || r.value !== value) lost.push(`${key}@${st.id}`);
    }
  }
  expect(lost, 'acknowledged writes missing').toEqual([]);
  const result = checkLinearizable(kvModel, workload.ops(), { maxSteps: 20_000_000 });
  console.info(
    `workload: ${workload.counts.ok} ok, ${workload.counts.unknown} unknown, ${workload.counts.failed} not applied; ` +
      `${workload.acked.size} unique writes checked on ${statuses.length} nodes; linearizability ${result.result} (${result.steps} steps)`,
  );
  expect(result.result === 'illegal' ? result.partition : result.result).toBe('ok');
}
