// Graceful shutdown of a real process: SIGTERM mid-crawl → the run stops taking work, lets what
// is in flight finish, and exits 0 on its own; every admitted page is either parsed or still
// queued — nothing acknowledged is lost.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expectedCounts, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';

let site: FixtureSite;
beforeAll(async () => {
  // Slow pages, so the crawl is surely still running when the signal arrives.
  site = await startFixtureSite({ latencyMs: 20 });
});
afterAll(async () => {
  await site?.close();
});

interface ChildReport {
  reason: string;
  admitted: number;
  parsed: string[];
  queuedRequests: string[];
  queuedResponses: string[];
  queuedFollowUps: number;
}

test('SIGTERM mid-crawl: exits cleanly, every admitted page parsed or still queued', async () => {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--conditions=@mocra/source',
      path.join(import.meta.dirname, 'fixtures/shutdown-child.ts'),
      site.url,
      '25',
    ],
    {
      cwd: path.resolve(import.meta.dirname, '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MOCRA_LOG_LEVEL: 'silent' },
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (d: Buffer) => {
      stderr += d;
      if (stderr.includes('ready\n')) resolve();
    });
    child.on('exit', () => reject(new Error(`child exited before it was ready: ${stderr}`)));
  });
  child.kill('SIGTERM');
  const code = await exited;
  expect(code, stderr).toBe(0);

  const report = JSON.parse(stdout.trim()) as ChildReport;
  expect(report.reason).toBe('signal');
  const total = expectedCounts().catalog.pages;
  expect(report.parsed.length).toBeGreaterThanOrEqual(25);
  expect(report.parsed.length).toBeLessThan(total);

  // Nothing admitted is lost: parsed, or downloaded and waiting for parse, or waiting for download.
  const parsed = new Set(report.parsed);
  const queued = new Set([...report.queuedRequests, ...report.queuedResponses]);
  expect(parsed.size).toBe(report.parsed.length);
  expect([...queued].filter((u) => parsed.has(u))).toEqual([]);
  expect(parsed.size + queued.size).toBe(report.admitted);
  expect(report.queuedRequests.length).toBeGreaterThan(0);

  // Every page the server answered was parsed or is queued as a response (in-flight downloads
  // finished before the process stopped).
  const served = Object.keys(site.stats({ log: false }).paths).map((p) => `${site.url}${p}`);
  const downloaded = new Set([...report.parsed, ...report.queuedResponses]);
  expect(served.filter((u) => !downloaded.has(u))).toEqual([]);
});
