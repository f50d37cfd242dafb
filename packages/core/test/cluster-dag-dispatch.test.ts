// Remote placement of DAG nodes over the data-plane queue: a dispatcher and workers on the
// in-memory backend (one process) and on the real local Redis (separate connections, as
// separate processes would have).
import { randomBytes } from 'node:crypto';
import {
  createDag,
  type Dag,
  DagScheduler,
  ExecutionIncompleteError,
  jsonPayload,
  PermanentNodeError,
  RetryableNodeError,
  readJson,
} from '@mocra/dag';
import { afterEach, describe, expect, test } from 'vitest';
import {
  createDagWorker,
  createQueueDagDispatcher,
  type DagWorker,
} from '../src/cluster/dag-queue-dispatch.js';
import { createMemoryQueueBackend } from '../src/queue/memory-queue.js';
import { connectRedis } from '../src/queue/redis-connection.js';
import { createRedisQueueBackend } from '../src/queue/redis-queue.js';
import type { QueueBackend } from '../src/queue/types.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const KEY_PREFIX = 'mocra-test:dagq:';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** Where each node ran: `${node}@${worker}`. */
function graph(
  ran: string[],
  worker: string,
  behaviour: { failRender?: 'permanent' | 'retryable' } = {},
): Dag {
  let renderCalls = 0;
  return createDag([
    {
      id: 'prompt',
      run: async () => {
        ran.push(`prompt@${worker}`);
        return jsonPayload('a cat');
      },
    },
    {
      id: 'render',
      after: ['prompt'],
      placement: { kind: 'remote', workerGroup: 'gpu' },
      retry: { maxRetries: 2, backoff: { kind: 'fixed', delayMs: 10 } },
      run: async (ctx) => {
        ran.push(`render@${worker}#${ctx.attempt}`);
        renderCalls++;
        if (behaviour.failRender === 'permanent') throw new PermanentNodeError('bad prompt');
        if (behaviour.failRender === 'retryable' && renderCalls < 2) throw new RetryableNodeError('gpu busy');
        return jsonPayload({ image: `of ${readJson<string>(ctx.input('prompt'))}`, token: ctx.fencingToken });
      },
    },
    {
      id: 'publish',
      after: ['render'],
      run: async (ctx) => {
        ran.push(`publish@${worker}`);
        return ctx.input('render');
      },
    },
  ]);
}

function workers(queue: QueueBackend, ran: string[], ids: string[], behaviour = {}): DagWorker[] {
  return ids.map((id) => {
    const w = createDagWorker({
      queue,
      nodeId: id,
      groups: ['gpu'],
      graphs: new Map([['art', graph(ran, id, behaviour)]]),
      pollWaitMs: 50,
    });
    w.start();
    cleanups.push(() => w.close());
    return w;
  });
}

