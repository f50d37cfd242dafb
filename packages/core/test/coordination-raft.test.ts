// The Raft backend against the coordination conformance suite, on a real 3-node cluster in this
// process (LevelDB logs, HTTP on loopback). A test's clients share a namespace and are spread
// over the three nodes, so most calls are forwarded to the leader or read through ReadIndex.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createCoordination } from '../src/coordination/create-coordination.js';
import { createLeaderElection } from '../src/coordination/leader.js';
import { createRaftCoordination, type RaftCoordination } from '../src/coordination/raft-coordination.js';
import { raftConfigFromUrl } from '../src/coordination/raft-url.js';
import {
  FAST_NODE_OPTIONS,
  type InProcessCluster,
  startInProcessCluster,
  waitUntil,
} from './cluster-harness.js';
import { coordinationConformance } from './coordination-conformance.js';

let cluster: InProcessCluster;
let next = 0;

beforeAll(async () => {
  cluster = await startInProcessCluster();
}, 60_000);

afterAll(async () => {
  await cluster?.close();
});

coordinationConformance({
  name: 'raft',
  async open(scope, nodeId, { memberTtlMs }) {
    const node = cluster.nodes[next++ % cluster.nodes.length]!;
    return createRaftCoordination({ node, nodeId, namespace: scope, memberTtlMs });
  },
  async crash(client) {
    await (client as RaftCoordination).close({ leave: false });
  },
  async cleanup(scope) {
    const node = cluster.nodes[0]!;
    for (const key of await node.keys(`${scope}/`)) await node.delete(key);
  },
});

describe('raft coordination', () => {
  test('a lease can only be renewed or released by its owner, even with the right token', async () => {
    const c = await createRaftCoordination({
      node: cluster.nodes[1]!,
      nodeId: 'x',
      namespace: 'owner-check',
    });
    const lease = (await c.acquireLock('L', { ttlMs: 5_000, owner: 'A' }))!;
    expect(await c.renewLock({ ...lease, owner: 'B' }, 5_000)).toBeUndefined();
    expect(await c.releaseLock({ ...lease, owner: 'B' })).toBe(false);
    expect(await c.renewLock({ ...lease, token: lease.token + 1_000 }, 5_000)).toBeUndefined();
    expect(await c.releaseLock(lease)).toBe(true);
    await c.close();
  });

  test('namespaces keep clients apart; status() is the node’s Raft view', async () => {
    const a = await createRaftCoordination({ node: cluster.nodes[0]!, namespace: 'ns-a' });
    const b = await createRaftCoordination({ node: cluster.nodes[2]!, namespace: 'ns-b' });
    expect(a.nodeId).toBe('n1');
    await a.set('k', 'a');
    await b.set('k', 'b');
    expect(await a.get('k')).toBe('a');
    expect(await b.get('k')).toBe('b');
    await a.join({ meta: { role: 'x' } });
    expect((await b.members()).map((m) => m.id)).toEqual([]);
    expect((await a.members()).map((m) => m.id)).toEqual(['n1']);
    const status = b.status();
    expect(status).toMatchObject({ id: 'n3' });
    expect(status.voters).toHaveLength(3);
    expect(status.term).toBeGreaterThan(0);
    await expect(createRaftCoordination({ node: cluster.nodes[0]!, namespace: 'a/b' })).rejects.toMatchObject(
      {
        code: 'MOCRA_ERR_INVALID_ARGUMENT',
      },
    );
    await a.close();
    await b.close();
  });
});

