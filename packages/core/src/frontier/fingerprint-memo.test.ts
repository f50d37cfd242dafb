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

  test('a crawl whose links are nearly all new holds nothing most of the time; one that meets its links again keeps them', () => {
    const fresh = new FingerprintMemo(100);
    const held: number[] = [];
    for (let i = 0; i < 2_000; i++) {
      const url = `http://e.com/p/${i}.html`;
      expect(fresh.fingerprint('GET', url, undefined)).toBe(fingerprintParts('GET', url, undefined));
      held.push(fresh.size);
    }
    // Two generations of 100 with no hit, then a rest of 800 misses, then it starts over.
    expect(Math.max(...held)).toBe(200);
    expect(held.filter((n) => n === 0).length).toBeGreaterThan(1_500);
    const met = new FingerprintMemo(100);
    for (let i = 0; i < 2_000; i++) met.fingerprint('GET', `http://e.com/p/${i % 150}.html`, undefined);
    expect(met.size).toBeGreaterThanOrEqual(100);
  });
});
