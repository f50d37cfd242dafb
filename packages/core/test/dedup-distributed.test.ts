// The shared deduplicators (Redis hashes, NATS KV) on the real local servers. Each "worker" is
// its own instance with its own connection, as separate processes would be.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, test } from 'vitest';
import { createNatsDeduplicator, type NatsDeduplicator } from '../src/frontier/dedup/nats-deduplicator.js';
import { createRedisDeduplicator, type RedisDeduplicator } from '../src/frontier/dedup/redis-deduplicator.js';
import type { Deduplicator } from '../src/frontier/dedup.js';
import { fingerprintRequest } from '../src/frontier/fingerprint.js';
import { Request } from '../src/model/request.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const NATS_URL = process.env.MOCRA_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

const fp = (i: number) => fingerprintRequest(new Request(`http://example.test/page/${i}`));

interface Harness {
  name: string;
  open(scope: string, extra?: { buckets?: number; localCacheSize?: number }): Promise<Deduplicator>;
  destroy(d: Deduplicator): Promise<void>;
}

const harnesses: Harness[] = [
  {
    name: 'redis',
    open: (scope, extra = {}) =>
      createRedisDeduplicator({
        url: REDIS_URL,
        namespace: 'dtest',
        scope,
        keyPrefix: 'mocra-test:dedup:',
        ...extra,
      }),
    destroy: (d) => (d as RedisDeduplicator).destroy(),
  },
  {
    name: 'nats',
    open: (scope, extra = {}) =>
      createNatsDeduplicator({
        servers: NATS_URL,
        namespace: 'dtest',
        scope,
        storage: 'memory',
        ...(extra.localCacheSize === undefined ? {} : { localCacheSize: extra.localCacheSize }),
      }),
    destroy: (d) => (d as NatsDeduplicator).destroy(),
  },
];

for (const h of harnesses) {
  describe(`shared deduplicator: ${h.name}`, () => {
    const open: Deduplicator[] = [];
    const scope = () => `t${randomBytes(5).toString('hex')}`;
    const make = async (s: string, extra?: { buckets?: number; localCacheSize?: number }) => {
      const d = await h.open(s, extra);
      open.push(d);
      return d;
    };
    afterAll(async () => {
      const first = open[0];
      for (const d of open) await d.close();
      void first;
    });

    test('each fingerprint is new exactly once across workers racing on overlapping batches', async () => {
      const s = scope();
      const workers = await Promise.all([make(s), make(s), make(s)]);
      // Worker w marks 0…199 shifted by w*50 in batches of 25: heavy overlap, concurrent.
      const results = await Promise.all(
        workers.map(async (d, w) => {
          const mine: string[] = [];
          for (let start = 0; start < 200; start += 25) {
            const batch = Array.from({ length: 25 }, (_, j) => fp(w * 50 + start + j));
            const fresh = await d.markSeen(batch);
            batch.forEach((f, j) => {
              if (fresh[j]) mine.push(f);
            });
          }
          return mine;
        }),
      );
      const all = results.flat();
      expect(new Set(all).size).toBe(all.length); // nobody got the same one twice
      expect(all.length).toBe(300); // fingerprints 0…299 exist, each admitted once
      expect(await workers[0]!.size()).toBe(300);
      // A fresh worker (no local cache) sees all of them as seen.
      const late = await make(s);
      const again = await late.markSeen(Array.from({ length: 300 }, (_, i) => fp(i)));
      expect(again.every((x) => x === false)).toBe(true);
      await h.destroy(workers[0]!);
    });

    test('a fingerprint repeated in one batch is new only at its first position', async () => {
      const s = scope();
      const d = await make(s);
      expect(await d.markSeen([fp(1), fp(1), fp(2), fp(1)])).toEqual([true, false, true, false]);
      expect(await d.markSeen([fp(2), fp(3)])).toEqual([false, true]);
      // Keys that are not fingerprints (a user's dedupKey) work too.
      expect(await d.markSeen(['isbn:1234', 'isbn:1234', 'isbn:5678'])).toEqual([true, false, true]);
      expect(await d.markSeen(['isbn:1234'])).toEqual([false]);
      await h.destroy(d);
    });

    test('a claim re-admits what it marked (a redelivered message), nobody else does', async () => {
      const s = scope();
      const first = await make(s);
      expect(await first.markSeen([fp(10), fp(11)], { claim: 'msg-1' })).toEqual([true, true]);
      // The process died before publishing; the message is redelivered elsewhere.
      const second = await make(s);
      expect(await second.markSeen([fp(10), fp(11), fp(12)], { claim: 'msg-1' })).toEqual([true, true, true]);
      // Another message, or a worker without a claim, finds them seen.
      expect(await second.markSeen([fp(10), fp(12)], { claim: 'msg-2' })).toEqual([false, false]);
      const third = await make(s);
      expect(await third.markSeen([fp(10), fp(11), fp(12)])).toEqual([false, false, false]);
      // The same process handling the same message again (a nack after a failed publish) too:
      // its local cache does not hide its own claim.
      expect(await first.markSeen([fp(10), fp(12)], { claim: 'msg-1' })).toEqual([true, true]);
      expect(await first.markSeen([fp(10)], { claim: 'msg-3' })).toEqual([false]);
      await h.destroy(first);
    });

    test('a redelivery re-admits what a dead worker claimed, even where the survivor saw those fingerprints as seen', async () => {
      const s = scope();
      const dead = await make(s);
      expect(await dead.markSeen([fp(20), fp(21)], { claim: 'msg-1' })).toEqual([true, true]);
      // The survivor meets the same links on other pages first: seen, and remembered as seen.
      const survivor = await make(s);
      expect(await survivor.markSeen([fp(20), fp(21)], { claim: 'msg-2' })).toEqual([false, false]);
      expect(await survivor.markSeen([fp(20)], { claim: 'msg-3' })).toEqual([false]);
      // Then the dead worker's message reaches it: what that message marked is new to it again.
      expect(
        await survivor.markSeen([fp(20), fp(21), fp(22)], { claim: 'msg-1', redelivered: true }),
      ).toEqual([true, true, true]);
      // Still seen to everyone else.
      expect(await survivor.markSeen([fp(20), fp(22)], { claim: 'msg-4' })).toEqual([false, false]);
      await h.destroy(dead);
    });

    test('scopes are separate sets', async () => {
      const a = await make(scope());
      const b = await make(scope());
      expect(await a.markSeen([fp(1)])).toEqual([true]);
      expect(await b.markSeen([fp(1)])).toEqual([true]);
      await h.destroy(a);
      await h.destroy(b);
    });
  });
}

