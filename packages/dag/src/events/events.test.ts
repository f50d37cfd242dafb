import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { describe, expect, test } from 'vitest';
import { deferred, incomplete, tick } from '../../test/helpers.js';
import {
  createDag,
  createManualClock,
  createMemoryEventSink,
  createMemoryRunGuard,
  createMemoryRunStateStore,
  DAG_CHANNELS,
  type DagEvent,
  DagScheduler,
  EMPTY_PAYLOAD,
  type EventSink,
  type Payload,
  runDag,
} from '../index.js';

const brief = (e: DagEvent) => ('nodeId' in e ? `${e.type}:${e.nodeId}` : e.type);

describe('events', () => {
  test('every state change of a successful run, in order', async () => {
    const clock = createManualClock(5_000);
    const sink = createMemoryEventSink();
    let attempts = 0;
    const dag = createDag([
      {
        id: 'a',
        retry: { maxRetries: 1, backoff: { kind: 'fixed', delayMs: 10 } },
        run: async () => {
          if (++attempts === 1) throw new Error('once');
          return EMPTY_PAYLOAD;
        },
      },
      { id: 'b', after: ['a'], run: async () => EMPTY_PAYLOAD },
    ]);
    const run = new DagScheduler(dag, {
      clock,
      eventSink: sink,
      key: 'job',
      runGuard: { guard: createMemoryRunGuard({ clock }), ttlMs: 60_000 },
    }).run({ runId: 'r' });
    await clock.advance(10);
    await run;
    expect(sink.events.map(brief)).toEqual([
      'run-guard-acquired',
      'run-started',
      'node-ready:a',
      'node-running:a',
      'node-attempt-failed:a',
      'node-retry-scheduled:a',
      'node-ready:a',
      'node-running:a',
      'node-succeeded:a',
      'node-ready:b',
      'node-running:b',
      'node-succeeded:b',
      'run-guard-released',
      'run-succeeded',
    ]);
    for (const e of sink.events) {
      expect(e.runId).toBe('r');
      expect(typeof e.fencingToken).toBe('number');
      expect(e.timestampMs).toBeGreaterThanOrEqual(5_000);
      // JSON-safe: survives a round trip unchanged
      expect(JSON.parse(JSON.stringify(e))).toEqual(e);
    }
    const retry = sink.ofType('node-retry-scheduled')[0];
    expect(retry).toMatchObject({
      attempt: 1,
      delayMs: 10,
      breakerOpen: false,
      layer: 0,
      placement: 'local',
    });
    expect(retry?.error).toMatchObject({ name: 'Error', message: 'once', retryable: false });
    expect(sink.ofType('node-succeeded').map((e) => [e.nodeId, e.attempt, e.source, e.durationMs])).toEqual([
      ['a', 2, 'run', 0],
      ['b', 1, 'run', 0],
    ]);
    expect(sink.ofType('run-succeeded')[0]?.durationMs).toBe(10);
  });

  test('attempt failures (a timeout among them), checkpoint writes and a refused guard are events too', async () => {
    const clock = createManualClock(1_000);
    const sink = createMemoryEventSink();
    const guard = createMemoryRunGuard({ clock });
    let attempts = 0;
    const dag = createDag([
      {
        id: 'slow',
        timeoutMs: 50,
        retry: { maxRetries: 1, backoff: { kind: 'fixed', delayMs: 0 } },
        run: () => (++attempts === 1 ? deferred<Payload>().promise : Promise.resolve(EMPTY_PAYLOAD)),
      },
      { id: 'after', after: ['slow'], run: async () => EMPTY_PAYLOAD },
    ]);
    const scheduler = new DagScheduler(dag, {
      clock,
      eventSink: sink,
      key: 'job',
      runGuard: { guard, ttlMs: 60_000 },
      runState: { store: createMemoryRunStateStore() },
    });
    const held = await guard.acquire('job', 'someone-else', 60_000);
    await expect(scheduler.run({ runId: 'refused' })).rejects.toMatchObject({
      code: 'MOCRA_ERR_DAG_RUN_IN_PROGRESS',
    });
    expect(sink.events.map(brief)).toEqual(['run-guard-refused']);
    expect(sink.ofType('run-guard-refused')[0]).toMatchObject({
      runId: 'refused',
      key: 'job',
      reason: 'held',
    });
    await guard.release(held!);
    sink.clear();

    const run = scheduler.run({ runId: 'r' });
    await clock.advance(50);
    await run;
    const types = sink.events.map(brief);
    expect(types.slice(types.indexOf('node-running:slow'))).toEqual([
      'node-running:slow',
      'node-attempt-failed:slow',
      'node-retry-scheduled:slow',
      'node-ready:slow',
      'node-running:slow',
      'node-checkpointed:slow',
      'node-succeeded:slow',
      'node-ready:after',
      'node-running:after',
      'node-checkpointed:after',
      'node-succeeded:after',
      'run-guard-released',
      'run-succeeded',
    ]);
    expect(sink.ofType('node-attempt-failed')[0]).toMatchObject({
      attempt: 1,
      durationMs: 50,
      error: { code: 'MOCRA_ERR_DAG_NODE_TIMEOUT' },
    });
  });

  test('a failed run: node-failed, node-cancelled and run-failed with the unfinished nodes', async () => {
    const sink = createMemoryEventSink();
    const dag = createDag([
      { id: 'bad', run: async () => Promise.reject(new Error('x')) },
      { id: 'slow', run: () => deferred<Payload>().promise },
      { id: 'next', after: ['bad'], idempotencyKey: 'k', run: async () => EMPTY_PAYLOAD },
    ]);
    await incomplete(runDag(dag, { eventSink: sink }));
    const types = sink.events.map(brief);
    expect(types).toContain('node-failed:bad');
    expect(types).toContain('node-cancelled:slow');
    expect(types.at(-1)).toBe('run-failed');
    const failed = sink.ofType('run-failed')[0];
    expect(failed?.unfinishedNodes).toEqual(['bad', 'next', 'slow']);
    expect(failed?.error.code).toBe('MOCRA_ERR_DAG_NODE_FAILED');
    expect(sink.ofType('node-cancelled')[0]?.reason.code).toBe('MOCRA_ERR_DAG_NODE_FAILED');
  });

  test('diagnostics channels carry the same events; nothing is built when nobody listens', async () => {
    const seen: string[] = [];
    const onNode = (msg: unknown) => seen.push(brief(msg as DagEvent));
    const onRun = (msg: unknown) => seen.push(brief(msg as DagEvent));
    subscribe(DAG_CHANNELS.node, onNode);
    subscribe(DAG_CHANNELS.run, onRun);
    try {
      await runDag(createDag([{ id: 'x', run: async () => EMPTY_PAYLOAD }]));
    } finally {
      unsubscribe(DAG_CHANNELS.node, onNode);
      unsubscribe(DAG_CHANNELS.run, onRun);
    }
    expect(seen).toEqual([
      'run-started',
      'node-ready:x',
      'node-running:x',
      'node-succeeded:x',
      'run-succeeded',
    ]);
    expect(DAG_CHANNELS).toEqual({
      run: 'mocra:dag:run',
      node: 'mocra:dag:node',
      sinkError: 'mocra:dag:sink-error',
      storeError: 'mocra:dag:store-error',
    });
  });

  test('a sink that throws or rejects does not disturb the run; its errors go to mocra:dag:sink-error', async () => {
    const errors: unknown[] = [];
    const onError = (msg: unknown) => errors.push((msg as { error: unknown }).error);
    subscribe(DAG_CHANNELS.sinkError, onError);
    let calls = 0;
    const sink: EventSink = {
      emit(event) {
        calls++;
        if (event.type === 'node-running') throw new Error('sync sink failure');
        if (event.type === 'node-succeeded') return Promise.reject(new Error('async sink failure'));
        return undefined;
      },
    };
    try {
      const report = await runDag(createDag([{ id: 'x', run: async () => EMPTY_PAYLOAD }]), {
        eventSink: sink,
      });
      await tick();
      expect(report.states.get('x')).toBe('succeeded');
    } finally {
      unsubscribe(DAG_CHANNELS.sinkError, onError);
    }
    expect(calls).toBe(5);
    expect(errors.map((e) => (e as Error).message)).toEqual(['sync sink failure', 'async sink failure']);
  });
});
