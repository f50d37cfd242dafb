// The bounded-memory dedup set: its parts (key encoding, exact table, Bloom filter) and the
// tiered deduplicator across its memory → disk switch, persistence and the frontier's use.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { ScalableBloomFilter } from '../src/frontier/dedup/bloom-filter.js';
import { KEY_BYTES, keyOf } from '../src/frontier/dedup/fingerprint-key.js';
import { FingerprintSet } from '../src/frontier/dedup/fingerprint-set.js';
import { TieredDeduplicator } from '../src/frontier/dedup/tiered-deduplicator.js';
import { fingerprintParts } from '../src/frontier/fingerprint.js';
import { Frontier } from '../src/frontier/frontier.js';
import { Request } from '../src/model/request.js';

const root = await mkdtemp(path.join(tmpdir(), 'mocra-dedup-test-'));
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const fp = (i: number) => fingerprintParts('GET', `http://example.com/page/${i}`, undefined);
const words = (s: string) => {
  const w = new Uint32Array(4);
  keyOf(s, new Uint8Array(KEY_BYTES), 0, w);
  return [...w];
};

describe('parts', () => {
  test('keyOf: a fingerprint decodes to its own 128 bits; other strings are hashed; distinct stays distinct', () => {
    expect(words(fp(1))).toEqual(words(fp(1)));
    expect(words(fp(1))).not.toEqual(words(fp(2)));
    const a = 'A'.repeat(22);
    // Two keys that differ only in their last characters still differ (the tail is folded in).
    expect(words(`${a}AAAAA`)).not.toEqual(words(`${a}AAAAE`));
    // Non-zero padding bits: not a canonical fingerprint, so hashed instead of decoded.
    expect(words(`${a}AAAAA`)).not.toEqual(words(`${a}AAAAB`));
    expect(words('user-key')).toEqual(words('user-key'));
    expect(words('user-key')).not.toEqual(words('user-kez'));
    expect(words('!'.repeat(27))).toEqual(words('!'.repeat(27))); // not base64url: hashed
  });

  test('FingerprintSet agrees with a Set over 20k keys with repeats, across growth', () => {
    const set = new FingerprintSet();
    const ref = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const key = fp(i % 12_000);
      const [a, b, c, d] = words(key) as [number, number, number, number];
      expect(set.add(a, b, c, d)).toBe(!ref.has(key));
      ref.add(key);
    }
    expect(set.size).toBe(12_000);
    expect(set.has(...(words(fp(11_999)) as [number, number, number, number]))).toBe(true);
    expect(set.has(...(words(fp(12_000)) as [number, number, number, number]))).toBe(false);
    expect([...set.entries()]).toHaveLength(12_000);
    expect(set.add(0, 0, 0, 0)).toBe(true); // the all-zero key is stored too
    expect(set.has(0, 0, 0, 0)).toBe(true);
  });

  test('FingerprintSet: probes wrap past the last slot, and the load stays between 1/2 and 3/4', () => {
    const set = new FingerprintSet();
    // Keys whose first word is near 2^32 all start at the last slots: their probes wrap to slot 0.
    for (let i = 0; i < 600; i++) expect(set.add(0xffffffff - i, i, 7, 9)).toBe(true);
    for (let i = 0; i < 600; i++) expect(set.has(0xffffffff - i, i, 7, 9)).toBe(true);
    expect(set.has(0xffffffff, 1, 7, 9)).toBe(false);
    expect(set.add(0xffffffff - 3, 3, 7, 9)).toBe(false);
    const random = new Uint32Array(randomBytes(300_000 * 16).buffer);
    for (let i = 0; i < 300_000; i++) {
      set.add(random[4 * i]!, random[4 * i + 1]!, random[4 * i + 2]!, random[4 * i + 3]!);
      if (i % 50_000 === 49_999) {
        const load = set.size / set.slots;
        expect(load).toBeGreaterThanOrEqual(0.5 - 0.01);
        expect(load).toBeLessThanOrEqual(0.75);
      }
    }
    expect(set.size).toBe(300_600);
    // The wrapped keys survived every growth.
    for (let i = 0; i < 600; i++) expect(set.has(0xffffffff - i, i, 7, 9)).toBe(true);
    expect(set.byteLength).toBe(set.slots * 16);
  });

  test('ScalableBloomFilter: no false negatives, false positives near the target as it grows', () => {
    const N = 60_000;
    const bloom = new ScalableBloomFilter({ initialCapacity: 4096, falsePositiveRate: 0.01 });
    const added = new Uint32Array(randomBytes(N * 8).buffer);
    const fresh = new Uint32Array(randomBytes(N * 8).buffer);
    for (let i = 0; i < N; i++) bloom.add(added[2 * i]!, added[2 * i + 1]!);
    let misses = 0;
    for (let i = 0; i < N; i++) if (!bloom.mightHave(added[2 * i]!, added[2 * i + 1]!)) misses++;
    expect(misses).toBe(0);
    let positives = 0;
    for (let i = 0; i < N; i++) if (bloom.mightHave(fresh[2 * i]!, fresh[2 * i + 1]!)) positives++;
    expect(positives / N).toBeLessThan(0.02);
    expect(bloom.count).toBe(N);
    // ~1.2–3 bytes a key at 1 %, far from the ~80 bytes of a string in a Set.
    expect(bloom.byteLength / N).toBeLessThan(3);
  });
});

