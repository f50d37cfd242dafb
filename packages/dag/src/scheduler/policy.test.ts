import { describe, expect, test } from 'vitest';
import { deferred, incomplete, num, readNum } from '../../test/helpers.js';
import {
  createDag,
  createManualClock,
  createMemoryEventSink,
  DagScheduler,
  EMPTY_PAYLOAD,
  type NodeContext,
  NodeFailedError,
  type NodeOptions,
  type NodeRun,
  NodeTimeoutError,
  type Payload,
  PermanentNodeError,
  RetryableNodeError,
  RetryExhaustedError,
  runDag,
} from '../index.js';
import { applyJitter, backoffDelay } from '../policy/retry.js';

/** A node that fails `failures` times (recording when each attempt started), then succeeds. */
function flaky(clock: { now(): number }, failures: number, error: () => unknown = () => new Error('flaky')) {
  const startedAt: number[] = [];
  const run: NodeRun = async (ctx: NodeContext) => {
    startedAt.push(clock.now());
    if (ctx.attempt <= failures) throw error();
    return num(ctx.attempt);
  };
  return { run, startedAt };
}

async function runOne(options: NodeOptions, node: NodeRun, extra: Record<string, unknown> = {}) {
  const clock = (extra.clock as ReturnType<typeof createManualClock>) ?? createManualClock();
  const dag = createDag([{ id: 'n', run: node, ...options }]);
  const sink = createMemoryEventSink();
  const promise = new DagScheduler(dag, { clock, eventSink: sink, ...extra }).run();
  promise.catch(() => {});
  await clock.runAll();
  return { promise, sink, clock };
}

