import { describe, expect, test } from 'vitest';
import { deferred, incomplete, num, readNum, tick } from '../../test/helpers.js';
import {
  createDag,
  createManualClock,
  createMemoryEventSink,
  createMemoryFencingStore,
  createMemoryRunGuard,
  createMemoryRunStateStore,
  DagScheduler,
  EMPTY_PAYLOAD,
  FencingTokenRejectedError,
  InvalidOptionsError,
  MissingFencingTokenError,
  type NodeContext,
  type NodeRun,
  type Payload,
  PermanentNodeError,
  type RunGuard,
  RunGuardAcquireError,
  RunGuardLostError,
  RunInProgressError,
  RunStateError,
  type RunStateStore,
} from '../index.js';

describe('run guard', () => {
  test('one run of a key at a time; the token reaches nodes and the report; released at the end', async () => {
    const guard = createMemoryRunGuard();
    const gate = deferred<Payload>();
    let token: number | undefined;
    const dag = createDag([
      {
        id: 'a',
        run: (ctx) => {
          token = ctx.fencingToken;
          return gate.promise;
        },
      },
    ]);
    const scheduler = new DagScheduler(dag, { runGuard: { guard }, key: 'nightly' });
    const first = scheduler.run();
    await tick();
    expect(guard.holder('nightly')?.token).toBe(token);
    await expect(scheduler.run()).rejects.toBeInstanceOf(RunInProgressError);
    gate.resolve(EMPTY_PAYLOAD);
    const report = await first;
    expect(report.fencingToken).toBe(token);
    expect(guard.holder('nightly')).toBeUndefined();
    // a later run gets a higher token
    const again = await scheduler.run();
    expect(again.fencingToken).toBeGreaterThan(report.fencingToken as number);
    expect(token).toBe(again.fencingToken);
  });

  test('the guard is renewed in the background (every ttl/3 by default, with jitter) so long runs keep it', async () => {
    const clock = createManualClock();
    const guard = createMemoryRunGuard({ clock });
    const sink = createMemoryEventSink();
    const gate = deferred<Payload>();
    const dag = createDag([{ id: 'long', run: () => gate.promise }]);
    const run = new DagScheduler(dag, {
      clock,
      random: () => 0.5,
      eventSink: sink,
      key: 'k',
      runGuard: { guard, ttlMs: 300 },
    }).run();
    await clock.advance(1_000);
    // far past the 300 ms TTL, still held
    expect(guard.holder('k')).toBeDefined();
    expect(sink.ofType('run-guard-renewed').map((e) => e.timestampMs)).toEqual([
      100, 200, 300, 400, 500, 600, 700, 800, 900, 1_000,
    ]);
    gate.resolve(EMPTY_PAYLOAD);
    await run;
    expect(sink.ofType('run-guard-released').map((e) => e.released)).toEqual([true]);
    expect(clock.pendingTimers).toBe(0);
  });

  test('renewal jitter spreads renewals by ±renewJitter', async () => {
    const clock = createManualClock();
    const sink = createMemoryEventSink();
    const gate = deferred<Payload>();
    const run = new DagScheduler(createDag([{ id: 'x', run: () => gate.promise }]), {
      clock,
      random: () => 0,
      eventSink: sink,
      key: 'k',
      runGuard: {
        guard: createMemoryRunGuard({ clock }),
        ttlMs: 1_000,
        renewIntervalMs: 100,
        renewJitter: 0.5,
      },
    }).run();
    await clock.advance(200);
    expect(sink.ofType('run-guard-renewed').map((e) => e.timestampMs)).toEqual([50, 100, 150, 200]);
    gate.resolve(EMPTY_PAYLOAD);
    await run;
  });

  test('losing the guard aborts running nodes and ends the run with RunGuardLostError', async () => {
    const clock = createManualClock();
    const inner = createMemoryRunGuard({ clock });
    // the backend says the lease is gone (expired and taken, or revoked by an operator)
    const revoking: RunGuard = { ...inner, renew: async () => undefined };
    let signal: AbortSignal | undefined;
    const sink = createMemoryEventSink();
    const dag = createDag([
      {
        id: 'work',
        run: (ctx) => {
          signal = ctx.signal;
          return deferred<Payload>().promise;
        },
      },
    ]);
    const run = new DagScheduler(dag, {
      clock,
      eventSink: sink,
      key: 'k',
      runGuard: { guard: revoking, ttlMs: 300, renewJitter: 0 },
    }).run();
    const failed = incomplete(run);
    await clock.advance(100);
    const err = await failed;
    expect(err.cause).toBeInstanceOf(RunGuardLostError);
    expect((err.cause as RunGuardLostError).key).toBe('k');
    expect(err.retryable).toBe(true);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBe(err.cause);
    expect(sink.ofType('run-guard-lost')).toHaveLength(1);
    expect(err.report.states.get('work')).toBe('cancelled');
  });

  test('a renewal that fails while the lease still runs is retried; the guard is lost only when it lapses', async () => {
    const clock = createManualClock();
    const inner = createMemoryRunGuard({ clock });
    let failRenewals = 1;
    const flaky: RunGuard = {
      ...inner,
      renew: async (lease, ttl) => {
        if (failRenewals-- > 0) throw new Error('backend timeout');
        return inner.renew(lease, ttl);
      },
    };
    const gate = deferred<Payload>();
    const run = new DagScheduler(createDag([{ id: 'x', run: () => gate.promise }]), {
      clock,
      key: 'k',
      runGuard: { guard: flaky, ttlMs: 300, renewJitter: 0 },
    }).run();
    await clock.advance(1_000);
    gate.resolve(EMPTY_PAYLOAD);
    await run;

    // now renewals keep failing until the lease lapses
    const down: RunGuard = {
      ...inner,
      renew: async () => {
        throw new Error('backend down');
      },
    };
    const lost = new DagScheduler(createDag([{ id: 'x', run: () => deferred<Payload>().promise }]), {
      clock,
      key: 'k2',
      runGuard: { guard: down, ttlMs: 300, renewJitter: 0 },
    }).run();
    const failed = incomplete(lost);
    const t0 = clock.now();
    await clock.runAll(50);
    const err = await failed;
    expect(err.cause).toBeInstanceOf(RunGuardLostError);
    expect(((err.cause as RunGuardLostError).cause as Error).message).toBe('backend down');
    expect(clock.now() - t0).toBe(300);
  });

  test('a guard backend that cannot be reached: RunGuardAcquireError, nothing runs', async () => {
    let ran = false;
    const broken: RunGuard = {
      acquire: async () => {
        throw new Error('ECONNREFUSED');
      },
      renew: async () => undefined,
      release: async () => false,
    };
    const dag = createDag([
      {
        id: 'x',
        run: async () => {
          ran = true;
          return EMPTY_PAYLOAD;
        },
      },
    ]);
    await expect(
      new DagScheduler(dag, { key: 'k', runGuard: { guard: broken } }).run(),
    ).rejects.toBeInstanceOf(RunGuardAcquireError);
    expect(ran).toBe(false);
  });

  test('a run guard or run-state store needs a key', async () => {
    const dag = createDag([{ id: 'x', run: async () => EMPTY_PAYLOAD }]);
    await expect(
      new DagScheduler(dag, { runGuard: { guard: createMemoryRunGuard() } }).run(),
    ).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(
      new DagScheduler(dag, { runState: { store: createMemoryRunStateStore() } }).run(),
    ).rejects.toBeInstanceOf(InvalidOptionsError);
    expect(
      () =>
        new DagScheduler(dag, {
          runGuard: { guard: createMemoryRunGuard(), ttlMs: 100, renewIntervalMs: 100 },
        }),
    ).toThrow(/renewIntervalMs/);
  });
});

