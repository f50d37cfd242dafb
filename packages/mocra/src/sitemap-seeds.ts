/**
 * `seeds.sitemap(url)` and `seeds.sitemaps(site)`: start a crawl from the pages sitemaps list.
 * The sitemaps are read (streamed, gunzipped, nested indexes followed) when the run's task
 * runs, and every listed page becomes a GET request that goes through the frontier like any
 * seed (dedup, scope of later links, maxPages). A sitemap that cannot be read is logged
 * (`MOCRA_ERR_SITEMAP`) and skipped; the crawl goes on with the others. A sitemap's URLs must lie
 * under its location (docs/crawling.md#sitemaps): the others are skipped, and logged.
 */
import {
  discoverSitemaps,
  type GenerateContext,
  Request,
  type RequestInit,
  type ResourceFetcher,
  type RobotsCache,
  readSitemap,
  type SitemapEntry,
  type SitemapError,
} from '@mocra/core';

export interface SitemapSeedOptions {
  /** Fields every request gets (headers, meta, priority…). */
  request?: RequestInit;
  /** Keep only the entries this accepts. @default every entry */
  filter?: (entry: SitemapEntry) => boolean;
  /** Pages taken from these sitemaps at most. @default 1000000 */
  maxUrls?: number;
  /**
   * For `seeds.sitemaps(site)`: let a sitemap that the site's robots.txt lists on another host
   * list the site's pages (the sitemaps protocol's cross-submits).
   * @default false
   */
  crossSubmits?: boolean;
  /** For `seeds.sitemaps(site)`: the robots.txt cache to ask (the crawl's, so robots.txt is fetched once). */
  robots?: RobotsCache;
  /** How sitemaps (and robots.txt, without `robots`) are fetched. @default an undici GET with the fetcher's default timeouts */
  fetch?: ResourceFetcher;
}

export interface SitemapSeed {
  url: string;
  /** `url` is a site: its robots.txt says where the sitemaps are. */
  discover: boolean;
  options: SitemapSeedOptions;
}

export async function requestsFromSitemaps(
  seeds: readonly SitemapSeed[],
  ctx: Pick<GenerateContext, 'signal' | 'log'>,
): Promise<Request[]> {
  const out: Request[] = [];
  const onError = (err: SitemapError) =>
    ctx.log.warn({ err, code: err.code, url: err.url }, 'sitemap skipped');
  for (const seed of seeds) {
    let urls: string[];
    try {
      urls = seed.discover
        ? await discoverSitemaps(seed.url, {
            signal: ctx.signal,
            ...(seed.options.fetch === undefined ? {} : { fetch: seed.options.fetch }),
            ...(seed.options.robots === undefined ? {} : { robots: seed.options.robots }),
          })
        : [seed.url];
    } catch (err) {
      ctx.log.warn({ err, url: seed.url }, 'sitemap discovery failed');
      continue;
    }
    for await (const entry of readSitemap(urls, {
      signal: ctx.signal,
      ...(seed.options.fetch === undefined ? {} : { fetch: seed.options.fetch }),
      onError,
      maxUrls: seed.options.maxUrls ?? 1_000_000,
      ...(seed.discover ? { listedBy: seed.url, crossSubmits: seed.options.crossSubmits === true } : {}),
    })) {
      if (seed.options.filter && !seed.options.filter(entry)) continue;
      const request = new Request(entry.url, seed.options.request);
      out.push(request);
    }
  }
  return out;
}
