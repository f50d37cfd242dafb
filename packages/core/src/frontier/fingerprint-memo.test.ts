import { describe, expect, test } from 'vitest';
import { fingerprintParts } from './fingerprint.js';
import { FingerprintMemo } from './fingerprint-memo.js';

describe('FingerprintMemo', () => {
  test('answers what fingerprintParts computes, for new, repeated and forgotten keys alike', () => {
    // Two keys per generation: the 40 URLs below turn the generations over many times.
    const memo = new FingerprintMemo(2);
    const urls = Array.from({ length: 40 }, (_, i) => `http://e.com/p/${i % 7}.html?i=${i % 5}`);
    for (const method of ['GET', 'HEAD']) {
      for (const url of [...urls, ...urls.reverse()]) {
        expect(memo.fingerprint(method, url, undefined)).toBe(fingerprintParts(method, url, undefined));
      }
    }
  });

  test('keeps method and body apart: a body is hashed, never answered from the memo', () => {
    const memo = new FingerprintMemo();
    const url = 'http://e.com/search';
    const get = memo.fingerprint('GET', url, undefined);
    expect(memo.fingerprint('POST', url, undefined)).not.toBe(get);
    expect(memo.fingerprint('GET', url, '')).toBe(get); // an empty body is no body
    expect(memo.fingerprint('POST', url, 'q=1')).toBe(fingerprintParts('POST', url, 'q=1'));
    const bytes = new TextEncoder().encode('q=2');
    expect(memo.fingerprint('POST', url, bytes)).toBe(fingerprintParts('POST', url, bytes));
    expect(memo.fingerprint('POST', url, 'q=1')).not.toBe(memo.fingerprint('POST', url, 'q=2'));
  });
});
