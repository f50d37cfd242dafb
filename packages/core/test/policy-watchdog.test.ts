import diagnostics_channel from 'node:diagnostics_channel';
import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { HandlerTimeoutError } from '../src/errors.js';
import { classifyError } from '../src/policy/failure-kind.js';
import { POLICY_CHANNEL_NAMES, type WatchdogTimeoutMessage } from '../src/policy/policy-channels.js';
import { PolicyResolver } from '../src/policy/policy-resolver.js';
import { ProgressWatchdog, type StallReport } from '../src/policy/progress-watchdog.js';
import { DeadlineGroup, HandlerWatchdog, runWithDeadline } from '../src/policy/watchdog.js';
import { ManualClock } from '../src/schedule/clock.js';

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
beforeEach(() => {
  unhandled.length = 0;
  process.on('unhandledRejection', onUnhandled);
});
afterEach(() => {
  process.off('unhandledRejection', onUnhandled);
});

describe('runWithDeadline', () => {
  test('a handler that finishes in time returns its value; no timer is left behind', async () => {
    const clock = new ManualClock();
    await expect(
      runWithDeadline(async () => 42, { timeoutMs: 1_000, label: 'parse a', clock }),
    ).resolves.toBe(42);
    await expect(
      runWithDeadline(
        async () => {
          throw new Error('own failure');
        },
        { timeoutMs: 1_000, label: 'parse a', clock },
      ),
    ).rejects.toThrow('own failure');
    expect(clock.pending).toBe(0);
  });

  test('a handler that never returns is aborted at its deadline and fails with a retryable timeout', async () => {
    const clock = new ManualClock();
    const seen: WatchdogTimeoutMessage[] = [];
    const listener = (m: unknown) => seen.push(m as WatchdogTimeoutMessage);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.watchdog, listener);
    let handlerSignal: AbortSignal | undefined;
    try {
      const outcome = runWithDeadline(
        (signal) => {
          handlerSignal = signal;
          return new Promise<never>(() => {}); // never settles, ignores its signal
        },
        { timeoutMs: 5_000, label: 'download http://x/', clock },
      ).catch((e: unknown) => e);
      await clock.advance(4_999);
      expect(handlerSignal?.aborted).toBe(false);
      await clock.advance(1);
      const error = await outcome;
      expect(error).toBeInstanceOf(HandlerTimeoutError);
      expect(error).toMatchObject({ code: 'MOCRA_ERR_HANDLER_TIMEOUT', retryable: true, timeoutMs: 5_000 });
      expect(handlerSignal?.aborted).toBe(true);
      expect(handlerSignal?.reason).toBe(error);
      // It takes the retry path: a timeout, retried with backoff.
      expect(classifyError(error)).toBe('timeout');
      const decision = new PolicyResolver({ random: () => 0 }).decide({
        code: (error as HandlerTimeoutError).code,
        stage: 'parse',
        attempt: 1,
      });
      expect(decision).toMatchObject({ action: 'retry', kind: 'timeout', delayMs: 1_000 });
    } finally {
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.watchdog, listener);
    }
    expect(seen).toEqual([{ label: 'download http://x/', timeoutMs: 5_000, at: 5_000 }]);
  });

  test("an abandoned handler's late rejection is swallowed, its late value ignored", async () => {
    const clock = new ManualClock();
    let rejectLate: (e: Error) => void = () => {};
    const outcome = runWithDeadline(
      () =>
        new Promise<string>((_, reject) => {
          rejectLate = reject;
        }),
      { timeoutMs: 10, label: 'store', clock },
    ).catch((e: unknown) => e);
    await clock.advance(10);
    expect(await outcome).toBeInstanceOf(HandlerTimeoutError);
    rejectLate(new Error('late'));
    await new Promise((r) => setImmediate(r));
    expect(unhandled).toEqual([]);
  });

  test('a parent abort reaches the handler; 0 means no deadline', async () => {
    const clock = new ManualClock();
    const parent = new AbortController();
    const outcome = runWithDeadline(
      (signal) =>
        new Promise<string>((resolve) =>
          signal.addEventListener('abort', () => resolve(`aborted: ${signal.reason}`)),
        ),
      { timeoutMs: 0, label: 'x', clock, signal: parent.signal },
    );
    expect(clock.pending).toBe(0);
    parent.abort('shutdown');
    await expect(outcome).resolves.toBe('aborted: shutdown');
    const already = runWithDeadline((signal) => signal.aborted, {
      timeoutMs: 5,
      label: 'y',
      clock,
      signal: parent.signal,
    });
    await expect(already).resolves.toBe(true);
  });

  test('HandlerWatchdog applies per-kind deadlines and counts timeouts', async () => {
    const clock = new ManualClock();
    const watchdog = new HandlerWatchdog({ timeouts: { parse: 100, download: 0 }, clock });
    const stuck = watchdog
      .run('parse', 'parse p', undefined, () => new Promise<never>(() => {}))
      .catch((e) => e);
    const unbounded = watchdog.run('download', 'download d', undefined, async () => 'ok');
    await clock.advance(100);
    expect(await stuck).toBeInstanceOf(HandlerTimeoutError);
    expect(await unbounded).toBe('ok');
    expect(watchdog.timeouts()).toEqual({ parse: 1 });
    expect(watchdog.timeoutOf('generate')).toBe(0);
    expect(() => new HandlerWatchdog({ timeouts: { parse: -1 } })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});

describe('ProgressWatchdog', () => {
  function setup(pending: () => number) {
    const clock = new ManualClock();
    const reports: StallReport[] = [];
    const watchdog = new ProgressWatchdog({
      stallMs: 60_000,
      checkEveryMs: 5_000,
      pending,
      clock,
      onStall: (r) => reports.push(r),
    });
    return { clock, reports, watchdog };
  }

  test('no report while work moves', async () => {
    const { clock, reports, watchdog } = setup(() => 10);
    watchdog.start();
    for (let i = 0; i < 100; i++) {
      await clock.advance(30_000);
      watchdog.progress();
    }
    watchdog.stop();
    expect(reports).toEqual([]);
    expect(clock.pending).toBe(0);
  });

  test('reports a stall with work pending, again every stallMs, and resets on progress', async () => {
    const onChannel: StallReport[] = [];
    const listener = (m: unknown) => onChannel.push(m as StallReport);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.stall, listener);
    const { clock, reports, watchdog } = setup(() => 7);
    try {
      watchdog.start();
      await clock.advance(59_999);
      expect(reports).toHaveLength(0);
      await clock.advance(1);
      expect(reports).toHaveLength(1);
      expect(reports[0]).toMatchObject({ idleMs: 60_000, pending: 7, repeat: 1 });
      expect(reports[0]?.error.code).toBe('MOCRA_ERR_STALLED');
      await clock.advance(60_000);
      expect(reports.map((r) => r.repeat)).toEqual([1, 2]);
      watchdog.progress();
      await clock.advance(55_000);
      expect(reports).toHaveLength(2);
      await clock.advance(5_000);
      expect(reports.map((r) => r.repeat)).toEqual([1, 2, 1]);
      expect(watchdog.stalls).toBe(3);
    } finally {
      watchdog.stop();
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.stall, listener);
    }
    expect(onChannel).toHaveLength(3);
  });

  test('idle with nothing pending is not a stall (a finished crawl)', async () => {
    const { clock, reports, watchdog } = setup(() => 0);
    watchdog.start();
    await clock.advance(600_000);
    watchdog.stop();
    expect(reports).toEqual([]);
  });

  test('a throwing listener does not stop later checks', async () => {
    const clock = new ManualClock();
    let calls = 0;
    const watchdog = new ProgressWatchdog({
      stallMs: 1_000,
      checkEveryMs: 500,
      pending: () => 1,
      clock,
      onStall: () => {
        calls++;
        throw new Error('listener bug');
      },
    });
    watchdog.start();
    await clock.advance(3_000);
    watchdog.stop();
    expect(calls).toBe(3);
    expect(unhandled).toEqual([]);
  });
});

