// Cron for modules and spiders with no database, on a manual clock: each scheduled time starts
// one fresh run, run-now-and-schedule also fires at start, a late wake-up beyond the misfire
// tolerance is skipped and reported, and two engines sharing one coordination store fire each
// scheduled time once between them.
import diagnostics_channel from 'node:diagnostics_channel';
import {
  type CronSkipMessage,
  createLocalCoordination,
  LocalCoordinationStore,
  SCHEDULE_CHANNEL_NAMES,
} from '@mocra/core';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import {
  type CronInput,
  cron,
  defineModule,
  defineSpider,
  every,
  ManualClock,
  Mocra,
  Request,
  type RunSummary,
} from 'mocra';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';

const T0 = Date.UTC(2030, 0, 1, 0, 0, 0);
let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(async () => {
  await site?.close();
});

interface Fired {
  source: string;
  scheduledAt: number;
  runId: string;
}

/** A spider whose every run fetches one URL unique to its firing and emits what fired it. */
function cronSpider(name: string, schedule: CronInput) {
  return defineSpider<Fired>({
    name,
    cron: schedule,
    start(seeds) {
      const at = (seeds.params.cron as { scheduledAt: number }).scheduledAt;
      seeds.get(`${site.url}/echo?spider=${name}&at=${at}`);
    },
    parse(res, cx) {
      cx.emit({
        source: name,
        scheduledAt: Number(new URL(res.url).searchParams.get('at')),
        runId: cx.runId,
      });
    },
  });
}

describe('cron on a manual clock', () => {
  test('modules and spiders fire on schedule; each firing is a fresh run; the engine runs until stopped', async () => {
    const clock = new ManualClock(T0);
    const fired: Fired[] = [];
    const mod = defineModule<Fired>({
      name: 'every-10s',
      cron: {
        schedule: cron('*/10 * * * * *', { timezone: 'UTC' }),
        targets: [{ account: 'a1' }, { account: 'a2' }],
      },
      nodes: [
        {
          id: 'n',
          generate: (ctx) => [
            new Request(
              `${site.url}/echo?m=1&acc=${ctx.account}&at=${(ctx.params.cron as { scheduledAt: number }).scheduledAt}`,
            ),
          ],
          parse: (res, cx) =>
            cx.emit({
              source: `module:${cx.account}`,
              scheduledAt: Number(new URL(res.url).searchParams.get('at')),
              runId: cx.runId,
            }),
        },
      ],
    });
    const engine = Mocra.builder()
      .module(mod, (f) => void fired.push(f))
      .spider(
        cronSpider('now-and-every-15s', every.seconds(15).runNowAndSchedule()),
        (f) => void fired.push(f),
      )
      .cron({ clock })
      .handleSignals(false)
      .build();
    const run = engine.run();
    await clock.advance(0); // run-now
    await clock.advance(30_000);
    await vi.waitFor(() => expect(fired).toHaveLength(3 * 2 + 3), { timeout: 10_000, interval: 20 });
    // Nothing more without the clock moving: the run does not end by itself, and fires nothing.
    expect(engine.state).toBe('running');
    const summary: RunSummary = await engine.stop();
    const at = (source: string) =>
      fired
        .filter((f) => f.source === source)
        .map((f) => f.scheduledAt - T0)
        .sort((x, y) => x - y);
    expect(at('module:a1')).toEqual([10_000, 20_000, 30_000]);
    expect(at('module:a2')).toEqual([10_000, 20_000, 30_000]);
    expect(at('now-and-every-15s')).toEqual([0, 15_000, 30_000]);
    expect(new Set(fired.map((f) => f.runId)).size).toBe(fired.length); // one run per firing
    expect(summary.reason).toBe('stopped');
    expect(summary.errors).toBe(0);
    await run;
  });

  test('a wake-up later than the misfire tolerance skips the firing and reports it', async () => {
    const clock = new ManualClock(T0);
    const fired: Fired[] = [];
    const skips: CronSkipMessage[] = [];
    const onSkip = (m: unknown) => skips.push(m as CronSkipMessage);
    diagnostics_channel.subscribe(SCHEDULE_CHANNEL_NAMES.skip, onSkip);
    const engine = Mocra.builder()
      .spider(cronSpider('minutely', cron('0 * * * * *', { timezone: 'UTC' })), (f) => void fired.push(f))
      .cron({ clock, misfireToleranceMs: 5_000 })
      .handleSignals(false)
      .build();
    try {
      const run = engine.run();
      await clock.advance(0);
      clock.jump(70_000); // the process was blocked through 00:01:00 and woke 10 s late
      await clock.advance(0);
      await clock.advance(60_000 - 10_000); // on time for 00:02:00
      await vi.waitFor(() => expect(fired).toHaveLength(1), { timeout: 10_000, interval: 20 });
      await engine.stop();
      await run;
    } finally {
      diagnostics_channel.unsubscribe(SCHEDULE_CHANNEL_NAMES.skip, onSkip);
    }
    expect(fired.map((f) => f.scheduledAt - T0)).toEqual([120_000]);
    expect(skips).toEqual([
      {
        jobId: 'minutely:default:default',
        scheduledAt: T0 + 60_000,
        reason: 'misfire',
        lateByMs: 10_000,
        count: 1,
      },
    ]);
  });

  test('two engines sharing coordination: each scheduled time fires once between them', async () => {
    const clock = new ManualClock(T0);
    const store = new LocalCoordinationStore();
    const fired: (Fired & { node: string })[] = [];
    const engines = ['node-a', 'node-b'].map((nodeId) =>
      Mocra.builder()
        .spider(cronSpider('shared', every.seconds(10)), (f) => void fired.push({ ...f, node: nodeId }))
        .cron({ clock })
        .engineOptions({ coordination: createLocalCoordination({ nodeId, store }) })
        .handleSignals(false)
        .build(),
    );
    const runs = engines.map((e) => e.run());
    await clock.advance(60_000);
    await vi.waitFor(() => expect(fired).toHaveLength(6), { timeout: 10_000, interval: 20 });
    for (const engine of engines) await engine.stop();
    await Promise.all(runs);
    expect(fired.map((f) => f.scheduledAt - T0).sort((x, y) => x - y)).toEqual([
      10_000, 20_000, 30_000, 40_000, 50_000, 60_000,
    ]);
  });

  test('a module with an invalid cron fails at definition with MOCRA_ERR_INVALID_MODULE', () => {
    expect(() =>
      defineModule({ name: 'bad-cron', cron: '61 * * * *', nodes: [{ id: 'n', parse() {} }] }),
    ).toThrowError(
      expect.objectContaining({
        code: 'MOCRA_ERR_INVALID_MODULE',
        message: expect.stringMatching(/invalid cron.*minute: 61/),
      }),
    );
  });
});
