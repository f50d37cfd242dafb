/**
 * Conformance suites for the injected contracts. Each takes a factory so that any
 * implementation (the in-memory ones here; Redis or Raft ones elsewhere) runs the same checks.
 * The factory gets a manual clock; a backend with its own clock can ignore it and skip the
 * expiry cases by passing `{ controlsTime: false }`.
 */
import { describe, expect, test } from 'vitest';
import {
  createManualClock,
  EMPTY_PAYLOAD,
  type FencingStore,
  FencingTokenRejectedError,
  type IdempotencyStore,
  jsonPayload,
  type ManualClock,
  type RunGuard,
  type RunStateStore,
  readJson,
} from '../src/index.js';

interface Suite {
  /** The factory's backend reads time from the clock it is given. @default true */
  controlsTime?: boolean;
}

export function describeRunGuardConformance(
  name: string,
  make: (clock: ManualClock) => RunGuard,
  suite: Suite = {},
) {
  describe(`RunGuard conformance: ${name}`, () => {
    test('one owner at a time; tokens strictly increase and are never reused', async () => {
      const guard = make(createManualClock());
      const a = await guard.acquire('job', 'A', 1_000);
      expect(a).toBeDefined();
      expect(await guard.acquire('job', 'B', 1_000)).toBeUndefined();
      expect(await guard.release(a!)).toBe(true);
      const b = await guard.acquire('job', 'B', 1_000);
      expect(b!.token).toBeGreaterThan(a!.token);
      // other keys are independent
      expect(await guard.acquire('other', 'A', 1_000)).toBeDefined();
    });

    test('renew keeps the token and extends the lease; a released or foreign lease cannot be renewed', async () => {
      const clock = createManualClock();
      const guard = make(clock);
      const a = (await guard.acquire('job', 'A', 1_000))!;
      await clock.advance(600);
      const renewed = (await guard.renew(a, 1_000))!;
      expect(renewed.token).toBe(a.token);
      expect(renewed.expiresAt).toBeGreaterThan(a.expiresAt);
      expect(await guard.renew({ ...a, owner: 'B' }, 1_000)).toBeUndefined();
      expect(await guard.release(renewed)).toBe(true);
      expect(await guard.renew(renewed, 1_000)).toBeUndefined();
      expect(await guard.release(renewed)).toBe(false);
    });

    test.skipIf(suite.controlsTime === false)(
      'a lapsed guard can be taken over, and the old lease is lost',
      async () => {
        const clock = createManualClock();
        const guard = make(clock);
        const a = (await guard.acquire('job', 'A', 1_000))!;
        await clock.advance(1_001);
        const b = (await guard.acquire('job', 'B', 1_000))!;
        expect(b.token).toBeGreaterThan(a.token);
        expect(await guard.renew(a, 1_000)).toBeUndefined();
        expect(await guard.release(a)).toBe(false);
      },
    );
  });
}

export function describeFencingStoreConformance(name: string, make: () => FencingStore) {
  describe(`FencingStore conformance: ${name}`, () => {
    const commit = (token: number, resource = 'res') => ({
      resource,
      token,
      runId: `r${token}`,
      nodeId: 'n',
      output: EMPTY_PAYLOAD,
    });

    test('accepts equal or higher tokens; rejects lower ones with FencingTokenRejectedError', async () => {
      const store = make();
      await store.commit(commit(1));
      await store.commit(commit(1));
      await store.commit(commit(5));
      let err: unknown;
      try {
        await store.commit(commit(4));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(FencingTokenRejectedError);
      expect((err as FencingTokenRejectedError).token).toBe(4);
      expect((err as FencingTokenRejectedError).highestToken).toBe(5);
      expect((err as FencingTokenRejectedError).code).toBe('MOCRA_ERR_DAG_FENCING_REJECTED');
      // resources are fenced separately
      await store.commit(commit(1, 'other'));
    });
  });
}

export function describeRunStateStoreConformance(name: string, make: () => RunStateStore) {
  describe(`RunStateStore conformance: ${name}`, () => {
    test('saves entries one by one, loads them all, clears them', async () => {
      const store = make();
      expect(await store.load('k')).toBeUndefined();
      await store.save('k', { runId: 'r1', fencingToken: 3, nodeId: 'a', output: jsonPayload({ a: 1 }) });
      await store.save('k', { runId: 'r1', fencingToken: 3, nodeId: 'b', output: EMPTY_PAYLOAD });
      const cp = (await store.load('k'))!;
      expect(cp.runId).toBe('r1');
      expect(cp.fencingToken).toBe(3);
      expect([...cp.outputs.keys()].sort()).toEqual(['a', 'b']);
      expect(readJson(cp.outputs.get('a')!)).toEqual({ a: 1 });
      expect(await store.load('other')).toBeUndefined();
      await store.clear('k', 3);
      expect(await store.load('k')).toBeUndefined();
    });

    test('rejects a save or clear with a token lower than one already seen', async () => {
      const store = make();
      await store.save('k', { runId: 'new', fencingToken: 7, nodeId: 'a', output: EMPTY_PAYLOAD });
      await expect(
        store.save('k', { runId: 'old', fencingToken: 6, nodeId: 'b', output: EMPTY_PAYLOAD }),
      ).rejects.toBeInstanceOf(FencingTokenRejectedError);
      await expect(store.clear('k', 6)).rejects.toBeInstanceOf(FencingTokenRejectedError);
      expect([...(await store.load('k'))!.outputs.keys()]).toEqual(['a']);
    });
  });
}

export function describeIdempotencyStoreConformance(
  name: string,
  make: (clock: ManualClock) => IdempotencyStore,
) {
  describe(`IdempotencyStore conformance: ${name}`, () => {
    test('claim → busy for others → complete → done for everyone; waiters get the output', async () => {
      const store = make(createManualClock());
      expect(await store.begin('k', 'A', 1_000)).toEqual({ status: 'claimed' });
      expect(await store.begin('k', 'B', 1_000)).toEqual({ status: 'busy' });
      const waiting = store.wait('k', new AbortController().signal);
      await store.complete('k', 'A', jsonPayload(5));
      expect(readJson((await waiting)!)).toBe(5);
      const done = await store.begin('k', 'C', 1_000);
      expect(done.status).toBe('done');
      expect(readJson((done as { output: typeof EMPTY_PAYLOAD }).output)).toBe(5);
      expect(readJson((await store.wait('k', new AbortController().signal))!)).toBe(5);
    });

    test('abandon wakes waiters with undefined and frees the key', async () => {
      const store = make(createManualClock());
      await store.begin('k', 'A', 1_000);
      const waiting = store.wait('k', new AbortController().signal);
      await store.abandon('k', 'A');
      expect(await waiting).toBeUndefined();
      expect(await store.begin('k', 'B', 1_000)).toEqual({ status: 'claimed' });
      // abandoning someone else's claim does nothing
      await store.abandon('k', 'A');
      expect(await store.begin('k', 'C', 1_000)).toEqual({ status: 'busy' });
    });

    test('a claim lapses after its TTL; waiting can be aborted', async () => {
      const clock = createManualClock();
      const store = make(clock);
      await store.begin('k', 'A', 1_000);
      const waiting = store.wait('k', new AbortController().signal);
      await clock.advance(1_000);
      expect(await waiting).toBeUndefined();
      expect(await store.begin('k', 'B', 1_000)).toEqual({ status: 'claimed' });
      const controller = new AbortController();
      const aborted = store.wait('k', controller.signal);
      controller.abort();
      expect(await aborted).toBeUndefined();
      expect(await store.wait('absent', new AbortController().signal)).toBeUndefined();
    });
  });
}