describe('retries', () => {
  test('fixed backoff: waits the same delay before each retry, then succeeds', async () => {
    const clock = createManualClock();
    const node = flaky(clock, 2);
    const { promise, sink } = await runOne(
      { retry: { maxRetries: 3, backoff: { kind: 'fixed', delayMs: 100 } } },
      node.run,
      { clock },
    );
    const report = await promise;
    expect(node.startedAt).toEqual([0, 100, 200]);
    expect(readNum(report.output('n'))).toBe(3);
    expect(report.results[0]?.attempts).toBe(3);
    expect(sink.ofType('node-retry-scheduled').map((e) => [e.attempt, e.delayMs, e.breakerOpen])).toEqual([
      [1, 100, false],
      [2, 100, false],
    ]);
  });

  test('exponential backoff doubles (or uses factor) up to maxDelayMs', async () => {
    const clock = createManualClock();
    const node = flaky(clock, 4);
    const { promise } = await runOne(
      {
        retry: {
          maxRetries: 4,
          backoff: { kind: 'exponential', initialDelayMs: 100, factor: 3, maxDelayMs: 500 },
        },
      },
      node.run,
      { clock },
    );
    await promise;
    // waits 100, 300, 500 (900 capped), 500
    expect(node.startedAt).toEqual([0, 100, 400, 900, 1400]);
    expect(backoffDelay({ kind: 'exponential', initialDelayMs: 10 }, 4)).toBe(80);
  });

  test('jitter spreads each wait by ±jitter using the injected random source', async () => {
    for (const [u, expected] of [
      [0, [0, 80]],
      [0.5, [0, 100]],
      [0.999_999, [0, 120]],
    ] as const) {
      const clock = createManualClock();
      const node = flaky(clock, 1);
      const { promise } = await runOne(
        { retry: { maxRetries: 1, backoff: { kind: 'fixed', delayMs: 100 }, jitter: 0.2 } },
        node.run,
        { clock, random: () => u },
      );
      await promise;
      expect(node.startedAt.map(Math.round)).toEqual(expected);
    }
    expect(applyJitter(100, 0, 0.1)).toBe(100);
    expect(applyJitter(0, 0.5, 0.1)).toBe(0);
  });

  test('retries used up: RetryExhaustedError with the attempts and the last error', async () => {
    const clock = createManualClock();
    const last = new Error('third');
    let n = 0;
    const { promise } = await runOne(
      { retry: { maxRetries: 2, backoff: { kind: 'fixed', delayMs: 5 } } },
      async () => {
        n++;
        throw n === 3 ? last : new Error('earlier');
      },
      { clock },
    );
    const err = await incomplete(promise);
    const cause = err.cause as RetryExhaustedError;
    expect(cause).toBeInstanceOf(RetryExhaustedError);
    expect(cause.attempts).toBe(3);
    expect(cause.maxRetries).toBe(2);
    expect(cause.cause).toBe(last);
    expect(cause.retryable).toBe(true);
    expect(err.report.results[0]?.attempts).toBe(3);
  });

  test('a node waiting out its backoff is cancelled (and its timer cleared) when another node fails', async () => {
    const clock = createManualClock();
    const sink = createMemoryEventSink();
    const dag = createDag([
      {
        id: 'flaky',
        retry: { maxRetries: 3, backoff: { kind: 'fixed', delayMs: 1_000 } },
        run: async () => {
          throw new Error('flaky');
        },
      },
      {
        id: 'broken',
        run: () =>
          new Promise<Payload>((_, reject) =>
            clock.setTimeout(() => reject(new PermanentNodeError('broken')), 10),
          ),
      },
    ]);
    const run = new DagScheduler(dag, { clock, eventSink: sink }).run();
    const failed = incomplete(run);
    await clock.advance(10);
    const err = await failed;
    expect(err.report.states.get('flaky')).toBe('cancelled');
    expect(err.report.results.find((r) => r.nodeId === 'flaky')?.attempts).toBe(1);
    expect(sink.ofType('node-cancelled').map((e) => e.nodeId)).toEqual(['flaky']);
    expect(clock.pendingTimers).toBe(0);
  });

  test("retryOn 'retryable' retries only errors that say so", async () => {
    const clock = createManualClock();
    const plain = flaky(clock, 1);
    const r1 = await runOne({ retry: { maxRetries: 3, retryOn: 'retryable' } }, plain.run, { clock });
    const err = await incomplete(r1.promise);
    expect(err.cause).toBeInstanceOf(NodeFailedError);
    expect(plain.startedAt).toHaveLength(1);

    const marked = flaky(clock, 2, () => new RetryableNodeError('try again'));
    const r2 = await runOne({ retry: { maxRetries: 3, retryOn: 'retryable' } }, marked.run, { clock });
    expect((await r2.promise).results[0]?.attempts).toBe(3);

    // duck-typed: any error with retryable: true (e.g. mocra's RetryLaterError)
    const duck = flaky(clock, 1, () => Object.assign(new Error('later'), { retryable: true }));
    const r3 = await runOne({ retry: { maxRetries: 1, retryOn: 'retryable' } }, duck.run, { clock });
    await r3.promise;
    expect(duck.startedAt).toHaveLength(2);
  });

  test("retryOn 'all' (default) retries everything except errors marked non-retryable", async () => {
    const clock = createManualClock();
    const permanent = flaky(clock, 1, () => new PermanentNodeError('bad input'));
    const r = await runOne({ retry: { maxRetries: 5 } }, permanent.run, { clock });
    const err = await incomplete(r.promise);
    expect(err.cause).toBeInstanceOf(NodeFailedError);
    expect((err.cause as NodeFailedError).cause).toBeInstanceOf(PermanentNodeError);
    expect(permanent.startedAt).toHaveLength(1);
  });

  test("an error's own delayMs replaces the backoff", async () => {
    const clock = createManualClock();
    const node = flaky(clock, 1, () => new RetryableNodeError('rate limited', { delayMs: 7_000 }));
    const { promise } = await runOne(
      { retry: { maxRetries: 1, backoff: { kind: 'fixed', delayMs: 10 } } },
      node.run,
      { clock },
    );
    await promise;
    expect(node.startedAt).toEqual([0, 7_000]);
  });

  test('defaultPolicy applies to nodes that do not set the field; a node policy wins', async () => {
    const clock = createManualClock();
    const a = flaky(clock, 2);
    const b = flaky(clock, 1);
    const dag = createDag([
      { id: 'a', run: a.run },
      { id: 'b', run: b.run, retry: { maxRetries: 1, backoff: { kind: 'fixed', delayMs: 1 } } },
    ]);
    const run = new DagScheduler(dag, {
      clock,
      defaultPolicy: { retry: { maxRetries: 2, backoff: { kind: 'fixed', delayMs: 50 } } },
    }).run();
    await clock.runAll();
    await run;
    expect(a.startedAt).toEqual([0, 50, 100]);
    expect(b.startedAt).toEqual([0, 1]);
  });
});

