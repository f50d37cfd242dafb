/**
 * A deterministic link graph of any size, for benchmarks. Page `i` of a graph with `pages` pages
 * and fan-out `f` links to exactly `f` pages:
 *
 *   slots 1…f   → the tree children i·f+1 … i·f+f that exist (< pages), in order;
 *   other slots → cross links hash(seed, pages, i, slot) mod pages (may repeat or point back).
 *
 *          0
 *      ┌───┼───┐          tree backbone (f = 3): every page is reachable from page 0,
 *      1   2   3          so a full crawl from page 0 fetches exactly `pages` distinct pages;
 *     /|\ /|\ /|\         leaves use all their slots for cross links.
 *
 * Nothing is stored: each page and its links are computed from `(seed, pages, fanout, i)`.
 * The whole configuration lives in the path, so one server serves many graphs:
 * `/graph/<pages>/<fanout>/<bytes>/<i>`, where `bytes` is the exact size of each page body.
 */

import { hash32, STREAM } from '../content/random.js';
import { fillerParts } from '../content/text.js';
import { FixtureOptionError } from '../errors.js';
import { type FixtureSiteOptions, resolveFixtureOptions } from '../site/options.js';

export interface GraphSpec {
  /** Number of pages, 1 … 2,147,483,647. */
  pages: number;
  /** Links on every page, 1 … 1,000. */
  fanout: number;
  /** Size of every page body in bytes (pages whose markup alone is larger are that size), 0 … 10,000,000. */
  bytes: number;
}

export const GRAPH_LIMITS = { maxPages: 2_147_483_647, maxFanout: 1000, maxBytes: 10_000_000 } as const;

export function isValidGraphSpec(spec: GraphSpec): boolean {
  return (
    Number.isInteger(spec.pages) &&
    spec.pages >= 1 &&
    spec.pages <= GRAPH_LIMITS.maxPages &&
    Number.isInteger(spec.fanout) &&
    spec.fanout >= 1 &&
    spec.fanout <= GRAPH_LIMITS.maxFanout &&
    Number.isInteger(spec.bytes) &&
    spec.bytes >= 0 &&
    spec.bytes <= GRAPH_LIMITS.maxBytes
  );
}

function check(spec: GraphSpec): void {
  if (typeof spec !== 'object' || spec === null || !isValidGraphSpec(spec)) {
    throw new FixtureOptionError(
      'graph',
      `expected { pages: 1…${GRAPH_LIMITS.maxPages}, fanout: 1…${GRAPH_LIMITS.maxFanout}, bytes: 0…${GRAPH_LIMITS.maxBytes} } (integers), got ${JSON.stringify(spec)}`,
    );
  }
}

function checkIndex(spec: GraphSpec, index: number): void {
  if (!Number.isInteger(index) || index < 0 || index >= spec.pages) {
    throw new FixtureOptionError('index', `expected a page index 0…${spec.pages - 1}, got ${index}`);
  }
}

/** Root-relative path of page `index` (default: the start page 0). */
export function graphPath(spec: GraphSpec, index = 0): string {
  check(spec);
  checkIndex(spec, index);
  return `/graph/${spec.pages}/${spec.fanout}/${spec.bytes}/${index}`;
}

/** Link targets of page `index` without validation (the server has validated the path). */
export function linksOf(seed: number, spec: GraphSpec, index: number, out: number[]): void {
  const { pages, fanout } = spec;
  const firstChild = index * fanout + 1;
  for (let k = 0; k < fanout; k++) {
    const child = firstChild + k;
    out.push(child < pages ? child : hash32(seed, STREAM.graphCross, pages, index, k) % pages);
  }
}

/** Page indexes page `index` links to, in document order (exactly `fanout` of them). */
export function graphLinks(spec: GraphSpec, index: number, options: FixtureSiteOptions = {}): number[] {
  check(spec);
  checkIndex(spec, index);
  const out: number[] = [];
  linksOf(resolveFixtureOptions(options).seed, spec, index, out);
  return out;
}

/** Distinct pages a full crawl from page 0 fetches: always `spec.pages`. */
export function graphPageCount(spec: GraphSpec): number {
  check(spec);
  return spec.pages;
}

/** Links on all pages together (`pages × fanout`), i.e. URLs a crawler discovers before dedup. */
export function graphLinkCount(spec: GraphSpec): number {
  check(spec);
  return spec.pages * spec.fanout;
}

/** Depth of the deepest page in the tree backbone (page 0 has depth 0); a BFS may find shortcuts. */
export function graphTreeDepth(spec: GraphSpec): number {
  check(spec);
  let depth = 0;
  let last = spec.pages - 1;
  while (last > 0) {
    last = Math.floor((last - 1) / spec.fanout);
    depth += 1;
  }
  return depth;
}

/** The HTML of one page, exactly `max(spec.bytes, markup)` bytes long (all ASCII). */
export function renderGraphPage(seed: number, spec: GraphSpec, index: number): string {
  const prefix = `/graph/${spec.pages}/${spec.fanout}/${spec.bytes}/`;
  const parts: string[] = [
    `<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Graph page ${index}</title>\n</head>\n<body>\n<main class="graph-page" data-index="${index}" data-pages="${spec.pages}">\n<h1>Page ${index}</h1>\n<ul class="links">\n`,
  ];
  const links: number[] = [];
  linksOf(seed, spec, index, links);
  for (const j of links) parts.push(`<li><a href="${prefix}${j}">Page ${j}</a></li>\n`);
  parts.push('</ul>\n<div class="filler">\n');
  const tail = '</div>\n</main>\n</body>\n</html>\n';
  let used = tail.length;
  for (const p of parts) used += p.length;
  if (spec.bytes > used) fillerParts(seed, hash32(seed, STREAM.fillerStart, index), spec.bytes - used, parts);
  parts.push(tail);
  return parts.join('');
}
