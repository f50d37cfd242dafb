import { describe, expect, test } from 'vitest';
import { deferred, incomplete, num, readNum, tick } from '../../test/helpers.js';
import {
  createDag,
  createManualClock,
  createMemoryEventSink,
  createMemoryIdempotencyStore,
  DagScheduler,
  EMPTY_PAYLOAD,
  type IdempotencyStore,
  IdempotencyStoreError,
  type NodeRun,
  type Payload,
  runDag,
} from '../index.js';

describe('singleflight within a run', () => {
  test('nodes sharing a key run once; the others get the same output', async () => {
    let runs = 0;
    const gate = deferred<Payload>();
    const fetchRates: NodeRun = () => {
      runs++;
      return gate.promise;
    };
    const dag = createDag([
      { id: 'eu', idempotencyKey: 'rates', run: fetchRates },
      { id: 'us', idempotencyKey: 'rates', run: fetchRates },
      { id: 'asia', idempotencyKey: 'rates', run: fetchRates },
      { id: 'sum', after: ['eu', 'us', 'asia'], run: (ctx) => num(ctx.upstream.size) },
    ]);
    const sink = createMemoryEventSink();
    const run = runDag(dag, { eventSink: sink });
    await tick();
    expect(runs).toBe(1);
    expect(sink.ofType('node-singleflight-wait').map((e) => e.nodeId)).toEqual(['eu', 'us']);
    gate.resolve(num(42));
    const report = await run;
    expect(runs).toBe(1);
    for (const id of ['eu', 'us', 'asia']) expect(readNum(report.output(id))).toBe(42);
    expect(report.results.map((r) => [r.nodeId, r.source, r.attempts])).toEqual([
      ['asia', 'run', 1],
      ['eu', 'singleflight', 0],
      ['us', 'singleflight', 0],
      ['sum', 'run', 1],
    ]);
    expect(sink.ofType('node-succeeded').map((e) => [e.nodeId, e.source])).toEqual([
      ['asia', 'run'],
      ['eu', 'singleflight'],
      ['us', 'singleflight'],
      ['sum', 'run'],
    ]);
  });

  test('a key that already finished in this run is a cache hit', async () => {
    let runs = 0;
    const work: NodeRun = async () => num(++runs);
    const dag = createDag([
      { id: 'first', idempotencyKey: 'k', run: work },
      { id: 'later', after: ['first'], idempotencyKey: 'k', run: work },
    ]);
    const report = await runDag(dag);
    expect(runs).toBe(1);
    expect(report.results.map((r) => r.source)).toEqual(['run', 'cache']);
    expect(readNum(report.output('later'))).toBe(1);
  });

  test('waiters hold no slot: with maxInFlight 1 the owner still finishes', async () => {
    let runs = 0;
    const dag = createDag([
      { id: 'a', idempotencyKey: 'k', run: async () => num(++runs) },
      { id: 'b', idempotencyKey: 'k', run: async () => num(++runs) },
    ]);
    const report = await runDag(dag, { maxInFlight: 1 });
    expect(runs).toBe(1);
    expect(report.results.map((r) => r.source)).toEqual(['run', 'cache']);
  });

  test('the owner retries under its own policy; waiters get the final output', async () => {
    let attempts = 0;
    const dag = createDag([
      {
        id: 'a',
        idempotencyKey: 'k',
        retry: { maxRetries: 2 },
        run: async () => {
          attempts++;
          await tick();
          if (attempts < 3) throw new Error('flaky');
          return num(7);
        },
      },
      { id: 'b', idempotencyKey: 'k', run: async () => num(-1) },
    ]);
    const report = await runDag(dag);
    expect(attempts).toBe(3);
    expect(readNum(report.output('b'))).toBe(7);
  });
});

