import { expect, test } from 'vitest';
import { BatchWriter } from './leveldb-batch-writer.js';
import { openStore } from './leveldb-store.js';

const key = (n: number) => new Uint8Array([1, n]);

test('a write issued the moment the previous one resolves is written too (it does not wait for a loop that ended)', async () => {
  const store = await openStore({ tempPrefix: 'mocra-writer-test-' });
  try {
    const writer = new BatchWriter(store.db, store.dir);
    // Each write starts as soon as the one before resolves: before the fix the second one
    // waited forever for the write loop that had just ended.
    for (let i = 0; i < 20; i++) {
      await writer.write([{ type: 'put', key: key(i), value: new Uint8Array([i]) }]);
    }
    await writer.idle();
    for (let i = 0; i < 20; i++) expect([...((await store.db.get(key(i))) ?? [])]).toEqual([i]);
    expect(writer.batches).toBe(20);
  } finally {
    await store.close();
  }
}, 10_000);
