// What the child-process workers of the distributed tests print when their run ends: one JSON
// line on stdout, the last line the parent reads.
import type { RunSummary } from 'mocra';

export function printSummary(summary: RunSummary): void {
  const { reason, pages, items, errors, errorsByCode, pending } = summary;
  process.stdout.write(`${JSON.stringify({ reason, pages, items, errors, errorsByCode, pending })}\n`);
}
