// setWasmTierUp: with tier-up off, V8 does not optimise undici's WebAssembly HTTP parser —
// read from V8's own peak compiler memory in a child process making real HTTP requests — and
// with it on (V8's default) the optimising compile shows as tens of MB; a process started with
// its own --liftoff-only keeps it.
import { expect, test } from 'vitest';
import { runV8Child } from './v8-child.js';

const MIB = 1024 * 1024;

async function runChild(
  setting: string,
  nodeFlags: string[] = [],
): Promise<{ result: string | undefined; grew: number }> {
  const out = await runV8Child('wasm-tier-up-child.ts', [setting], nodeFlags);
  const peak = /PEAK (\d+) (\d+)/.exec(out);
  if (peak === null) throw new Error(`no PEAK line: ${out.slice(-500)}`);
  return { result: /RESULT (\w+)/.exec(out)?.[1], grew: Number(peak[1]) - Number(peak[2]) };
}

test("V8's default optimises the parser: its compiler memory peaks tens of MB higher", async () => {
  const run = await runChild('on');
  expect(run.result).toBe('set');
  expect(run.grew).toBeGreaterThan(15 * MIB);
}, 90_000);

test('with tier-up off the parser stays baseline code and the peak stays flat', async () => {
  const run = await runChild('off');
  expect(run.result).toBe('set');
  expect(run.grew).toBeLessThan(5 * MIB);
}, 90_000);

test('a process started with its own --liftoff-only keeps it', async () => {
  const run = await runChild('on', ['--liftoff_only']);
  expect(run.result).toBe('kept');
  expect(run.grew).toBeLessThan(5 * MIB);
}, 90_000);
