// Link extraction, scopes, globs, depth, nofollow and <base href>: on hand-written HTML for the
// edge cases, and on the fixture site's real pages.
import { catalogBooks, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { extractLinks, MAX_TEXT_CHARS, TRUNCATED_MARKER } from '../src/frontier/links/extract-links.js';
import { createLinkFilter } from '../src/frontier/links/link-filter.js';
import { createLinkPlanner, planLinks } from '../src/frontier/links/plan-links.js';
import { parseStreamSelector } from '../src/frontier/links/selector.js';

const PAGE = 'http://shop.example.com/catalog/index.html';
const urls = (html: string, options: Omit<Parameters<typeof extractLinks>[1], 'pageUrl'> = {}) =>
  extractLinks(html, { pageUrl: PAGE, ...options }).links.map((l) => l.url);

describe('extractLinks', () => {
  test('a title or link text over MAX_TEXT_CHARS is cut there and marked, on every parser path', () => {
    const long = 'é'.repeat(MAX_TEXT_CHARS * 50);
    const spaced = `${'x '.repeat(MAX_TEXT_CHARS * 3)}end`;
    const html = `<title>${long}</title><a href="/a">${spaced}</a><a href="/b">short &amp; fine</a>`;
    const cut = `${'é'.repeat(MAX_TEXT_CHARS)}${TRUNCATED_MARKER}`;
    for (const selector of [undefined, 'a', 'a:nth-child(odd), a:nth-child(even)']) {
      const page = extractLinks(html, { pageUrl: PAGE, withText: true, ...(selector ? { selector } : {}) });
      expect(page.title, selector).toBe(cut);
      const [a, b] = page.links;
      expect(a!.text!.endsWith(TRUNCATED_MARKER), selector).toBe(true);
      expect(a!.text!.length).toBe(MAX_TEXT_CHARS + TRUNCATED_MARKER.length);
      expect(b!.text).toBe('short & fine');
    }
    // A title exactly at the limit is kept whole.
    const exact = 'y'.repeat(MAX_TEXT_CHARS);
    expect(extractLinks(`<title>${exact}</title>`, { pageUrl: PAGE }).title).toBe(exact);
  });

  test('takes <a>, <area> and <link rel=next|prev>, resolves relative URLs, drops fragments', () => {
    const html = `<html><head><title> The  Shop </title>
      <link rel="next" href="page2.html"><link rel="stylesheet" href="/style.css"><link rel="PREV" href="/p0">
      </head><body>
      <a href="/a">A</a> <a href="b?x=1&amp;y=2#frag">B</a> <A HREF="HTTP://Other.Example.com:80/c">C</A>
      <map><area href="/area" alt=""></map>
      <a href="#top">top</a><a href="mailto:x@y.z">m</a><a href="javascript:void(0)">j</a><a href="tel:123">t</a>
      <a href="ftp://files/x">f</a><a href="  ">blank</a><a>no href</a><a href="http://[bad">bad</a>
      </body></html>`;
    const page = extractLinks(html, { pageUrl: PAGE });
    expect(page.title).toBe('The Shop');
    expect(page.links.map((l) => [l.tag, l.url])).toEqual([
      ['link', 'http://shop.example.com/catalog/page2.html'],
      ['link', 'http://shop.example.com/p0'],
      ['a', 'http://shop.example.com/a'],
      ['a', 'http://shop.example.com/catalog/b?x=1&y=2'],
      ['a', 'http://other.example.com/c'],
      ['area', 'http://shop.example.com/area'],
    ]);
    expect(page.skipped).toBe(7);
  });

  test('an empty fragment is dropped too; only C0 controls and spaces are trimmed from an href', () => {
    expect(urls('<a href="/x#">x</a><a href="?#">y</a>')).toEqual([
      'http://shop.example.com/x',
      'http://shop.example.com/catalog/index.html?',
    ]);
    // A no-break space or an ideographic space is part of the href (browsers encode it).
    expect(urls('<a href="\u00a0/x\u3000">x</a><a href=" \t/y\n">y</a>')).toEqual([
      'http://shop.example.com/catalog/%C2%A0/x%E3%80%80',
      'http://shop.example.com/y',
    ]);
  });

  test('<base href> applies to the whole document, even to links before it; a bad one is ignored', () => {
    const html = `<a href="before">1</a><base href="/deep/dir/"><base href="/second/"><a href="after">2</a>`;
    expect(urls(html)).toEqual([
      'http://shop.example.com/deep/dir/before',
      'http://shop.example.com/deep/dir/after',
    ]);
    expect(extractLinks(html, { pageUrl: PAGE }).baseUrl).toBe('http://shop.example.com/deep/dir/');
    expect(urls(`<base href="https://cdn.example.net/x/"><a href="y">`)).toEqual([
      'https://cdn.example.net/x/y',
    ]);
    expect(urls(`<base href="javascript:alert(1)"><a href="y">`)).toEqual([
      'http://shop.example.com/catalog/y',
    ]);
  });

  test('script, style, comments and attribute look-alikes do not produce links', () => {
    const html = `<script>var s = '<a href="/in-script">';</script><style>a[href="/in-style"]{}</style>
      <!-- <a href="/in-comment"> --><textarea><a href="/in-textarea"></textarea>
      <div data-href="/data"></div><a data-x="1" href="/real" href="/dup">r</a>`;
    expect(urls(html)).toEqual(['http://shop.example.com/real']);
  });

  test('rel=nofollow and <meta name=robots content=nofollow> are reported', () => {
    const page = extractLinks(
      `<meta name="ROBOTS" content="noindex, NOFOLLOW"><a rel="external nofollow" href="/x">x</a><a href="/y">y</a>`,
      { pageUrl: PAGE },
    );
    expect(page.nofollowPage).toBe(true);
    expect(page.links.map((l) => [l.url, l.nofollow])).toEqual([
      ['http://shop.example.com/x', true],
      ['http://shop.example.com/y', false],
    ]);
    expect(extractLinks(`<meta name="robots" content="noarchive">`, { pageUrl: PAGE }).nofollowPage).toBe(
      false,
    );
  });

  test('link text on request (entities decoded, whitespace collapsed)', () => {
    const page = extractLinks(`<a href="/a"> Fish &amp;\n <b>Chips</b> </a><a href="/b"><a href="/c">C</a>`, {
      pageUrl: PAGE,
      withText: true,
    });
    expect(page.links.map((l) => l.text)).toEqual(['Fish & Chips', '', 'C']);
  });

  test("character references: the default scan decodes what htmlparser2's parser decodes", () => {
    // The default scan tokenizes without decoding and decodes the strings it keeps afterwards;
    // a selector other than the default runs htmlparser2's Parser, which decodes as it reads.
    // On generated pages full of references (named, numeric, without ';', before '=' in an
    // attribute, in titles, link text, raw-text elements), the two must agree.
    const refs = [
      '&amp;',
      '&amp',
      '&amp=',
      '&ampx',
      '&lt;',
      '&#47;',
      '&#x2F;',
      '&#0;',
      '&nbsp;',
      '&notin;',
      '&not',
      '&copy=',
      '&bogus;',
      '&',
      '&#xZZ;',
      '&#128512;',
    ];
    const words = ['a', 'b c', '?q=1', '/x', 'é', '=', ' '];
    let seed = 7;
    const pick = <T>(list: readonly T[]): T => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return list[seed % list.length]!;
    };
    const piece = () => {
      let out = '';
      for (let i = 0; i < 4; i++) out += pick([pick(refs), pick(words)]);
      return out;
    };
    const attr = (value: string) =>
      pick([`"${value}"`, `'${value}'`, value.replace(/[\s'"=<>`]/g, '') || 'v']);
    for (let page = 0; page < 300; page++) {
      let html = `<title>${piece()}<b>${piece()}</title>`;
      for (let k = 0; k < 6; k++) {
        const inner = pick([
          piece(),
          `<script>${piece()}</script>${piece()}`,
          `<span>${piece()}</span>`,
          `<style>${piece()}</style>`,
        ]);
        html += `<a class=x href=${attr(`/p${k}?${piece()}`)} rel=${attr(piece())}>${inner}</a> ${piece()}`;
      }
      const scan = (selector?: string) => {
        const out = extractLinks(html, { pageUrl: PAGE, withText: true, ...(selector ? { selector } : {}) });
        return { title: out.title, links: out.links.map((l) => [l.url, l.rel, l.text]) };
      };
      expect(scan(), html).toEqual(
        scan('a[href], area[href], link[rel~=next][href], link[rel~=prev][href] '),
      );
    }
  });

  test('selectors: the streaming subset and the DOM fallback select the same links', () => {
    const html = `<ul class="links main"><li><a href="/1">1</a></li><li class="next"><a href="/2">2</a></li></ul>
      <div class="other"><a href="/3" rel="next">3</a><span><a href="/books/4">4</a></span></div>`;
    const cases: [string, string[]][] = [
      ['ul.links a', ['/1', '/2']],
      ['li.next > a', ['/2']],
      ['.other > a', ['/3']],
      ['div a', ['/3', '/books/4']],
      ['a[rel~=next]', ['/3']],
      ['a[href^="/books"]', ['/books/4']],
      ['ul.main.links li:not(.next) a', ['/1']], // DOM fallback (:not)
      ['li + li a', ['/2']], // DOM fallback (sibling combinator)
    ];
    for (const [selector, expected] of cases) {
      expect(
        urls(html, { selector }).map((u) => new URL(u).pathname),
        selector,
      ).toEqual(expected);
    }
    expect(() => urls(html, { selector: 'a[[' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });

  test('parseStreamSelector accepts only what it can match while streaming', () => {
    for (const ok of ['a', '*', 'a.b.c', '#id', 'ul > li a', 'a[x], area[y="z" i]', 'a[data-x|=en]']) {
      expect(parseStreamSelector(ok), ok).toBeDefined();
    }
    for (const no of ['a:hover', 'a + b', 'a ~ b', '', 'a >', '> a', 'a,,b']) {
      expect(parseStreamSelector(no), no).toBeUndefined();
    }
  });

  test('malformed HTML never throws', () => {
    for (const html of [
      '',
      '<',
      '<a href=',
      '<a href="/x',
      '<<<>>>',
      '<a href=/x>',
      '\u0000<a href="/\u0000">',
    ]) {
      expect(() => extractLinks(html, { pageUrl: PAGE })).not.toThrow();
    }
    expect(urls('<a href=/unquoted>x')).toEqual(['http://shop.example.com/unquoted']);
  });
});

describe('link filter: scopes and patterns', () => {
  const ref = new URL('https://www.example.co.uk/docs/guide/intro.html');
  const keep = (url: string, options: Parameters<typeof createLinkFilter>[0]) =>
    createLinkFilter(options).test(new URL(url), ref);

  test('same-host compares hostnames (any scheme or port)', () => {
    expect(keep('http://www.example.co.uk:8080/x', { scope: 'same-host' })).toBe(true);
    expect(keep('https://shop.example.co.uk/x', { scope: 'same-host' })).toBe(false);
  });

  test('same-domain is public-suffix aware', () => {
    expect(keep('https://shop.example.co.uk/x', { scope: 'same-domain' })).toBe(true);
    expect(keep('https://example.co.uk/x', { scope: 'same-domain' })).toBe(true);
    expect(keep('https://other.co.uk/x', { scope: 'same-domain' })).toBe(false);
    const gh = new URL('https://alice.github.io/');
    const filter = createLinkFilter({ scope: 'same-domain' });
    expect(filter.test(new URL('https://bob.github.io/'), gh)).toBe(false); // private suffix: different owners
    expect(filter.test(new URL('https://alice.github.io/x'), gh)).toBe(true);
    const ip = new URL('http://127.0.0.1:3000/');
    expect(filter.test(new URL('http://127.0.0.2:3000/'), ip)).toBe(false);
    expect(filter.test(new URL('http://127.0.0.1:4000/'), ip)).toBe(true);
  });

  test('prefix: the reference directory by default, or given prefixes', () => {
    expect(keep('https://www.example.co.uk/docs/guide/advanced', { scope: 'prefix' })).toBe(true);
    expect(keep('https://www.example.co.uk/docs/other', { scope: 'prefix' })).toBe(false);
    expect(
      keep('https://www.example.co.uk/blog/1', {
        scope: 'prefix',
        prefix: 'HTTPS://WWW.example.co.uk/blog/',
      }),
    ).toBe(true);
    expect(
      keep('https://www.example.co.uk/docs/guide/x', {
        scope: 'prefix',
        prefix: ['https://a.b/', 'https://c.d/'],
      }),
    ).toBe(false);
  });

  test('any', () => {
    expect(keep('https://elsewhere.org/', { scope: 'any' })).toBe(true);
  });

  test('include/exclude with globs (path or whole URL) and regexes; exclude wins', () => {
    const o = { scope: 'any' as const };
    expect(keep('https://a.org/books/1', { ...o, include: '/books/**' })).toBe(true);
    expect(keep('https://a.org/book/1', { ...o, include: '/books/**' })).toBe(false);
    expect(keep('https://a.org/books/page/2', { ...o, include: '/books/*' })).toBe(false); // * stops at /
    expect(keep('https://cdn.a.org/x/y', { ...o, include: 'https://*.a.org/**' })).toBe(true);
    expect(keep('https://a.org/x?page=2', { ...o, include: [/page=\d+$/g] })).toBe(true);
    expect(keep('https://a.org/x?page=2', { ...o, include: [/page=\d+$/g] })).toBe(true); // no lastIndex state
    expect(keep('https://a.org/books/1', { ...o, include: '/books/**', exclude: [/\/1$/] })).toBe(false);
    expect(() => createLinkFilter({ include: '' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => createLinkFilter({ scope: 'nowhere' as 'any' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });

  test('a glob with a bracket left open is refused (picomatch would match it literally or never)', () => {
    for (const glob of ['[', '/books/[0-9', 'https://a.org/{x,y', '/a/(b']) {
      expect(() => createLinkFilter({ include: glob }), glob).toThrow(
        expect.objectContaining({
          code: 'MOCRA_ERR_INVALID_ARGUMENT',
          message: expect.stringMatching(/is not closed/),
        }),
      );
    }
    const o = { scope: 'any' as const };
    expect(keep('https://a.org/books/7', { ...o, include: '/books/[0-9]' })).toBe(true);
    expect(keep('https://a.org/x/[1]', { ...o, include: '/x/\\[1]' })).toBe(true); // an escaped bracket is the character
    expect(keep('https://a.org/b', { ...o, include: '/{a,b}' })).toBe(true);
  });
});

describe('planLinks', () => {
  const html = `<a href="/docs/a">a</a><a rel="nofollow" href="/docs/b">b</a><a href="https://elsewhere.org/c">c</a>
    <a href="/docs/d?utm=1">d</a>`;
  const page = { url: 'https://site.org/docs/index.html', html, depth: 1 };

  test('scope, nofollow, depth and limit are counted separately', () => {
    const plan = planLinks(page, { respectNofollow: true });
    expect(plan.targets.map((t) => t.url)).toEqual([
      'https://site.org/docs/a',
      'https://site.org/docs/d?utm=1',
    ]);
    expect(plan.targets.every((t) => t.depth === 2)).toBe(true);
    expect(plan.dropped).toMatchObject({ nofollow: 1, filtered: 1 });
    expect(planLinks(page, {}).targets).toHaveLength(3); // nofollow links are kept unless asked
    expect(planLinks(page, { maxDepth: 1 }).dropped.depth).toBe(3);
    expect(planLinks(page, { maxDepth: 2 }).targets).toHaveLength(3);
    expect(planLinks(page, { limit: 1 }).dropped.limit).toBe(2);
    const meta = { ...page, html: `<meta name="robots" content="nofollow">${html}` };
    expect(planLinks(meta, { respectNofollow: true }).targets).toEqual([]);
  });

  test('origin sets the scope reference; label, node and request fields travel with each target', () => {
    const plan = planLinks(page, {
      scope: 'any',
      origin: 'https://elsewhere.org/',
      label: 'detail',
      node: 'details',
      request: { priority: 5, headers: { 'x-a': '1' } },
    });
    expect(plan.targets[0]).toMatchObject({ label: 'detail', node: 'details', request: { priority: 5 } });
    const sameHost = planLinks(page, { origin: 'https://elsewhere.org/' });
    expect(sameHost.targets.map((t) => t.url)).toEqual(['https://elsewhere.org/c']);
  });

  test('transform can rewrite, relabel or skip (falsy)', () => {
    const plan = planLinks(page, {
      transform(link) {
        if (link.url.endsWith('/b')) return false;
        if (link.text === 'a') return { ...link, label: 'first', url: `${link.url}?v=2` };
        link.url = link.url.replace(/\?utm=1$/, '');
        return link;
      },
    });
    expect(plan.targets.map((t) => [t.url, t.label])).toEqual([
      ['https://site.org/docs/a?v=2', 'first'],
      ['https://site.org/docs/d', undefined],
    ]);
    expect(plan.dropped.transform).toBe(1);
    const bad = planLinks(page, { transform: (l) => ({ ...l, url: 'mailto:x@y' }) });
    expect(bad.targets).toEqual([]);
  });

  test('bad options are refused with typed errors', () => {
    expect(() => createLinkPlanner({ maxDepth: -1 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => createLinkPlanner({ origin: 'not a url' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});

describe('on the fixture site', () => {
  let site: Awaited<ReturnType<typeof startFixtureSite>>;
  beforeAll(async () => {
    site = await startFixtureSite({ hosts: 2 });
  });
  afterAll(() => site.close());

  const get = async (url: string) => (await fetch(url)).text();

  test('a listing page: its 20 books, pagination and categories, nothing off-host', async () => {
    const url = `${site.url}/books/page/2`;
    const planner = createLinkPlanner({ include: '/book/*' });
    const plan = planner.plan({ url, html: await get(url), depth: 0 });
    const expected = catalogBooks()
      .slice(20, 40)
      .map((b) => `${site.url}${b.url}`);
    expect([...new Set(plan.targets.map((t) => t.url))]).toEqual(expected);
    const next = createLinkPlanner({ selector: 'ul.pager li.next a' }).plan({
      url,
      html: await get(url),
      depth: 0,
    });
    expect(next.targets.map((t) => t.url)).toEqual([`${site.url}/books/page/3`]);
  });

  test('link-graph pages: exactly `fanout` links; another host is out of the same-host scope', async () => {
    const spec = { pages: 1000, fanout: 7, bytes: 4096 };
    const url = site.graphUrl(spec, 3);
    const html = await get(url);
    expect(html.length).toBe(4096);
    const plan = planLinks({ url, html, depth: 0 });
    expect(plan.found).toBe(7);
    expect(plan.title).toBe('Graph page 3');
    const other = planLinks({ url, html, depth: 0 }, { origin: site.hostUrl(1) });
    expect(other.targets).toEqual([]);
    expect(other.dropped.filtered).toBe(7);
  });
});