describe('raft:// URLs', () => {
  test('bootstrap and join configs; bad URLs are typed errors', () => {
    expect(raftConfigFromUrl('raft://127.0.0.1:7001?id=n1&dir=/tmp/n1', { env: {} })).toMatchObject({
      nodeId: 'n1',
      addr: '127.0.0.1:7001',
      dataDir: '/tmp/n1',
      mode: 'bootstrap',
      secret: undefined,
    });
    expect(
      raftConfigFromUrl('raft://127.0.0.1:7002?id=n2&dir=/tmp/n2&join=127.0.0.1:7001,127.0.0.1:7002', {
        env: { MOCRA_CLUSTER_SECRET: 's3' },
      }),
    ).toMatchObject({ mode: 'join', seeds: ['127.0.0.1:7001'], secret: 's3' });
    expect(
      raftConfigFromUrl('raft://env', {
        env: { MOCRA_NODE_ID: 'e1', MOCRA_HTTP_ADDR: '127.0.0.1:7100', MOCRA_DATA_DIR: '/tmp/e1' },
      }),
    ).toMatchObject({ nodeId: 'e1', mode: 'bootstrap' });
    expect(raftConfigFromUrl('raft://127.0.0.1:1?dir=/d', { nodeId: 'fallback', env: {} }).nodeId).toBe(
      'fallback',
    );
    const bad = [
      'raft://127.0.0.1:7001?dir=/tmp/x', // no id
      'raft://127.0.0.1:7001?id=n1', // no dir
      'raft://127.0.0.1:7001?id=n1&dir=/x&secret=no', // secrets never go in URLs
      'raft://nowhere?id=n1&dir=/x', // not host:port
      'raft://127.0.0.1:7001?id=bad id&dir=/x',
      'raft://?id=n1&dir=/x',
      'raft://env?id=n1',
    ];
    for (const url of bad) {
      expect(() => raftConfigFromUrl(url, { env: {} }), url).toThrow(
        expect.objectContaining({ code: 'MOCRA_ERR_BACKEND_URL' }),
      );
    }
    expect(() => raftConfigFromUrl('raft://env', { env: {} })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_BACKEND_URL' }),
    );
  });

  test('createCoordination("raft://…") starts a node that bootstraps, leads and closes with the client', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'mocra-raft-url-'));
    try {
      const c = (await createCoordination(`raft://127.0.0.1:0?id=solo&dir=${encodeURIComponent(dir)}`, {
        namespace: 'solo',
        raft: { nodeOptions: FAST_NODE_OPTIONS },
      })) as RaftCoordination;
      expect(c.kind).toBe('raft');
      expect(c.nodeId).toBe('solo');
      expect(c.status().role).toBe('leader');
      expect(await c.increment('n')).toBe(1);
      const election = createLeaderElection(c, { ttlMs: 2_000, renewEveryMs: 200 });
      await election.start();
      expect(election.isLeader()).toBe(true);
      await election.stop();
      await c.close();
      await expect(c.get('n')).rejects.toMatchObject({ code: 'MOCRA_ERR_COORDINATION_CLOSED' });
      expect(c.status().role).toBeDefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('raft coordination across a leader failure', () => {
  test('a lock and a counter survive the leader node dying; the next holder gets a higher token', async () => {
    const own = await startInProcessCluster();
    try {
      const leader = await own.leader();
      const followers = own.nodes.filter((n) => n !== leader);
      const a = await createRaftCoordination({ node: followers[0]!, nodeId: 'a', namespace: 'failover' });
      const b = await createRaftCoordination({ node: followers[1]!, nodeId: 'b', namespace: 'failover' });
      const lease = (await a.acquireLock('job', { ttlMs: 60_000 }))!;
      for (let i = 0; i < 5; i++) await b.increment('count');
      // The leader's process dies: no hand-off.
      await leader.close({ transferLeadership: false });
      await waitUntil('a new leader', () => followers.find((n) => n.isLeader), 10_000);
      expect(await b.acquireLock('job', { ttlMs: 1_000 })).toBeUndefined();
      expect(await a.renewLock(lease, 60_000)).toMatchObject({ token: lease.token });
      expect(await b.increment('count')).toBe(6);
      expect(await a.releaseLock(lease)).toBe(true);
      const next = (await b.acquireLock('job', { ttlMs: 1_000 }))!;
      expect(next.token).toBeGreaterThan(lease.token);
      await a.close();
      await b.close();
    } finally {
      await own.close();
    }
  }, 40_000);
});
