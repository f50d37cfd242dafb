import { describe, expect, test } from 'vitest';
import { fingerprintParts } from '../fingerprint.js';
import { KEY_BYTES, keyOf, keyWordsOf } from './fingerprint-key.js';

describe('fingerprint keys', () => {
  test('keyWordsOf gives the words of the bytes keyOf writes (the memory and disk phases agree)', () => {
    const keys = ['http://e.com/a', 'http://e.com/b'].map((u) => fingerprintParts('GET', u, undefined));
    keys.push('a user dedupKey', 'x'.repeat(27)); // not fingerprints: hashed first
    const out = new Uint8Array(KEY_BYTES * 2);
    for (const key of keys) {
      const fromBytes = new Uint32Array(4);
      const words = new Uint32Array(4);
      keyOf(key, out, KEY_BYTES, fromBytes);
      keyWordsOf(key, words);
      expect([...words]).toEqual([...fromBytes]);
      const view = new DataView(out.buffer, KEY_BYTES);
      expect([0, 4, 8, 12].map((at) => view.getUint32(at, true))).toEqual([...words]);
      expect([...out.subarray(0, KEY_BYTES)].every((b) => b === 0)).toBe(true); // only at `offset`
    }
  });

  test('a fingerprint key is its sha1 bytes, the last four folded into the first four', () => {
    const fingerprint = fingerprintParts('GET', 'http://e.com/a', undefined);
    const digest = Buffer.from(fingerprint, 'base64url');
    const expected = digest.subarray(0, KEY_BYTES);
    for (let i = 0; i < 4; i++) expected[i]! ^= digest[16 + i]!;
    const out = new Uint8Array(KEY_BYTES);
    keyOf(fingerprint, out, 0, new Uint32Array(4));
    expect(Buffer.from(out).equals(expected)).toBe(true);
  });
});
