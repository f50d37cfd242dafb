// Sitemaps against the fixture site (index, gzip file, text, discovery through robots.txt) and
// the bounds and failure cases with a stand-in fetcher.

import { gzipSync } from 'node:zlib';
import { fixtureSitemaps, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { SitemapError } from '../src/errors.js';
import type { FetchedResource, ResourceFetcher } from '../src/frontier/robots/resource-fetcher.js';
import { RobotsCache } from '../src/frontier/robots/robots-cache.js';
import { discoverSitemaps } from '../src/frontier/sitemap/discover-sitemaps.js';
import { readSitemap, SitemapParser } from '../src/frontier/sitemap/sitemap-reader.js';

let site: Awaited<ReturnType<typeof startFixtureSite>>;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

async function collect(url: string | string[], options: Parameters<typeof readSitemap>[1] = {}) {
  const out: string[] = [];
  for await (const entry of readSitemap(url, options)) out.push(entry.url);
  return out;
}

describe('on the fixture site', () => {
  const layout = fixtureSitemaps();
  const abs = (paths: readonly string[]) => paths.map((p) => `${site.url}${p}`);

  test('a sitemap index: every listed file read, in order, the .xml.gz one gunzipped', async () => {
    const urls = await collect(`${site.url}/sitemap.xml`);
    expect(urls).toEqual(
      abs([
        ...layout.files['/sitemaps/books-1.xml']!,
        ...layout.files['/sitemaps/books-2.xml']!,
        ...layout.files['/sitemaps/catalog-pages.xml.gz']!,
      ]),
    );
  });

  test('entries carry lastmod and the file they came from', async () => {
    // Read on its own, as if the site's robots.txt listed it (it lists pages outside /sitemaps/).
    const entries = [];
    for await (const entry of readSitemap(`${site.url}/sitemaps/books-1.xml`, { listedBy: site.url })) {
      entries.push(entry);
      break;
    }
    expect(entries).toEqual([
      {
        url: `${site.url}/book/1`,
        lastmod: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
        sitemap: `${site.url}/sitemaps/books-1.xml`,
      },
    ]);
  });

  test('a gzip file on its own and a plain-text sitemap', async () => {
    const gz = `${site.url}/sitemaps/catalog-pages.xml.gz`;
    expect(await collect(gz, { listedBy: site.url })).toEqual(
      abs(layout.files['/sitemaps/catalog-pages.xml.gz']!),
    );
    // Not listed by robots.txt or an index: its location is /sitemaps/, and its pages are not under it.
    const errors: SitemapError[] = [];
    expect(await collect(gz, { onError: (e) => errors.push(e) })).toEqual([]);
    expect(errors[0]?.message).toMatch(/outside the sitemap's location/);
    expect(await collect(`${site.url}/sitemap.txt`)).toEqual(abs(layout.files['/sitemap.txt']!));
  });

  test('discovery through robots.txt finds both sitemaps; together they list every page once', async () => {
    site.resetStats();
    const robots = new RobotsCache();
    const found = await discoverSitemaps(site.url, { robots });
    expect(found).toEqual(abs(layout.robots));
    const urls = await collect(found);
    expect(new Set(urls).size).toBe(layout.pages.length);
    expect([...new Set(urls)].sort()).toEqual(abs(layout.pages).sort());
    expect(site.stats().paths['/robots.txt']).toBe(1);
    // Shared cache: asking robots afterwards does not fetch again.
    await robots.check(new URL(`${site.url}/books/page/1`));
    expect(site.stats().paths['/robots.txt']).toBe(1);
  });

  test('no Sitemap: lines: the /sitemap.xml convention', async () => {
    site.setRobots({ sitemaps: false });
    try {
      expect(await discoverSitemaps(site.url)).toEqual([`${site.url}/sitemap.xml`]);
      expect(await discoverSitemaps(site.url, { fallback: false })).toEqual([]);
    } finally {
      site.setRobots({});
    }
  });

  test('limits: maxUrls stops early; maxDepth 0 skips an index’s children with an error', async () => {
    expect(await collect(`${site.url}/sitemap.xml`, { maxUrls: 10 })).toHaveLength(10);
    const errors: SitemapError[] = [];
    expect(await collect(`${site.url}/sitemap.xml`, { maxDepth: 0, onError: (e) => errors.push(e) })).toEqual(
      [],
    );
    expect(errors.map((e) => e.code)).toEqual(['MOCRA_ERR_SITEMAP']);
    expect(errors[0]!.message).toMatch(/maxDepth/);
  });

  test('a 404 sitemap is a SitemapError; with onError the other sitemaps are still read', async () => {
    await expect(collect(`${site.url}/nope.xml`)).rejects.toMatchObject({ code: 'MOCRA_ERR_SITEMAP' });
    const errors: SitemapError[] = [];
    const urls = await collect([`${site.url}/nope.xml`, `${site.url}/sitemap.txt`], {
      onError: (e) => errors.push(e),
    });
    expect(urls).toHaveLength(30);
    expect(errors[0]!.message).toMatch(/HTTP 404/);
  });
});

/** A fetcher that serves fixed bodies (for cases the fixture site has no route for). */
function staticFetcher(
  files: Record<string, Uint8Array | string>,
  chunkSize = 7,
): ResourceFetcher & { calls: string[] } {
  const calls: string[] = [];
  const fetcher = async (url: string): Promise<FetchedResource> => {
    calls.push(url);
    const body = files[url];
    const bytes = body === undefined ? new Uint8Array() : typeof body === 'string' ? Buffer.from(body) : body;
    return {
      url,
      status: body === undefined ? 404 : 200,
      headers: {},
      body: (async function* () {
        // In small chunks, so tags and lines are split across writes.
        for (let i = 0; i < bytes.length; i += chunkSize) yield bytes.subarray(i, i + chunkSize);
      })(),
      discard: async () => {},
    };
  };
  return Object.assign(fetcher, { calls });
}

describe('forms and failures', () => {
  test('namespaced tags, entities, CDATA-free whitespace, bad and relative locs skipped', async () => {
    const xml = `<?xml version="1.0"?>
      <sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">
        <sm:url><sm:loc>  http://a.test/x?a=1&amp;b=2  </sm:loc><sm:priority>0.8</sm:priority><sm:changefreq>daily</sm:changefreq></sm:url>
        <sm:url><sm:loc>/relative</sm:loc></sm:url>
        <sm:url><sm:loc>ftp://a.test/f</sm:loc></sm:url>
        <sm:url></sm:url>
      </sm:urlset>`;
    const fetch = staticFetcher({ 'http://a.test/s.xml': xml });
    const entries = [];
    for await (const e of readSitemap('http://a.test/s.xml', { fetch })) entries.push(e);
    expect(entries).toEqual([
      { url: 'http://a.test/x?a=1&b=2', priority: 0.8, changefreq: 'daily', sitemap: 'http://a.test/s.xml' },
    ]);
  });

  test('an index that lists itself (a loop) is read once', async () => {
    const index = `<sitemapindex><sitemap><loc>http://a.test/i.xml</loc></sitemap><sitemap><loc>http://a.test/t.txt</loc></sitemap></sitemapindex>`;
    const fetch = staticFetcher({
      'http://a.test/i.xml': index,
      'http://a.test/t.txt': 'http://a.test/1\r\njunk\n\nhttp://a.test/2',
    });
    expect(await collect('http://a.test/i.xml', { fetch })).toEqual(['http://a.test/1', 'http://a.test/2']);
    expect(fetch.calls).toEqual(['http://a.test/i.xml', 'http://a.test/t.txt']);
  });

  test('bad gzip, too large after decompression, and the file limit are SitemapErrors', async () => {
    const big = gzipSync(`http://a.test/x\n`.repeat(10_000)); // ~160 KB inflated
    const fetch = staticFetcher({
      'http://a.test/bad.gz': new Uint8Array([0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
      'http://a.test/big.gz': big,
      'http://a.test/a.txt': 'http://a.test/1',
      'http://a.test/b.txt': 'http://a.test/2',
    });
    const errors: SitemapError[] = [];
    const onError = (e: SitemapError) => errors.push(e);
    await collect('http://a.test/bad.gz', { fetch, onError });
    await collect('http://a.test/big.gz', { fetch, onError, maxBytes: 50_000 });
    expect(
      await collect(['http://a.test/a.txt', 'http://a.test/b.txt'], { fetch, onError, maxFiles: 1 }),
    ).toEqual(['http://a.test/1']);
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/bad gzip/),
      expect.stringMatching(/larger than maxBytes/),
      expect.stringMatching(/limit of 1 sitemap files/),
    ]);
    expect(errors.every((e) => e.code === 'MOCRA_ERR_SITEMAP')).toBe(true);
  });

  test('SitemapParser decides XML or text by the first non-blank character', () => {
    const text = new SitemapParser('s');
    text.write('\uFEFF  http://a.test/1\nhttp://a.');
    text.write('test/2');
    text.end();
    expect(text.take().urls.map((e) => e.url)).toEqual(['http://a.test/1', 'http://a.test/2']);
  });
});

describe('where a sitemap may point (sitemaps.org: the sitemap file location)', () => {
  const urlset = (...locs: string[]) =>
    `<urlset>${locs.map((l) => `<url><loc>${l}</loc></url>`).join('')}</urlset>`;

  test("only URLs under the sitemap's scheme, host, port and directory; the rest are skipped and reported", async () => {
    const fetch = staticFetcher({
      'http://a.test/shop/s.xml': urlset(
        'http://a.test/shop/1',
        'http://a.test/other',
        'http://b.test/shop/1',
        'https://a.test/shop/2',
        'http://a.test:8080/shop/3',
        'http://a.test/shop/deep/4',
      ),
    });
    const errors: SitemapError[] = [];
    const urls = await collect('http://a.test/shop/s.xml', { fetch, onError: (e) => errors.push(e) });
    expect(urls).toEqual(['http://a.test/shop/1', 'http://a.test/shop/deep/4']);
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/4 URL\(s\) outside .*http:\/\/a\.test\/shop\//),
    ]);
  });

  test('an index lists sitemaps of its own origin only; theirs may list what the index may', async () => {
    const fetch = staticFetcher({
      'http://a.test/index.xml':
        '<sitemapindex><sitemap><loc>http://a.test/maps/s1.xml</loc></sitemap><sitemap><loc>http://b.test/s2.xml</loc></sitemap></sitemapindex>',
      'http://a.test/maps/s1.xml': urlset('http://a.test/page', 'http://b.test/page'),
      'http://b.test/s2.xml': urlset('http://b.test/x'),
    });
    const errors: SitemapError[] = [];
    expect(await collect('http://a.test/index.xml', { fetch, onError: (e) => errors.push(e) })).toEqual([
      'http://a.test/page',
    ]);
    expect(fetch.calls).toEqual(['http://a.test/index.xml', 'http://a.test/maps/s1.xml']);
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/1 sitemap\(s\) of another origin skipped/),
      expect.stringMatching(/1 URL\(s\) outside/),
    ]);
  });

  test('listed by robots.txt: the whole site on its own origin; cross-submits from another host only when allowed', async () => {
    const files = {
      'http://a.test/maps/s.xml': urlset('http://a.test/x'),
      'http://cdn.test/s.xml': urlset('http://a.test/y', 'http://cdn.test/z'),
    };
    const urls = ['http://a.test/maps/s.xml', 'http://cdn.test/s.xml'];
    const onError = () => {};
    expect(await collect(urls, { fetch: staticFetcher(files), onError, listedBy: 'http://a.test' })).toEqual([
      'http://a.test/x',
      'http://cdn.test/z',
    ]);
    expect(
      await collect(urls, {
        fetch: staticFetcher(files),
        onError,
        listedBy: 'http://a.test',
        crossSubmits: true,
      }),
    ).toEqual(['http://a.test/x', 'http://a.test/y', 'http://cdn.test/z']);
    // Without listedBy the directory rule holds for both.
    expect(await collect(urls, { fetch: staticFetcher(files), onError })).toEqual(['http://cdn.test/z']);
  });
});

