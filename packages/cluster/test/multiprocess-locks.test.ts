// L4: fenced locks across real processes. Every node runs a worker that takes lock L and does a
// read-modify-write of a counter held by a resource in this (the test) process; the resource
// admits a token only if it is at least the highest it has seen (FencingGuard). The lock holder's
// whole process is SIGSTOPped past the TTL and resumed, and the leader is SIGKILLed. The counter
// must equal the number of accepted writes, and the resource must never see a write that was
// not based on the latest accepted value (which is what "held twice at once" would cause).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, test } from 'vitest';
import { FencingGuard } from '../src/index.js';
import { eventually, ProcessCluster, TEST_NODE_OPTIONS } from './harness/process-cluster.js';
import { sleep } from './harness/workload.js';

interface LockLoopState {
  running: boolean;
  acquired: number;
  accepted: number;
  rejected: number;
  errors: number;
  tokens: number[];
}

const cluster = new ProcessCluster({ nodeOptions: TEST_NODE_OPTIONS });
const guard = new FencingGuard();
const resource = {
  value: 0,
  accepted: [] as Array<{ token: number; owner: string; value: number }>,
  rejected: 0,
  violations: [] as string[],
};
const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => {
    body += c.toString();
  });
  req.on('end', () => {
    const args = JSON.parse(body) as { token: number; owner: string; value?: number };
    const reply = (v: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(v));
    };
    if (!guard.tryAdmit('counter', args.token)) {
      resource.rejected++;
      return reply({ ok: false, highest: guard.highest('counter') });
    }
    if (req.url === '/read') return reply({ ok: true, value: resource.value });
    if (args.value !== resource.value + 1) {
      resource.violations.push(
        `token ${args.token} (${args.owner}) wrote ${args.value} over ${resource.value}`,
      );
    }
    resource.value = args.value ?? resource.value;
    resource.accepted.push({ token: args.token, owner: args.owner, value: resource.value });
    reply({ ok: true });
  });
});

afterAll(async () => {
  await cluster.close();
  server.close();
});

describe('fenced locks across processes', () => {
  test('a stopped holder and a killed leader never let two writers corrupt the protected counter', async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const resourceUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await cluster.init();
    const n1 = await cluster.start('n1');
    await eventually('n1 to lead', async () => (await cluster.status('n1'))?.role === 'leader');
    await cluster.start('n2', [n1.raftAddr]);
    await cluster.start('n3', [n1.raftAddr]);
    await eventually('three voters', async () => (await cluster.status('n1'))?.voters.length === 3, 30_000);

    for (const id of ['n1', 'n2', 'n3']) {
      await cluster.post(id, '/lock-loop', {
        resource: resourceUrl,
        name: 'L',
        ttlMs: 600,
        iterations: 100_000,
        owner: `worker-${id}`,
      });
    }
    await sleep(1500);

    // Freeze whoever holds the lock, well past its TTL, then let it continue where it stopped.
    for (let round = 0; round < 2; round++) {
      const holder = await eventually('a lock holder', async () => {
        for (const n of cluster.up()) {
          const r = await cluster.op(n.id, { op: 'getLock', name: 'L' }, 3000);
          if (r.ok && r.value) return (r.value as { owner: string }).owner.replace('worker-', '');
        }
        return undefined;
      });
      cluster.pause(holder);
      await sleep(2000);
      cluster.resume(holder);
      await sleep(1000);
    }

    // SIGKILL the leader; locks keep working under the new one; bring it back.
    const leader = await eventually('a leader', () => cluster.agreedLeader());
    cluster.kill(leader);
    await eventually('a new leader', async () => {
      const l = await cluster.agreedLeader();
      return l !== undefined && l !== leader ? l : undefined;
    });
    await sleep(1500);
    await cluster.restart(leader);
    await cluster.post(leader, '/lock-loop', {
      resource: resourceUrl,
      name: 'L',
      ttlMs: 600,
      iterations: 100_000,
      owner: `worker-${leader}`,
    });
    await sleep(1500);

    const states: LockLoopState[] = [];
    for (const id of ['n1', 'n2', 'n3']) {
      await cluster.post(id, '/lock-loop', { stop: true });
    }
    for (const id of ['n1', 'n2', 'n3']) {
      states.push(
        await eventually(`worker on ${id} to stop`, async () => {
          const st = (await cluster.post(id, '/lock-loop', undefined)) as LockLoopState;
          return st.running ? undefined : st;
        }),
      );
    }

    console.info(
      `locks: ${states.reduce((n, s) => n + s.acquired, 0)} grants seen by live workers, ${resource.accepted.length} writes accepted, ` +
        `${resource.rejected} stale-token accesses rejected by the resource`,
    );
    expect(resource.violations).toEqual([]);
    expect(resource.value).toBe(resource.accepted.length);
    expect(resource.accepted.length).toBeGreaterThan(20);
    // Accepted writes came with non-decreasing tokens, each a grant the cluster really made once.
    const tokens = resource.accepted.map((a) => a.token);
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    // No token was granted twice, and each worker saw its tokens grow.
    const granted = states.flatMap((s) => s.tokens);
    expect(new Set(granted).size).toBe(granted.length);
    for (const s of states) expect(s.tokens).toEqual([...s.tokens].sort((a, b) => a - b));
  }, 150_000);
});
