// Sitemaps against the sitemaps.org protocol's own examples and rules, transcribed as data
// (conformance/README.md): each sample is served by a stand-in fetcher and read with readSitemap.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import type { FetchedResource } from '../src/frontier/robots/resource-fetcher.js';
import { readSitemap, type SitemapEntry } from '../src/frontier/sitemap/sitemap-reader.js';

interface Suite {
  parse: { example: string; sitemap: string; body: string; entries: Omit<SitemapEntry, 'sitemap'>[] }[];
  index: { example: string; index: string; body: string; read: string[] }[];
  location: {
    example: string;
    sitemap: string;
    listedBy?: string;
    crossSubmits?: boolean;
    urls: [string, boolean][];
  }[];
}
const suite = JSON.parse(
  readFileSync(join(import.meta.dirname, 'conformance', 'sitemaps-org.json'), 'utf8'),
) as Suite;

/** Serves `files`; anything else is an empty urlset. Records what was fetched. */
function serve(files: Record<string, string>, calls: string[] = []) {
  return async (url: string): Promise<FetchedResource> => {
    calls.push(url);
    const bytes = Buffer.from(files[url] ?? '<urlset></urlset>');
    return {
      url,
      status: 200,
      headers: {},
      body: (async function* () {
        yield bytes;
      })(),
      discard: async () => {},
    };
  };
}

test('sitemaps.org protocol examples', async () => {
  const failed: string[] = [];
  let total = 0;
  for (const c of suite.parse) {
    total++;
    const got: Omit<SitemapEntry, 'sitemap'>[] = [];
    for await (const { sitemap: _, ...e } of readSitemap(c.sitemap, {
      fetch: serve({ [c.sitemap]: c.body }),
    }))
      got.push(e);
    if (JSON.stringify(got) !== JSON.stringify(c.entries))
      failed.push(`${c.example}: ${JSON.stringify(got)}`);
  }
  for (const c of suite.index) {
    total++;
    const calls: string[] = [];
    for await (const _ of readSitemap(c.index, {
      fetch: serve({ [c.index]: c.body }, calls),
      onError: () => {},
    }));
    if (JSON.stringify(calls.slice(1)) !== JSON.stringify(c.read))
      failed.push(`${c.example}: read ${calls.slice(1)}`);
  }
  for (const c of suite.location) {
    const body = `<urlset>${c.urls.map(([u]) => `<url><loc>${u.replaceAll('&', '&amp;')}</loc></url>`).join('')}</urlset>`;
    const got = new Set<string>();
    const options = {
      fetch: serve({ [c.sitemap]: body }),
      onError: () => {},
      ...(c.listedBy === undefined ? {} : { listedBy: c.listedBy }),
      ...(c.crossSubmits === undefined ? {} : { crossSubmits: c.crossSubmits }),
    };
    for await (const e of readSitemap(c.sitemap, options)) got.add(e.url);
    for (const [url, accepted] of c.urls) {
      total++;
      if (got.has(url) !== accepted) failed.push(`${c.example}: ${url} ${accepted ? 'refused' : 'accepted'}`);
    }
  }
  console.log(
    `sitemaps.org examples: ${total - failed.length}/${total} passed${failed.length ? `\n  ${failed.join('\n  ')}` : ''}`,
  );
  expect(failed).toEqual([]);
});
