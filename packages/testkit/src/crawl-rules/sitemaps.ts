/**
 * Sitemaps of the fixture site. Layout (defaults: 1,000 books, 500 URLs per file):
 *
 *   /sitemap.xml                      index → books-1.xml, books-2.xml, catalog-pages.xml.gz
 *   /sitemaps/books-N.xml             book detail pages, 500 per file
 *   /sitemaps/catalog-pages.xml.gz    a gzip file (no Content-Encoding): listing + category pages
 *   /sitemap.txt                      plain text: quote listing pages and author pages
 */

import { categoryAt, listingPageCount } from '../catalog/data.js';
import { hash32 } from '../content/random.js';
import { authorAt, quotePageCount } from '../quotes/data.js';
import {
  type FixtureSiteOptions,
  type ResolvedFixtureSiteOptions,
  resolveFixtureOptions,
} from '../site/options.js';

export const SITEMAP_INDEX_PATH = '/sitemap.xml';
export const SITEMAP_TEXT_PATH = '/sitemap.txt';
export const SITEMAP_GZIP_PATH = '/sitemaps/catalog-pages.xml.gz';

export function bookSitemapCount(cfg: ResolvedFixtureSiteOptions): number {
  return Math.ceil(cfg.catalog.books / cfg.sitemapUrlsPerFile);
}

export function indexEntries(cfg: ResolvedFixtureSiteOptions): string[] {
  const out: string[] = [];
  for (let k = 1; k <= bookSitemapCount(cfg); k++) out.push(`/sitemaps/books-${k}.xml`);
  out.push(SITEMAP_GZIP_PATH);
  return out;
}

/** Book detail paths of `/sitemaps/books-<k>.xml`. */
export function bookSitemapPaths(cfg: ResolvedFixtureSiteOptions, k: number): string[] {
  const out: string[] = [];
  const per = cfg.sitemapUrlsPerFile;
  for (let id = (k - 1) * per + 1; id <= Math.min(cfg.catalog.books, k * per); id++) out.push(`/book/${id}`);
  return out;
}

export function catalogPagePaths(cfg: ResolvedFixtureSiteOptions): string[] {
  const out: string[] = [];
  for (let p = 1; p <= listingPageCount(cfg); p++) out.push(`/books/page/${p}`);
  for (let c = 0; c < cfg.catalog.categories; c++) {
    const cat = categoryAt(cfg, c);
    for (let p = 1; p <= cat.pages; p++) out.push(`/books/category/${cat.slug}/page/${p}`);
  }
  return out;
}

export function quoteSitemapPaths(cfg: ResolvedFixtureSiteOptions): string[] {
  const out: string[] = [];
  for (let p = 1; p <= quotePageCount(cfg); p++) out.push(`/quotes/page/${p}`);
  for (let a = 0; a < cfg.quotes.authors; a++) out.push(authorAt(cfg, a).url);
  return out;
}

/** A stable `lastmod` date in 2024 for a path id. */
function lastmod(seed: number, id: number): string {
  const day = hash32(seed, 77, id) % 365;
  const d = new Date(Date.UTC(2024, 0, 1) + day * 86_400_000);
  return d.toISOString().slice(0, 10);
}

export function urlsetXml(origin: string, paths: readonly string[], seed: number): string {
  const parts = [
    '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n',
  ];
  for (let i = 0; i < paths.length; i++) {
    parts.push(`<url><loc>${origin}${paths[i]}</loc><lastmod>${lastmod(seed, i)}</lastmod></url>\n`);
  }
  parts.push('</urlset>\n');
  return parts.join('');
}

export function indexXml(origin: string, files: readonly string[]): string {
  const entries = files.map((f) => `<sitemap><loc>${origin}${f}</loc></sitemap>\n`).join('');
  return `<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n${entries}</sitemapindex>\n`;
}

export interface SitemapLayout {
  /** Files listed by the index `/sitemap.xml`, in order (root-relative paths). */
  index: string[];
  /** Page paths listed in each sitemap file, by file path: every `books-N.xml`, the `.xml.gz` and `/sitemap.txt`. */
  files: Record<string, string[]>;
  /** Every page path found in any sitemap file (no duplicates across files). */
  pages: string[];
  /** The `Sitemap:` lines of the default robots.txt, as root-relative paths. */
  robots: string[];
}

/** The exact sitemap layout the site serves for `options`. */
export function fixtureSitemaps(options: FixtureSiteOptions = {}): SitemapLayout {
  const cfg = resolveFixtureOptions(options);
  const files: Record<string, string[]> = {};
  for (let k = 1; k <= bookSitemapCount(cfg); k++)
    files[`/sitemaps/books-${k}.xml`] = bookSitemapPaths(cfg, k);
  files[SITEMAP_GZIP_PATH] = catalogPagePaths(cfg);
  files[SITEMAP_TEXT_PATH] = quoteSitemapPaths(cfg);
  return {
    index: indexEntries(cfg),
    files,
    pages: Object.values(files).flat(),
    robots: [SITEMAP_INDEX_PATH, SITEMAP_TEXT_PATH],
  };
}
