import { describe, expect, test } from 'vitest';
import { expectedCounts } from './expected.js';
import { quoteTags } from './quotes/data.js';

// The figures docs/fixture-site.md and the README state for a default site.
describe('documented default counts', () => {
  test('catalog, quotes, whole site and sitemaps', () => {
    expect(expectedCounts()).toEqual({
      catalog: {
        books: 1000,
        categories: 20,
        perPage: 20,
        listingPages: 50,
        categoryPages: 60,
        detailPages: 1000,
        pages: 1110,
      },
      quotes: {
        quotes: 100,
        perPage: 10,
        listingPages: 10,
        authors: 20,
        tags: 12,
        tagPages: 25,
        apiPages: 10,
        pages: 56,
      },
      site: { pages: 1169 },
      sitemaps: { indexEntries: 3, urls: 1140 },
    });
    expect(quoteTags().map((t) => [t.name, t.quotes])).toEqual([
      ['courage', 12],
      ['rivers', 13],
      ['memory', 13],
      ['patience', 13],
      ['light', 13],
      ['silence', 15],
      ['friendship', 20],
      ['work', 23],
      ['change', 14],
      ['home', 18],
      ['time', 12],
      ['wonder', 13],
    ]);
  });
});
