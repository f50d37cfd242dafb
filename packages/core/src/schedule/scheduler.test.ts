import diagnostics_channel from 'node:diagnostics_channel';
import { afterEach, describe, expect, test } from 'vitest';
import { createLocalCoordination, LocalCoordinationStore } from '../coordination/local-coordination.js';
import { createPartitionOwnership } from '../coordination/partitions.js';
import type { Coordination } from '../coordination/types.js';
import { BackendUnavailableError } from '../errors.js';
import { ManualClock } from './clock.js';
import { cron, every, runNow } from './cron.js';
import { type CronFiring, CronScheduler, type CronSkipMessage, SCHEDULE_CHANNEL_NAMES } from './scheduler.js';

const T0 = Date.UTC(2024, 0, 1, 0, 0, 0);
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function setup(options: { tolerance?: number; coordination?: Coordination; clock?: ManualClock } = {}) {
  const clock = options.clock ?? new ManualClock(T0);
  const fired: CronFiring[] = [];
  const skipped: CronSkipMessage[] = [];
  const errors: unknown[] = [];
  const scheduler = new CronScheduler({
    clock,
    misfireToleranceMs: options.tolerance ?? 30_000,
    ...(options.coordination ? { coordination: options.coordination } : {}),
    onSkip: (s) => skipped.push(s),
    onError: (_id, e) => errors.push(e),
  });
  cleanups.push(() => scheduler.stop());
  const record = (firing: CronFiring) => void fired.push(firing);
  return { clock, scheduler, fired, skipped, errors, record };
}

describe('CronScheduler on a manual clock', () => {
  test('fires at every scheduled time, exactly on time', async () => {
    const { clock, scheduler, fired, record } = setup();
    scheduler.add({ id: 'tick', schedule: cron('*/10 * * * * *', { timezone: 'UTC' }), fire: record });
    scheduler.start();
    await clock.advance(35_000);
    expect(fired.map((f) => [f.scheduledAt - T0, f.firedAt - T0, f.reason])).toEqual([
      [10_000, 10_000, 'schedule'],
      [20_000, 20_000, 'schedule'],
      [30_000, 30_000, 'schedule'],
    ]);
    expect(scheduler.jobs()).toEqual([
      {
        id: 'tick',
        key: 'tick',
        expression: '*/10 * * * * *',
        timezone: 'UTC',
        enabled: true,
        nextFireAt: T0 + 40_000,
      },
    ]);
  });

  test('run-now fires once at start; run-now-and-schedule then keeps the schedule', async () => {
    const { clock, scheduler, fired, record } = setup();
    scheduler.add({ id: 'once', schedule: runNow(), fire: record });
    scheduler.add({ id: 'both', schedule: every.minutes(1).runNowAndSchedule(), fire: record });
    scheduler.start();
    await clock.advance(125_000);
    expect(fired.map((f) => [f.jobId, f.reason, f.scheduledAt - T0])).toEqual([
      ['once', 'run-now', 0],
      ['both', 'run-now', 0],
      ['both', 'schedule', 60_000],
      ['both', 'schedule', 120_000],
    ]);
  });

  test('a disabled schedule never fires', async () => {
    const { clock, scheduler, fired, record } = setup();
    scheduler.add({
      id: 'off',
      schedule: cron('* * * * * *', { enabled: false, runNowAndSchedule: true }),
      fire: record,
    });
    scheduler.start();
    await clock.advance(10_000);
    expect(fired).toEqual([]);
  });

  test('a job added to a running scheduler is armed at once; a removed job stops', async () => {
    const { clock, scheduler, fired, record } = setup();
    scheduler.start();
    await clock.advance(5_000);
    scheduler.add({ id: 'late', schedule: every.seconds(10).runNowAndSchedule(), fire: record });
    await clock.advance(10_000);
    scheduler.remove('late');
    await clock.advance(60_000);
    expect(fired.map((f) => [f.reason, f.scheduledAt - T0])).toEqual([
      ['run-now', 5_000],
      ['schedule', 10_000],
    ]);
    expect(() => scheduler.add({ id: 'x', schedule: 'nope', fire: record })).toThrowError(
      /invalid cron schedule/,
    );
    scheduler.add({ id: 'x', schedule: '* * * * *', fire: record });
    expect(() => scheduler.add({ id: 'x', schedule: '* * * * *', fire: record })).toThrowError(
      /already scheduled/,
    );
  });

  test('misfire: late within tolerance fires late; later than tolerance is skipped and reported', async () => {
    const { clock, scheduler, fired, skipped, record } = setup({ tolerance: 30_000 });
    scheduler.add({ id: 'm', schedule: cron('0 * * * * *', { timezone: 'UTC' }), fire: record });
    scheduler.start();
    await clock.advance(0);
    clock.jump(80_000); // blocked 20 s past the 60 s tick
    await clock.advance(0);
    clock.jump(60_000); // now 140 s: the 120 s tick is 20 s late again
    await clock.advance(0);
    clock.jump(45_000); // now 185 s: the 180 s tick is 5 s late
    await clock.advance(0);
    clock.jump(55_000); // now 240 s: exactly on time
    await clock.advance(0);
    clock.jump(100_000); // now 340 s: the 300 s tick is 40 s late → skipped
    await clock.advance(0);
    expect(fired.map((f) => [f.scheduledAt - T0, f.firedAt - T0])).toEqual([
      [60_000, 80_000],
      [120_000, 140_000],
      [180_000, 185_000],
      [240_000, 240_000],
    ]);
    expect(skipped).toEqual([
      { jobId: 'm', scheduledAt: T0 + 300_000, reason: 'misfire', lateByMs: 40_000, count: 1 },
    ]);
  });

  test('a long sleep fires at most once (the latest time within tolerance) and reports the rest', async () => {
    const { clock, scheduler, fired, skipped, record } = setup({ tolerance: 90_000 });
    scheduler.add({ id: 'm', schedule: cron('0 * * * * *', { timezone: 'UTC' }), fire: record });
    scheduler.start();
    await clock.advance(0);
    clock.jump(10 * 60_000 + 30_000); // asleep through ten ticks
    await clock.advance(0);
    expect(fired.map((f) => f.scheduledAt - T0)).toEqual([600_000]);
    expect(skipped).toEqual([
      { jobId: 'm', scheduledAt: T0 + 60_000, reason: 'misfire', lateByMs: 570_000, count: 9 },
    ]);
    await clock.advance(60_000);
    expect(fired.map((f) => f.scheduledAt - T0)).toEqual([600_000, 660_000]);
  });

  test('a throwing job is reported and the schedule goes on', async () => {
    const { clock, scheduler, errors } = setup();
    let calls = 0;
    const published: unknown[] = [];
    const onError = (m: unknown) => published.push(m);
    diagnostics_channel.subscribe(SCHEDULE_CHANNEL_NAMES.error, onError);
    cleanups.push(() => void diagnostics_channel.unsubscribe(SCHEDULE_CHANNEL_NAMES.error, onError));
    scheduler.add({
      id: 'bad',
      schedule: every.seconds(1),
      fire: async () => {
        calls++;
        throw new Error(`boom ${calls}`);
      },
    });
    scheduler.start();
    await clock.advance(3_000);
    expect(calls).toBe(3);
    expect(errors.map((e) => (e as Error).message)).toEqual(['boom 1', 'boom 2', 'boom 3']);
    expect(published).toHaveLength(3);
  });

  test('stop() waits for a firing in progress and nothing fires afterwards', async () => {
    const { clock, scheduler, fired } = setup();
    let release!: () => void;
    let finished = false;
    scheduler.add({
      id: 'slow',
      schedule: every.seconds(1),
      fire: async (f) => {
        fired.push(f);
        await new Promise<void>((r) => (release = r));
        finished = true;
      },
    });
    scheduler.start();
    await clock.advance(1_000);
    const stopping = scheduler.stop();
    release();
    await stopping;
    expect(finished).toBe(true);
    await clock.advance(10_000);
    expect(fired).toHaveLength(1);
  });
});