describe('fencing', () => {
  test('every output is committed under the run token', async () => {
    const fencing = createMemoryFencingStore();
    const dag = createDag([
      { id: 'a', run: async () => num(1) },
      { id: 'b', after: ['a'], run: async () => num(2) },
    ]);
    const report = await new DagScheduler(dag, {
      key: 'job',
      runGuard: { guard: createMemoryRunGuard() },
      fencing: { store: fencing },
    }).run();
    expect(fencing.committed('job', 'a')?.token).toBe(report.fencingToken);
    expect(readNum(fencing.committed('job', 'b')?.output)).toBe(2);
  });

  test('a stale run (paused past its lease) is rejected when it writes after a newer run', async () => {
    const clock = createManualClock();
    const guard = createMemoryRunGuard({ clock });
    const fencing = createMemoryFencingStore();
    // Run A's renewals never come back (a stalled process), so it does not notice it lost the guard.
    const stalled: RunGuard = { ...guard, renew: () => new Promise(() => {}) };
    const resume = deferred<Payload>();
    const a = new DagScheduler(createDag([{ id: 'write', run: () => resume.promise }]), {
      clock,
      key: 'job',
      runGuard: { guard: stalled, ttlMs: 300 },
      fencing: { store: fencing },
    }).run({ runId: 'A' });
    const aFailed = incomplete(a);
    await clock.advance(301);
    // Run B takes over with a newer token and finishes.
    const b = await new DagScheduler(createDag([{ id: 'write', run: async () => num(2) }]), {
      clock,
      key: 'job',
      runGuard: { guard, ttlMs: 300 },
      fencing: { store: fencing },
    }).run({ runId: 'B' });
    // A wakes up and tries to commit its output with the old token.
    resume.resolve(num(1));
    const err = await aFailed;
    expect(err.cause).toBeInstanceOf(FencingTokenRejectedError);
    expect((err.cause as FencingTokenRejectedError).token).toBeLessThan(b.fencingToken as number);
    expect(err.retryable).toBe(false);
    expect(readNum(fencing.committed('job', 'write')?.output)).toBe(2);
    expect(fencing.committed('job', 'write')?.runId).toBe('B');
  });

  test('a fencing store without a token source: MissingFencingTokenError; an explicit token works', async () => {
    const fencing = createMemoryFencingStore();
    const dag = createDag([{ id: 'a', run: async () => EMPTY_PAYLOAD }]);
    const scheduler = new DagScheduler(dag, { fencing: { store: fencing, resource: 'table' } });
    await expect(scheduler.run()).rejects.toBeInstanceOf(MissingFencingTokenError);
    const report = await scheduler.run({ fencingToken: 41 });
    expect(report.fencingToken).toBe(41);
    expect(fencing.committed('table', 'a')?.token).toBe(41);
  });
});

