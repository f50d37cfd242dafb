// Runs one of the V8-setting tests' child scripts (heap growth, young generation, WebAssembly
// tier-up) in its own node process — V8 settings are process-wide — and resolves with its
// stdout once it exits with 0. Bounded: killed after 60 s.
import { spawn } from 'node:child_process';
import path from 'node:path';

export function runV8Child(script: string, args: string[], nodeFlags: string[] = []): Promise<string> {
  const child = spawn(
    process.execPath,
    [
      ...nodeFlags,
      '--import',
      'tsx',
      '--conditions=@mocra/source',
      path.join(import.meta.dirname, script),
      ...args,
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
      reject(new Error(`${script} did not finish in 60 s`));
    }, 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) reject(new Error(`${script} exited with ${code}: ${out.slice(-500)}`));
      else resolve(out);
    });
  });
}
