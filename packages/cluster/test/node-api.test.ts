// The public API of a node, end to end in one process: three real nodes (LevelDB in temp dirs,
// HTTP on loopback, a shared secret), exercised through followers and the leader.
import diagnostics from 'node:diagnostics_channel';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ClusterEvent, ClusterNode, ClusterNodeOptions } from '../src/index.js';
import { ClusterConfig, createClusterNode, partitionOf, rendezvousOwner } from '../src/index.js';
import { HttpPeerServer } from '../src/internal.js';
import { eventually } from './harness/process-cluster.js';

const SECRET = 'not-a-real-secret';
const options: ClusterNodeOptions = {
  tickMs: 20,
  electionTicks: 15,
  heartbeatTicks: 3,
  requestTimeoutMs: 5000,
};
let base = '';
const nodes = new Map<string, ClusterNode>();
const events: ClusterEvent[] = [];

async function leader(): Promise<ClusterNode> {
  return eventually('a leader', async () =>
    [...nodes.values()].find((n) => n.isLeader && n.status().voters.length >= 2),
  );
}
async function follower(): Promise<ClusterNode> {
  const l = await leader();
  return [...nodes.values()].find((n) => n !== l && n.status().role === 'follower')!;
}

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'mocra-node-api-'));
  const withEvents = { ...options, onEvent: (e: ClusterEvent) => events.push(e) };
  const n1 = await createClusterNode(
    ClusterConfig.bootstrap('n1', '127.0.0.1:0', path.join(base, 'n1'), { secret: SECRET }),
    withEvents,
  );
  nodes.set('n1', n1);
  await n1.waitForLeader();
  for (const id of ['n2', 'n3']) {
    nodes.set(
      id,
      await createClusterNode(
        ClusterConfig.join(id, '127.0.0.1:0', path.join(base, id), n1.addr, { secret: SECRET }),
        options,
      ),
    );
  }
  await eventually('three voters', async () => n1.status().voters.length === 3);
}, 60_000);

afterAll(async () => {
  for (const n of nodes.values()) await n.close({ transferLeadership: false }).catch(() => {});
  await rm(base, { recursive: true, force: true });
});

describe('ClusterConfig', () => {
  test('bootstrap, join and fromEnv build the right configuration', () => {
    const b = ClusterConfig.bootstrap('n1', '127.0.0.1:7001', '/tmp/x');
    expect(b).toMatchObject({ nodeId: 'n1', mode: 'bootstrap', seeds: [] });
    const j = ClusterConfig.join('n2', '127.0.0.1:7002', '/tmp/y', ['127.0.0.1:7001', '127.0.0.1:7003']);
    expect(j).toMatchObject({ mode: 'join', seeds: ['127.0.0.1:7001', '127.0.0.1:7003'] });
    const env = {
      MOCRA_NODE_ID: 'n3',
      MOCRA_HTTP_ADDR: '10.0.0.3:7000',
      MOCRA_DATA_DIR: '/data/n3',
      MOCRA_SEEDS: '10.0.0.1:7000, 10.0.0.3:7000 ,10.0.0.2:7000',
      MOCRA_CLUSTER_SECRET: 'shh',
    };
    const e = ClusterConfig.fromEnv(env);
    expect(e).toMatchObject({
      nodeId: 'n3',
      mode: 'join',
      seeds: ['10.0.0.1:7000', '10.0.0.2:7000'],
      secret: 'shh',
    });
    expect(ClusterConfig.fromEnv({ ...env, MOCRA_SEEDS: '' }).mode).toBe('bootstrap');
  });

  test('bad input is a typed error, not a crash', () => {
    const code = { code: 'MOCRA_ERR_CLUSTER_INVALID_CONFIG' };
    expect(() => ClusterConfig.bootstrap('bad id!', '127.0.0.1:1', '/tmp')).toThrow(
      expect.objectContaining(code),
    );
    expect(() => ClusterConfig.bootstrap('n1', 'nowhere', '/tmp')).toThrow(expect.objectContaining(code));
    expect(() => ClusterConfig.join('n1', '127.0.0.1:1', '/tmp', [])).toThrow(expect.objectContaining(code));
    expect(() => ClusterConfig.join('n1', '127.0.0.1:1', '/tmp', 'host:99999')).toThrow(
      expect.objectContaining(code),
    );
    expect(() => ClusterConfig.fromEnv({ MOCRA_NODE_ID: 'n1' })).toThrow(/MOCRA_HTTP_ADDR/);
  });
});

