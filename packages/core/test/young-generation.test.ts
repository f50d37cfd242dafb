// limitYoungGeneration: V8's young generation stops growing at the cap (read from V8's own
// heap statistics in a child process that keeps objects alive across scavenges), it grows to
// V8's 32 MB without the cap, a process started with its own semi-space size keeps it, and
// bad values are refused with a typed error.
import { expect, test } from 'vitest';
import { limitYoungGeneration } from '../src/engine/young-generation.js';
import { runV8Child } from './v8-child.js';

const MIB = 1024 * 1024;

async function runChild(
  cap: string,
  nodeFlags: string[] = [],
): Promise<{ result: string | undefined; largest: number }> {
  const out = await runV8Child('young-generation-child.ts', [cap], nodeFlags);
  const largest = /LARGEST (\d+)/.exec(out);
  if (largest === null) throw new Error(`no LARGEST line: ${out.slice(-500)}`);
  return { result: /RESULT (\w+)/.exec(out)?.[1], largest: Number(largest[1]) };
}

test('without a cap V8 grows the young generation past 16 MB', async () => {
  const run = await runChild('none');
  expect(run.largest).toBeGreaterThan(16 * MIB);
}, 90_000);

test('limitYoungGeneration(8) keeps it at 8 MB', async () => {
  const run = await runChild('8');
  expect(run.result).toBe('set');
  expect(run.largest).toBeLessThanOrEqual(8 * MIB);
  expect(run.largest).toBeGreaterThan(4 * MIB); // it still grows up to the cap
}, 90_000);

test('a process started with its own --max-semi-space-size keeps it', async () => {
  const run = await runChild('8', ['--max_semi_space_size=1']);
  expect(run.result).toBe('kept');
  expect(run.largest).toBeLessThanOrEqual(2 * MIB);
}, 90_000);

test('a cap that is not a whole number of MB from 2 to 32 is an InvalidArgumentError', () => {
  const code = expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' });
  for (const bad of [0, 1, 33, 8.5, Number.NaN])
    expect(() => limitYoungGeneration(bad), String(bad)).toThrow(code);
});
