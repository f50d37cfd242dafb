/**
 * How far V8 lets the old generation grow past what survived the last full GC before it
 * collects again — the setting that decides a big crawl's peak memory.
 *
 * A crawl allocates at a high rate, and most of what it allocates (a page's links, their
 * requests and queue records) lives just long enough to be promoted to the old generation and
 * then dies there. V8 sizes its next full-GC limit from how fast the program promotes against
 * how fast it marks, and for such a program it picks its largest factor: 4× the live heap. With
 * a million URLs queued (a live heap of ~50 MB) that is ~200 MB of old generation, mostly
 * garbage, and about half the process's peak RSS. A fixed factor of 1.5 holds the same crawl
 * near 300 MB instead of 400 MB at the same speed: its live heap is small, so a full GC is
 * cheap (measured in docs/benchmarks.md, "Crawl throughput and memory").
 *
 * This is a process-wide V8 setting (`--heap-growing-percent`), so the library never sets it on
 * its own: the `mocra` CLI does (it owns its process), and `Mocra.builder().heapGrowth()` is
 * the opt-in for a program built on the library. A value the process was started with
 * (`node --heap-growing-percent=…`, or in NODE_OPTIONS) is the user's choice and is kept.
 */
import v8 from 'node:v8';
import { InvalidArgumentError } from '../errors.js';
import { startedWithV8Flag } from './v8-flags.js';

const FLAG = '--heap-growing-percent';

export type HeapGrowthResult =
  /** The factor is now 1 + percent/100. */
  | 'set'
  /** The process was started with its own --heap-growing-percent; it stays. */
  | 'kept';

/** The lowest and highest percent accepted: below 10 the GC would run almost continuously. */
export const HEAP_GROWTH_RANGE = { min: 10, max: 300 } as const;

/**
 * Let V8's old generation grow by at most `percent` % of the live heap between full GCs
 * (V8 picks 10–300 % on its own, 300 % for a crawl). See the module comment.
 */
export function limitHeapGrowth(percent: number): HeapGrowthResult {
  if (!Number.isInteger(percent) || percent < HEAP_GROWTH_RANGE.min || percent > HEAP_GROWTH_RANGE.max) {
    throw new InvalidArgumentError(
      `heap growth must be a whole percent from ${HEAP_GROWTH_RANGE.min} to ${HEAP_GROWTH_RANGE.max}, got ${percent}`,
    );
  }
  if (startedWithV8Flag(FLAG)) return 'kept';
  v8.setFlagsFromString(`${FLAG}=${percent}`);
  return 'set';
}
