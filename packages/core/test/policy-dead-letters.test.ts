import { afterEach, describe, expect, test } from 'vitest';
import { EngineDeadLetters, REPLAYED_HEADER, type StageTopics } from '../src/engine/dead-letters.js';
import { ATTEMPT_HEADER, type ErrorEvent, TOPICS } from '../src/model/events.js';
import { createMemoryQueueBackend } from '../src/queue/memory-queue.js';
import type { LeaseQueue, QueueBackend } from '../src/queue/types.js';

let backend: QueueBackend;
afterEach(async () => {
  await backend?.close();
});

function setup() {
  backend = createMemoryQueueBackend({ namespace: `dlq-${Math.random()}` });
  const topic = (name: string) => backend.topic<unknown>(name, { maxDeliveries: 1, leaseMs: 60_000 });
  const topics: StageTopics = {
    task: topic(TOPICS.task),
    download: topic(TOPICS.request),
    parse: topic(TOPICS.response),
    followUp: topic(TOPICS.followUp),
    error: topic(TOPICS.error),
  };
  const replayed: string[][] = [];
  const dlq = new EngineDeadLetters({
    topics,
    beforeReplay: (entries) => replayed.push(entries.map((e) => e.id)),
  });
  return { topics, dlq, replayed };
}

function failure(
  code: string,
  payload: Record<string, unknown>,
  extra: Partial<ErrorEvent> = {},
): ErrorEvent {
  return {
    stage: 'download',
    topic: 'request',
    payload,
    error: { code, message: `${code} happened` } as never,
    code,
    message: `${code} happened`,
    retryable: false,
    attempt: 3,
    at: 0,
    priority: 2,
    url: String(payload.url ?? ''),
    module: 'shop',
    ...extra,
  };
}

/** Dead-letter one message of `queue` through the queue's own path (consume, deadLetter). */
async function deadLetter(queue: LeaseQueue<unknown>, payload: unknown, reason: string): Promise<void> {
  await queue.publish([{ payload, headers: { [ATTEMPT_HEADER]: '3' } }]);
  const [delivery] = await queue.consume({ max: 1, waitMs: 0 });
  if (!delivery) throw new Error('nothing to consume');
  await delivery.deadLetter(reason);
}