describe('TieredDeduplicator', () => {
  test('memory phase: synchronous answers, repeats inside one call are new only once', () => {
    const dedup = new TieredDeduplicator();
    const first = dedup.markSeen([fp(1), fp(2), fp(1)]);
    expect(first).toEqual([true, true, false]);
    expect(dedup.markSeen([fp(2), fp(3)])).toEqual([false, true]);
    expect(dedup.size()).toBe(3);
    expect(dedup.stats().phase).toBe('memory');
  });

  test('spills to a temporary LevelDB past memoryEntries and stays exact; the directory goes on close', async () => {
    const dedup = new TieredDeduplicator({ memoryEntries: 1000, recentEntries: 500 });
    const ref = new Set<number>();
    // 12k calls' worth of keys, half of them repeats of old keys (beyond the recent table).
    for (let batch = 0; batch < 120; batch++) {
      const ids = Array.from({ length: 100 }, (_, i) =>
        i % 2 === 0 ? batch * 50 + i : (batch * 37 + i * 11) % 3000,
      );
      const answer = await dedup.markSeen(ids.map(fp));
      const expected = ids.map((id, i) => {
        const fresh = !ref.has(id) && ids.indexOf(id) === i;
        return fresh;
      });
      for (const id of ids) ref.add(id);
      expect(answer).toEqual(expected);
    }
    const stats = dedup.stats();
    expect(stats.phase).toBe('disk');
    expect(stats.size).toBe(ref.size);
    expect(stats.diskReads).toBeGreaterThan(0);
    expect(stats.dir).toBeDefined();
    expect(existsSync(stats.dir!)).toBe(true);
    await dedup.close();
    expect(existsSync(stats.dir!)).toBe(false);
    await expect(dedup.markSeen([fp(1)])).rejects.toMatchObject({ code: 'MOCRA_ERR_STORE_FAILED' });
  });

  test('the switch to disk does not wait for the memory keys to be written: they answer from memory meanwhile', async () => {
    const dedup = new TieredDeduplicator({ memoryEntries: 200_000 });
    const old = Array.from({ length: 200_000 }, (_, i) => fp(i));
    for (let i = 0; i < old.length; i += 10_000) dedup.markSeen(old.slice(i, i + 10_000));
    // This call switches to disk; it resolves after one write of its own, not the 20 batches of the copy.
    const mixed = [fp(5), fp(199_999), fp(300_000), fp(5)];
    expect(await dedup.markSeen(mixed)).toEqual([false, false, true, false]);
    expect(dedup.stats()).toMatchObject({ phase: 'disk', size: 200_001 });
    expect(dedup.stats().copying).toBe(200_000);
    const copyingBytes = dedup.stats().memoryBytes;
    // Bounded wait for the background copy (200k keys; well under a second here).
    for (let i = 0; i < 500 && dedup.stats().copying > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(dedup.stats().copying).toBe(0);
    expect(dedup.stats().memoryBytes).toBeLessThan(copyingBytes);
    // The old keys are answered from disk now: every one still seen, new ones still new.
    const sample = Array.from({ length: 2_000 }, (_, i) => fp(i * 100));
    expect((await dedup.markSeen(sample)).every((fresh) => !fresh)).toBe(true);
    expect(await dedup.markSeen([fp(300_001), fp(300_000)])).toEqual([true, false]);
    expect(dedup.stats().size).toBe(200_002);
    await dedup.close();
  });

  test('memory stays bounded in the disk phase: Bloom bits plus two recent tables', async () => {
    const dedup = new TieredDeduplicator({ memoryEntries: 1000, recentEntries: 2048 });
    for (let i = 0; i < 50_000; i += 500) {
      await dedup.markSeen(Array.from({ length: 500 }, (_, j) => fp(i + j)));
    }
    const { memoryBytes, size } = dedup.stats();
    expect(size).toBe(50_000);
    // 2 recent tables of ≤ 4096 slots × 16 B, plus ~1.5 B per key of Bloom bits.
    expect(memoryBytes).toBeLessThan(2 * 4096 * 16 + 50_000 * 3);
    await dedup.close();
  });

  test('overlapping calls never both admit one key', async () => {
    const dedup = new TieredDeduplicator({ memoryEntries: 10 });
    const keys = Array.from({ length: 50 }, (_, i) => fp(i));
    const answers = await Promise.all([dedup.markSeen(keys), dedup.markSeen([...keys].reverse())]);
    const admitted = answers.flatMap((a) => a.filter(Boolean));
    expect(admitted).toHaveLength(50);
    await dedup.close();
  });

  test('with a directory it is persistent: a reopened set remembers; a second opener is refused', async () => {
    const dir = path.join(root, 'persist');
    const a = await new TieredDeduplicator({ dir }).open();
    expect(await a.markSeen([fp(1), fp(2)])).toEqual([true, true]);
    await expect(new TieredDeduplicator({ dir }).open()).rejects.toMatchObject({
      code: 'MOCRA_ERR_STORE_LOCKED',
    });
    await a.close();
    expect(existsSync(dir)).toBe(true);
    const b = await new TieredDeduplicator({ dir }).open();
    expect(b.size()).toBe(2);
    expect(await b.markSeen([fp(2), fp(3)])).toEqual([false, true]);
    await b.close();
  });

  test('bad options are typed errors', () => {
    expect(() => new TieredDeduplicator({ memoryEntries: 0 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => new TieredDeduplicator({ falsePositiveRate: 1 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });

  test('behind the frontier: one URL written many ways is admitted once, also after the spill', async () => {
    const dedup = new TieredDeduplicator({ memoryEntries: 5 });
    const frontier = new Frontier({
      deduplicator: dedup,
      fingerprint: { sortQuery: true, stripParams: ['utm_source'] },
    });
    const spellings = [
      'http://Example.com/a?b=2&a=1',
      'HTTP://example.COM:80/a?a=1&b=2#frag',
      'http://example.com/a?utm_source=x&a=1&b=2',
    ];
    const filler = Array.from({ length: 20 }, (_, i) => new Request(`http://example.com/filler/${i}`));
    const r1 = await frontier.admit([...filler, new Request(spellings[0]!)]);
    expect(r1.admitted).toHaveLength(21);
    expect(dedup.stats().phase).toBe('disk');
    const r2 = await frontier.admit(spellings.slice(1).map((u) => new Request(u)));
    expect(r2.admitted).toEqual([]);
    expect(
      (await frontier.admit([new Request('http://example.com/a', { method: 'POST', body: 'x' })])).admitted,
    ).toHaveLength(1);
    await frontier.close();
  });
});
