/**
 * The book catalog as data. Every book is a pure function of `(seed, id)`, so the server renders
 * any page without a stored catalog and a test computes the exact same books with
 * {@link catalogBooks}. Layout (defaults):
 *
 *   /books/page/1 … /books/page/50            20 books each, ids in order
 *   /book/1 … /book/1000                      one detail page per book
 *   /books/category/<slug>/page/1 … /3        category c holds ids c+1, c+1+20, c+1+40, …
 */
import { hash32, STREAM } from '../content/random.js';
import { sentences, slugify, titleFromHash } from '../content/text.js';
import { GENRES } from '../content/words.js';
import {
  type FixtureSiteOptions,
  type ResolvedFixtureSiteOptions,
  resolveFixtureOptions,
} from '../site/options.js';

export interface Book {
  /** 1-based id; the detail page is `/book/<id>`. */
  id: number;
  title: string;
  /** Root-relative detail page URL, `/book/<id>`. */
  url: string;
  /** Price as shown, e.g. `£23.45`. */
  price: string;
  /** Price in pence, 500 … 5999. */
  priceCents: number;
  inStock: boolean;
  /** Copies available; 0 when out of stock. */
  stock: number;
  /** `In stock (7 available)` or `Out of stock`. */
  availability: string;
  /** Star rating, 1 … 5. */
  rating: number;
  /** Category name, e.g. `Travel`. */
  category: string;
  categorySlug: string;
  /** 16 hex digits. */
  upc: string;
  /** Two to four generated sentences. */
  description: string;
}

export interface Category {
  /** 0-based index; book `id` is in category `(id - 1) % categories`. */
  index: number;
  name: string;
  slug: string;
  /** `/books/category/<slug>/page/1`. */
  url: string;
  /** Books in the category. */
  books: number;
  /** Category pages (at least 1). */
  pages: number;
}

export const RATING_WORDS = ['One', 'Two', 'Three', 'Four', 'Five'] as const;

type CatalogConfig = Pick<ResolvedFixtureSiteOptions, 'seed' | 'catalog'>;

export function categoryName(index: number): string {
  const base = GENRES[index % GENRES.length]!;
  const round = Math.floor(index / GENRES.length);
  return round === 0 ? base : `${base} ${round + 1}`;
}

/** Books in category `index`. */
export function categorySize(cfg: CatalogConfig, index: number): number {
  const { books, categories } = cfg.catalog;
  return index >= books ? 0 : Math.floor((books - 1 - index) / categories) + 1;
}

export function categoryAt(cfg: CatalogConfig, index: number): Category {
  const name = categoryName(index);
  const slug = slugify(name);
  const books = categorySize(cfg, index);
  return {
    index,
    name,
    slug,
    url: `/books/category/${slug}/page/1`,
    books,
    pages: Math.max(1, Math.ceil(books / cfg.catalog.perPage)),
  };
}

/** Category index from its slug, or -1. Slugs are `genre` or `genre-N` (see {@link categoryName}). */
export function categoryIndexOf(cfg: CatalogConfig, slug: string): number {
  const m = /^([a-z]+)(?:-([2-9]|[1-9]\d+))?$/.exec(slug);
  if (m === null) return -1;
  const genre = GENRES.findIndex((g) => g.toLowerCase() === m[1]);
  if (genre < 0) return -1;
  const round = m[2] === undefined ? 0 : Number(m[2]) - 1;
  const index = round * GENRES.length + genre;
  return index < cfg.catalog.categories ? index : -1;
}

/** A book with everything a listing shows; `description` is left empty (it costs the most to generate). */
export function bookSummaryAt(cfg: CatalogConfig, id: number): Book {
  const seed = cfg.seed;
  const title = titleFromHash(hash32(seed, STREAM.bookTitle, id));
  const priceCents = 500 + (hash32(seed, STREAM.bookPrice, id) % 5500);
  const stockHash = hash32(seed, STREAM.bookStock, id);
  // About one book in seven is out of stock.
  const inStock = stockHash % 7 !== 0;
  const stock = inStock ? 1 + ((stockHash >>> 3) % 22) : 0;
  const rating = 1 + (hash32(seed, STREAM.bookRating, id) % 5);
  const c = (id - 1) % cfg.catalog.categories;
  const category = categoryName(c);
  const u1 = hash32(seed, STREAM.bookUpc, id, 1).toString(16).padStart(8, '0');
  const u2 = hash32(seed, STREAM.bookUpc, id, 2).toString(16).padStart(8, '0');
  return {
    id,
    title,
    url: `/book/${id}`,
    price: `£${Math.floor(priceCents / 100)}.${String(priceCents % 100).padStart(2, '0')}`,
    priceCents,
    inStock,
    stock,
    availability: inStock ? `In stock (${stock} available)` : 'Out of stock',
    rating,
    category,
    categorySlug: slugify(category),
    upc: u1 + u2,
    description: '',
  };
}

export function bookAt(cfg: CatalogConfig, id: number): Book {
  const book = bookSummaryAt(cfg, id);
  const dh = hash32(cfg.seed, STREAM.bookDescription, id);
  book.description = sentences(dh, 2 + (dh % 3));
  return book;
}

/** Ids of the books on listing page `page` (1-based), in order. Empty past the last page. */
export function listingIds(cfg: CatalogConfig, page: number): number[] {
  const { books, perPage } = cfg.catalog;
  const ids: number[] = [];
  for (let id = (page - 1) * perPage + 1; id <= Math.min(books, page * perPage); id++) ids.push(id);
  return ids;
}

/** Ids of the books on page `page` of category `index`, in order. */
export function categoryPageIds(cfg: CatalogConfig, index: number, page: number): number[] {
  const { categories, perPage } = cfg.catalog;
  const size = categorySize(cfg, index);
  const ids: number[] = [];
  for (let j = (page - 1) * perPage; j < Math.min(size, page * perPage); j++)
    ids.push(index + 1 + j * categories);
  return ids;
}

export function listingPageCount(cfg: CatalogConfig): number {
  return Math.ceil(cfg.catalog.books / cfg.catalog.perPage);
}

// ---- Public helpers: same options object as startFixtureSite ----

/** Every book of the catalog, in id order, exactly as the site renders them. */
export function catalogBooks(options: FixtureSiteOptions = {}): Book[] {
  const cfg = resolveFixtureOptions(options);
  const out: Book[] = [];
  for (let id = 1; id <= cfg.catalog.books; id++) out.push(bookAt(cfg, id));
  return out;
}

/** One book by id (1-based), or undefined when the catalog has no such book. */
export function catalogBook(id: number, options: FixtureSiteOptions = {}): Book | undefined {
  const cfg = resolveFixtureOptions(options);
  return Number.isInteger(id) && id >= 1 && id <= cfg.catalog.books ? bookAt(cfg, id) : undefined;
}

/** Every category with its size and page count, in index order. */
export function catalogCategories(options: FixtureSiteOptions = {}): Category[] {
  const cfg = resolveFixtureOptions(options);
  const out: Category[] = [];
  for (let c = 0; c < cfg.catalog.categories; c++) out.push(categoryAt(cfg, c));
  return out;
}
