import { SeededRandom } from '@mocra/testkit';
import { describe, expect, test } from 'vitest';
import { extractLinks, resolveHref } from './extract-links.js';
import { HrefResolver } from './href-resolver.js';

const BASES = [
  'http://example.com/',
  'http://example.com/dir/page.html?x=1#frag',
  'https://example.com:8443/a/b/',
  'http://user:pw@example.com/d/e',
  'http://[::1]:8080/x/y',
  'http://bücher.example/a/b', // IDN: the base's host is punycoded
  'HTTPS://EXAMPLE.com:443/A/B/c', // default port, upper case: normalized by the parser
  'http://127.0.0.1:8080/p/0.html',
  'http://example.com/a%20b/c%2F/',
];

const PIECES = [
  'a',
  'p',
  'x.html',
  '1',
  '.',
  '..',
  '.a',
  'a.',
  '...',
  '%2e',
  '%2E',
  '.%2e',
  '%41',
  '%zz',
  '%',
  '%2',
  'é',
  '日本',
  '\u00a0',
  '\u3000',
  ' ',
  '\t',
  '\n',
  '\r',
  '\u0000',
  '\u007f',
  '\\',
  ':',
  '@',
  "'",
  '"',
  '<',
  '>',
  '^',
  '`',
  '{',
  '}',
  '|',
  '[',
  ']',
  '~',
  '!',
  '$',
  '&',
  '(',
  ')',
  '*',
  '+',
  ',',
  ';',
  '=',
  '/',
  '/',
  '/',
  '?',
  '#',
  '-',
  '_',
];

const STARTS = [
  '',
  '',
  '',
  '/',
  '/',
  '//',
  '\\',
  '/\\',
  './',
  '../',
  '?',
  '#',
  'http://example.com/',
  'http://example.com',
  'http://example.com:80/',
  'https://example.com:8443/',
  'https://example.com:8443',
  'http://127.0.0.1:8080/',
  'http://[::1]:8080/',
  'http://xn--bcher-kva.example/',
  'HTTP://example.com/',
  'http://EXAMPLE.com/',
  'http://user:pw@example.com/',
  'http:/',
  'http:',
  'https:x',
  'mailto:',
  'javascript:',
  'data:',
  'ftp://example.com/',
  'a:',
  'C:/',
  'c|/',
  '  ',
  '\t/',
  'file:///',
  'ws://example.com/',
];

function corpus(size: number): string[] {
  // Seeded: the corpus is the same on every run.
  const random = new SeededRandom(20261202);
  const pick = <T>(list: readonly T[]): T => list[random.int(list.length)]!;
  const out = [
    '/p/1.html',
    'p/1.html',
    'next.html',
    '/a/b?c=d&e=f',
    '/a/b?c=d#top',
    '/a/b?',
    '/a/b#',
    '/',
    '?q',
    '#f',
    '//host/x',
    '../x',
    './x',
    '/a/../b',
    '/a/./b',
    '/a/%2e%2E/b',
    ' /p/1.html ',
    '/p/\t1.html',
    '/p/1.html\n',
    '/caf%C3%A9',
    '/café',
    '/a b',
    "/it's?q='1'",
    '/a/b:c',
    'a:b',
    'a/b:c',
    'http://example.com/p?x=1',
    'http://bücher.example/x',
    'https://example.com:8443/x',
  ];
  while (out.length < size) {
    let s = pick(STARTS);
    const n = random.range(1, 6);
    for (let i = 0; i < n; i++) s += pick(PIECES);
    out.push(s);
  }
  return out;
}

/** What the URL parser makes of an href on a page at `base`: the link's url, or undefined. */
function expected(href: string, base: URL): string | undefined {
  const parsed = resolveHref(href, base);
  if (parsed === undefined) return undefined;
  const at = parsed.href.indexOf('#');
  return at < 0 ? parsed.href : parsed.href.slice(0, at);
}

/** Strips what the URL parser strips around an href: C0 controls and spaces. */
function trim(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && s.charCodeAt(start) <= 0x20) start++;
  while (end > start && s.charCodeAt(end - 1) <= 0x20) end--;
  return s.slice(start, end);
}
const attribute = (s: string) =>
  s.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('\u0000', '&#xFFFD;');

describe('HrefResolver against new URL', () => {
  const hrefs = corpus(6_000);

  test.each(BASES)('every href it resolves itself resolves as the URL parser does (base %s)', (b) => {
    const base = new URL(b);
    const resolver = new HrefResolver(base);
    const wrong: string[] = [];
    let fast = 0;
    for (const href of hrefs) {
      const got = resolver.resolve(trim(href));
      if (got === undefined) continue;
      fast++;
      const want = expected(href, base);
      if (got !== want) wrong.push(`${JSON.stringify(href)}: ${got}, URL parser: ${want}`);
      else if (new URL(got).hostname !== resolver.hostname) wrong.push(`${JSON.stringify(href)}: hostname`);
    }
    expect(wrong).toEqual([]);
    // The corpus holds many plain paths: a resolver that resolves nothing itself would pass the
    // comparison above vacuously.
    if (base.username === '') expect(fast).toBeGreaterThan(100);
    else expect(fast).toBe(0);
  });

  test('extractLinks gives the URL parser’s url, hostname and parsed URL for every href', () => {
    const wrong: string[] = [];
    for (const b of BASES) {
      const base = new URL(b);
      const html = hrefs.map((h) => `<a href="${attribute(h)}">x</a>`).join('\n');
      const page = extractLinks(html, { pageUrl: b });
      const want = hrefs.map((h) => expected(h.replaceAll('\u0000', '\ufffd'), base));
      const got = page.links.map((l) => l.url);
      expect(got).toEqual(want.filter((u) => u !== undefined));
      expect(page.skipped).toBe(want.filter((u) => u === undefined).length);
      for (const link of page.links) {
        const parsed = link.parsed;
        if (parsed.href.split('#')[0] !== link.url || parsed.hostname !== link.hostname)
          wrong.push(`${b}: ${link.url} / ${parsed.href} / ${link.hostname}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  test('the common links take the fast path; the others are left to the URL parser', () => {
    const resolver = new HrefResolver(new URL('http://example.com:8080/dir/page.html?q=1'));
    expect(resolver.resolve('/p/1.html')).toBe('http://example.com:8080/p/1.html');
    expect(resolver.resolve('/p/1.html?a=1&b=%20#top')).toBe('http://example.com:8080/p/1.html?a=1&b=%20');
    expect(resolver.resolve('next.html')).toBe('http://example.com:8080/dir/next.html');
    expect(resolver.resolve('http://example.com:8080/x')).toBe('http://example.com:8080/x');
    for (const href of [
      '//example.com:8080/x',
      '/\\x',
      '../x',
      './x',
      '/a/%2e/b',
      '?q',
      '#f',
      'mailto:a@b',
      'a:b',
      '/a b',
      '/a\tb',
      '/é',
      "/x?it's",
      '/x^y',
      'http://example.com:8080',
      'HTTP://example.com:8080/x',
    ]) {
      expect(resolver.resolve(href), href).toBeUndefined();
    }
  });
});