describe('remote DAG nodes over the in-memory queue', () => {
  test('a remote node runs on a worker and its output flows on to the local successors', async () => {
    const queue = createMemoryQueueBackend({ namespace: 'dagq' });
    cleanups.push(() => queue.close());
    const ran: string[] = [];
    const [w1, w2] = workers(queue, ran, ['w1', 'w2']);
    const dispatcher = createQueueDagDispatcher({ queue, nodeId: 'main', pollWaitMs: 50 });
    cleanups.push(() => dispatcher.close());
    const report = await new DagScheduler(graph(ran, 'main'), { dispatcher: dispatcher.for('art') }).run({
      fencingToken: 42,
    });
    expect(readJson(report.output('publish')!)).toEqual({ image: 'of a cat', token: 42 });
    expect(ran[0]).toBe('prompt@main');
    expect(ran[1]).toMatch(/^render@w[12]#1$/);
    expect(ran[2]).toBe('publish@main');
    expect(w1!.stats().succeeded + w2!.stats().succeeded).toBe(1);
    expect(dispatcher.pending).toBe(0);
  });

  test('remote failures keep their retry semantics: a retryable one is retried, a permanent one is not', async () => {
    const queue = createMemoryQueueBackend({ namespace: 'dagq' });
    cleanups.push(() => queue.close());
    const dispatcher = createQueueDagDispatcher({ queue, nodeId: 'main', pollWaitMs: 50 });
    cleanups.push(() => dispatcher.close());

    const ran: string[] = [];
    workers(queue, ran, ['w1'], { failRender: 'retryable' });
    const ok = await new DagScheduler(graph(ran, 'main'), { dispatcher: dispatcher.for('art') }).run();
    expect(ok.results.find((r) => r.nodeId === 'render')?.attempts).toBe(2);

    const queue2 = createMemoryQueueBackend({ namespace: 'dagq2' });
    cleanups.push(() => queue2.close());
    const dispatcher2 = createQueueDagDispatcher({ queue: queue2, nodeId: 'main', pollWaitMs: 50 });
    cleanups.push(() => dispatcher2.close());
    const ran2: string[] = [];
    workers(queue2, ran2, ['w9'], { failRender: 'permanent' });
    const err = await new DagScheduler(graph(ran2, 'main'), { dispatcher: dispatcher2.for('art') })
      .run()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutionIncompleteError);
    // The scheduler wraps the attempt's error (NodeFailedError); the remote failure is its cause.
    const cause = ((err as ExecutionIncompleteError).failures[0]?.error as Error | undefined)?.cause;
    expect(cause).toMatchObject({
      code: 'MOCRA_ERR_REMOTE_NODE_FAILED',
      remoteCode: 'MOCRA_ERR_DAG_NODE_PERMANENT',
      worker: 'w9',
      retryable: false,
    });
    expect(ran2.filter((r) => r.startsWith('render'))).toEqual(['render@w9#1']);

    // A graph no worker knows is a clear remote error, not a hang.
    const err3 = await new DagScheduler(graph([], 'main'), {
      dispatcher: dispatcher2.for('no-such-graph'),
      defaultPolicy: { retry: { maxRetries: 0 } },
    })
      .run()
      .catch((e: unknown) => e);
    expect(((err3 as ExecutionIncompleteError).failures[0]?.error as Error | undefined)?.cause).toMatchObject(
      {
        code: 'MOCRA_ERR_REMOTE_NODE_FAILED',
        remoteCode: 'MOCRA_ERR_INVALID_ARGUMENT',
      },
    );
  });

  test('a worker that dies holding a task: its lease lapses and another worker runs it', async () => {
    const queue = createMemoryQueueBackend({ namespace: 'dagq', topicDefaults: { leaseMs: 200 } });
    cleanups.push(() => queue.close());
    const dispatcher = createQueueDagDispatcher({ queue, nodeId: 'main', pollWaitMs: 50 });
    cleanups.push(() => dispatcher.close());
    const ran: string[] = [];
    const running = new DagScheduler(graph(ran, 'main'), { dispatcher: dispatcher.for('art') }).run();
    // The "dead" worker: takes the task, never answers, never extends its lease.
    const stolen = await queue.topic('dag-task-gpu').consume({ max: 1, waitMs: 2_000 });
    expect(stolen).toHaveLength(1);
    workers(queue, ran, ['survivor']);
    const report = await running;
    expect(readJson(report.output('render')!)).toMatchObject({ image: 'of a cat' });
    expect(ran).toContain('render@survivor#1');
  });

  test('bad messages on a task topic go to its dead-letter queue; the worker goes on', async () => {
    const queue = createMemoryQueueBackend({ namespace: 'dagq' });
    cleanups.push(() => queue.close());
    const ran: string[] = [];
    workers(queue, ran, ['w1']);
    const topic = queue.topic<unknown>('dag-task-gpu');
    await topic.publish([
      { payload: { v: 1, nonsense: true } },
      { payload: { v: 1, id: 'x', graph: 'art', replyTo: 'r', task: '!!' } },
    ]);
    for (let i = 0; i < 100 && (await topic.deadLetters.size()) < 2; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(await topic.deadLetters.size()).toBe(2);
    const dispatcher = createQueueDagDispatcher({ queue, nodeId: 'main', pollWaitMs: 50 });
    cleanups.push(() => dispatcher.close());
    const report = await new DagScheduler(graph(ran, 'main'), { dispatcher: dispatcher.for('art') }).run();
    expect(readJson(report.output('publish')!)).toMatchObject({ image: 'of a cat' });
  });
});

describe('remote DAG nodes over Redis Streams', () => {
  test('dispatcher and workers on separate connections', async () => {
    const namespace = `dagq${randomBytes(4).toString('hex')}`;
    const open = async () => {
      const q = await createRedisQueueBackend({
        url: REDIS_URL,
        namespace,
        keyPrefix: KEY_PREFIX,
        pollMs: 20,
      });
      cleanups.push(() => q.close());
      return q;
    };
    cleanups.push(async () => {
      const admin = await connectRedis({ url: REDIS_URL, feature: 'cluster-dag-dispatch.test' });
      const keys = await admin.keys(`${KEY_PREFIX}{${namespace}:*`);
      if (keys.length > 0) await admin.del(...keys);
      await admin.quit();
    });
    const ran: string[] = [];
    workers(await open(), ran, ['redis-w1']);
    workers(await open(), ran, ['redis-w2']);
    const queue = await open();
    const dispatcher = createQueueDagDispatcher({ queue, nodeId: 'main', pollWaitMs: 100 });
    cleanups.push(() => dispatcher.close());
    const reports = await Promise.all(
      [1, 2, 3].map((t) =>
        new DagScheduler(graph(ran, 'main'), { dispatcher: dispatcher.for('art') }).run({ fencingToken: t }),
      ),
    );
    expect(reports.map((r) => readJson<{ token: number }>(r.output('publish')!).token)).toEqual([1, 2, 3]);
    expect(ran.filter((r) => r.startsWith('render@redis-w'))).toHaveLength(3);
  });
});
