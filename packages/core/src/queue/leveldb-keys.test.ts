import { describe, expect, test } from 'vitest';
import { composeKey, KeyArena, priorityCode, readSeq, topicPrefix, writeSeq } from './leveldb-keys.js';

describe('leveldb keys', () => {
  test('seq round-trips big-endian across the 32-bit boundary and up to 2^53 - 1', () => {
    for (const seq of [0, 1, 255, 256, 0xffff_ffff, 0x1_0000_0000, 0x1_2345_6789, Number.MAX_SAFE_INTEGER]) {
      const out = new Uint8Array(10);
      writeSeq(out, 1, seq);
      expect(readSeq(out, 1)).toBe(seq);
      // Big-endian: the same bytes a DataView writes.
      const ref = new Uint8Array(8);
      new DataView(ref.buffer).setUint32(0, Math.floor(seq / 0x1_0000_0000));
      new DataView(ref.buffer).setUint32(4, seq >>> 0);
      expect([...out.subarray(1, 9)]).toEqual([...ref]);
    }
  });

  test('keys of one lane sort in seq order, bytewise', () => {
    const prefix = topicPrefix('m', 'request');
    const seqs = [5, 256, 0x1_0000_0000, 3, 0xffff_ffff];
    const keys = seqs.map((seq) => composeKey(prefix, undefined, seq));
    const sorted = [...keys].sort((a, b) => Buffer.compare(a, b)).map((k) => readSeq(k, prefix.length));
    expect(sorted).toEqual([...seqs].sort((a, b) => a - b));
  });

  test('an arena composes the same bytes as composeKey, in shared blocks, never overwriting a key it gave out', () => {
    const arena = new KeyArena();
    const prefix = topicPrefix('m', 'request');
    const lane = priorityCode(3);
    const given: { key: Uint8Array; seq: number }[] = [];
    // Enough keys to fill several blocks.
    for (let seq = 0; seq < 10_000; seq++)
      given.push({ key: arena.compose(prefix, seq % 2 ? lane : undefined, seq), seq });
    for (const { key, seq } of given) {
      expect([...key]).toEqual([...composeKey(prefix, seq % 2 ? lane : undefined, seq)]);
    }
    const blocks = new Set(given.map(({ key }) => key.buffer));
    expect(blocks.size).toBeGreaterThan(1);
    expect(blocks.size).toBeLessThan(given.length / 100);
  });
});
