/**
 * How large V8 lets the young generation (where every new object starts) become — the other
 * half of a crawl's peak memory, next to the old generation's headroom (heap-growth.ts).
 *
 * V8 starts the young generation at 2 MB and doubles it while many objects survive a
 * scavenge, up to 32 MB. A crawl keeps every in-flight page alive across scavenges, so it
 * always reaches 32 MB: on a crawl of 50 KB pages that is a fifth of the process's peak RSS,
 * for no speed (measured in docs/benchmarks.md: 8 MB crawls as fast, on small and large
 * pages, and takes 15–25 MB less).
 *
 * The cap V8 is started with (`--max-semi-space-size`) cannot change once the process runs,
 * but the growth step can: V8 multiplies the young generation by `--semi-space-growth-factor`
 * each time it grows it. So the cap is kept by steering that factor after every scavenge:
 * V8's own doubling below the cap, 1 (stay) at or above it. V8 grows in doublings, so the
 * young generation stops at the first doubling at or above the cap; it can still shrink when
 * the process idles, and grows back the same way. The steering runs between turns of the event
 * loop, so one long synchronous stretch of allocation can take it a doubling further.
 *
 * A process-wide V8 setting, like the heap growth: the library never sets it on its own, the
 * `mocra` CLI does, `Mocra.builder().youngGeneration()` is the opt-in, and a process started
 * with its own `--max-semi-space-size` or `--semi-space-growth-factor` keeps it.
 */
import { constants, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';
import { InvalidArgumentError } from '../errors.js';
import { startedWithV8Flag } from './v8-flags.js';

export type YoungGenerationResult =
  /** The young generation now stops growing at the cap. */
  | 'set'
  /** The process was started with its own young-generation flags; they stay. */
  | 'kept';

/** The cap in MB: V8's young generation starts at 2 MB and grows to 32 MB on its own. */
export const YOUNG_GENERATION_RANGE = { min: 2, max: 32 } as const;

const MIB = 1024 * 1024;
/** V8's own growth factor, restored below the cap. */
const V8_GROWTH_FACTOR = 2;

let capBytes: number | undefined;
/** The factor last set here; unknown until the first steer (the `mocra` bin sets its own first). */
let growthFactor: number | undefined;
let observer: PerformanceObserver | undefined;

function youngGenerationBytes(): number {
  return v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
}

/** Set the growth factor V8 uses at its next growth: stay at or above the cap, double below. */
function steer(): void {
  if (capBytes === undefined) return;
  const wanted = youngGenerationBytes() >= capBytes ? 1 : V8_GROWTH_FACTOR;
  if (wanted === growthFactor) return;
  v8.setFlagsFromString(`--semi-space-growth-factor=${wanted}`);
  growthFactor = wanted;
}

/**
 * Keep V8's young generation at or under `megabytes` (2–32; V8 grows it to 32 on its own),
 * for this whole process. See the module comment.
 */
export function limitYoungGeneration(megabytes: number): YoungGenerationResult {
  if (
    !Number.isInteger(megabytes) ||
    megabytes < YOUNG_GENERATION_RANGE.min ||
    megabytes > YOUNG_GENERATION_RANGE.max
  ) {
    throw new InvalidArgumentError(
      `the young generation cap must be a whole number of MB from ${YOUNG_GENERATION_RANGE.min} to ${YOUNG_GENERATION_RANGE.max}, got ${megabytes}`,
    );
  }
  if (startedWithV8Flag('--max-semi-space-size', '--semi-space-growth-factor')) return 'kept';
  capBytes = megabytes * MIB;
  if (observer === undefined) {
    // Growth is decided at the end of a scavenge; the next decision is steered right after it.
    // A GC observer holds no handle: it does not keep the process alive.
    observer = new PerformanceObserver((list) => {
      const minor = (e: PerformanceEntry) =>
        (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ===
        constants.NODE_PERFORMANCE_GC_MINOR;
      if (list.getEntries().some(minor)) steer();
    });
    observer.observe({ entryTypes: ['gc'] });
  }
  steer();
  return 'set';
}
