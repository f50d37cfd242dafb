import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { get } from '../__fixtures__/http.js';
import { expectedCounts } from '../expected.js';
import { type FixtureSite, startFixtureSite } from '../site/start.js';
import { fixtureSitemaps } from './sitemaps.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ hosts: 2 });
});
afterAll(() => site.close());

function locs(xml: string): string[] {
  return [...xml.matchAll(/<loc>([^<]+)<\/loc>/g)].map((m) => m[1]!);
}

describe('robots.txt', () => {
  test('default rules: Allow, Disallow, a Crawl-delay group and Sitemap lines with the host’s own origin', async () => {
    const f = await get(`${site.url}/robots.txt`);
    expect(f.status).toBe(200);
    expect(f.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(f.text).toBe(
      [
        '# robots.txt of the mocra fixture site',
        'User-agent: *',
        'Allow: /private/public/',
        'Disallow: /private/',
        '',
        'User-agent: fixture-slowbot',
        'Crawl-delay: 5',
        'Disallow: /books/',
        '',
        `Sitemap: ${site.url}/sitemap.xml`,
        `Sitemap: ${site.url}/sitemap.txt`,
        '',
      ].join('\n'),
    );
    const other = await get(`${site.hostUrl(1)}/robots.txt`);
    expect(other.text).toContain(`Sitemap: ${site.hostUrl(1)}/sitemap.xml`);
    expect((await get(`${site.url}/private/secret`)).status).toBe(200);
    expect((await get(`${site.url}/private/public/notice`)).status).toBe(200);
  });

  test('setRobots changes one host or all hosts: rules, Crawl-delay, literal text, status and 404', async () => {
    try {
      site.setRobots(
        { crawlDelay: 2, disallow: ['/books/'], allow: [], slowbotGroup: false, sitemaps: false },
        1,
      );
      expect((await get(`${site.hostUrl(1)}/robots.txt`)).text).toBe(
        '# robots.txt of the mocra fixture site\nUser-agent: *\nDisallow: /books/\nCrawl-delay: 2\n',
      );
      expect((await get(`${site.url}/robots.txt`)).text).toContain('Disallow: /private/');
      site.setRobots('User-agent: *\nDisallow: /\nSitemap: {origin}/sitemap.xml\n');
      expect((await get(`${site.hostUrl(1)}/robots.txt`)).text).toBe(
        `User-agent: *\nDisallow: /\nSitemap: ${site.hostUrl(1)}/sitemap.xml\n`,
      );
      site.setRobots({ status: 503 });
      expect((await get(`${site.url}/robots.txt`)).status).toBe(503);
      site.setRobots(false, 0);
      expect((await get(`${site.url}/robots.txt`)).status).toBe(404);
      expect(() => site.setRobots({ crawlDelay: -1 })).toThrowError(
        expect.objectContaining({ code: 'MOCRA_ERR_TESTKIT_INVALID_OPTION', option: 'robots.crawlDelay' }),
      );
      expect(() => site.setRobots({}, 5)).toThrowError(
        expect.objectContaining({ code: 'MOCRA_ERR_TESTKIT_UNKNOWN_HOST' }),
      );
    } finally {
      site.setRobots({});
    }
  });

  test('the robots option at start applies to every host', async () => {
    const s = await startFixtureSite({ hosts: 2, robots: { crawlDelay: 0.5 } });
    try {
      for (const u of s.urls)
        expect((await get(`${u}/robots.txt`)).text).toContain(
          'User-agent: *\nAllow: /private/public/\nDisallow: /private/\nCrawl-delay: 0.5\n',
        );
    } finally {
      await s.close();
    }
  });
});

describe('sitemaps', () => {
  test('the index lists two XML sitemaps and a gzip sitemap with absolute URLs', async () => {
    const f = await get(`${site.url}/sitemap.xml`);
    expect(f.status).toBe(200);
    expect(f.headers['content-type']).toBe('application/xml; charset=utf-8');
    expect(f.text).toContain('<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">');
    const layout = fixtureSitemaps();
    expect(layout.index).toEqual([
      '/sitemaps/books-1.xml',
      '/sitemaps/books-2.xml',
      '/sitemaps/catalog-pages.xml.gz',
    ]);
    expect(locs(f.text)).toEqual(layout.index.map((p) => `${site.url}${p}`));
  });

  test('each file lists real fixture pages; the .xml.gz is a gzip file; the text sitemap has one URL a line', async () => {
    const layout = fixtureSitemaps();
    const books1 = await get(`${site.url}/sitemaps/books-1.xml`);
    expect(locs(books1.text)).toEqual(layout.files['/sitemaps/books-1.xml']!.map((p) => `${site.url}${p}`));
    expect(locs(books1.text)).toHaveLength(500);
    expect(books1.text).toMatch(/<lastmod>2024-\d\d-\d\d<\/lastmod>/);

    const gz = await get(`${site.url}/sitemaps/catalog-pages.xml.gz`);
    expect(gz.headers['content-type']).toBe('application/gzip');
    expect(gz.headers['content-encoding']).toBeUndefined();
    expect(gz.body.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    const xml = gunzipSync(gz.body).toString('utf8');
    expect(locs(xml)).toEqual(layout.files['/sitemaps/catalog-pages.xml.gz']!.map((p) => `${site.url}${p}`));
    expect(locs(xml)).toHaveLength(110);

    const txt = await get(`${site.url}/sitemap.txt`);
    expect(txt.text.trimEnd().split('\n')).toEqual(
      layout.files['/sitemap.txt']!.map((p) => `${site.url}${p}`),
    );

    expect(layout.pages).toHaveLength(expectedCounts().sitemaps.urls);
    expect(new Set(layout.pages).size).toBe(layout.pages.length);
    expect((await get(`${site.url}/sitemaps/books-3.xml`)).status).toBe(404);
    expect((await get(`${site.url}/sitemaps/other.xml`)).status).toBe(404);
  });

  test('every URL in every sitemap answers 200', async () => {
    const layout = fixtureSitemaps();
    const statuses = new Map<number, number>();
    const queue = [...layout.pages];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (queue.length > 0) {
          const s = (await get(`${site.url}${queue.pop()!}`)).status;
          statuses.set(s, (statuses.get(s) ?? 0) + 1);
        }
      }),
    );
    expect([...statuses]).toEqual([[200, 1140]]);
  });

  test('files split at sitemapUrlsPerFile', () => {
    const layout = fixtureSitemaps({ catalog: { books: 250 }, sitemapUrlsPerFile: 100 });
    expect(layout.index).toEqual([
      '/sitemaps/books-1.xml',
      '/sitemaps/books-2.xml',
      '/sitemaps/books-3.xml',
      '/sitemaps/catalog-pages.xml.gz',
    ]);
    expect(layout.files['/sitemaps/books-3.xml']).toHaveLength(50);
  });
});
