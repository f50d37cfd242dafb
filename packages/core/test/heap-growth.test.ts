// limitHeapGrowth: the V8 factor it sets is the one V8 uses (read from V8's own GC trace in a
// child process), a process started with its own --heap-growing-percent keeps it, and bad
// values are refused with a typed error.
import { expect, test } from 'vitest';
import { limitHeapGrowth } from '../src/engine/heap-growth.js';
import { runV8Child } from './v8-child.js';

interface ChildRun {
  stdout: string;
  /** The factor of every new old-generation limit V8 computed, e.g. "1.5". */
  factors: string[];
}

async function runChild(percent: string, nodeFlags: string[] = []): Promise<ChildRun> {
  const out = await runV8Child('heap-growth-child.ts', [percent], ['--trace-gc-verbose', ...nodeFlags]);
  // Only the limits set after the child applied its setting (tsx's own loading comes first).
  const after = out.slice(Math.max(0, out.indexOf('RESULT')));
  const factors = [...after.matchAll(/\[HeapController\] Limit: .*\((\d+\.\d+)\)/g)].map((m) => m[1]!);
  return { stdout: out, factors };
}

test('limitHeapGrowth(50) makes V8 grow the old generation by 1.5× the live heap', async () => {
  const run = await runChild('50');
  expect(run.stdout).toContain('RESULT set');
  expect(run.stdout).toContain('DONE');
  expect(run.factors.length).toBeGreaterThan(0);
  expect(new Set(run.factors)).toEqual(new Set(['1.5']));
}, 90_000);

test('a process started with its own --heap-growing-percent keeps it', async () => {
  const run = await runChild('50', ['--heap_growing_percent=30']);
  expect(run.stdout).toContain('RESULT kept');
  expect(run.factors.length).toBeGreaterThan(0);
  expect(new Set(run.factors)).toEqual(new Set(['1.3']));
}, 90_000);

test('without it V8 keeps its own factor', async () => {
  const run = await runChild('none');
  expect(run.factors.length).toBeGreaterThan(0);
  expect(run.factors.every((f) => f === '1.5')).toBe(false);
}, 90_000);

test('a percent that is not a whole number from 10 to 300 is an InvalidArgumentError', () => {
  const code = expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' });
  for (const bad of [0, 9, 301, 50.5, Number.NaN])
    expect(() => limitHeapGrowth(bad), String(bad)).toThrow(code);
});
