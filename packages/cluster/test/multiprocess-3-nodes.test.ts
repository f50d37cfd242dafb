// L4: a real 3-node cluster of child processes on loopback with the real LevelDB log. Nodes join
// through a non-leader, the leader and a follower are SIGKILLed and restarted, the leader is
// SIGSTOPped past its lease and resumed — all under a client workload whose history must stay
// linearizable and whose acknowledged writes must all survive.
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, test } from 'vitest';
import { eventually, ProcessCluster, TEST_NODE_OPTIONS } from './harness/process-cluster.js';
import { verifyWorkload } from './harness/verify.js';
import { KvWorkload, sleep } from './harness/workload.js';
import { Prng } from './sim/prng.js';

const cluster = new ProcessCluster({ nodeOptions: TEST_NODE_OPTIONS });
afterAll(() => cluster.close());

describe('3 nodes as child processes', () => {
  test('join through a non-leader, SIGKILL leader and follower, SIGSTOP the leader: nothing acknowledged is lost', async () => {
    await cluster.init();
    const n1 = await cluster.start('n1');
    await eventually('n1 to lead', async () => (await cluster.status('n1'))?.role === 'leader');
    await cluster.start('n2', [n1.raftAddr]);
    await eventually(
      'n2 to be promoted to voter',
      async () => (await cluster.status('n1'))?.voters.length === 2,
    );
    // n2 is a follower: n3 joins through it, and it forwards the request to the leader. n2 learns
    // that its promotion committed one heartbeat after the leader does, so wait for its own view.
    await eventually(
      'n2 to see itself a voter',
      async () => (await cluster.status('n2'))?.role === 'follower',
    );
    await cluster.start('n3', [cluster.node('n2').raftAddr]);
    await eventually('three voters', async () => {
      const st = await cluster.status('n3');
      return st?.voters.length === 3 && st.role === 'follower';
    });

    const workload = new KvWorkload(cluster, new Prng(3));
    workload.start(4);
    await sleep(1500);

    // 1. SIGKILL the leader; the other two elect a new one; the old leader comes back.
    const first = await eventually('a leader', () => cluster.agreedLeader());
    cluster.kill(first);
    const second = await eventually('a new leader after SIGKILL', async () => {
      const l = await cluster.agreedLeader();
      return l !== first ? l : undefined;
    });
    await sleep(800);
    await cluster.restart(first);
    await sleep(1000);

    // 2. SIGKILL a follower and restart it (it may need a snapshot to catch up).
    const follower = ['n1', 'n2', 'n3'].find((id) => id !== second)!;
    cluster.kill(follower);
    await sleep(1500);
    await cluster.restart(follower);
    await sleep(800);

    // 3. SIGSTOP the leader past its lease: the others elect someone else; then SIGCONT.
    const paused = await eventually('a leader', () => cluster.agreedLeader());
    cluster.pause(paused);
    await eventually('a leader while the old one is stopped', async () => {
      const l = await cluster.agreedLeader();
      return l !== undefined && l !== paused ? l : undefined;
    });
    await sleep(500);
    cluster.resume(paused);
    await sleep(1000);

    await workload.stop();
    expect(workload.counts.ok).toBeGreaterThan(50);
    await verifyWorkload(cluster, workload);

    // A voter that lost its disk may not simply join again (it could vote twice in a term).
    const victim = (await cluster.agreedLeader()) === 'n3' ? 'n2' : 'n3';
    cluster.kill(victim);
    await rm(cluster.node(victim).dataDir, { recursive: true, force: true });
    cluster.nodes.delete(victim);
    await expect(cluster.start(victim, [cluster.node('n1').raftAddr])).rejects.toThrow(
      /MOCRA_ERR_CLUSTER_DATA_LOST/,
    );
  }, 150_000);
});
