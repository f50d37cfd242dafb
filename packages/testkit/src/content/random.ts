/**
 * Seeded, index-addressable randomness. Every generated thing on the fixture site (a book, a
 * quote, a graph page's cross links) is a pure function of `(seed, stream, index…)`, so any item
 * can be computed on its own without generating the ones before it: page 999,999 of a link graph
 * costs the same as page 0, and nothing is kept in memory between requests.
 */

/** murmur3's 32-bit finaliser: a cheap, well-mixed bijection on uint32. */
function fmix32(input: number): number {
  let h = input >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function combine(h: number, value: number): number {
  // Split values above 2^32 (graph sizes may exceed it in theory) into two words.
  const lo = value >>> 0;
  const hi = Math.floor(value / 0x1_0000_0000) >>> 0;
  let x = fmix32((h ^ Math.imul(lo, 0xcc9e2d51)) + 0x9e3779b9);
  if (hi !== 0) x = fmix32((x ^ Math.imul(hi, 0x1b873593)) + 0x7f4a7c15);
  return x;
}

/** A uniformly mixed uint32 from a seed and up to four integers. Same inputs, same output, everywhere. */
export function hash32(seed: number, a: number, b = 0, c = 0, d = 0): number {
  let h = fmix32((seed >>> 0) ^ 0x5bd1e995);
  h = combine(h, a);
  h = combine(h, b);
  h = combine(h, c);
  h = combine(h, d);
  return h;
}

/** An integer in `[0, n)` from a hash. */
export function pick(hash: number, n: number): number {
  return n <= 1 ? 0 : hash % n;
}

/**
 * A small sequential generator (mulberry32) for the few things built once per seed, such as the
 * pool of filler paragraphs. Per-item content uses `hash32` instead.
 */
export class SeededRandom {
  #state: number;
  constructor(seed: number) {
    this.#state = seed >>> 0;
  }
  /** The next uint32. */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
  /** An integer in `[0, n)`. */
  int(n: number): number {
    return pick(this.next(), n);
  }
  /** An integer in `[min, max]`. */
  range(min: number, max: number): number {
    return min + this.int(max - min + 1);
  }
}

/**
 * Streams of {@link hash32}: one number per kind of generated field, so that changing how one
 * field is drawn never shifts another.
 */
export const STREAM = {
  bookTitle: 1,
  bookPrice: 2,
  bookStock: 3,
  bookRating: 4,
  bookUpc: 5,
  bookDescription: 6,
  quoteText: 11,
  quoteTags: 12,
  authorBorn: 21,
  authorPlace: 22,
  authorBio: 23,
  authorShift: 24,
  graphCross: 31,
  filler: 41,
  fillerStart: 42,
  accountQuotes: 51,
} as const;
