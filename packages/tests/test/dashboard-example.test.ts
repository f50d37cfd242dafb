// examples/dashboard.ts runs as documented: it prints the dashboard URL, serves the page and the
// API while it crawls, and exits 0 on its own after DURATION_MS.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect, test } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../..');

test('the dashboard example serves the dashboard, then stops by itself and exits 0', async () => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=@mocra/source', path.join(root, 'examples/dashboard.ts')],
    { cwd: root, env: { ...process.env, DURATION_MS: '4000' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d;
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
      const match = /dashboard: (http:\/\/\S+)\//.exec(stdout);
      if (match?.[1] !== undefined) resolve(match[1]);
    });
    child.on('exit', () => reject(new Error(`exited before printing the URL:\n${stdout}\n${stderr}`)));
  });
  const page = await fetch(`${url}/`);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('<title>mocra · dashboard</title>');
  const engine = (await (await fetch(`${url}/observability/engine`)).json()) as { state: string };
  expect(engine.state).toBe('running');

  const code = await new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.on('exit', resolve);
  });
  expect(code, stderr).toBe(0);
  expect(stdout).toMatch(/API key \(pause, resume, dead letters\): \S+/);
  expect(stdout).toMatch(/\d+ books from \d+ pages in \d+ ms \(aborted\)\n$/);
}, 60_000);
