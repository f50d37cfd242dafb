// docs/metrics.md lists every mocra_* family with its type and labels, and nothing else.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { METRIC_FAMILIES, THRESHOLD_DECISION_LABELS, THRESHOLD_DECISIONS } from '../src/index.js';

const doc = readFileSync(join(import.meta.dirname, '../../../docs/metrics.md'), 'utf8');

/** `| \`mocra_x\` | type | labels | … |` rows of the families table. */
function rows(): Map<string, { type: string; labels: string[] }> {
  const out = new Map<string, { type: string; labels: string[] }>();
  for (const line of doc.split('\n')) {
    const m = /^\| `(mocra_[a-z0-9_]+)` \| (counter|gauge|histogram) \| ([^|]+) \|/.exec(line);
    if (!m) continue;
    const labels = m[3]!.trim() === '–' ? [] : [...m[3]!.matchAll(/`([a-z_]+)`/g)].map((x) => x[1]!);
    out.set(m[1]!, { type: m[2]!, labels });
  }
  return out;
}

test('every family is documented with its type and labels', () => {
  const documented = rows();
  for (const spec of Object.values(METRIC_FAMILIES)) {
    expect(documented.get(spec.name), spec.name).toEqual({ type: spec.type, labels: [...spec.labelNames] });
  }
});

test('the docs list no family the registry does not have', () => {
  const known = new Set<string>(Object.values(METRIC_FAMILIES).map((f) => f.name));
  expect([...rows().keys()].filter((name) => !known.has(name))).toEqual([]);
});

test('every threshold decision has its label value in the docs, retry_after as upstream names it', () => {
  const row = doc.split('\n').find((l) => l.startsWith('| `decision` |'));
  expect(row).toBeDefined();
  for (const decision of THRESHOLD_DECISIONS)
    expect(row).toContain(`\`${THRESHOLD_DECISION_LABELS[decision]}\``);
  expect(THRESHOLD_DECISION_LABELS['retry-later']).toBe('retry_after');
});
