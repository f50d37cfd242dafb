import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { markSeenThroughCache, SeenCache } from './seen-cache.js';

const fp = (s: string) => createHash('sha1').update(s).digest('base64url').slice(0, 27);

/** A shared set as the remote deduplicators keep it: first marker wins, its claim gets "new" again. */
function remoteSet() {
  const marked = new Map<string, string>();
  const asked: string[][] = [];
  const remote = (claim: string | undefined) => async (fps: string[]) => {
    asked.push(fps);
    return fps.map((f) => {
      const by = marked.get(f);
      if (by === undefined) {
        marked.set(f, claim ?? '');
        return true;
      }
      return claim !== undefined && by === claim;
    });
  };
  return { remote, asked };
}

describe('SeenCache', () => {
  test('a fingerprint known seen is answered locally; repeats in a batch are asked once and are false after the first', async () => {
    const cache = new SeenCache(100);
    const { remote, asked } = remoteSet();
    const [a, b] = [fp('a'), fp('b')];
    expect(await markSeenThroughCache([a, b, a], {}, cache, remote(undefined))).toEqual([true, true, false]);
    expect(asked).toEqual([[a, b]]);
    expect(await markSeenThroughCache([a, b], {}, cache, remote(undefined))).toEqual([false, false]);
    expect(asked).toHaveLength(1);
  });

  test('a claim gets its own fingerprints from the shared set again until it is released', async () => {
    const cache = new SeenCache(100);
    const { remote, asked } = remoteSet();
    const x = fp('x');
    expect(await markSeenThroughCache([x], { claim: 'm1' }, cache, remote('m1'))).toEqual([true]);
    // The same message again (redelivered before it published): new again, from the shared set.
    expect(await markSeenThroughCache([x], { claim: 'm1' }, cache, remote('m1'))).toEqual([true]);
    // Another message while m1 holds it: one lookup, seen, known from then on.
    expect(await markSeenThroughCache([x], { claim: 'm2' }, cache, remote('m2'))).toEqual([false]);
    expect(asked).toHaveLength(3);
    expect(await markSeenThroughCache([x], { claim: 'm3' }, cache, remote('m3'))).toEqual([false]);
    expect(asked).toHaveLength(3);
    // Released: m1's fingerprints are plainly seen, also for m1.
    const y = fp('y');
    await markSeenThroughCache([y], { claim: 'm4' }, cache, remote('m4'));
    cache.release('m4');
    expect(cache.claimed('m4')).toBeUndefined();
    expect(await markSeenThroughCache([y], { claim: 'm4' }, cache, remote('m4'))).toEqual([false]);
    expect(asked).toHaveLength(4);
  });

  test('bounded: past capacity the older generation is dropped, and a dropped key only costs a lookup', async () => {
    const cache = new SeenCache(2);
    const { remote, asked } = remoteSet();
    const keys = ['1', '2', '3', '4', '5'].map(fp);
    for (const k of keys) await markSeenThroughCache([k], {}, cache, remote(undefined));
    expect(asked).toHaveLength(5);
    expect(cache.has(keys[4]!)).toBe(true);
    expect(cache.has(keys[0]!)).toBe(false);
    expect(await markSeenThroughCache([keys[0]!], {}, cache, remote(undefined))).toEqual([false]);
    expect(asked).toHaveLength(6);
  });

  test('non-fingerprint dedup keys work too; capacity 0 caches nothing', async () => {
    const cache = new SeenCache(10);
    const { remote } = remoteSet();
    await markSeenThroughCache(['user-key:42'], {}, cache, remote(undefined));
    expect(cache.has('user-key:42')).toBe(true);
    expect(cache.has('user-key:43')).toBe(false);
    const none = new SeenCache(0);
    await markSeenThroughCache(['k'], {}, none, remote(undefined));
    expect(none.has('k')).toBe(false);
  });
});
