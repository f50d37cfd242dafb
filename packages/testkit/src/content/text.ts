/**
 * Generated English-like text: titles, sentences, paragraphs and names, all pure functions of a
 * hash. Output is ASCII without `<`, `>`, `&` or quotes (see words.ts), so it goes into HTML as is.
 */
import { hash32, SeededRandom, STREAM } from './random.js';
import { ADJECTIVES, ADVERBS, NOUNS, PREPOSITIONS, VERBS } from './words.js';

function at<T>(list: readonly T[], index: number): T {
  return list[index % list.length] as T;
}

export function capitalize(word: string): string {
  return word.length === 0 ? word : word[0]!.toUpperCase() + word.slice(1);
}

export function titleCase(text: string): string {
  return text
    .split(' ')
    .map((w, i) =>
      i > 0 && (w === 'of' || w === 'the' || w === 'a' || w === 'an' || w === 'for' || w === 'and')
        ? w
        : capitalize(w),
    )
    .join(' ');
}

export function plural(noun: string): string {
  if (/(s|x|ch|sh)$/.test(noun)) return `${noun}es`;
  if (/[^aeiou]y$/.test(noun)) return `${noun.slice(0, -1)}ies`;
  return `${noun}s`;
}

function article(word: string): string {
  return /^[aeiou]/.test(word) ? 'an' : 'a';
}

/** A lowercase, hyphenated, URL-safe form of a name. */
export function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

/** A book-like title of two to five words. */
export function titleFromHash(h: number): string {
  const r = new SeededRandom(h);
  const adj = at(ADJECTIVES, r.next());
  const noun = at(NOUNS, r.next());
  const noun2 = at(NOUNS, r.next());
  switch (r.int(6)) {
    case 0:
      return titleCase(`the ${adj} ${noun}`);
    case 1:
      return titleCase(`${plural(noun)} of the ${adj} ${noun2}`);
    case 2:
      return titleCase(`${article(noun)} ${noun} for the ${adj} ${noun2}`);
    case 3:
      return titleCase(`${adj} ${plural(noun)}`);
    case 4:
      return titleCase(`the ${noun} ${at(PREPOSITIONS, r.next())} the ${noun2}`);
    default:
      return titleCase(`the ${adj} ${noun} and the ${noun2}`);
  }
}

/** One sentence, capitalised and ending with a full stop. */
export function sentence(r: SeededRandom): string {
  const adj = at(ADJECTIVES, r.next());
  const adj2 = at(ADJECTIVES, r.next());
  const noun = at(NOUNS, r.next());
  const noun2 = at(NOUNS, r.next());
  const noun3 = at(NOUNS, r.next());
  const verb = at(VERBS, r.next());
  const verb2 = at(VERBS, r.next());
  const adverb = at(ADVERBS, r.next());
  const prep = at(PREPOSITIONS, r.next());
  let s: string;
  switch (r.int(7)) {
    case 0:
      s = `the ${adj} ${noun} ${verb} the ${noun2} ${prep} the ${noun3}`;
      break;
    case 1:
      s = `every ${noun} ${adverb} ${verb} ${article(adj)} ${adj} ${noun2}`;
      break;
    case 2:
      s = `${article(adj)} ${adj} ${noun} is ${article(noun2)} ${noun2} that ${verb} its own ${noun3}`;
      break;
    case 3:
      s = `no ${noun} ${verb} the ${adj} ${noun2} twice`;
      break;
    case 4:
      s = `${adverb}, the ${noun} ${verb} what the ${adj2} ${noun2} leaves ${prep} the ${noun3}`;
      break;
    case 5:
      s = `whoever ${verb} ${article(noun)} ${noun} ${adverb} ${verb2} the ${adj} ${noun2}`;
      break;
    default:
      s = `${prep} the ${adj} ${noun}, ${article(adj2)} ${adj2} ${noun2} ${verb} the ${noun3}`;
      break;
  }
  return `${capitalize(s)}.`;
}

/** `count` sentences joined by spaces. */
export function sentences(h: number, count: number): string {
  const r = new SeededRandom(h);
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(sentence(r));
  return out.join(' ');
}

/** Number of paragraphs in the filler pool shared by link-graph pages and streamed bodies. */
export const FILLER_POOL_SIZE = 64;

const fillerPools = new Map<number, readonly string[]>();

/**
 * `<p>…</p>\n` paragraphs (ASCII, so string length equals byte length) that pad pages to a size.
 * Built once per seed (about 25 KB) and shared by every request; kept for at most a few seeds.
 */
export function fillerParagraphs(seed: number): readonly string[] {
  let pool = fillerPools.get(seed);
  if (pool === undefined) {
    const built: string[] = [];
    for (let i = 0; i < FILLER_POOL_SIZE; i++) {
      const h = hash32(seed, STREAM.filler, i);
      built.push(`<p>${sentences(h, 3 + (h % 5))}</p>\n`);
    }
    pool = built;
    if (fillerPools.size >= 8) fillerPools.delete(fillerPools.keys().next().value as number);
    fillerPools.set(seed, pool);
  }
  return pool;
}

/**
 * Exactly `bytes` bytes of paragraphs, starting at paragraph `start` of the pool. The last paragraph
 * is cut to fit; a gap too small for `<p></p>` is filled with newlines. Returns the parts to join.
 */
export function fillerParts(seed: number, start: number, bytes: number, out: string[]): void {
  const pool = fillerParagraphs(seed);
  let left = bytes;
  let i = start % pool.length;
  while (left > 0) {
    const p = pool[i]!;
    if (p.length <= left) {
      out.push(p);
      left -= p.length;
    } else if (left >= 8) {
      // `<p>` + text + `</p>\n` = text + 8 bytes.
      out.push(`<p>${p.slice(3, 3 + left - 8)}</p>\n`);
      left = 0;
    } else {
      out.push('\n'.repeat(left));
      left = 0;
    }
    i = (i + 1) % pool.length;
  }
}
