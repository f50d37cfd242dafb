import { describe, expect, test } from 'vitest';
import { Request } from '../model/request.js';
import { fingerprintRequest, normalizeUrl, parseHttpUrl } from './fingerprint.js';

describe('normalizeUrl', () => {
  test.each([
    ['HTTP://Example.COM/a', 'http://example.com/a'],
    ['http://example.com:80/a', 'http://example.com/a'],
    ['https://example.com:443/a', 'https://example.com/a'],
    ['https://example.com:8443/a', 'https://example.com:8443/a'],
    ['http://example.com', 'http://example.com/'],
    ['http://example.com/a#section', 'http://example.com/a'],
    ['http://example.com/a/../b/./c', 'http://example.com/b/c'],
    ['http://example.com/a?b=2&a=1', 'http://example.com/a?b=2&a=1'],
    ['http://example.com/x?', 'http://example.com/x'],
    ['http://example.com/x?#top', 'http://example.com/x'],
    ['http://example.com/x#', 'http://example.com/x'],
  ])('%s → %s', (input, expected) => {
    expect(normalizeUrl(input)).toBe(expected);
  });

  test('optional query sorting (stable) and parameter stripping', () => {
    expect(normalizeUrl('http://e.com/?b=2&a=1&b=1', { sortQuery: true })).toBe('http://e.com/?a=1&b=2&b=1');
    expect(
      normalizeUrl('http://e.com/?utm_source=x&id=3&utm_medium=y', {
        stripParams: ['utm_source', 'utm_medium'],
      }),
    ).toBe('http://e.com/?id=3');
    expect(normalizeUrl('http://e.com/a?utm_source=x', { stripParams: ['utm_source'] })).toBe(
      'http://e.com/a',
    );
    expect(normalizeUrl('http://e.com/?b=1&a%20b=2&a+b=3', { sortQuery: true })).toBe(
      'http://e.com/?a%20b=2&a+b=3&b=1',
    );
  });

  test('sorting and stripping never re-encode: different resources stay different', () => {
    const both = { sortQuery: true, stripParams: ['utm_source'] };
    for (const [a, b] of [
      ['http://e.com/?q=a+b', 'http://e.com/?q=a%20b'],
      ['http://e.com/?x=%2F', 'http://e.com/?x=/'],
      ['http://e.com/?a', 'http://e.com/?a='],
    ] as const) {
      expect(normalizeUrl(a, both)).toBe(a);
      expect(normalizeUrl(a, both)).not.toBe(normalizeUrl(b, both));
    }
  });

  test('rejects what cannot be fetched', () => {
    for (const bad of [
      'not a url',
      '/relative/path',
      'mailto:a@b.c',
      'javascript:void(0)',
      'ftp://e.com/f',
    ]) {
      expect(() => parseHttpUrl(bad)).toThrow(expect.objectContaining({ code: 'MOCRA_ERR_INVALID_URL' }));
    }
    expect(parseHttpUrl('../x', 'http://e.com/a/b').href).toBe('http://e.com/x');
  });
});

describe('fingerprintRequest', () => {
  const fp = (url: string, init?: ConstructorParameters<typeof Request>[1]) =>
    fingerprintRequest(new Request(url, init));

  test('equal for the same resource written differently', () => {
    expect(fp('HTTP://Example.com:80/a#x')).toBe(fp('http://example.com/a'));
    expect(fp('http://e.com/?b=1&a=2', {})).not.toBe(fp('http://e.com/?a=2&b=1'));
    expect(fingerprintRequest(new Request('http://e.com/?b=1&a=2'), { sortQuery: true })).toBe(
      fingerprintRequest(new Request('http://e.com/?a=2&b=1'), { sortQuery: true }),
    );
  });

  test('method and body are part of it', () => {
    expect(fp('http://e.com/a', { method: 'POST' })).not.toBe(fp('http://e.com/a'));
    expect(fp('http://e.com/a', { method: 'post', body: 'x=1' })).toBe(
      fp('http://e.com/a', { method: 'POST', body: 'x=1' }),
    );
    expect(fp('http://e.com/a', { method: 'POST', body: 'x=1' })).not.toBe(
      fp('http://e.com/a', { method: 'POST', body: 'x=2' }),
    );
    expect(fp('http://e.com/a', { method: 'POST', body: 'x=1' })).toBe(
      fp('http://e.com/a', { method: 'POST', body: Buffer.from('x=1') }),
    );
  });

  test('is a short url-safe string', () => {
    expect(fp('http://e.com/a')).toMatch(/^[A-Za-z0-9_-]{27}$/);
  });
});