test('redis: the first worker fixes the bucket layout for the scope', async () => {
  const s = `t${randomBytes(5).toString('hex')}`;
  const a = await createRedisDeduplicator({
    url: REDIS_URL,
    namespace: 'dtest',
    scope: s,
    keyPrefix: 'mocra-test:dedup:',
    buckets: 8,
  });
  const b = await createRedisDeduplicator({
    url: REDIS_URL,
    namespace: 'dtest',
    scope: s,
    keyPrefix: 'mocra-test:dedup:',
    buckets: 1024,
  });
  try {
    expect(a.buckets).toBe(8);
    expect(b.buckets).toBe(8);
    const keys = Array.from({ length: 100 }, (_, i) => fp(i));
    expect((await a.markSeen(keys)).filter(Boolean).length).toBe(100);
    expect((await b.markSeen(keys)).filter(Boolean).length).toBe(0);
  } finally {
    await a.destroy();
    await a.close();
    await b.close();
  }
});

test('bad options are typed errors', async () => {
  await expect(createRedisDeduplicator({ url: REDIS_URL, buckets: 0 })).rejects.toMatchObject({
    code: 'MOCRA_ERR_INVALID_ARGUMENT',
  });
  await expect(createRedisDeduplicator({ url: REDIS_URL, namespace: 'bad name' })).rejects.toMatchObject({
    code: 'MOCRA_ERR_INVALID_ARGUMENT',
  });
  await expect(createRedisDeduplicator({ url: 'redis://127.0.0.1:1' })).rejects.toMatchObject({
    code: 'MOCRA_ERR_BACKEND_UNAVAILABLE',
  });
  await expect(createNatsDeduplicator({ servers: 'nats://127.0.0.1:1' })).rejects.toMatchObject({
    code: 'MOCRA_ERR_BACKEND_UNAVAILABLE',
  });
});

test('redis: a released claim no longer re-admits (its message published what it admitted)', async () => {
  const s = `t${randomBytes(5).toString('hex')}`;
  const opts = { url: REDIS_URL, namespace: 'dtest', scope: s, keyPrefix: 'mocra-test:dedup:' };
  const a = await createRedisDeduplicator(opts);
  const b = await createRedisDeduplicator(opts);
  try {
    expect(await a.markSeen([fp(1), fp(2)], { claim: 'm1' })).toEqual([true, true]);
    expect(await b.markSeen([fp(1)], { claim: 'm1' })).toEqual([true]); // not released yet
    a.releaseClaim('m1'); // batched; close() sends what is pending
    await a.close();
    expect(await b.markSeen([fp(1), fp(2)], { claim: 'm1' })).toEqual([false, false]);
  } finally {
    await b.destroy();
    await a.close();
    await b.close();
  }
});