describe('idempotency across runs (idempotency store)', () => {
  test('a key finished by an earlier run is a cache hit; the node does not run', async () => {
    const store = createMemoryIdempotencyStore();
    let runs = 0;
    const dag = createDag([{ id: 'charge', idempotencyKey: 'invoice-17', run: async () => num(++runs) }]);
    const scheduler = new DagScheduler(dag, { idempotency: { store } });
    const first = await scheduler.run();
    const second = await scheduler.run();
    expect(runs).toBe(1);
    expect(first.results[0]?.source).toBe('run');
    expect(second.results[0]?.source).toBe('cache');
    expect(readNum(second.output('charge'))).toBe(1);
  });

  test('concurrent runs (two schedulers, one store): one does the work, the other waits for its result', async () => {
    const store = createMemoryIdempotencyStore();
    const gate = deferred<Payload>();
    let runs = 0;
    const dag = createDag([
      {
        id: 'expensive',
        idempotencyKey: 'shared',
        run: () => {
          runs++;
          return gate.promise;
        },
      },
    ]);
    const sink = createMemoryEventSink();
    const a = new DagScheduler(dag, { idempotency: { store } }).run({ runId: 'A' });
    const b = new DagScheduler(dag, { idempotency: { store }, eventSink: sink }).run({ runId: 'B' });
    await tick();
    expect(runs).toBe(1);
    expect(sink.ofType('node-singleflight-wait')).toHaveLength(1);
    gate.resolve(num(99));
    const [ra, rb] = await Promise.all([a, b]);
    expect(runs).toBe(1);
    expect(readNum(ra.output('expensive'))).toBe(99);
    expect(readNum(rb.output('expensive'))).toBe(99);
    expect(rb.results[0]?.source).toBe('singleflight');
  });

  test('a failed owner abandons its claim, so a waiting run takes the key over and does the work', async () => {
    const store = createMemoryIdempotencyStore();
    const gate = deferred<Payload>();
    const dag = (run: NodeRun) => createDag([{ id: 'job', idempotencyKey: 'k', run }]);
    const failing = new DagScheduler(
      dag(() => gate.promise),
      { idempotency: { store } },
    ).run({ runId: 'A' });
    failing.catch(() => {});
    let secondRan = false;
    const waiting = new DagScheduler(
      dag(async () => {
        secondRan = true;
        return num(2);
      }),
      { idempotency: { store } },
    ).run({ runId: 'B' });
    await tick();
    expect(secondRan).toBe(false);
    gate.reject(new Error('owner crashed'));
    await incomplete(failing);
    const report = await waiting;
    expect(secondRan).toBe(true);
    expect(readNum(report.output('job'))).toBe(2);
    expect(report.results[0]?.source).toBe('run');
  });

  test('a claim that lapses (owner vanished) lets a waiter take the key over', async () => {
    const clock = createManualClock();
    const store = createMemoryIdempotencyStore({ clock });
    await store.begin('k', 'ghost-owner', 1_000);
    let ran = false;
    const dag = createDag([
      {
        id: 'job',
        idempotencyKey: 'k',
        run: async () => {
          ran = true;
          return num(1);
        },
      },
    ]);
    const run = new DagScheduler(dag, { idempotency: { store }, clock }).run();
    await tick();
    expect(ran).toBe(false);
    await clock.advance(1_000);
    await run;
    expect(ran).toBe(true);
  });

  test('a failing store fails the run with IdempotencyStoreError', async () => {
    const broken: IdempotencyStore = {
      begin: async () => {
        throw new Error('connection refused');
      },
      complete: async () => {},
      abandon: async () => {},
      wait: async () => undefined,
    };
    const dag = createDag([{ id: 'job', idempotencyKey: 'k', run: async () => EMPTY_PAYLOAD }]);
    const err = await incomplete(runDag(dag, { idempotency: { store: broken } }));
    expect(err.cause).toBeInstanceOf(IdempotencyStoreError);
    expect((err.cause as IdempotencyStoreError).operation).toBe('begin');
    expect(err.retryable).toBe(true);
  });
});
