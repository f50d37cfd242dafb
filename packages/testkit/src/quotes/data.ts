/**
 * The quotes site as data. Quote `id` is by author `(id - 1) % authors` and carries the tag
 * `tags[(id - 1) % tagCount]` plus zero to two more drawn from the seed, so every author and every
 * tag has at least one quote. Counts per tag vary; {@link quoteTags} computes them.
 */
import { hash32, SeededRandom, STREAM } from '../content/random.js';
import { sentence, sentences, slugify } from '../content/text.js';
import { FIRST_NAMES, LAST_NAMES, MONTHS, PLACES, REGIONS, TAGS } from '../content/words.js';
import {
  type FixtureSiteOptions,
  type ResolvedFixtureSiteOptions,
  resolveFixtureOptions,
} from '../site/options.js';

export interface Quote {
  /** 1-based id. */
  id: number;
  /** The quote, without quotation marks (pages show it as “text”). */
  text: string;
  author: string;
  authorSlug: string;
  /** `/quotes/author/<slug>`. */
  authorUrl: string;
  /** One to three tags, the first being the quote's primary tag. */
  tags: string[];
}

export interface Author {
  /** 0-based index. */
  index: number;
  name: string;
  slug: string;
  /** `/quotes/author/<slug>`. */
  url: string;
  /** e.g. `March 3, 1871`. */
  born: string;
  /** e.g. `in Velmora, the Salt Coast`. */
  bornIn: string;
  bio: string;
  /** Number of quotes by this author. */
  quotes: number;
}

export interface Tag {
  name: string;
  /** `/quotes/tag/<name>/page/1`. */
  url: string;
  /** Number of quotes with this tag. */
  quotes: number;
  /** Tag pages (at least 1). */
  pages: number;
}

type QuotesConfig = Pick<ResolvedFixtureSiteOptions, 'seed' | 'quotes'>;

export function authorName(cfg: QuotesConfig, index: number): string {
  // (index % F, floor(index / F)) is unique for index < F·L; shifting the last-name index by a
  // function of the first keeps it unique and mixes the pairs.
  const F = FIRST_NAMES.length;
  const L = LAST_NAMES.length;
  const shift = hash32(cfg.seed, STREAM.authorShift) % L;
  const first = FIRST_NAMES[(index + shift) % F]!;
  const last = LAST_NAMES[(Math.floor(index / F) + 7 * (index % F) + shift) % L]!;
  return `${first} ${last}`;
}

export function authorAt(cfg: QuotesConfig, index: number): Author {
  const { seed } = cfg;
  const { count, authors } = cfg.quotes;
  const name = authorName(cfg, index);
  const slug = slugify(name);
  const bh = hash32(seed, STREAM.authorBorn, index);
  const ph = hash32(seed, STREAM.authorPlace, index);
  return {
    index,
    name,
    slug,
    url: `/quotes/author/${slug}`,
    born: `${MONTHS[bh % 12]} ${1 + ((bh >>> 4) % 28)}, ${1700 + ((bh >>> 9) % 250)}`,
    bornIn: `in ${PLACES[ph % PLACES.length]}, ${REGIONS[(ph >>> 5) % REGIONS.length]}`,
    bio: sentences(hash32(seed, STREAM.authorBio, index), 3),
    quotes: index >= count ? 0 : Math.floor((count - 1 - index) / authors) + 1,
  };
}

export function tagNames(cfg: QuotesConfig): readonly string[] {
  return TAGS.slice(0, cfg.quotes.tags);
}

export function quoteTagsOf(cfg: QuotesConfig, id: number): string[] {
  const T = cfg.quotes.tags;
  const primary = (id - 1) % T;
  const tags = [TAGS[primary]!];
  if (T > 1) {
    const h = hash32(cfg.seed, STREAM.quoteTags, id);
    const extra = h % 3;
    for (let k = 1; k <= extra; k++) {
      const t = TAGS[hash32(cfg.seed, STREAM.quoteTags, id, k) % T]!;
      if (!tags.includes(t)) tags.push(t);
    }
  }
  return tags;
}

export function quoteAt(cfg: QuotesConfig, id: number): Quote {
  const a = (id - 1) % cfg.quotes.authors;
  const name = authorName(cfg, a);
  const slug = slugify(name);
  const r = new SeededRandom(hash32(cfg.seed, STREAM.quoteText, id));
  const text = r.int(3) === 0 ? `${sentence(r)} ${sentence(r)}` : sentence(r);
  return {
    id,
    text,
    author: name,
    authorSlug: slug,
    authorUrl: `/quotes/author/${slug}`,
    tags: quoteTagsOf(cfg, id),
  };
}

export function quotePageCount(cfg: QuotesConfig): number {
  return Math.ceil(cfg.quotes.count / cfg.quotes.perPage);
}

/** Quotes of listing page `page` (1-based); empty past the end. */
export function quotePage(cfg: QuotesConfig, page: number): Quote[] {
  const { count, perPage } = cfg.quotes;
  const out: Quote[] = [];
  for (let id = (page - 1) * perPage + 1; id <= Math.min(count, page * perPage); id++)
    out.push(quoteAt(cfg, id));
  return out;
}

/**
 * Ids of quotes with `tag`, in order. Scans every quote's tags (cheap: a few hashes per quote), so
 * the server keeps nothing per tag; a site with a very large quote count pays this per tag page.
 */
export function quoteIdsWithTag(cfg: QuotesConfig, tag: string): number[] {
  const ids: number[] = [];
  for (let id = 1; id <= cfg.quotes.count; id++) if (quoteTagsOf(cfg, id).includes(tag)) ids.push(id);
  return ids;
}

export function authorIndexOf(cfg: QuotesConfig, slug: string): number {
  for (let a = 0; a < cfg.quotes.authors; a++) if (slugify(authorName(cfg, a)) === slug) return a;
  return -1;
}

// ---- Public helpers: same options object as startFixtureSite ----

/** Every quote in id order, exactly as the site renders them. */
export function quoteList(options: FixtureSiteOptions = {}): Quote[] {
  const cfg = resolveFixtureOptions(options);
  const out: Quote[] = [];
  for (let id = 1; id <= cfg.quotes.count; id++) out.push(quoteAt(cfg, id));
  return out;
}

/** Every author in index order, with their quote counts. */
export function quoteAuthors(options: FixtureSiteOptions = {}): Author[] {
  const cfg = resolveFixtureOptions(options);
  const out: Author[] = [];
  for (let a = 0; a < cfg.quotes.authors; a++) out.push(authorAt(cfg, a));
  return out;
}

/** Every tag in list order, with its quote and page counts. */
export function quoteTags(options: FixtureSiteOptions = {}): Tag[] {
  const cfg = resolveFixtureOptions(options);
  const counts = new Map<string, number>(tagNames(cfg).map((t) => [t, 0]));
  for (let id = 1; id <= cfg.quotes.count; id++) {
    for (const t of quoteTagsOf(cfg, id)) counts.set(t, (counts.get(t) ?? 0) + 1);
  }
  return [...counts].map(([name, quotes]) => ({
    name,
    url: `/quotes/tag/${name}/page/1`,
    quotes,
    pages: Math.max(1, Math.ceil(quotes / cfg.quotes.perPage)),
  }));
}