describe('DeadlineGroup', () => {
  test('one timer watches many handlers; only the one past its deadline is aborted', async () => {
    const clock = new ManualClock();
    const group = new DeadlineGroup({ timeoutMs: 1_000, resolutionMs: 100, clock });
    let labelled = 0;
    const label = (name: string) => () => {
      labelled++;
      return `parse ${name}`;
    };
    const stuck = group.run(
      (signal) =>
        new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      label('stuck'),
    );
    const results = Array.from({ length: 50 }, (_, i) => group.run(async () => i, label(String(i))));
    expect(await Promise.all(results)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(group.size).toBe(1);
    expect(clock.pending).toBe(1);
    await clock.advance(999);
    expect(group.size).toBe(1);
    await clock.advance(101);
    await expect(stuck).rejects.toBeInstanceOf(HandlerTimeoutError);
    await expect(stuck).rejects.toThrow('parse stuck');
    // Labels are only formatted for the handler that timed out.
    expect(labelled).toBe(1);
    expect(group.size).toBe(0);
    expect(clock.pending).toBe(0);
  });

  test('a deadline is enforced at most resolutionMs late, and a parent abort reaches the handler', async () => {
    const clock = new ManualClock();
    const group = new DeadlineGroup({ timeoutMs: 1_000, resolutionMs: 300, clock });
    const late = group.run(
      (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      'late',
    );
    await clock.advance(900);
    expect(group.size).toBe(1);
    await clock.advance(300);
    await expect(late).rejects.toMatchObject({ code: 'MOCRA_ERR_HANDLER_TIMEOUT' });
    const parent = new AbortController();
    const aborted = group.run(
      (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      'aborted',
      parent.signal,
    );
    parent.abort(new Error('engine stopping'));
    await expect(aborted).rejects.toThrow('engine stopping');
    expect(group.size).toBe(0);
  });
});

describe('DeadlineGroup cohorts', () => {
  const stuck = (signal: AbortSignal) =>
    new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));

  test('runs started within one resolution window share a signal; a later window gets its own', async () => {
    const clock = new ManualClock();
    const group = new DeadlineGroup({ timeoutMs: 1_000, resolutionMs: 100, clock });
    const parent = new AbortController();
    const seen: AbortSignal[] = [];
    const take = (signal: AbortSignal) => {
      seen.push(signal);
      return 1;
    };
    await Promise.all(Array.from({ length: 20 }, () => group.run(take, 'r', parent.signal)));
    await clock.advance(99);
    await group.run(take, 'r', parent.signal);
    await clock.advance(1);
    await group.run(take, 'r', parent.signal);
    await group.run(take, 'r');
    expect(new Set(seen.slice(0, 21)).size).toBe(1);
    expect(seen[21]).not.toBe(seen[0]);
    // Runs with no parent never share one with runs under a parent.
    expect(seen[22]).not.toBe(seen[21]);
    expect(seen.every((signal) => !signal.aborted)).toBe(true);
  });

  test("a cohort expires at its last run's deadline: no run is cut short, none is more than two windows late", async () => {
    const clock = new ManualClock();
    const group = new DeadlineGroup({ timeoutMs: 1_000, resolutionMs: 100, clock });
    const first = group.run(stuck, 'first');
    await clock.advance(50);
    const second = group.run(stuck, 'second');
    const outcome = { first: 'running', second: 'running' };
    first.catch((err: Error) => (outcome.first = err.message));
    second.catch((err: Error) => (outcome.second = err.message));
    // 1,000 ms after the first started: the second has 50 ms left, so neither is aborted yet.
    await clock.advance(950);
    expect(outcome).toEqual({ first: 'running', second: 'running' });
    await clock.advance(100);
    await expect(first).rejects.toBeInstanceOf(HandlerTimeoutError);
    // Each run is rejected with its own label, though their signal is one.
    await expect(first).rejects.toThrow('first');
    await expect(second).rejects.toThrow('second');
    expect(group.size).toBe(0);
  });

  test('a run that starts once its cohort expired gets a fresh signal, not an aborted one', async () => {
    const clock = new ManualClock();
    const group = new DeadlineGroup({ timeoutMs: 100, resolutionMs: 1_000, clock });
    const expired = group.run(stuck, 'expired');
    expired.catch(() => {});
    let signal: AbortSignal | undefined;
    const blocked = group.run((s) => {
      signal = s;
      return stuck(s);
    }, 'blocked');
    blocked.catch(() => {});
    await clock.advance(1_000);
    await expect(expired).rejects.toBeInstanceOf(HandlerTimeoutError);
    expect(signal?.aborted).toBe(true);
    const next = await group.run((s) => s.aborted, 'next');
    expect(next).toBe(false);
  });
});

describe('DeadlineGroup under one parent signal', () => {
  test('runs share one abort listener on the parent, removed when the last one ends', async () => {
    const clock = new ManualClock();
    const group = new DeadlineGroup({ timeoutMs: 1_000, clock });
    const parent = new AbortController();
    const releases: (() => void)[] = [];
    const runs = Array.from({ length: 20 }, (_, i) =>
      group.run(
        () =>
          new Promise<number>((resolve) => {
            releases.push(() => resolve(i));
          }),
        `run ${i}`,
        parent.signal,
      ),
    );
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(1);
    for (const release of releases) release();
    expect(await Promise.all(runs)).toHaveLength(20);
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(0);
    expect(clock.pending).toBe(0);
  });

  test('a parent abort reaches every run under it, and later runs start aborted', async () => {
    const clock = new ManualClock();
    const group = new DeadlineGroup({ timeoutMs: 1_000, clock });
    const parent = new AbortController();
    const waitAbort = (signal: AbortSignal) =>
      new Promise<string>((resolve) =>
        signal.addEventListener('abort', () => resolve(String(signal.reason))),
      );
    const runs = [group.run(waitAbort, 'a', parent.signal), group.run(waitAbort, 'b', parent.signal)];
    parent.abort('stopping');
    expect(await Promise.all(runs)).toEqual(['stopping', 'stopping']);
    await expect(group.run((signal) => String(signal.reason), 'c', parent.signal)).resolves.toBe('stopping');
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(0);
    expect(group.size).toBe(0);
  });

  test('onTimeout hears each timeout once, after the run was rejected', async () => {
    const clock = new ManualClock();
    const seen: string[] = [];
    const group = new DeadlineGroup({
      timeoutMs: 100,
      resolutionMs: 50,
      clock,
      onTimeout: (error) => seen.push(error.message),
    });
    const stuck = group.run(() => new Promise<never>(() => {}), 'stuck').catch((e: unknown) => e);
    const quick = group.run(async () => 'ok', 'quick');
    await expect(quick).resolves.toBe('ok');
    await clock.advance(150);
    expect(await stuck).toBeInstanceOf(HandlerTimeoutError);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toContain('stuck');
  });
});
