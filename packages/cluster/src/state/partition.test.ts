import { describe, expect, test } from 'vitest';
import { partitionOf, partitionsOwnedBy, rendezvousOwner } from './partition.js';

const members = (n: number) => Array.from({ length: n }, (_, i) => `node-${i + 1}`);

describe('rendezvous partition ownership', () => {
  test('deterministic, exactly one owner per partition, independent of member order', () => {
    const m = members(5);
    const reversed = [...m].reverse();
    const owned = new Map<string, number>();
    for (let p = 0; p < 256; p++) {
      const o = rendezvousOwner(p, m);
      expect(o).toBe(rendezvousOwner(p, reversed));
      owned.set(o!, (owned.get(o!) ?? 0) + 1);
    }
    expect([...owned.values()].reduce((a, b) => a + b, 0)).toBe(256);
    const union = m.flatMap((id) => partitionsOwnedBy(id, m)).sort((a, b) => a - b);
    expect(union).toEqual(Array.from({ length: 256 }, (_, i) => i));
  });

  test('load is roughly even', () => {
    const m = members(4);
    for (const id of m) {
      const n = partitionsOwnedBy(id, m, 1024).length;
      expect(n).toBeGreaterThan(1024 / 4 / 1.5);
      expect(n).toBeLessThan((1024 / 4) * 1.5);
    }
  });

  test('a member joining takes about 1/N of the partitions, and only partitions it now owns move', () => {
    for (const n of [2, 3, 5, 8]) {
      const before = members(n);
      const after = [...before, 'newcomer'];
      let moved = 0;
      for (let p = 0; p < 1024; p++) {
        const a = rendezvousOwner(p, before);
        const b = rendezvousOwner(p, after);
        if (a !== b) {
          moved++;
          expect(b).toBe('newcomer');
        }
      }
      const expected = 1024 / (n + 1);
      expect(moved).toBeGreaterThan(expected * 0.6);
      expect(moved).toBeLessThan(expected * 1.4);
    }
  });

  test('a member leaving moves only its own partitions', () => {
    const before = members(5);
    const after = before.filter((m) => m !== 'node-3');
    for (let p = 0; p < 512; p++) {
      const a = rendezvousOwner(p, before);
      if (a !== 'node-3') expect(rendezvousOwner(p, after)).toBe(a);
    }
  });

  test('partitionOf is stable and in range; no members means no owner', () => {
    expect(partitionOf('account-42')).toBe(partitionOf('account-42'));
    for (let i = 0; i < 200; i++) {
      const p = partitionOf(`acct-${i}`, 16);
      expect(p).toBeGreaterThanOrEqual(0);
      expect(p).toBeLessThan(16);
    }
    expect(rendezvousOwner(3, [])).toBeUndefined();
    expect(() => partitionOf('x', 0)).toThrow(RangeError);
  });
});
