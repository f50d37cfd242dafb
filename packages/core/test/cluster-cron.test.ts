// Cron on a Raft-coordinated cluster: each job fires on the owner of its key's partition, every
// scheduled time exactly once — also across the death of the owner (its times are fired late by
// the next owner) and a member joining (times move, none fires twice). Three schedulers share
// one manual clock; membership and claims are on a real 3-node Raft cluster in this process.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createCronOwnership } from '../src/cluster/cron-ownership.js';
import { createRaftCoordination, type RaftCoordination } from '../src/coordination/raft-coordination.js';
import { ManualClock } from '../src/schedule/clock.js';
import { CronScheduler } from '../src/schedule/scheduler.js';
import { type InProcessCluster, startInProcessCluster, waitUntil } from './cluster-harness.js';

let cluster: InProcessCluster;
beforeAll(async () => {
  cluster = await startInProcessCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

interface Member {
  id: string;
  coordination: RaftCoordination;
  scheduler: CronScheduler;
  ownership: ReturnType<typeof createCronOwnership>;
}

test('every scheduled time fires once, on its owner; a dead owner’s times are fired late by the next one', async () => {
  const start = Date.UTC(2030, 0, 1, 0, 0, 0);
  const clock = new ManualClock(start);
  const fired: { node: string; job: string; at: number; late: number }[] = [];
  const namespace = `cron${Date.now().toString(36)}`;
  const members: Member[] = [];
  const join = async (id: string, nodeIndex: number): Promise<Member> => {
    const coordination = await createRaftCoordination({
      node: cluster.nodes[nodeIndex]!,
      nodeId: id,
      namespace,
      memberTtlMs: 600,
    });
    await coordination.join({});
    const ownership = createCronOwnership(coordination, { refreshMs: 50 });
    await ownership.start();
    const scheduler = new CronScheduler({
      coordination,
      clock,
      namespace,
      gate: ownership.gate,
      recheckRefusedMs: 100,
    });
    // Jobs keyed by several accounts, so every member owns some.
    for (const account of ['acme', 'globex', 'initech', 'umbrella', 'hooli', 'stark']) {
      scheduler.add({
        id: `report:${account}`,
        key: account,
        schedule: '* * * * * *',
        fire: (f) => {
          fired.push({ node: id, job: f.jobId, at: f.scheduledAt, late: f.firedAt - f.scheduledAt });
        },
      });
    }
    scheduler.start();
    const m = { id, coordination, scheduler, ownership };
    members.push(m);
    return m;
  };
  const a = await join('a', 0);
  const b = await join('b', 1);
  await join('c', 2);
  for (const m of members) await m.ownership.partitions.refresh();
  const owners = new Map(
    ['acme', 'globex', 'initech', 'umbrella', 'hooli', 'stark'].map((k) => [
      k,
      a.ownership.partitions.ownerOf(k)!,
    ]),
  );
  expect(new Set(owners.values()).size).toBeGreaterThan(1);
  /** Move `n` seconds, each firing `perSecond` jobs somewhere. */
  const tick = async (n: number, perSecond: number) => {
    for (let i = 0; i < n; i++) {
      expected += perSecond;
      await clock.advance(1_000);
      // Let the claims (Raft writes) of this second land, and the schedulers re-arm, before the next.
      await waitUntil('claims settle', async () => ((await settled()) ? true : undefined), 5_000);
      await new Promise((r) => setTimeout(r, 30));
    }
  };
  let expected = 0;
  const settled = async () => fired.length >= expected;

  // Three seconds with everyone alive: 6 jobs × 3 times, each on its owner.
  await tick(3, 6);
  expect(fired).toHaveLength(18);
  for (const f of fired) expect(f.node).toBe(owners.get(f.job.slice('report:'.length)));

  // b dies: no more heartbeats, no more firing, no leave.
  const bJobs = [...owners].filter(([, o]) => o === 'b').map(([k]) => k);
  expect(bJobs.length).toBeGreaterThan(0);
  await b.scheduler.stop();
  b.ownership.stop();
  await b.coordination.close({ leave: false });
  members.splice(members.indexOf(b), 1);
  const deadFrom = clock.now() + 1_000;
  // Three more seconds while the others still think b is alive: b's jobs are refused everywhere.
  await tick(3, 6 - bJobs.length);
  // b's membership lapses; the new owners ask again about the refused times and fire them, late.
  await waitUntil(
    'b to drop out of membership',
    async () => (members.every((m) => !m.ownership.partitions.members().includes('b')) ? true : undefined),
    5_000,
  );
  expected += 3 * bJobs.length;
  await clock.advance(100);
  await waitUntil('the refused times to be fired', async () => ((await settled()) ? true : undefined), 5_000);
  const late = fired.filter((f) => f.at >= deadFrom && bJobs.includes(f.job.slice('report:'.length)));
  expect(late).toHaveLength(3 * bJobs.length);
  for (const f of late) {
    expect(f.node).not.toBe('b');
    expect(f.late).toBeGreaterThan(0);
  }

  // A member joins: about a third of the jobs move to it; still one firing per time.
  await join('d', 1);
  for (const m of members) await m.ownership.partitions.refresh();
  await tick(2, 6);

  // Every (job, time) fired exactly once, and every time in the window fired.
  const seen = new Map<string, number>();
  for (const f of fired) seen.set(`${f.job}@${f.at}`, (seen.get(`${f.job}@${f.at}`) ?? 0) + 1);
  expect([...seen.values()].every((n) => n === 1)).toBe(true);
  expect(seen.size).toBe(6 * 8);
  for (const m of members) {
    await m.scheduler.stop();
    m.ownership.stop();
    await m.coordination.close();
  }
}, 60_000);