describe('timeouts', () => {
  test('an attempt that runs too long is aborted through its signal, and may be retried', async () => {
    const clock = createManualClock();
    const signals: AbortSignal[] = [];
    const late = deferred<Payload>();
    const { promise, sink } = await runOne(
      { timeoutMs: 1_000, retry: { maxRetries: 1 } },
      (ctx) => {
        signals.push(ctx.signal);
        // the first attempt ignores its signal and resolves far too late
        return ctx.attempt === 1 ? late.promise : num(2);
      },
      { clock },
    );
    const report = await promise;
    expect(signals[0]?.aborted).toBe(true);
    expect(signals[0]?.reason).toBeInstanceOf(NodeTimeoutError);
    expect((signals[0] as AbortSignal).reason.timeoutMs).toBe(1_000);
    expect(signals[1]?.aborted).toBe(false);
    expect(readNum(report.output('n'))).toBe(2);
    // the abandoned attempt's late result changes nothing
    late.resolve(num(1));
    await new Promise((r) => setImmediate(r));
    expect(readNum(report.output('n'))).toBe(2);
    expect(sink.ofType('node-running').map((e) => e.deadline)).toEqual([1_000, 2_000]);
  });

  test('a timeout that exhausts retries fails the run with NodeTimeoutError as the cause', async () => {
    const clock = createManualClock();
    const { promise } = await runOne({ timeoutMs: 50 }, () => deferred<Payload>().promise, { clock });
    const err = await incomplete(promise);
    expect((err.cause as NodeFailedError).cause).toBeInstanceOf(NodeTimeoutError);
    expect(err.retryable).toBe(true);
  });

  test('attempts time out at their own deadline: finished attempts are skipped, each timeout value is its own lane', async () => {
    const clock = createManualClock();
    const after = (ms: number, value: Payload) =>
      new Promise<Payload>((resolve) => clock.setTimeout(() => resolve(value), ms));
    const abortedAt = new Map<string, number>();
    const hang = (ctx: NodeContext) => {
      ctx.signal.addEventListener('abort', () => abortedAt.set(ctx.nodeId, clock.now()));
      return deferred<Payload>().promise;
    };
    const dag = createDag([
      // z finishes at 10, well inside its 100 ms: its lane entry (deadline 100) goes stale
      { id: 'z', timeoutMs: 100, run: () => after(10, EMPTY_PAYLOAD) },
      // x takes 30 ms, then y starts and hangs: its deadline is 30 + 100
      { id: 'x', run: () => after(30, EMPTY_PAYLOAD) },
      { id: 'y', after: ['x'], timeoutMs: 100, run: hang },
      // w hangs in a different lane (50 ms)
      { id: 'w', timeoutMs: 50, run: hang },
    ]);
    const run = new DagScheduler(dag, { clock, cancelInFlightOnFailure: false }).run();
    const failed = incomplete(run);
    await clock.runAll();
    const err = await failed;
    expect(Object.fromEntries(abortedAt)).toEqual({ w: 50, y: 130 });
    expect(err.failures.map((f) => f.nodeId)).toEqual(['w', 'y']);
    expect(err.report.states.get('z')).toBe('succeeded');
    expect(clock.pendingTimers).toBe(0);
  });

  test('a finished run leaves no timers behind', async () => {
    const clock = createManualClock();
    const dag = createDag([{ id: 'n', timeoutMs: 10_000, run: async () => EMPTY_PAYLOAD }]);
    await runDag(dag, { clock });
    expect(clock.pendingTimers).toBe(0);
  });
});

describe('circuit breaker', () => {
  test('opens after N consecutive failures: the next attempt waits openMs; half-open failure re-opens at once', async () => {
    const clock = createManualClock();
    const node = flaky(clock, 3);
    const { promise, sink } = await runOne(
      {
        retry: { maxRetries: 5, backoff: { kind: 'fixed', delayMs: 10 } },
        circuitBreaker: { failureThreshold: 2, openMs: 1_000 },
      },
      node.run,
      { clock },
    );
    await promise;
    // fail@0, fail@10 → open: wait 1000; half-open probe fails@1010 → open again: wait 1000; succeeds@2010
    expect(node.startedAt).toEqual([0, 10, 1_010, 2_010]);
    expect(sink.ofType('node-retry-scheduled').map((e) => [e.delayMs, e.breakerOpen])).toEqual([
      [10, false],
      [1_000, true],
      [1_000, true],
    ]);
  });

  test('nodes sharing a breaker key share its state; the state carries over to the next run of the scheduler', async () => {
    const clock = createManualClock();
    const calls: string[] = [];
    let apiUp = false;
    const callApi: NodeRun = async (ctx) => {
      calls.push(`${ctx.nodeId}@${clock.now()}`);
      if (!apiUp) throw new Error('503');
      return EMPTY_PAYLOAD;
    };
    const breaker = { failureThreshold: 1, openMs: 500, key: 'api' };
    const dag = createDag([
      { id: 'first', run: callApi, circuitBreaker: breaker },
      { id: 'second', after: ['first'], run: callApi, circuitBreaker: breaker },
    ]);
    const scheduler = new DagScheduler(dag, { clock });
    const r1 = scheduler.run();
    r1.catch(() => {});
    await clock.runAll();
    await incomplete(r1);
    expect(scheduler.circuitBreaker('api')).toMatchObject({ consecutiveFailures: 1, openUntil: 500 });
    // next run, 100 ms later: the breaker is still open, so 'first' waits until 500
    await clock.advance(100);
    apiUp = true;
    const r2 = scheduler.run();
    await clock.runAll();
    await r2;
    expect(calls).toEqual(['first@0', 'first@500', 'second@500']);
    expect(scheduler.circuitBreaker('api')).toMatchObject({ consecutiveFailures: 0, openUntil: 0 });
  });
});
