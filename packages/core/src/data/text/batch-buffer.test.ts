import { describe, expect, test } from 'vitest';
import { BatchBuffer } from './batch-buffer.js';

describe('BatchBuffer', () => {
  test('flushes on size, in order, and the rest on close', async () => {
    const batches: number[][] = [];
    const buffer = new BatchBuffer<number>({ maxItems: 3, maxWaitMs: 0, flush: (b) => void batches.push(b) });
    for (let i = 0; i < 7; i++) await buffer.add(i);
    await buffer.close();
    expect(batches).toEqual([[0, 1, 2], [3, 4, 5], [6]]);
    expect(buffer.flushed).toBe(7);
    await expect(buffer.add(8)).rejects.toMatchObject({ code: 'MOCRA_ERR_BATCH_CLOSED' });
  });

  test('flushes on time', async () => {
    let resolveFlushed: (b: string[]) => void = () => {};
    const flushed = new Promise<string[]>((r) => {
      resolveFlushed = r;
    });
    const buffer = new BatchBuffer<string>({ maxItems: 100, maxWaitMs: 20, flush: (b) => resolveFlushed(b) });
    await buffer.add('a');
    await buffer.add('b');
    expect(await flushed).toEqual(['a', 'b']);
    await buffer.close();
  });

  test('back-pressure: add waits while maxPendingBatches full batches wait behind a slow flush', async () => {
    const releases: (() => void)[] = [];
    const buffer = new BatchBuffer<number>({
      maxItems: 1,
      maxWaitMs: 0,
      maxPendingBatches: 1,
      flush: () => new Promise<void>((r) => releases.push(r)),
    });
    await buffer.add(1); // being flushed
    await buffer.add(2); // waits behind it: still within the limit
    let third = false;
    const adding = buffer.add(3).then(() => {
      third = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(third).toBe(false);
    expect(buffer.size).toBe(3);
    releases.shift()?.();
    await adding;
    expect(third).toBe(true);
    for (let i = 0; i < 10 && buffer.flushed < 3; i++) {
      releases.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    await buffer.close();
    expect(buffer.flushed).toBe(3);
  });

  test('a failed flush is thrown from the next call, with the cause', async () => {
    const buffer = new BatchBuffer<number>({
      maxItems: 2,
      maxWaitMs: 0,
      flush: async () => {
        throw new Error('disk full');
      },
    });
    await buffer.add(1);
    await buffer.add(2);
    await expect(buffer.flush()).rejects.toMatchObject({ code: 'MOCRA_ERR_BATCH_FLUSH', items: 2 });
    await expect(buffer.add(3)).rejects.toThrow(/disk full/);
  });

  test('bad options are refused', () => {
    expect(() => new BatchBuffer({ flush: () => {}, maxItems: 0 })).toThrow(/maxItems/);
  });
});