describe('checkpoints and resume', () => {
  function etl(counts: Record<string, number>, failLoad: () => boolean) {
    const count = (id: string) => {
      counts[id] = (counts[id] ?? 0) + 1;
    };
    return createDag([
      {
        id: 'extract',
        run: async () => {
          count('extract');
          return num(10);
        },
      },
      {
        id: 'transform',
        after: ['extract'],
        run: async (ctx) => {
          count('transform');
          return num(readNum(ctx.input('extract')) * 2);
        },
      },
      {
        id: 'load',
        after: ['transform'],
        run: async (ctx: NodeContext) => {
          count('load');
          if (failLoad()) throw new PermanentNodeError('warehouse offline');
          return num(readNum(ctx.input('transform')) + 1);
        },
      },
    ]);
  }

  test('a restarted run skips the nodes that succeeded, reuses their outputs and its run id, then clears the checkpoint', async () => {
    const store = createMemoryRunStateStore();
    const counts: Record<string, number> = {};
    let offline = true;
    const scheduler = new DagScheduler(
      etl(counts, () => offline),
      { key: 'etl:2024-06-01', runState: { store } },
    );
    const err = await incomplete(scheduler.run({ runId: 'first' }));
    expect(err.unfinishedNodes).toEqual(['load']);
    const saved = await store.load('etl:2024-06-01');
    expect([...(saved?.outputs.keys() ?? [])].sort()).toEqual(['extract', 'transform']);

    offline = false;
    const sink = createMemoryEventSink();
    const report = await new DagScheduler(
      etl(counts, () => offline),
      {
        key: 'etl:2024-06-01',
        runState: { store },
        eventSink: sink,
      },
    ).run();
    expect(counts).toEqual({ extract: 1, transform: 1, load: 2 });
    expect(readNum(report.output('load'))).toBe(21);
    expect(report.runId).toBe('first');
    expect(report.results.map((r) => r.source)).toEqual(['checkpoint', 'checkpoint', 'run']);
    expect(sink.ofType('run-started')[0]?.restoredCount).toBe(2);
    expect(sink.ofType('node-restored').map((e) => e.nodeId)).toEqual(['extract', 'transform']);
    expect(await store.load('etl:2024-06-01')).toBeUndefined();
  });

  test('a checkpoint that holds every node: nothing runs, the run succeeds and clears it', async () => {
    const store = createMemoryRunStateStore();
    await store.save('k', { runId: 'done-before', fencingToken: undefined, nodeId: 'a', output: num(1) });
    await store.save('k', { runId: 'done-before', fencingToken: undefined, nodeId: 'b', output: num(2) });
    let ran = 0;
    const run: NodeRun = async () => {
      ran++;
      return EMPTY_PAYLOAD;
    };
    const dag = createDag([
      { id: 'a', run },
      { id: 'b', after: ['a'], run },
    ]);
    const report = await new DagScheduler(dag, { key: 'k', runState: { store } }).run();
    expect(ran).toBe(0);
    expect(report.runId).toBe('done-before');
    expect(readNum(report.output('b'))).toBe(2);
    expect(store.keys()).toEqual([]);
  });

  test('each success is checkpointed before its successors start', async () => {
    const store = createMemoryRunStateStore();
    const seen: string[][] = [];
    const dag = createDag([
      { id: 'a', run: async () => EMPTY_PAYLOAD },
      { id: 'b', after: ['a'], run: async () => EMPTY_PAYLOAD },
      {
        id: 'c',
        after: ['b'],
        run: async () => {
          seen.push([...((await store.load('k'))?.outputs.keys() ?? [])].sort());
          return EMPTY_PAYLOAD;
        },
      },
    ]);
    await new DagScheduler(dag, { key: 'k', runState: { store } }).run();
    expect(seen).toEqual([['a', 'b']]);
  });

  test('a checkpointed node whose predecessor is not checkpointed runs again', async () => {
    const store = createMemoryRunStateStore();
    await store.save('k', { runId: 'old', fencingToken: undefined, nodeId: 'b', output: num(-1) });
    const ran: string[] = [];
    const run: NodeRun = async (ctx) => {
      ran.push(ctx.nodeId);
      return num(1);
    };
    const dag = createDag([
      { id: 'a', run },
      { id: 'b', after: ['a'], run },
    ]);
    const report = await new DagScheduler(dag, { key: 'k', runState: { store } }).run();
    expect(ran).toEqual(['a', 'b']);
    expect(readNum(report.output('b'))).toBe(1);
  });

  test('store failures: a failed save ends the run with RunStateError; a failed load stops it before it starts', async () => {
    const inner = createMemoryRunStateStore();
    const failingSave: RunStateStore = {
      ...inner,
      save: async () => {
        throw new Error('disk full');
      },
    };
    const dag = createDag([
      { id: 'a', run: async () => EMPTY_PAYLOAD },
      { id: 'b', after: ['a'], run: async () => EMPTY_PAYLOAD },
    ]);
    const err = await incomplete(new DagScheduler(dag, { key: 'k', runState: { store: failingSave } }).run());
    expect(err.cause).toBeInstanceOf(RunStateError);
    expect((err.cause as RunStateError).operation).toBe('save');
    expect(err.unfinishedNodes).toEqual(['a', 'b']);

    const guard = createMemoryRunGuard();
    const failingLoad: RunStateStore = {
      ...inner,
      load: async () => {
        throw new Error('timeout');
      },
    };
    await expect(
      new DagScheduler(dag, { key: 'k', runState: { store: failingLoad }, runGuard: { guard } }).run(),
    ).rejects.toBeInstanceOf(RunStateError);
    // the guard taken for the failed start was given back
    expect(guard.holder('k')).toBeUndefined();
  });

  test('checkpoints are fenced: a stale run cannot overwrite a newer run’s checkpoint', async () => {
    const clock = createManualClock();
    const guard = createMemoryRunGuard({ clock });
    const store = createMemoryRunStateStore();
    const stalled: RunGuard = { ...guard, renew: () => new Promise(() => {}) };
    const resume = deferred<Payload>();
    const old = new DagScheduler(createDag([{ id: 'x', run: () => resume.promise }]), {
      clock,
      key: 'k',
      runGuard: { guard: stalled, ttlMs: 100 },
      runState: { store },
    }).run();
    const oldFailed = incomplete(old);
    await clock.advance(101);
    // the newer run saves (then fails, keeping its checkpoint)
    const newer = new DagScheduler(
      createDag([
        { id: 'x', run: async () => num(2) },
        { id: 'y', after: ['x'], run: async () => Promise.reject(new PermanentNodeError('stop')) },
      ]),
      { clock, key: 'k', runGuard: { guard, ttlMs: 100 }, runState: { store } },
    ).run();
    await incomplete(newer);
    resume.resolve(num(1));
    const err = await oldFailed;
    expect(err.cause).toBeInstanceOf(FencingTokenRejectedError);
    expect(readNum((await store.load('k'))?.outputs.get('x'))).toBe(2);
  });
});
