/**
 * Exact counts a test can assert, computed from the same options the site was started with.
 * "A crawl from X" means: start at X, follow every same-host `<a href>` in the HTML (no
 * JavaScript, no sitemaps, no robots.txt rules, no query strings added), fetch each URL once.
 */
import { categoryAt, listingPageCount } from './catalog/data.js';
import { bookSitemapCount } from './crawl-rules/sitemaps.js';
import { quotePageCount, quoteTags } from './quotes/data.js';
import { HOME_LINKS } from './site/home-routes.js';
import { type FixtureSiteOptions, resolveFixtureOptions } from './site/options.js';

export interface FixtureExpectations {
  catalog: {
    books: number;
    categories: number;
    perPage: number;
    /** `/books/page/1 … N`. */
    listingPages: number;
    /** Category pages summed over all categories. */
    categoryPages: number;
    /** `/book/1 … /book/<books>`. */
    detailPages: number;
    /** Pages a crawl from `/books/page/1` fetches: listing + category + detail pages. */
    pages: number;
  };
  quotes: {
    quotes: number;
    perPage: number;
    /** `/quotes/page/1 … N`. */
    listingPages: number;
    authors: number;
    tags: number;
    /** Tag pages summed over all tags. */
    tagPages: number;
    /** Pages `/api/quotes?page=N` returns quotes for (the last has `has_next: false`). */
    apiPages: number;
    /** Pages a crawl from `/quotes/page/1` fetches: listing + author + tag pages + `/quotes/login`. */
    pages: number;
  };
  /** Pages a crawl from `/` fetches: the home page, the catalog, the quotes site, the two /private pages. */
  site: { pages: number };
  sitemaps: {
    /** XML sitemaps listed by `/sitemap.xml` (the `books-N.xml` files and the `.xml.gz`). */
    indexEntries: number;
    /** Distinct page URLs across all sitemap files (including `/sitemap.txt`). */
    urls: number;
  };
}

export function expectedCounts(options: FixtureSiteOptions = {}): FixtureExpectations {
  const cfg = resolveFixtureOptions(options);
  const listingPages = listingPageCount(cfg);
  let categoryPages = 0;
  for (let c = 0; c < cfg.catalog.categories; c++) categoryPages += categoryAt(cfg, c).pages;
  const catalogPages = listingPages + categoryPages + cfg.catalog.books;
  const tags = quoteTags(options);
  const tagPages = tags.reduce((sum, t) => sum + t.pages, 0);
  const quoteListingPages = quotePageCount(cfg);
  const quotePages = quoteListingPages + cfg.quotes.authors + tagPages + 1;
  return {
    catalog: {
      books: cfg.catalog.books,
      categories: cfg.catalog.categories,
      perPage: cfg.catalog.perPage,
      listingPages,
      categoryPages,
      detailPages: cfg.catalog.books,
      pages: catalogPages,
    },
    quotes: {
      quotes: cfg.quotes.count,
      perPage: cfg.quotes.perPage,
      listingPages: quoteListingPages,
      authors: cfg.quotes.authors,
      tags: cfg.quotes.tags,
      tagPages,
      apiPages: quoteListingPages,
      pages: quotePages,
    },
    site: { pages: 1 + catalogPages + quotePages + (HOME_LINKS.length - 2) },
    sitemaps: {
      indexEntries: bookSitemapCount(cfg) + 1,
      urls: cfg.catalog.books + listingPages + categoryPages + quoteListingPages + cfg.quotes.authors,
    },
  };
}