describe('at most one firing per scheduled time, cluster-wide', () => {
  test('two nodes on one coordination store: each time fires once in total', async () => {
    const clock = new ManualClock(T0);
    const store = new LocalCoordinationStore();
    const nodes = ['a', 'b', 'c'].map((nodeId) => {
      const coordination = createLocalCoordination({ nodeId, store });
      cleanups.push(() => coordination.close());
      return setup({ clock, coordination });
    });
    for (const node of nodes) {
      node.scheduler.add({ id: 'shared', schedule: every.seconds(5), fire: node.record });
      node.scheduler.start();
    }
    await clock.advance(60_000);
    const all = nodes.flatMap((n) => n.fired.map((f) => f.scheduledAt - T0)).sort((x, y) => x - y);
    expect(all).toEqual(Array.from({ length: 12 }, (_, i) => (i + 1) * 5_000));
    const claimedElsewhere = nodes.flatMap((n) => n.skipped).filter((s) => s.reason === 'claimed');
    expect(claimedElsewhere).toHaveLength(24);
  });

  test('with a partition gate, each job fires only on the node that owns its key', async () => {
    const clock = new ManualClock(T0);
    const store = new LocalCoordinationStore();
    const members = await Promise.all(
      ['n1', 'n2'].map(async (nodeId) => {
        const coordination = createLocalCoordination({ nodeId, store });
        await coordination.join({});
        cleanups.push(() => coordination.close());
        const partitions = createPartitionOwnership(coordination);
        await partitions.refresh();
        return { nodeId, coordination, partitions };
      }),
    );
    const keys = Array.from({ length: 12 }, (_, i) => `account-${i}`);
    const runs = members.map(({ coordination, partitions }) => {
      const fired: string[] = [];
      const scheduler = new CronScheduler({ clock, coordination, gate: (job) => partitions.owns(job.key) });
      cleanups.push(() => scheduler.stop());
      for (const key of keys) {
        scheduler.add({
          id: `job-${key}`,
          key,
          schedule: every.minutes(1),
          fire: () => void fired.push(key),
        });
      }
      scheduler.start();
      return fired;
    });
    await clock.advance(60_000);
    expect([...runs[0]!, ...runs[1]!].sort()).toEqual([...keys].sort());
    for (const [i, { partitions }] of members.entries()) {
      expect(runs[i]!.every((key) => partitions.owns(key))).toBe(true);
    }
    expect(runs[0]!.length).toBeGreaterThan(0);
    expect(runs[1]!.length).toBeGreaterThan(0);
  });

  test('when the claim cannot be made the firing is skipped (at most once) and reported', async () => {
    const coordination = createLocalCoordination({ nodeId: 'x' });
    cleanups.push(() => coordination.close());
    const failing = Object.assign(Object.create(coordination) as Coordination, {
      nodeId: 'x',
      compareAndSet: async () => {
        throw new BackendUnavailableError('redis', 'connection refused');
      },
    });
    const { clock, scheduler, fired, skipped, record } = setup({ coordination: failing });
    scheduler.add({ id: 'j', schedule: every.seconds(1), fire: record });
    scheduler.start();
    await clock.advance(1_000);
    expect(fired).toEqual([]);
    expect(skipped).toMatchObject([
      { jobId: 'j', reason: 'claim-failed', error: { code: 'MOCRA_ERR_BACKEND_UNAVAILABLE' } },
    ]);
  });
});
