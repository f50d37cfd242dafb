import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { crawl, get, links, texts } from '../__fixtures__/http.js';
import { expectedCounts } from '../expected.js';
import { type FixtureSite, startFixtureSite } from '../site/start.js';
import { catalogBook, catalogBooks, catalogCategories, RATING_WORDS } from './data.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

describe('book catalog (defaults)', () => {
  test('has 1,000 books in 20 categories of 50, across 50 listing pages of 20', () => {
    const books = catalogBooks();
    expect(books).toHaveLength(1000);
    expect(books.map((b) => b.id)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    const cats = catalogCategories();
    expect(cats).toHaveLength(20);
    expect(cats.every((c) => c.books === 50 && c.pages === 3)).toBe(true);
    expect(new Set(cats.map((c) => c.slug)).size).toBe(20);
    const e = expectedCounts();
    expect(e.catalog).toEqual({
      books: 1000,
      categories: 20,
      perPage: 20,
      listingPages: 50,
      categoryPages: 60,
      detailPages: 1000,
      pages: 1110,
    });
    for (const b of books) {
      expect(b.rating).toBeGreaterThanOrEqual(1);
      expect(b.rating).toBeLessThanOrEqual(5);
      expect(b.priceCents).toBeGreaterThanOrEqual(500);
      expect(b.priceCents).toBeLessThan(6000);
      expect(b.inStock).toBe(b.stock > 0);
      expect(b.category).toBe(cats[(b.id - 1) % 20]!.name);
    }
    // Stock and ratings vary (the generator is not stuck on one value).
    expect(new Set(books.map((b) => b.rating)).size).toBe(5);
    expect(books.some((b) => !b.inStock)).toBe(true);
  });

  test('listing pages show 20 books each, in id order, with next/previous links that end', async () => {
    const all = catalogBooks();
    for (const page of [1, 2, 50]) {
      const f = await get(`${site.url}/books/page/${page}`);
      expect(f.status).toBe(200);
      expect(f.headers['content-type']).toBe('text/html; charset=utf-8');
      const titles = [...f.text.matchAll(/<h3><a href="\/book\/\d+" title="([^"]+)">/g)].map((m) => m[1]);
      expect(titles).toEqual(all.slice((page - 1) * 20, page * 20).map((b) => b.title));
      const ids = [...f.text.matchAll(/<article class="product_pod" data-id="(\d+)">/g)].map((m) =>
        Number(m[1]),
      );
      expect(ids).toEqual(Array.from({ length: 20 }, (_, i) => (page - 1) * 20 + i + 1));
      const prices = texts(f.text, 'p', 'price_color');
      expect(prices).toEqual(all.slice((page - 1) * 20, page * 20).map((b) => b.price));
      const next = f.text.match(/<li class="next"><a href="([^"]+)">/)?.[1];
      const prev = f.text.match(/<li class="previous"><a href="([^"]+)">/)?.[1];
      expect(next).toBe(page < 50 ? `/books/page/${page + 1}` : undefined);
      expect(prev).toBe(page > 1 ? `/books/page/${page - 1}` : undefined);
    }
    for (const bad of ['0', '51', '01', 'abc', '-1']) {
      expect((await get(`${site.url}/books/page/${bad}`)).status).toBe(404);
    }
    const redirect = await get(`${site.url}/books`);
    expect(redirect.status).toBe(302);
    expect(redirect.headers.location).toBe('/books/page/1');
  });

  test('detail pages carry exactly the fields catalogBooks() computes, under stable selectors', async () => {
    for (const id of [1, 7, 500, 1000]) {
      const b = catalogBook(id)!;
      const f = await get(`${site.url}/book/${id}`);
      expect(f.status).toBe(200);
      expect([...f.text.matchAll(/<h1>([^<]*)<\/h1>/g)].map((m) => m[1])).toEqual([b.title]);
      expect(f.text).toContain(`<article class="product" data-id="${id}">\n<h1>${b.title}</h1>`);
      expect(texts(f.text, 'p', 'price')).toEqual([b.price]);
      expect(texts(f.text, 'p', 'availability')).toEqual([b.availability]);
      expect(f.text).toContain(
        `<p class="star-rating ${RATING_WORDS[b.rating - 1]}" data-rating="${b.rating}">`,
      );
      expect(texts(f.text, 'p', 'category')).toEqual([b.category]);
      expect(texts(f.text, 'td', 'upc')).toEqual([b.upc]);
      expect(texts(f.text, 'div', 'description')).toEqual([`Description${b.description}`]);
    }
    expect((await get(`${site.url}/book/1001`)).status).toBe(404);
    const api = await get(`${site.url}/api/books/42`);
    expect(api.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(api.text)).toEqual(catalogBook(42));
    expect((await get(`${site.url}/api/books/0`)).status).toBe(404);
  });

  test('category pages list the category’s books in id order, 20 per page, 3 pages', async () => {
    const cat = catalogCategories()[3]!;
    const seen: number[] = [];
    for (let p = 1; p <= cat.pages; p++) {
      const f = await get(`${site.url}/books/category/${cat.slug}/page/${p}`);
      expect(f.status).toBe(200);
      seen.push(...[...f.text.matchAll(/data-id="(\d+)"/g)].map((m) => Number(m[1])));
    }
    const expected = catalogBooks()
      .filter((b) => b.category === cat.name)
      .map((b) => b.id);
    expect(seen).toEqual(expected);
    expect(seen).toHaveLength(50);
    expect((await get(`${site.url}/books/category/${cat.slug}/page/4`)).status).toBe(404);
    expect((await get(`${site.url}/books/category/no-such-genre/page/1`)).status).toBe(404);
  });

  test('a crawl from /books/page/1 following every link fetches exactly 1,110 pages, all 200', async () => {
    const pages = await crawl(site.url, '/books/page/1', 5000);
    expect(pages.size).toBe(expectedCounts().catalog.pages);
    expect([...pages.values()].every((p) => p.status === 200)).toBe(true);
    expect([...pages.keys()].filter((p) => p.startsWith('/book/'))).toHaveLength(1000);
  });

  test('a crawl from / fetches exactly expectedCounts().site.pages pages', async () => {
    const pages = await crawl(site.url, '/', 5000);
    expect(pages.size).toBe(expectedCounts().site.pages);
    expect([...pages.values()].every((p) => p.status === 200)).toBe(true);
  });
});