describe('EngineDeadLetters', () => {
  test('lists policy entries with payload, error, stage, attempts and time; filters; inspects', async () => {
    const { topics, dlq } = setup();
    await deadLetter(
      topics.error,
      failure('MOCRA_ERR_BODY_TOO_LARGE', { url: 'http://a/big' }, { kind: 'body-too-large' }),
      'not retryable',
    );
    await deadLetter(
      topics.error,
      failure(
        'MOCRA_ERR_PARSE_FAILED',
        { url: 'http://a/page', request: { url: 'http://a/page' } },
        { stage: 'parse', topic: 'response', kind: 'parse', attempt: 1 },
      ),
      'parser threw',
    );
    // A stage topic's own DLQ: the queue gave up on a message.
    await deadLetter(
      topics.download,
      { url: 'http://a/lost', module: 'shop' },
      'lease expired (after 5 deliveries)',
    );

    const all = await dlq.list();
    expect(all).toHaveLength(3);
    expect(all[0]).toMatchObject({
      source: 'policy',
      stage: 'download',
      topic: 'request',
      payload: { url: 'http://a/big' },
      error: { code: 'MOCRA_ERR_BODY_TOO_LARGE', kind: 'body-too-large' },
      attempts: 3,
      reason: 'not retryable',
      module: 'shop',
      url: 'http://a/big',
    });
    expect(all[0]?.failedAt).toBeGreaterThan(0);
    expect(all[2]).toMatchObject({
      source: 'queue',
      stage: 'download',
      topic: 'request',
      error: { code: 'MOCRA_ERR_LEASE_EXPIRED' },
      module: 'shop',
      url: 'http://a/lost',
    });
    expect((await dlq.list({ stage: 'parse' })).map((e) => e.error.code)).toEqual(['MOCRA_ERR_PARSE_FAILED']);
    expect(await dlq.list({ code: ['MOCRA_ERR_PARSE_FAILED', 'MOCRA_ERR_BODY_TOO_LARGE'] })).toHaveLength(2);
    expect(await dlq.list({ kind: 'parse' })).toHaveLength(1);
    expect(await dlq.list({ source: 'queue' })).toHaveLength(1);
    expect(await dlq.list({ urlIncludes: '/big' })).toHaveLength(1);
    expect(await dlq.list({ limit: 1, offset: 1 })).toEqual([all[1]]);
    expect(await dlq.size()).toBe(3);
    expect(await dlq.size({ stage: 'download' })).toBe(2);
    const id = all[1]?.id ?? '';
    expect(await dlq.get(id)).toEqual(all[1]);
    expect(await dlq.get('error:nope')).toBeUndefined();
    expect(await dlq.get('garbage')).toBeUndefined();
    await expect(dlq.list({ limit: -1 })).rejects.toMatchObject({ code: 'MOCRA_ERR_INVALID_ARGUMENT' });
  });

  test('replay puts the work back on its origin topic with attempts starting over, and removes the entry', async () => {
    const { topics, dlq, replayed } = setup();
    await deadLetter(
      topics.error,
      failure(
        'MOCRA_ERR_PARSE_FAILED',
        { url: 'http://a/p' },
        { stage: 'parse', topic: 'response', key: 'acct' },
      ),
      'parser threw',
    );
    await deadLetter(topics.error, failure('MOCRA_ERR_TIMEOUT', { url: 'http://a/t' }), 'exhausted');
    await deadLetter(topics.download, { url: 'http://a/lost' }, 'lease expired');
    const [parseEntry] = await dlq.list({ stage: 'parse' });

    expect(await dlq.replay(parseEntry?.id)).toBe(1);
    expect(replayed).toEqual([[parseEntry?.id]]);
    const [again] = await topics.parse.consume({ max: 1, waitMs: 0 });
    expect(again?.payload).toEqual({ url: 'http://a/p' });
    expect(again?.priority).toBe(2);
    expect(again?.key).toBe('acct');
    expect(again?.headers[ATTEMPT_HEADER]).toBeUndefined();
    expect(again?.headers[REPLAYED_HEADER]).toBe(parseEntry?.id);
    expect(await dlq.size()).toBe(2);

    // By query: only the queue-sourced one; it goes back through its own queue.
    expect(await dlq.replay({ source: 'queue' })).toBe(1);
    const [lost] = await topics.download.consume({ max: 1, waitMs: 0 });
    expect(lost?.payload).toEqual({ url: 'http://a/lost' });

    // All.
    expect(await dlq.replay()).toBe(1);
    const [timeout] = await topics.download.consume({ max: 1, waitMs: 0 });
    expect(timeout?.payload).toEqual({ url: 'http://a/t' });
    expect(await dlq.size()).toBe(0);
    expect(await dlq.replay()).toBe(0);
  });

  test('purge by id, by query and all', async () => {
    const { topics, dlq } = setup();
    for (const n of [1, 2, 3, 4]) {
      await deadLetter(
        topics.error,
        failure(n % 2 ? 'MOCRA_ERR_TIMEOUT' : 'MOCRA_ERR_DECODE', { url: `http://a/${n}` }),
        'x',
      );
    }
    await deadLetter(topics.parse, { url: 'http://a/r', request: { module: 'shop' } }, 'lease expired');
    const [first] = await dlq.list();
    expect(await dlq.purge(first?.id)).toBe(1);
    expect(await dlq.purge({ code: 'MOCRA_ERR_TIMEOUT' })).toBe(1);
    expect(await dlq.list({ stage: 'parse' })).toMatchObject([{ module: 'shop', source: 'queue' }]);
    expect(await dlq.purge()).toBe(3);
    expect(await dlq.size()).toBe(0);
  });

  test("an entry written under the follow-up stage's former name lists as followUp; a filter on that name is refused", async () => {
    const { topics, dlq } = setup();
    const followUp = { module: 'shop', node: 'detail', runId: 'r', requests: [], meta: {}, depth: 1 };
    // As a run persisted before the rename left it in the error topic's DLQ.
    await deadLetter(
      topics.error,
      failure('MOCRA_ERR_GENERATE_FAILED', followUp, {
        stage: 'parserTask' as never,
        topic: TOPICS.followUp,
      }),
      'generate threw',
    );
    await deadLetter(topics.followUp, followUp, 'lease expired');
    expect(await dlq.list({ stage: 'followUp' })).toMatchObject([
      { source: 'policy', stage: 'followUp', topic: 'parser_task' },
      { source: 'queue', stage: 'followUp', topic: 'parser_task' },
    ]);
    await expect(dlq.list({ stage: 'parserTask' as never })).rejects.toMatchObject({
      code: 'MOCRA_ERR_INVALID_ARGUMENT',
      message: "stage filter 'parserTask' was renamed: use 'followUp'",
    });
  });
});
