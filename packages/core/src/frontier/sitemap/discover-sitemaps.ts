/**
 * Where an origin's sitemaps are: the `Sitemap:` lines of its robots.txt, or, when it lists
 * none, the conventional `/sitemap.xml`.
 */

import type { ResourceFetcher } from '../robots/resource-fetcher.js';
import { RobotsCache } from '../robots/robots-cache.js';

export interface DiscoverSitemapsOptions {
  /** The robots.txt cache to ask (shared with the crawl, so robots.txt is fetched once). */
  robots?: RobotsCache;
  /** Fetcher for robots.txt when no cache is given. */
  fetch?: ResourceFetcher;
  /** Fall back to `<origin>/sitemap.xml` when robots.txt lists no sitemap. @default true */
  fallback?: boolean;
  signal?: AbortSignal;
}

export async function discoverSitemaps(
  origin: string,
  options: DiscoverSitemapsOptions = {},
): Promise<string[]> {
  const o = new URL(origin).origin;
  const robots = options.robots ?? new RobotsCache(options.fetch ? { fetch: options.fetch } : {});
  const listed = await robots.sitemaps(o, options.signal);
  const unique = [...new Set(listed.filter((u) => /^https?:\/\//i.test(u)))];
  if (unique.length > 0 || options.fallback === false) return unique;
  return [`${o}/sitemap.xml`];
}
