import { afterEach, describe, expect, test, vi } from 'vitest';
import { createMemoryQueueBackend } from './memory-queue.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('memory queue', () => {
  test('highest priority first, FIFO within a priority; ack removes for good', async () => {
    const q = createMemoryQueueBackend().topic<string>('t');
    await q.publish([
      { payload: 'low-1', priority: -1 },
      { payload: 'mid-1' },
      { payload: 'high-1', priority: 5 },
      { payload: 'mid-2' },
    ]);
    const got = await q.consume({ max: 10 });
    expect(got.map((d) => d.payload)).toEqual(['high-1', 'mid-1', 'mid-2', 'low-1']);
    for (const d of got) await d.ack();
    expect(await q.stats()).toEqual({ ready: 0, inflight: 0, delayed: 0, deadLettered: 0 });
  });

  test('a waiting consumer is woken by publish', async () => {
    const q = createMemoryQueueBackend().topic<number>('t');
    const pending = q.consume({ max: 2, waitMs: 5_000 });
    await q.publish([{ payload: 1 }]);
    expect((await pending).map((d) => d.payload)).toEqual([1]);
  });

  test('nack with delay redelivers after the delay with attempt + 1', async () => {
    vi.useFakeTimers();
    const q = createMemoryQueueBackend().topic<string>('t');
    await q.publish([{ payload: 'x' }]);
    const [first] = await q.consume({ max: 1, waitMs: 0 });
    expect(first?.attempt).toBe(1);
    await first!.nack({ delayMs: 1_000 });
    expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
    expect((await q.stats()).delayed).toBe(1);
    vi.advanceTimersByTime(1_000);
    const [second] = await q.consume({ max: 1, waitMs: 0 });
    expect(second?.payload).toBe('x');
    expect(second?.attempt).toBe(2);
  });

  test('a lapsed lease redelivers, and the old delivery can no longer settle', async () => {
    vi.useFakeTimers();
    const q = createMemoryQueueBackend().topic<string>('t', { leaseMs: 100 });
    await q.publish([{ payload: 'x' }]);
    const [stale] = await q.consume({ max: 1, waitMs: 0 });
    vi.advanceTimersByTime(101);
    const [fresh] = await q.consume({ max: 1, waitMs: 0 });
    expect(fresh?.attempt).toBe(2);
    await expect(stale!.ack()).rejects.toMatchObject({ code: 'MOCRA_ERR_LEASE_EXPIRED' });
    await fresh!.ack();
    expect((await q.stats()).inflight).toBe(0);
  });

  test('extendLease keeps a slow delivery', async () => {
    vi.useFakeTimers();
    const q = createMemoryQueueBackend().topic<string>('t', { leaseMs: 100 });
    await q.publish([{ payload: 'x' }]);
    const [d] = await q.consume({ max: 1, waitMs: 0 });
    vi.advanceTimersByTime(80);
    await d!.extendLease(100);
    vi.advanceTimersByTime(80);
    expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
    await d!.ack();
  });

  test('maxDeliveries sends to the DLQ; replay brings it back with attempts starting over', async () => {
    const q = createMemoryQueueBackend().topic<string>('t', { maxDeliveries: 2 });
    await q.publish([{ payload: 'poison', key: 'acct' }]);
    for (let i = 0; i < 2; i++) {
      const [d] = await q.consume({ max: 1, waitMs: 0 });
      await d!.nack({ reason: 'boom' });
    }
    expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
    const letters = await q.deadLetters.list();
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({ payload: 'poison', key: 'acct', attempts: 2 });
    expect(letters[0]!.reason).toContain('boom');
    expect(await q.deadLetters.replay()).toBe(1);
    const [again] = await q.consume({ max: 1, waitMs: 0 });
    expect(again).toMatchObject({ payload: 'poison', attempt: 1 });
  });

  test('publish waits while the topic is at capacity', async () => {
    const q = createMemoryQueueBackend().topic<number>('t', { capacity: 2 });
    await q.publish([{ payload: 1 }, { payload: 2 }]);
    let published = false;
    const blocked = q.publish([{ payload: 3 }]).then(() => {
      published = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(published).toBe(false);
    const [d] = await q.consume({ max: 1, waitMs: 0 });
    await d!.ack();
    await blocked;
    expect(published).toBe(true);
  });

  test('close resolves waiting consumers and refuses publishes', async () => {
    const backend = createMemoryQueueBackend();
    const q = backend.topic<number>('t');
    const pending = q.consume({ max: 1, waitMs: 60_000 });
    await backend.close();
    expect(await pending).toEqual([]);
    await expect(q.publish([{ payload: 1 }])).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_CLOSED' });
  });
});

describe('memory queue lease bookkeeping', () => {
  test('after thousands of acks (which compact the lease records) a lapsed lease is still redelivered', async () => {
    vi.useFakeTimers();
    const q = createMemoryQueueBackend().topic<number>('t', { leaseMs: 1_000, capacity: 100_000 });
    await q.publish(Array.from({ length: 5_000 }, (_, i) => ({ payload: i })));
    const all = await q.consume({ max: 5_000, waitMs: 0 });
    // Ack all but one: the stale lease records are compacted away on the way.
    for (const d of all.slice(1)) await d.ack();
    expect((await q.stats()).inflight).toBe(1);
    vi.advanceTimersByTime(1_001);
    const [again] = await q.consume({ max: 1, waitMs: 0 });
    expect(again).toMatchObject({ payload: 0, attempt: 2 });
  });
});