describe('catalog options and determinism', () => {
  test('same seed → same bytes; another seed → other content; sizes follow the options', async () => {
    const opts = { seed: 42, catalog: { books: 45, categories: 4, perPage: 10 } };
    const a = await startFixtureSite(opts);
    const b = await startFixtureSite(opts);
    const c = await startFixtureSite({ ...opts, seed: 43 });
    try {
      const pa = await get(`${a.url}/book/9`);
      const pb = await get(`${b.url}/book/9`);
      const pc = await get(`${c.url}/book/9`);
      expect(pa.body.equals(pb.body)).toBe(true);
      expect(pa.body.equals(pc.body)).toBe(false);
      expect(catalogBooks(opts)).toEqual(catalogBooks(opts));
      // 45 books in 4 categories: 12, 11, 11, 11; pages of 10 → 2 each; 5 listing pages, the last with 5.
      expect(catalogCategories(opts).map((x) => [x.books, x.pages])).toEqual([
        [12, 2],
        [11, 2],
        [11, 2],
        [11, 2],
      ]);
      const last = await get(`${a.url}/books/page/5`);
      expect([...last.text.matchAll(/data-id="(\d+)"/g)].map((m) => Number(m[1]))).toEqual([
        41, 42, 43, 44, 45,
      ]);
      expect(links(last.text)).not.toContain('/books/page/6');
      expect((await get(`${a.url}/books/page/6`)).status).toBe(404);
      expect(expectedCounts(opts).catalog.pages).toBe(5 + 8 + 45);
      expect((await crawl(a.url, '/books/page/1', 500)).size).toBe(58);
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  test('categories past the genre list get numbered names', () => {
    const cats = catalogCategories({ catalog: { books: 100, categories: 35 } });
    expect(cats[30]!.name).toBe(`${cats[0]!.name} 2`);
    expect(cats[30]!.slug).toBe(`${cats[0]!.slug}-2`);
  });
});
