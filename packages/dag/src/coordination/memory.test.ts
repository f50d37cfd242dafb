import { describe, expect, test } from 'vitest';
import {
  describeFencingStoreConformance,
  describeIdempotencyStoreConformance,
  describeRunGuardConformance,
  describeRunStateStoreConformance,
} from '../../test/conformance.js';
import {
  createManualClock,
  createMemoryFencingStore,
  createMemoryIdempotencyStore,
  createMemoryRunGuard,
  createMemoryRunStateStore,
  EMPTY_PAYLOAD,
  InvalidOptionsError,
  jsonPayload,
} from '../index.js';

describeRunGuardConformance('memory', (clock) => createMemoryRunGuard({ clock }));
describeFencingStoreConformance('memory', () => createMemoryFencingStore());
describeRunStateStoreConformance('memory', () => createMemoryRunStateStore());
describeIdempotencyStoreConformance('memory', (clock) => createMemoryIdempotencyStore({ clock }));

describe('memory implementations: extras', () => {
  test('run guard: holder() shows the live lease; bad TTLs are rejected', async () => {
    const clock = createManualClock();
    const guard = createMemoryRunGuard({ clock });
    const lease = await guard.acquire('k', 'A', 100);
    expect(guard.holder('k')).toEqual(lease);
    await clock.advance(100);
    expect(guard.holder('k')).toBeUndefined();
    await expect(guard.acquire('k', 'A', 0)).rejects.toBeInstanceOf(InvalidOptionsError);
  });

  test('fencing store keeps what was committed, as an envelope copy', async () => {
    const store = createMemoryFencingStore();
    await store.commit({ resource: 'r', token: 2, runId: 'run', nodeId: 'n', output: jsonPayload([1]) });
    expect(store.highestToken('r')).toBe(2);
    const got = store.committed('r', 'n');
    expect(got?.token).toBe(2);
    expect(got?.runId).toBe('run');
    expect(got?.output.contentType).toBe('application/json');
    expect(store.committed('r', 'other')).toBeUndefined();
    await expect(
      store.commit({ resource: 'r', token: Number.NaN, runId: 'x', nodeId: 'n', output: EMPTY_PAYLOAD }),
    ).rejects.toBeInstanceOf(InvalidOptionsError);
  });

  test('idempotency store: results expire after resultTtlMs', async () => {
    const clock = createManualClock();
    const store = createMemoryIdempotencyStore({ clock, resultTtlMs: 500 });
    await store.begin('k', 'A', 100);
    await store.complete('k', 'A', EMPTY_PAYLOAD);
    expect((await store.begin('k', 'B', 100)).status).toBe('done');
    await clock.advance(500);
    expect((await store.begin('k', 'B', 100)).status).toBe('claimed');
    expect(() => createMemoryIdempotencyStore({ resultTtlMs: 0 })).toThrow(InvalidOptionsError);
  });

  test('run-state store lists its keys', async () => {
    const store = createMemoryRunStateStore();
    await store.save('a', { runId: 'r', fencingToken: undefined, nodeId: 'n', output: EMPTY_PAYLOAD });
    expect(store.keys()).toEqual(['a']);
  });
});
