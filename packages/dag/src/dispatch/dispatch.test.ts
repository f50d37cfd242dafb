import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { pricingGraph } from '../../test/fixtures/remote-graph.js';
import { incomplete } from '../../test/helpers.js';
import {
  createDag,
  createMemoryEventSink,
  createMemoryRunGuard,
  DagScheduler,
  decodeNodeTask,
  decodePayload,
  EMPTY_PAYLOAD,
  encodeNodeTask,
  encodePayload,
  InvalidEnvelopeError,
  InvalidNodeError,
  jsonPayload,
  type NodeDispatcher,
  type NodeFailedError,
  type NodeTask,
  RemoteDispatchNotConfiguredError,
  readJson,
  runDag,
  runNodeTask,
  textPayload,
  UnknownNodeError,
  UnsupportedEnvelopeVersionError,
} from '../index.js';

const sampleTask: NodeTask = {
  runId: 'run-1',
  fencingToken: 12,
  nodeId: 'score',
  attempt: 2,
  layer: 1,
  workerGroup: 'gpu',
  idempotencyKey: 'k',
  deadline: 1_700_000_000_000,
  upstream: new Map([['items', jsonPayload([1, 2])]]),
};

describe('node task codec', () => {
  test('round-trips every field, with and without the optional ones', () => {
    const back = decodeNodeTask(encodeNodeTask(sampleTask));
    expect({ ...back, upstream: undefined }).toEqual({ ...sampleTask, upstream: undefined });
    expect(readJson(back.upstream.get('items')!)).toEqual([1, 2]);
    const bare: NodeTask = {
      ...sampleTask,
      fencingToken: undefined,
      workerGroup: undefined,
      idempotencyKey: undefined,
      deadline: undefined,
      upstream: new Map(),
    };
    expect(decodeNodeTask(encodeNodeTask(bare))).toEqual(bare);
  });

  test('rejects bad magic, wrong version, truncation, trailing bytes and bad fields', () => {
    const enc = encodeNodeTask(sampleTask);
    expect(() => decodeNodeTask(encodePayload(EMPTY_PAYLOAD))).toThrow(/bad-magic/);
    const v = enc.slice();
    v[4] = 9;
    expect(() => decodeNodeTask(v)).toThrow(UnsupportedEnvelopeVersionError);
    for (let len = 0; len < enc.length; len++)
      expect(() => decodeNodeTask(enc.subarray(0, len))).toThrow(InvalidEnvelopeError);
    const longer = new Uint8Array(enc.length + 1);
    longer.set(enc);
    expect(() => decodeNodeTask(longer)).toThrow(/trailing-bytes/);
    const badToken = encodeNodeTask({ ...sampleTask, fencingToken: 1.5 });
    expect(() => decodeNodeTask(badToken)).toThrow(/safe integer/);
    const zeroAttempt = encodeNodeTask({ ...sampleTask, attempt: 0 });
    expect(() => decodeNodeTask(zeroAttempt)).toThrow(/attempt/);
  });
});

