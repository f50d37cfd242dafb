// The control API of an engine coordinated by Raft: `/observability/cluster` is filled from the
// node's ClusterNode.status() (leader, roles, term, commit index, partition map) without any
// option, `/nodes` lists every member, and pause is cluster-wide. Three real Raft nodes in this
// process, three engines, one API.
import { request } from 'undici';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startEngineApi } from '../src/api/engine-api.js';
import { createRaftCoordination, type RaftCoordination } from '../src/coordination/raft-coordination.js';
import { createEngine } from '../src/engine/engine.js';
import { type InProcessCluster, startInProcessCluster } from './cluster-harness.js';

let cluster: InProcessCluster;
beforeAll(async () => {
  cluster = await startInProcessCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

test('the cluster view shows the Raft leader, roles, term, commit index and the partition map', async () => {
  const namespace = `view${Date.now().toString(36)}`;
  const members: RaftCoordination[] = [];
  for (const node of cluster.nodes) {
    const c = await createRaftCoordination({ node, namespace });
    await c.join({ meta: { hostname: `host-${node.id}`, version: '1.2.3' } });
    members.push(c);
  }
  const engine = createEngine({ handleSignals: false, endWhenIdle: false });
  engine.register({ name: 'noop', nodes: [{ id: 'n', parse() {} }] }, { write() {} });
  const apiKey = 'view-test-key';
  const api = await startEngineApi(engine, { port: 0, apiKey, coordination: members[1]!, metrics: false });
  try {
    const get = async (path: string) =>
      (await (
        await request(`${api.url}${path}`, { headers: { 'x-api-key': apiKey } })
      ).body.json()) as Record<string, unknown>;
    const view = (await get('/observability/cluster')) as {
      kind: string;
      nodeId: string;
      leader: string;
      isLeader: boolean;
      members: { id: string; leader: boolean; self: boolean; meta: Record<string, string> }[];
      details: Record<string, string | number | null>;
    };
    const leader = (await cluster.leader()).id;
    expect(view).toMatchObject({ kind: 'raft', nodeId: 'n2', leader, isLeader: leader === 'n2' });
    expect(view.members.map((m) => [m.id, m.meta.role, m.leader, m.self])).toEqual(
      ['n1', 'n2', 'n3'].map((id) => [id, id === leader ? 'leader' : 'voter', id === leader, id === 'n2']),
    );
    expect(view.details['raft leader']).toBe(leader);
    expect(view.details['raft term']).toBeGreaterThan(0);
    expect(view.details['commit index']).toBeGreaterThan(0);
    expect(String(view.details['raft nodes'])).toMatch(/n1@127\.0\.0\.1:\d+ \(/);
    // The partition map covers the 16 partitions once each.
    const parts = Object.entries(view.details)
      .filter(([k]) => k.startsWith('partitions · '))
      .flatMap(([, v]) =>
        String(v)
          .split(' ')
          .filter((p) => p !== '–')
          .map(Number),
      );
    expect(parts.sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => i));

    const nodes = (await get('/nodes')) as {
      nodes: { id: string; hostname: string; version: string; self: boolean }[];
    };
    expect(nodes.nodes.map((n) => [n.id, n.hostname, n.version, n.self])).toEqual([
      ['n1', 'host-n1', '1.2.3', false],
      ['n2', 'host-n2', '1.2.3', true],
      ['n3', 'host-n3', '1.2.3', false],
    ]);
  } finally {
    await api.close();
    for (const c of members) await c.close();
  }
});
