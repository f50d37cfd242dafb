import { describe, expect, test } from 'vitest';
import { deferred, incomplete, num, readNum, tick } from '../../test/helpers.js';
import {
  createDag,
  createDagBuilder,
  createManualClock,
  DagScheduler,
  EMPTY_PAYLOAD,
  InvalidNodeOutputError,
  InvalidOptionsError,
  type NodeContext,
  NodeFailedError,
  type NodeRun,
  type Payload,
  RunAbortedError,
  RunTimeoutError,
  runDag,
  textPayload,
  UnknownNodeError,
} from '../index.js';

const noop: NodeRun = () => EMPTY_PAYLOAD;

describe('running a graph', () => {
  test('fan-in: a node gets every predecessor output; the report has outputs, results, layers, states', async () => {
    const dag = createDagBuilder()
      .addNode('a', () => num(1))
      .fanOut('a', [
        { id: 'b', run: (ctx) => num(readNum(ctx.input('a')) + 1) },
        { id: 'c', run: async (ctx) => num(readNum(ctx.input('a')) * 10) },
      ])
      .fanIn(['b', 'c'], {
        id: 'sum',
        run: (ctx) => num([...ctx.upstream.values()].reduce((s, p) => s + readNum(p), 0)),
      })
      .build();
    const report = await runDag(dag, { runId: 'r-1' });
    expect(report.runId).toBe('r-1');
    expect(readNum(report.output('sum'))).toBe(12);
    expect([...report.outputs.keys()]).toEqual(['a', 'b', 'c', 'sum']);
    expect(readNum(report.outputs.get('c'))).toBe(10);
    expect(report.layers).toEqual([['a'], ['b', 'c'], ['sum']]);
    expect([...report.states.values()]).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect(report.results.map((r) => [r.nodeId, r.layer, r.state, r.attempts, r.source])).toEqual([
      ['a', 0, 'succeeded', 1, 'run'],
      ['b', 1, 'succeeded', 1, 'run'],
      ['c', 1, 'succeeded', 1, 'run'],
      ['sum', 2, 'succeeded', 1, 'run'],
    ]);
    expect(report.output('nope')).toBeUndefined();
    expect(report.fencingToken).toBeUndefined();
    expect(JSON.parse(JSON.stringify(report))).toMatchObject({ runId: 'r-1', states: { sum: 'succeeded' } });
  });

  test('the node context carries run id, node id, attempt, layer, predecessors, upstream and a live signal', async () => {
    let seen: NodeContext | undefined;
    const dag = createDag([
      { id: 'x', run: () => textPayload('x') },
      {
        id: 'y',
        after: ['x'],
        idempotencyKey: 'key-y',
        run: (ctx) => {
          seen = ctx;
          expect(ctx.signal.aborted).toBe(false);
          expect(() => ctx.input('y')).toThrow(UnknownNodeError);
          return EMPTY_PAYLOAD;
        },
      },
    ]);
    const report = await runDag(dag, { runId: 'run-ctx' });
    expect(seen).toMatchObject({
      runId: 'run-ctx',
      nodeId: 'y',
      attempt: 1,
      layer: 1,
      predecessors: ['x'],
      fencingToken: undefined,
      deadline: undefined,
      idempotencyKey: 'key-y',
    });
    expect([...(seen as NodeContext).upstream.keys()]).toEqual(['x']);
    expect(report.runId).toBe('run-ctx');
  });

  test('event-driven: a node starts when its own predecessors are done, not when the layer is', async () => {
    const slow = deferred<Payload>();
    const started: string[] = [];
    const mark =
      (result: Payload | Promise<Payload>): NodeRun =>
      (ctx) => {
        started.push(ctx.nodeId);
        return result;
      };
    const dag = createDag([
      { id: 'a', run: mark(EMPTY_PAYLOAD) },
      { id: 'b', after: ['a'], run: mark(slow.promise) },
      { id: 'c', run: mark(EMPTY_PAYLOAD) },
      { id: 'd', after: ['c'], run: mark(EMPTY_PAYLOAD) },
      { id: 'e', after: ['b', 'd'], run: mark(EMPTY_PAYLOAD) },
    ]);
    const run = runDag(dag);
    await tick();
    // d (layer 1) ran although b (layer 1) is still running; e waits for b.
    expect(started).toEqual(['a', 'b', 'c', 'd']);
    slow.resolve(EMPTY_PAYLOAD);
    await run;
    expect(started).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  test('maxInFlight bounds concurrent attempts; with 1, nodes run in topological order', async () => {
    const specs = Array.from({ length: 12 }, (_, i) => ({
      id: `n${String(i).padStart(2, '0')}`,
      after: i >= 4 ? [`n${String(i - 4).padStart(2, '0')}`] : [],
    }));
    for (const max of [1, 2, 3]) {
      let active = 0;
      let peak = 0;
      const order: string[] = [];
      const run: NodeRun = async (ctx) => {
        active++;
        peak = Math.max(peak, active);
        order.push(ctx.nodeId);
        await tick();
        active--;
        return EMPTY_PAYLOAD;
      };
      const dag = createDag(specs.map((s) => ({ ...s, run })));
      await new DagScheduler(dag, { maxInFlight: max }).run();
      expect(peak).toBe(max);
      if (max === 1) expect(order).toEqual(dag.topologicalOrder);
    }
  });

  test('nodes may return synchronously; a long synchronous chain does not grow the stack', async () => {
    const n = 20_000;
    const dag = createDag(
      Array.from({ length: n }, (_, i) => ({
        id: `s${i}`,
        after: i === 0 ? [] : [`s${i - 1}`],
        run: (ctx: NodeContext) => (i === 0 ? num(0) : num(readNum(ctx.input(`s${i - 1}`)) + 1)),
      })),
    );
    const report = await runDag(dag);
    expect(readNum(report.output(`s${n - 1}`))).toBe(n - 1);
  });

  test('runs are independent: a scheduler can run again, and runs may overlap', async () => {
    let calls = 0;
    const dag = createDag([{ id: 'a', run: async () => num(++calls) }]);
    const scheduler = new DagScheduler(dag);
    const [r1, r2] = await Promise.all([scheduler.run(), scheduler.run()]);
    const r3 = await scheduler.run({ runId: 'third' });
    expect(calls).toBe(3);
    expect(new Set([r1.runId, r2.runId, r3.runId]).size).toBe(3);
    expect(r3.runId).toBe('third');
  });
});

describe('failures', () => {
  test('a failed node ends the run with ExecutionIncompleteError naming the unfinished nodes', async () => {
    const boom = new Error('boom');
    const dag = createDag([
      { id: 'a', run: noop },
      { id: 'b', after: ['a'], run: () => Promise.reject(boom) },
      { id: 'c', after: ['b'], run: noop },
      { id: 'd', after: ['a'], run: noop },
    ]);
    const err = await incomplete(runDag(dag, { maxInFlight: 1 }));
    expect(err.code).toBe('MOCRA_ERR_DAG_EXECUTION_INCOMPLETE');
    expect(err.unfinishedNodes).toEqual(['b', 'c', 'd']);
    expect(err.failures.map((f) => f.nodeId)).toEqual(['b']);
    const cause = err.cause as NodeFailedError;
    expect(cause).toBeInstanceOf(NodeFailedError);
    expect(cause.nodeId).toBe('b');
    expect(cause.attempt).toBe(1);
    expect(cause.cause).toBe(boom);
    expect(err.retryable).toBe(false);
    expect([...err.report.states]).toEqual([
      ['a', 'succeeded'],
      ['b', 'failed'],
      ['c', 'pending'],
      ['d', 'ready'],
    ]);
    expect(err.report.results.find((r) => r.nodeId === 'b')?.error).toBe(cause);
    expect(readNum(num(1))).toBe(1);
    expect(err.report.output('a')).toBe(EMPTY_PAYLOAD);
  });

  test('a synchronous throw is a failure like a rejection', async () => {
    const dag = createDag([
      {
        id: 'a',
        run: () => {
          throw new TypeError('sync');
        },
      },
    ]);
    const err = await incomplete(runDag(dag));
    expect(((err.cause as NodeFailedError).cause as Error).message).toBe('sync');
  });

  test('a node that resolves with something that is not a Payload fails with InvalidNodeOutputError (not retried)', async () => {
    let attempts = 0;
    const dag = createDag([
      {
        id: 'a',
        retry: { maxRetries: 3 },
        run: (async () => {
          attempts++;
          return { hello: 'world' };
        }) as unknown as NodeRun,
      },
    ]);
    const err = await incomplete(runDag(dag));
    expect((err.cause as NodeFailedError).cause).toBeInstanceOf(InvalidNodeOutputError);
    expect(attempts).toBe(1);
  });

  test('cancelInFlightOnFailure (default): running siblings are aborted with the failure as reason', async () => {
    let siblingSignal: AbortSignal | undefined;
    const never = deferred<Payload>();
    const dag = createDag([
      {
        id: 'sibling',
        run: (ctx) => {
          siblingSignal = ctx.signal;
          return never.promise;
        },
      },
      { id: 'fails', run: async () => Promise.reject(new Error('x')) },
      { id: 'later', after: ['sibling', 'fails'], run: noop },
    ]);
    const err = await incomplete(runDag(dag));
    expect(siblingSignal?.aborted).toBe(true);
    expect(siblingSignal?.reason).toBe(err.cause);
    expect(err.report.states.get('sibling')).toBe('cancelled');
    // unfinished nodes are listed in topological order
    expect(err.unfinishedNodes).toEqual(['fails', 'sibling', 'later']);
  });

  test('cancelInFlightOnFailure: false lets running nodes finish (their outputs are kept) but starts nothing new', async () => {
    const gate = deferred<Payload>();
    const started: string[] = [];
    const mark =
      (result: () => Promise<Payload> | Payload): NodeRun =>
      (ctx) => {
        started.push(ctx.nodeId);
        return result();
      };
    const dag = createDag([
      { id: 'slow', run: mark(() => gate.promise) },
      { id: 'fails', run: mark(() => Promise.reject(new Error('x'))) },
      { id: 'after-slow', after: ['slow'], run: mark(() => EMPTY_PAYLOAD) },
    ]);
    const run = runDag(dag, { cancelInFlightOnFailure: false });
    let settled = false;
    run.catch(() => {}).finally(() => (settled = true));
    await tick();
    expect(settled).toBe(false);
    gate.resolve(textPayload('done'));
    const err = await incomplete(run);
    expect(started).toEqual(['fails', 'slow']);
    expect(err.report.states.get('slow')).toBe('succeeded');
    expect(err.report.output('slow')?.bytes.length).toBe(4);
    expect(err.unfinishedNodes).toEqual(['fails', 'after-slow']);
  });

  test('run timeout aborts running nodes and ends the run (manual clock)', async () => {
    const clock = createManualClock(1_000);
    let signal: AbortSignal | undefined;
    let deadline: number | undefined;
    const dag = createDag([
      {
        id: 'stuck',
        timeoutMs: 10_000,
        run: (ctx) => {
          signal = ctx.signal;
          deadline = ctx.deadline;
          return deferred<Payload>().promise;
        },
      },
    ]);
    const run = runDag(dag, { clock, runTimeoutMs: 500 });
    const failed = incomplete(run);
    await clock.advance(499);
    expect(signal?.aborted).toBe(false);
    // the run deadline is earlier than the node's own timeout
    expect(deadline).toBe(1_500);
    await clock.advance(1);
    const err = await failed;
    expect(err.cause).toBeInstanceOf(RunTimeoutError);
    expect((err.cause as RunTimeoutError).retryable).toBe(true);
    expect(signal?.reason).toBe(err.cause);
    expect(err.report.states.get('stuck')).toBe('cancelled');
    expect(clock.pendingTimers).toBe(0);
  });

  test("the caller's AbortSignal stops the run; an already aborted signal stops it before it starts", async () => {
    const controller = new AbortController();
    const dag = createDag([{ id: 'a', run: () => deferred<Payload>().promise }]);
    const run = incomplete(runDag(dag, { signal: controller.signal }));
    await tick();
    controller.abort('enough');
    const err = await run;
    expect(err.cause).toBeInstanceOf(RunAbortedError);
    expect((err.cause as RunAbortedError).cause).toBe('enough');
    await expect(runDag(dag, { signal: AbortSignal.abort('early') })).rejects.toBeInstanceOf(RunAbortedError);
  });
});

describe('options are checked', () => {
  const dag = createDag([{ id: 'a', run: noop }]);
  test.each([
    [{ maxInFlight: 0 }, 'maxInFlight'],
    [{ maxInFlight: 1.5 }, 'maxInFlight'],
    [{ runTimeoutMs: -1 }, 'runTimeoutMs'],
    [{ defaultPolicy: { timeoutMs: 0 } }, 'defaultPolicy'],
    [{ clock: { now: () => 0 } }, 'clock'],
    [{ eventSink: {} }, 'eventSink'],
    [{ dispatcher: {} }, 'dispatcher'],
    [{ runGuard: { guard: {} } }, 'runGuard.guard'],
    [{ key: '' }, 'key'],
    [{ idempotency: { store: {} } }, 'idempotency.store'],
    [{ runState: { store: { load() {} } } }, 'runState.store'],
    [{ fencing: { store: {} } }, 'fencing.store'],
  ])('%o → InvalidOptionsError(%s)', (options, option) => {
    let err: unknown;
    try {
      new DagScheduler(dag, options as never);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as InvalidOptionsError).option).toBe(option);
  });

  test('run options are checked too', async () => {
    const s = new DagScheduler(dag);
    await expect(s.run({ runId: '' })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(s.run({ fencingToken: 1.5 })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(s.run({ signal: {} as AbortSignal })).rejects.toBeInstanceOf(InvalidOptionsError);
  });
});
