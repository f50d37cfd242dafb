// setWasmTierUp: with tier-up off, V8 does not optimise undici's WebAssembly HTTP parser —
// read from V8's own peak compiler memory in a child process making real HTTP requests — and
// with it on (V8's default) the optimising compile shows as tens of MB; a process started with
// its own --liftoff-only keeps it.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect, test } from 'vitest';

const MIB = 1024 * 1024;

function runChild(
  setting: string,
  nodeFlags: string[] = [],
): Promise<{ result: string | undefined; grew: number }> {
  const child = spawn(
    process.execPath,
    [
      ...nodeFlags,
      '--import',
      'tsx',
      '--conditions=@mocra/source',
      path.join(import.meta.dirname, 'wasm-tier-up-child.ts'),
      setting,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
  });
  child.stderr.resume();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('the child did not finish in 60 s'));
    }, 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      const peak = /PEAK (\d+) (\d+)/.exec(out);
      if (code !== 0 || peak === null)
        return reject(new Error(`child exited with ${code}: ${out.slice(-500)}`));
      resolve({ result: /RESULT (\w+)/.exec(out)?.[1], grew: Number(peak[1]) - Number(peak[2]) });
    });
  });
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
