export type { DiscoverSitemapsOptions } from './discover-sitemaps.js';
export { discoverSitemaps } from './discover-sitemaps.js';
export type { ReadSitemapOptions, SitemapEntry } from './sitemap-reader.js';
export { readSitemap, SitemapParser } from './sitemap-reader.js';