describe('hostile sitemaps cost their own file only', () => {
  test('a 5 MB text line and an 8 KB+ <loc> are skipped without being kept; the next entries are read', async () => {
    const fetch = staticFetcher(
      {
        'http://a.test/long.txt': `http://a.test/${'x'.repeat(5 * 1024 * 1024)}\nhttp://a.test/after\n`,
        'http://a.test/long.xml': `<urlset><url><loc>http://a.test/${'y'.repeat(10_000)}</loc></url><url><loc>http://a.test/ok</loc></url></urlset>`,
      },
      64 * 1024,
    );
    expect(await collect(['http://a.test/long.txt', 'http://a.test/long.xml'], { fetch })).toEqual([
      'http://a.test/after',
      'http://a.test/ok',
    ]);
  });

  test('a gzip of zeros past maxBytes is a SitemapError for that file; the other sitemaps are read', async () => {
    const zeros = gzipSync(Buffer.alloc(64 * 1024 * 1024)); // ~64 KB that inflate to 64 MiB
    const fetch = staticFetcher(
      { 'http://a.test/zeros.xml.gz': zeros, 'http://a.test/ok.txt': 'http://a.test/1\nhttp://a.test/2\n' },
      64 * 1024,
    );
    const errors: SitemapError[] = [];
    const urls = await collect(['http://a.test/zeros.xml.gz', 'http://a.test/ok.txt'], {
      fetch,
      onError: (e) => errors.push(e),
    });
    expect(urls).toEqual(['http://a.test/1', 'http://a.test/2']);
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/larger than maxBytes/)]);
  });
});
