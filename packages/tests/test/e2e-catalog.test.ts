// The fixture book catalog crawled end to end through the facade: exact page and item counts,
// every field of every book, each URL fetched once although every page links to many twice.
import { catalogBooks, expectedCounts, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra, type RunSummary } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

interface ScrapedBook {
  id: number;
  title: string;
  price: string;
  availability: string;
  inStock: boolean;
  rating: number;
  category: string;
  upc: string;
  description: string;
  url: string;
}

let site: FixtureSite;
let summary: RunSummary;
const books: ScrapedBook[] = [];

beforeAll(async () => {
  site = await startFixtureSite();
  const spider = defineSpider<ScrapedBook>({
    name: 'catalog',
    startUrls: [`${site.url}/books/page/1`],
    parse(res, cx) {
      const $ = res.$;
      // Follow every catalog link: listing and category pagers, the category sidebar, books,
      // breadcrumbs — most of them many times over; the frontier fetches each URL once.
      for (const a of $('a[href]').toArray()) {
        const href = a.attribs.href!;
        if (href.startsWith('/book')) cx.follow(href);
      }
      const book = $('article.product');
      if (book.length === 0) return;
      cx.emit({
        id: Number(book.attr('data-id')),
        title: book.find('h1').text(),
        price: book.find('p.price').text(),
        availability: book.find('p.availability').text(),
        inStock: book.find('p.availability').hasClass('instock'),
        rating: Number(book.find('.star-rating').attr('data-rating')),
        category: book.find('p.category a').text(),
        upc: book.find('td.upc').text(),
        description: book.find('#product_description p').text(),
        url: res.url,
      });
    },
  });
  summary = await Mocra.builder()
    .spider(spider, (b) => void books.push(b))
    .concurrency(16)
    .run();
});

afterAll(async () => {
  await site?.close();
});

describe('crawling the fixture catalog', () => {
  test('ends on its own with exact page and item counts', () => {
    const expected = expectedCounts().catalog;
    expect(summary.reason).toBe('idle');
    expect(summary.pending).toBe(0);
    expect(summary.errors).toBe(0);
    expect(summary.pages).toBe(expected.pages);
    expect(summary.items).toBe(expected.books);
    expect(books).toHaveLength(expected.books);
  });

  test('every book with every field, exactly as the site holds them', () => {
    const expected = catalogBooks().map((b) => ({
      id: b.id,
      title: b.title,
      price: b.price,
      availability: b.availability,
      inStock: b.inStock,
      rating: b.rating,
      category: b.category,
      upc: b.upc,
      description: b.description,
      url: `${site.url}${b.url}`,
    }));
    expect([...books].sort((a, b) => a.id - b.id)).toEqual(expected);
  });

  test('each URL was fetched once (dedup), as the server counted', () => {
    const stats = site.stats({ log: false });
    expect(stats.requests).toBe(expectedCounts().catalog.pages);
    const repeated = Object.entries(stats.paths).filter(([, n]) => n !== 1);
    expect(repeated).toEqual([]);
    // The frontier saw far more links than pages: the rest were duplicates.
    expect(summary.frontier.duplicates).toBeGreaterThan(summary.frontier.admitted);
  });
});
