// The cluster examples run as documented and exit 0 on their own: examples/cluster-crawl.ts
// (three processes on loopback, Raft control plane, Redis data plane, crawl the fixture catalog,
// every book once; with MOCRA_QUEUE=none, the Raft cluster alone, work partitioned by host) and
// examples/cluster-service.ts (three service nodes fed by cron and
// /start_work stay up until they are stopped).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect, test } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../..');

/** Run `examples/<file>` as documented, with a deadline; its exit code and output. */
async function runExample(file: string, timeoutMs: number, env: Record<string, string> = {}) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=@mocra/source', path.join(root, 'examples', file)],
    { cwd: root, env: { ...process.env, MOCRA_LOG_LEVEL: 'error', ...env } },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d;
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

test('examples/cluster-crawl.ts: 3 Raft nodes crawl the catalog, every book exactly once', {
  timeout: 150_000,
}, async () => {
  const { code, stdout, stderr } = await runExample('cluster-crawl.ts', 140_000);
  expect(code, stderr).toBe(0);
  expect(stdout).toContain('200 distinct items (catalog: 200 books)');
  const nodes = [...stdout.matchAll(/^(n\d): (\d+) pages, \d+ items, ended: idle$/gm)];
  expect(nodes.map((m) => m[1])).toEqual(['n1', 'n2', 'n3']);
});

test('examples/cluster-crawl.ts with MOCRA_QUEUE=none: the queue-less Raft cluster crawls 3 hosts, every book once per host', {
  timeout: 150_000,
}, async () => {
  const { code, stdout, stderr } = await runExample('cluster-crawl.ts', 140_000, { MOCRA_QUEUE: 'none' });
  expect(code, stderr).toBe(0);
  expect(stdout).toContain('600 distinct items (catalog: 200 books on each of 3 hosts)');
  const nodes = [...stdout.matchAll(/^(n\d): (\d+) pages, \d+ items, ended: idle$/gm)];
  expect(nodes.map((m) => m[1])).toEqual(['n1', 'n2', 'n3']);
  process.stdout.write(`[cluster-crawl none] ${nodes.map((m) => `${m[1]}=${m[2]} pages`).join(' ')}\n`);
});

test('examples/cluster-service.ts: 3 service nodes fed by cron and /start_work stay up, then stop cleanly', {
  timeout: 120_000,
}, async () => {
  const { code, stdout, stderr } = await runExample('cluster-service.ts', 110_000);
  expect(code, `${stdout}\n${stderr}`).toBe(0);
  expect(stdout).toContain('3 service nodes up');
  expect(stdout.match(/^\/start_work → crawled ".+" on n\d$/gm)).toHaveLength(3);
  expect(stdout).toMatch(/after 3 s with nothing posted: 3 of 3 nodes up/);
  expect(stdout).toMatch(/^n1: \d+ pages, ended: stopped$/m);
  expect(stdout.match(/^n[23]: \d+ pages, ended: signal$/gm)).toHaveLength(2);
  expect(stdout).toMatch(/cron ticks crawled: \d+, 0 twice/);
});
