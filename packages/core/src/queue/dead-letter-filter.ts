import type { DeadLetter, DeadLetterFilter } from './types.js';

/** Whether a dead letter passes a {@link DeadLetterFilter} (all given conditions must hold). */
export function matchesDeadLetterFilter(
  letter: Pick<DeadLetter, 'id' | 'reason' | 'deadLetteredAt'>,
  filter: DeadLetterFilter | undefined,
): boolean {
  if (!filter) return true;
  if (filter.ids && !filter.ids.includes(letter.id)) return false;
  if (filter.reasonIncludes !== undefined && !letter.reason.includes(filter.reasonIncludes)) return false;
  if (filter.since !== undefined && letter.deadLetteredAt < filter.since) return false;
  return true;
}

/** Applies offset/limit (defaults 0/100) over an already filtered, oldest-first sequence. */
export function pageOf<T>(items: Iterable<T>, offset = 0, limit = 100): T[] {
  const out: T[] = [];
  let skipped = 0;
  for (const item of items) {
    if (skipped < offset) {
      skipped++;
      continue;
    }
    if (out.length >= limit) break;
    out.push(item);
  }
  return out;
}
