// L4: the opt-in dead-voter rule with real nodes as child processes. Five voters with
// `removeDeadVotersAfterMs` and `minVoters: 3`: a SIGKILLed follower is removed after the
// timeout (five become four), then the SIGKILLed leader (four become three, after the new leader
// has waited the full time itself), and a third SIGKILL is absorbed by the remaining three
// voters — which the five could not have done had the dead stayed voters. The rule promises
// nothing below three: the third dead node stays a voter.
import { afterAll, describe, expect, test } from 'vitest';
import { eventually, ProcessCluster, TEST_NODE_OPTIONS } from './harness/process-cluster.js';
import { sleep } from './harness/workload.js';

const DEAD_AFTER_MS = 1500;
const cluster = new ProcessCluster({
  nodeOptions: { ...TEST_NODE_OPTIONS, removeDeadVotersAfterMs: DEAD_AFTER_MS, minVoters: 3 },
});
afterAll(() => cluster.close());

const ids = ['n1', 'n2', 'n3', 'n4', 'n5'];

async function votersSeenBy(id: string): Promise<readonly string[] | undefined> {
  return (await cluster.status(id))?.voters;
}

/** Wait until `leader` sees `size` voters, `dead` no longer among them. */
function removedBy(leader: string, dead: string, size: number): Promise<readonly string[]> {
  return eventually(
    `${dead} removed`,
    async () => {
      const v = await votersSeenBy(leader);
      return v?.length === size && !v.includes(dead) ? v : undefined;
    },
    20_000,
  );
}

describe('dead voters as child processes', () => {
  test('5 voters lose three nodes one after another and keep committing; never fewer than 3 voters', async () => {
    await cluster.init();
    const n1 = await cluster.start('n1');
    await eventually('n1 to lead', async () => (await cluster.status('n1'))?.role === 'leader');
    for (const id of ids.slice(1)) await cluster.start(id, [n1.raftAddr]);
    await eventually('5 voters', async () => (await votersSeenBy('n1'))?.length === 5, 30_000);

    // 1. A follower dies: after the timeout the leader removes it.
    const leader = await eventually('a leader', () => cluster.agreedLeader());
    const follower = ids.find((id) => id !== leader)!;
    cluster.kill(follower);
    await sleep(DEAD_AFTER_MS / 2);
    expect(await votersSeenBy(leader)).toContain(follower);
    expect(await removedBy(leader, follower, 4)).toHaveLength(4);

    // 2. The leader dies: a new one is elected, waits the full time, and removes it.
    cluster.kill(leader);
    const second = await eventually('a new leader', async () => {
      const l = await cluster.agreedLeader();
      return l !== undefined && l !== leader ? l : undefined;
    });
    const three = await removedBy(second, leader, 3);
    expect(three).toHaveLength(3);

    // 3. One more dies: two of the three voters are a quorum, and the third stays a voter.
    const third = three.find((id) => id !== second)!;
    cluster.kill(third);
    await sleep(DEAD_AFTER_MS * 3);
    const survivor = three.find((id) => id !== second && id !== third)!;
    for (const id of [second, survivor]) {
      expect(await votersSeenBy(id)).toEqual(three);
    }
    const write = await cluster.op(survivor, { op: 'set', key: 'after-three-deaths', value: 'yes' });
    expect(write).toMatchObject({ ok: true });
    expect(await cluster.op(second, { op: 'get', key: 'after-three-deaths' })).toEqual({
      ok: true,
      value: 'yes',
    });
  }, 180_000);
});