describe('a three-node cluster in one process', () => {
  test('any node takes writes (followers forward them) and reads are linearizable everywhere', async () => {
    const f = await follower();
    await f.set('greeting', 'hello');
    for (const n of nodes.values()) expect(await n.get('greeting')).toBe('hello');
    expect(await f.compareAndSet('greeting', 'nope', 'x')).toBe(false);
    expect(await f.compareAndSet('greeting', 'hello', 'hi')).toBe(true);
    expect(await f.compareAndSet('fresh', undefined, 'v')).toBe(true);
    expect(await (await leader()).get('greeting')).toBe('hi');
    expect(await f.increment('count')).toBe(1);
    expect(await f.increment('count', 41)).toBe(42);
    expect(await f.delete('fresh')).toBe(true);
    expect(await f.delete('fresh')).toBe(false);
    expect(await f.keys('gre')).toEqual(['greeting']);
  });

  test('locks: fencing tokens are Raft indexes, renew and release need the token', async () => {
    const f = await follower();
    const l = await leader();
    const a = await f.acquireLock('job', { ttlMs: 5000, owner: 'worker-a' });
    expect(a).toBeDefined();
    expect(await l.acquireLock('job', { ttlMs: 5000, owner: 'worker-b' })).toBeUndefined();
    const again = await l.acquireLock('job', { ttlMs: 5000, owner: 'worker-a' });
    expect(again!.token).toBeGreaterThan(a!.token);
    expect(await f.renewLock(a!, 5000)).toBeUndefined(); // the old token lost the lock to the re-grant
    const renewed = await f.renewLock(again!, 5000);
    expect(renewed?.token).toBe(again!.token);
    expect((await f.getLock('job'))?.owner).toBe('worker-a');
    expect(await f.releaseLock(a!)).toBe(false);
    expect(await f.releaseLock(again!)).toBe(true);
    expect(await f.getLock('job')).toBeUndefined();
    // The Raft-side fenced resource.
    expect(await f.fencedPut('res', again!.token, 'v1')).toEqual({ accepted: true, maxToken: again!.token });
    expect(await f.fencedPut('res', a!.token, 'stale')).toEqual({ accepted: false, maxToken: again!.token });
    expect(await f.fencedGet('res', again!.token)).toMatchObject({ accepted: true, value: 'v1' });
  });

  test('members, heartbeats and partition ownership', async () => {
    const f = await follower();
    await f.announceMember({ id: 'worker-1', meta: { role: 'crawler' }, ttlMs: 2000, heartbeatMs: 200 });
    await f.announceMember({ id: 'worker-2', ttlMs: 2000, heartbeatMs: 200 });
    const members = await (await leader()).members();
    expect(members.map((m) => m.id)).toEqual(['worker-1', 'worker-2']);
    expect(members[0]!.meta).toEqual({ role: 'crawler' });
    const { partition, owner } = await f.partitionOwner('account-7');
    expect(partition).toBe(partitionOf('account-7'));
    expect(owner).toBe(rendezvousOwner(partition, ['worker-1', 'worker-2']));
    const mine = await f.ownedPartitions('worker-1');
    const theirs = await f.ownedPartitions('worker-2');
    expect(mine.length + theirs.length).toBe(256);
    // Still live after several TTL-thirds thanks to heartbeats.
    await new Promise((r) => setTimeout(r, 700));
    expect((await f.members()).map((m) => m.id)).toEqual(['worker-1', 'worker-2']);
    await f.withdrawMember('worker-2');
    expect((await f.members()).map((m) => m.id)).toEqual(['worker-1']);
    await f.withdrawMember('worker-1');
  });

  test('bad arguments and failed commands have stable codes', async () => {
    const f = await follower();
    await expect(f.get('')).rejects.toMatchObject({ code: 'MOCRA_ERR_CLUSTER_INVALID_ARGUMENT' });
    await expect(f.acquireLock('x', { ttlMs: 0 })).rejects.toMatchObject({
      code: 'MOCRA_ERR_CLUSTER_INVALID_ARGUMENT',
    });
    await f.set('text', 'abc');
    await expect(f.increment('text')).rejects.toMatchObject({ code: 'MOCRA_ERR_CLUSTER_COMMAND_FAILED' });
  });

  test('app messages: a node calls another one through the cluster transport, outside Raft', async () => {
    const [a, b] = [nodes.get('n2')!, nodes.get('n3')!];
    // No handler yet: retryable "starting", so the caller can decide to try again.
    await expect(a.callApp('n3', 'echo', { x: 1 })).rejects.toMatchObject({
      code: 'MOCRA_ERR_CLUSTER_STARTING',
      retryable: true,
    });
    const off = b.onAppRequest('echo', async (body) => {
      if ((body as { fail?: boolean }).fail) throw new Error('refused by the handler');
      return { echoed: body, by: b.id };
    });
    expect(await a.callApp('n3', 'echo', { x: 1 })).toEqual({ echoed: { x: 1 }, by: 'n3' });
    await expect(a.callApp('n3', 'echo', { fail: true })).rejects.toMatchObject({
      code: 'MOCRA_ERR_CLUSTER_COMMAND_FAILED',
      message: 'refused by the handler',
    });
    // To itself: the handler runs in process, on a copy of the body.
    expect(await b.callApp('n3', 'echo', { y: 2 })).toEqual({ echoed: { y: 2 }, by: 'n3' });
    await expect(a.callApp('nobody', 'echo', {})).rejects.toMatchObject({
      code: 'MOCRA_ERR_CLUSTER_UNKNOWN_NODE',
    });
    expect(() => b.onAppRequest('no spaces', async () => null)).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_CLUSTER_INVALID_ARGUMENT' }),
    );
    off();
    await expect(a.callApp('n3', 'echo', {})).rejects.toMatchObject({ code: 'MOCRA_ERR_CLUSTER_STARTING' });
  });

  test('peers must present the shared secret; malformed bodies get typed 400s', async () => {
    const addr = nodes.get('n2')!.addr;
    const post = async (route: string, body: string, secret?: string) => {
      const res = await request(`http://${addr}${route}`, {
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/json',
          ...(secret ? { 'x-mocra-cluster-secret': secret } : {}),
        },
      });
      return { status: res.statusCode, body: (await res.body.text()) || '{}' };
    };
    const noSecret = await post('/raft/messages', '[]');
    expect(noSecret.status).toBe(401);
    expect(JSON.parse(noSecret.body).error.code).toBe('MOCRA_ERR_CLUSTER_UNAUTHORIZED');
    expect((await post('/raft/messages', '[]', 'wrong')).status).toBe(401);
    expect((await post('/raft/messages', '[]', SECRET)).status).toBe(204);
    const notJson = await post('/raft/messages', '{oops', SECRET);
    expect(notJson.status).toBe(400);
    expect(JSON.parse(notJson.body).error.code).toBe('MOCRA_ERR_CLUSTER_INVALID_MESSAGE');
    const badMessage = await post(
      '/raft/messages',
      JSON.stringify([{ type: 'append', from: 'x', to: 'n2' }]),
      SECRET,
    );
    expect(badMessage.status).toBe(400);
    const badCommand = await post(
      '/raft/request',
      JSON.stringify({ kind: 'propose', env: { c: 1 } }),
      SECRET,
    );
    expect(JSON.parse(badCommand.body)).toMatchObject({
      ok: false,
      error: { code: 'MOCRA_ERR_CLUSTER_INVALID_MESSAGE' },
    });
  });

  test('status, metrics events and diagnostics channels', async () => {
    const seen: unknown[] = [];
    const onPersist = (m: unknown) => seen.push(m);
    diagnostics.subscribe('mocra:cluster:persist', onPersist);
    const n1 = nodes.get('n1')!;
    await n1.set('observed', 'yes');
    diagnostics.unsubscribe('mocra:cluster:persist', onPersist);
    expect(seen.length).toBeGreaterThan(0);
    expect(events.some((e) => e.type === 'role' && e.role === 'leader')).toBe(true);
    expect(events.some((e) => e.type === 'persist' && e.entries > 0)).toBe(true);
    const st = n1.status();
    expect(st.voters).toEqual(['n1', 'n2', 'n3']);
    expect(st.commitIndex).toBeGreaterThanOrEqual(st.appliedIndex - 0);
    expect(st.leaderId).not.toBeNull();
    expect(st.members.map((m) => m.id)).toEqual(['n1', 'n2', 'n3']);
  });

  test('leadership moves on request, and close() hands it off', async () => {
    const l = await leader();
    const target = [...nodes.values()].find((n) => n !== l)!;
    expect(await (await follower()).transferLeadership(target.id)).toBe(target.id);
    await eventually('the target to lead', async () => target.isLeader);
    await target.close();
    nodes.delete(target.id);
    const next = await eventually('another leader', async () => [...nodes.values()].find((n) => n.isLeader));
    expect(next).toBeDefined();
    // The closed node comes back from its own disk with everything it had.
    const back = await createClusterNode(
      ClusterConfig.join(target.id, target.addr, path.join(base, target.id), next.addr, { secret: SECRET }),
      options,
    );
    nodes.set(target.id, back);
    expect(await back.get('greeting')).toBe('hi');
    expect(back.status().voters).toHaveLength(3);
  });

  test('a follower can be removed; its id cannot come back', async () => {
    const l = await leader();
    const victim = [...nodes.values()].find((n) => n !== l)!;
    await l.removeNode(victim.id);
    await eventually('the victim to learn it was removed', async () => victim.status().role === 'removed');
    expect(l.status().voters).toHaveLength(2);
    await expect(victim.set('k', 'v')).rejects.toMatchObject({ code: 'MOCRA_ERR_CLUSTER_REMOVED' });
    await victim.close();
    nodes.delete(victim.id);
    await expect(
      createClusterNode(
        ClusterConfig.join(victim.id, '127.0.0.1:0', path.join(base, `${victim.id}-again`), l.addr, {
          secret: SECRET,
        }),
        options,
      ),
    ).rejects.toMatchObject({ code: 'MOCRA_ERR_CLUSTER_NODE_ID_RETIRED' });
    await l.set('after-removal', 'ok');
    expect(await l.get('after-removal')).toBe('ok');
  });
});

describe('a peer that is still starting', () => {
  test('answers 503 with a retryable MOCRA_ERR_CLUSTER_STARTING, so joins and forwards try again', async () => {
    // Listening, but no node attached yet: the window while a node opens its LevelDB log.
    const server = await HttpPeerServer.listen('127.0.0.1:0');
    try {
      const res = await request(`http://${server.address}/raft/request`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'join', id: 'n9', addr: '127.0.0.1:1' }),
      });
      expect(res.statusCode).toBe(503);
      const body = (await res.body.json()) as { ok: boolean; error: { code: string; retryable: boolean } };
      expect(body.ok).toBe(false);
      expect(body.error).toMatchObject({ code: 'MOCRA_ERR_CLUSTER_STARTING', retryable: true });
    } finally {
      await server.close();
    }
  });
});