describe('remote placement', () => {
  test('without a dispatcher, a remote node fails with RemoteDispatchNotConfiguredError (not retried)', async () => {
    const dag = createDag([
      { id: 'r', placement: { kind: 'remote', workerGroup: 'gpu' }, retry: { maxRetries: 3 } },
    ]);
    const err = await incomplete(runDag(dag));
    const cause = (err.cause as NodeFailedError).cause as RemoteDispatchNotConfiguredError;
    expect(cause).toBeInstanceOf(RemoteDispatchNotConfiguredError);
    expect(cause.workerGroup).toBe('gpu');
    expect(err.report.results[0]?.attempts).toBe(1);
  });

  test('remote nodes go through the dispatcher with a serializable task; local nodes do not', async () => {
    const tasks: NodeTask[] = [];
    const dispatcher: NodeDispatcher = {
      async dispatch(task, signal) {
        expect(signal).toBeInstanceOf(AbortSignal);
        tasks.push(decodeNodeTask(encodeNodeTask(task)));
        if (task.attempt === 1) throw new Error('worker restarted');
        return textPayload(`done by ${task.workerGroup}`);
      },
    };
    const sink = createMemoryEventSink();
    const report = await new DagScheduler(pricingGraph(), {
      dispatcher,
      eventSink: sink,
      defaultPolicy: { retry: { maxRetries: 1 } },
    }).run({ runId: 'R' });
    expect(tasks.map((t) => [t.nodeId, t.attempt, t.workerGroup, t.idempotencyKey, t.runId])).toEqual([
      ['score', 1, 'gpu', 'score-v1', 'R'],
      ['score', 2, 'gpu', 'score-v1', 'R'],
    ]);
    expect(readJson(tasks[0]!.upstream.get('items')!)).toEqual([3, 4, 5]);
    expect(new TextDecoder().decode(report.output('report')!.bytes)).toBe('done by gpu');
    const running = sink.ofType('node-running').filter((e) => e.nodeId === 'score');
    expect(running.map((e) => [e.placement, e.workerGroup])).toEqual([
      ['remote', 'gpu'],
      ['remote', 'gpu'],
    ]);
  });

  describe('over a worker thread (bytes only cross the boundary)', () => {
    let worker: Worker;
    let dispatcher: NodeDispatcher;

    beforeAll(async () => {
      worker = new Worker(path.join(import.meta.dirname, '../../test/fixtures/remote-worker.mjs'), {
        execArgv: ['--conditions=@mocra/source'],
      });
      await new Promise((resolve, reject) => {
        worker.once('online', resolve);
        worker.once('error', reject);
      });
      let seq = 0;
      const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
      // A crashed worker fails every pending dispatch at once instead of leaving the test to time out.
      let crashed: unknown;
      worker.on('error', (error) => {
        crashed = error;
        for (const p of pending.values()) p.reject(error);
        pending.clear();
      });
      worker.on(
        'message',
        (msg: { id: number; ok: boolean; output?: Uint8Array; error?: { message: string } }) => {
          const p = pending.get(msg.id);
          pending.delete(msg.id);
          if (msg.ok) p?.resolve(decodePayload(msg.output!));
          else p?.reject(new Error(msg.error?.message));
        },
      );
      dispatcher = {
        dispatch(task) {
          if (crashed !== undefined) return Promise.reject(crashed);
          const id = ++seq;
          return new Promise((resolve, reject) => {
            pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
            worker.postMessage({ id, task: encodeNodeTask(task) });
          });
        },
      };
    });

    afterAll(async () => {
      await worker?.terminate();
    });

    test('the remote node runs in the worker with the run id, token and upstream it was sent', async () => {
      const report = await new DagScheduler(pricingGraph(), {
        dispatcher,
        key: 'pricing',
        runGuard: { guard: createMemoryRunGuard() },
      }).run({ runId: 'run-77' });
      expect(readJson(report.output('report')!)).toEqual({
        total: 50,
        attempt: 1,
        runId: 'run-77',
        token: report.fencingToken,
        thread: 'worker',
      });
    });
  });
});

describe('runNodeTask (worker side)', () => {
  test('builds a context from the task and checks the output', async () => {
    const out = await runNodeTask(pricingGraph(), {
      ...sampleTask,
      upstream: new Map([['items', jsonPayload([2])]]),
    });
    expect(readJson<{ total: number; attempt: number }>(out)).toMatchObject({ total: 4, attempt: 2 });
    await expect(runNodeTask(pricingGraph(), { ...sampleTask, nodeId: 'nope' })).rejects.toBeInstanceOf(
      UnknownNodeError,
    );
    const remoteOnly = createDag([{ id: 'score', placement: { kind: 'remote', workerGroup: 'gpu' } }]);
    await expect(runNodeTask(remoteOnly, sampleTask)).rejects.toBeInstanceOf(InvalidNodeError);
    await expect(runNodeTask(pricingGraph(), { ...sampleTask, upstream: new Map() })).rejects.toBeInstanceOf(
      UnknownNodeError,
    );
  });
});
