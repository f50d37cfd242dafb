// L4: a real 5-node cluster of child processes. Joins through non-leaders, the leader and a
// follower SIGKILLed at once (a minority of two), a follower SIGSTOPped, a leadership transfer
// asked of a follower, a node removed and a new one added — under a client workload whose
// history must stay linearizable and whose acknowledged writes must all survive.
import { afterAll, describe, expect, test } from 'vitest';
import { eventually, ProcessCluster, TEST_NODE_OPTIONS } from './harness/process-cluster.js';
import { verifyWorkload } from './harness/verify.js';
import { KvWorkload, sleep } from './harness/workload.js';
import { Prng } from './sim/prng.js';

const cluster = new ProcessCluster({ nodeOptions: TEST_NODE_OPTIONS });
afterAll(() => cluster.close());

describe('5 nodes as child processes', () => {
  test('minority crashes, a pause, a transfer and membership churn under load', async () => {
    await cluster.init();
    const n1 = await cluster.start('n1');
    await eventually('n1 to lead', async () => (await cluster.status('n1'))?.role === 'leader');
    await cluster.start('n2', [n1.raftAddr]);
    await eventually('2 voters', async () => (await cluster.status('n1'))?.voters.length === 2);
    // Later nodes join through whichever existing node, leader or not.
    await cluster.start('n3', [cluster.node('n2').raftAddr]);
    await cluster.start('n4', [cluster.node('n3').raftAddr, cluster.node('n1').raftAddr]);
    await cluster.start('n5', [cluster.node('n4').raftAddr]);
    await eventually('5 voters', async () => (await cluster.status('n5'))?.voters.length === 5, 30_000);

    const workload = new KvWorkload(cluster, new Prng(5));
    workload.start(4);
    await sleep(1500);

    // Kill the leader and one follower together: 3 of 5 remain and must carry on.
    const leader = await eventually('a leader', () => cluster.agreedLeader());
    const victim = ['n1', 'n2', 'n3', 'n4', 'n5'].find((id) => id !== leader)!;
    cluster.kill(leader);
    cluster.kill(victim);
    await eventually('a new leader among the three', async () => {
      const l = await cluster.agreedLeader();
      return l !== undefined && l !== leader ? l : undefined;
    });
    await sleep(1000);
    await cluster.restart(leader);
    await cluster.restart(victim);
    await sleep(1000);

    // Pause a follower past the election timeout, then let it go.
    const lead2 = await eventually('a leader', () => cluster.agreedLeader());
    const sleeper = ['n1', 'n2', 'n3', 'n4', 'n5'].find((id) => id !== lead2)!;
    cluster.pause(sleeper);
    await sleep(1500);
    cluster.resume(sleeper);
    await sleep(500);

    // Ask a follower to move leadership to another follower.
    const lead3 = await eventually('a leader', () => cluster.agreedLeader());
    const [asker, target] = ['n1', 'n2', 'n3', 'n4', 'n5'].filter((id) => id !== lead3);
    const moved = await cluster.op(asker!, { op: 'transfer', to: target });
    expect(moved).toMatchObject({ ok: true, value: target });
    await eventually(`${target} to lead`, async () => (await cluster.agreedLeader()) === target);

    // Remove a node (through a follower), stop it, and add a brand-new node through another follower.
    const lead4 = await eventually('a leader', () => cluster.agreedLeader());
    const others = ['n1', 'n2', 'n3', 'n4', 'n5'].filter((id) => id !== lead4);
    const removed = others[0]!;
    const removal = await cluster.op(others[1]!, { op: 'remove', id: removed });
    expect(removal.ok, JSON.stringify(removal)).toBe(true);
    await eventually('4 voters', async () => (await cluster.status(lead4))?.voters.length === 4);
    cluster.kill(removed);
    await cluster.start('n6', [cluster.node(others[2]!).raftAddr]);
    await eventually(
      'n6 promoted: 5 voters again',
      async () => {
        const st = await cluster.status(lead4);
        return st?.voters.length === 5 && st.voters.includes('n6');
      },
      30_000,
    );
    await sleep(800);

    await workload.stop();
    expect(workload.counts.ok).toBeGreaterThan(50);
    // The removed node's id is retired for good.
    const rejoin = await cluster.status('n6');
    expect(rejoin?.members.some((m) => m.id === removed)).toBe(false);
    await verifyWorkload(cluster, workload);
  }, 180_000);
});
