import diagnostics_channel from 'node:diagnostics_channel';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { LocalCoordination } from '../coordination/local-coordination.js';
import { compileModuleGraph, graph } from '../module/graph.js';
import { createLogger } from '../observability/logger.js';
import type { Delivery } from '../queue/types.js';
import { childCredit, formatCredit, type UnitCredit } from './credit.js';
import { type CreditFlushMessage, JoinCredits } from './join-credits.js';

const fanIn = compileModuleGraph({
  name: 'm',
  graph: graph()
    .edge({ id: 'fan', parse() {} }, { id: 'merge', join: true, parse() {} })
    .build(),
});

/** A request of `runId` holding the `index`-th share of the run's seed credit. */
function unitOf(runId: string, index: number): Delivery<unknown> {
  const seed: UnitCredit = { phase: 0, exp: 0, id: 'seed' };
  return {
    id: `${runId}-${index}`,
    payload: { runId, module: 'm', credit: formatCredit(childCredit(seed, index)) },
    headers: {},
  } as unknown as Delivery<unknown>;
}

describe('join credit writes', () => {
  const flushes: (CreditFlushMessage & { at: number })[] = [];
  const onFlush = (message: unknown) => flushes.push({ ...(message as CreditFlushMessage), at: Date.now() });
  let credits: JoinCredits;
  let coordination: LocalCoordination;

  function start(options: { quietMs?: number; maxQuietMs?: number; maxHeld?: number }): void {
    coordination = new LocalCoordination();
    credits = new JoinCredits({
      coordination,
      graphOf: (module) => (module === 'm' ? fanIn : undefined),
      modulesOf: () => ['m'],
      fire: async () => {},
      log: createLogger({ level: 'silent' }),
      ...options,
    });
  }

  /** Runs a unit through the wrapped handler: `finish` resolves it. Returns its held settle. */
  function run(
    delivery: Delivery<unknown>,
    stage: 'download' | 'task' = 'download',
  ): { finish: () => void; settled: Promise<unknown> } {
    let finish!: () => void;
    const handled = new Promise<undefined>((resolve) => {
      finish = () => resolve(undefined);
    });
    const wrapped = credits.wrap(stage, () => handled);
    const settled = wrapped(delivery, new AbortController().signal).then((result) =>
      result !== undefined && 'settleAfter' in result ? result.settleAfter : result,
    );
    return { finish, settled };
  }

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    flushes.length = 0;
    diagnostics_channel.subscribe('mocra:module:credit-flush', onFlush);
  });
  afterEach(async () => {
    diagnostics_channel.unsubscribe('mocra:module:credit-flush', onFlush);
    await credits.close();
    await coordination.close();
    vi.useRealTimers();
  });

  test('a run that comes back after a quiet write waits four times longer before the next', async () => {
    start({ quietMs: 100, maxQuietMs: 1600 });
    const t0 = Date.now();
    const first = run(unitOf('r', 1));
    first.finish();
    await vi.advanceTimersByTimeAsync(150);
    await first.settled; // its ack waited for the write
    expect(flushes.map((f) => [f.at - t0, f.trigger])).toEqual([[100, 'quiet']]);

    // More of the run reaches this process: the next quiet write waits 400 ms, not 100.
    const second = run(unitOf('r', 2));
    second.finish();
    await vi.advanceTimersByTimeAsync(350);
    expect(flushes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(flushes.map((f) => [f.at - t0, f.trigger])).toEqual([
      [100, 'quiet'],
      [550, 'quiet'],
    ]);
    await second.settled;

    // Another run is not slowed by it (the clock is at 600 now).
    const other = run(unitOf('s', 1));
    other.finish();
    await vi.advanceTimersByTimeAsync(100);
    expect(flushes.at(-1)).toMatchObject({ runId: 's', trigger: 'quiet', at: t0 + 700 });
  });

  test('the wait stops growing at maxQuietMs', async () => {
    start({ quietMs: 100, maxQuietMs: 300 });
    const t0 = Date.now();
    for (let i = 1; i <= 3; i++) {
      const unit = run(unitOf('r', i));
      unit.finish();
      await vi.advanceTimersByTimeAsync(400);
      await unit.settled;
    }
    // 100, then 300 (400 capped), then 300 again.
    expect(flushes.map((f) => f.at - t0)).toEqual([100, 700, 1100]);
  });

  test("the last phase's units (no join after them) are acked without a write", async () => {
    start({ quietMs: 100 });
    const afterJoin: Delivery<unknown> = {
      id: 'after-merge',
      payload: { runId: 'r', module: 'm', credit: formatCredit({ phase: 1, exp: 1, id: 'join-1.1' }) },
      headers: {},
    } as unknown as Delivery<unknown>;
    const unit = run(afterJoin);
    unit.finish();
    await unit.settled;
    await vi.advanceTimersByTimeAsync(1000);
    expect(flushes).toHaveLength(0);
  });

  test("a run's task is written at once, not when the run goes quiet", async () => {
    start({ quietMs: 10_000, maxQuietMs: 10_000 });
    const busy = run(unitOf('r', 9)); // the run is not quiet here
    const task = run({ id: 'task-r', payload: { runId: 'r', module: 'm' }, headers: {} } as never, 'task');
    await vi.advanceTimersByTimeAsync(1);
    task.finish();
    await vi.advanceTimersByTimeAsync(1);
    await task.settled;
    expect(flushes.map((f) => [f.runId, f.units, f.trigger])).toEqual([['r', 1, 'task']]);
    busy.finish();
  });

  test('holding maxHeld finished units writes the run holding the most at once', async () => {
    start({ quietMs: 10_000, maxQuietMs: 10_000, maxHeld: 3 });
    // A unit of run a keeps running, so it is not quiet.
    const busy = run(unitOf('a', 9));
    const a1 = run(unitOf('a', 1));
    const a2 = run(unitOf('a', 2));
    const b1 = run(unitOf('b', 1));
    a1.finish();
    a2.finish();
    await vi.advanceTimersByTimeAsync(10);
    expect(flushes).toHaveLength(0);
    b1.finish(); // the third held unit
    await vi.advanceTimersByTimeAsync(10);
    expect(flushes.map((f) => [f.runId, f.units, f.trigger])).toEqual([['a', 2, 'full']]);
    await Promise.all([a1.settled, a2.settled]);
    // b, quiet since its unit finished, is written when its wait is over.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(flushes.map((f) => [f.runId, f.units, f.trigger])).toEqual([
      ['a', 2, 'full'],
      ['b', 1, 'quiet'],
    ]);
    await b1.settled;
    busy.finish();
  });
});
