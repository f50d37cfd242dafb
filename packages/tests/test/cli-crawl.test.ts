// The `mocra` CLI end to end, as users run it: a child process against the fixture site.
// Exit codes, the records it writes (JSONL and CSV), robots.txt by default, clear errors for bad
// flags and unreachable start URLs, progress lines, and resuming after SIGKILL with --persist.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { catalogBooks, expectedCounts, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';

const CLI = path.resolve(import.meta.dirname, '../../mocra/src/cli/main.ts');
const tmp = mkdtempSync(path.join(tmpdir(), 'mocra-cli-test-'));

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
beforeEach(() => site.resetStats());
afterAll(async () => {
  await site.close();
  rmSync(tmp, { recursive: true, force: true });
});

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function start(
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; done: Promise<Ran> } {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', CLI, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    cwd: path.resolve(import.meta.dirname, '..'),
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (b: Buffer) => {
    stdout += b.toString();
  });
  child.stderr!.on('data', (b: Buffer) => {
    stderr += b.toString();
  });
  const done = new Promise<Ran>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, done };
}

const mocra = (...args: string[]) => start(args).done;

interface Record_ {
  url: string;
  finalUrl: string | null;
  status: number | null;
  contentType: string | null;
  bytes: number;
  depth: number;
  title: string | null;
  links: number;
  fetchMs: number | null;
  error: string | null;
}

const readJsonl = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record_);

describe('help and usage errors (the bin)', () => {
  test('--help exits 0; a bad flag exits 2 with its message (more cases: mocra/src/cli/program.test.ts)', async () => {
    const crawl = await mocra('crawl', '--help');
    expect(crawl.code).toBe(0);
    expect(crawl.stdout).toMatch(/Usage: mocra crawl \[options\] <url\.\.\.>/);
    const bad = await mocra('crawl', site.url, '--max-pages', 'ten');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--max-pages <n>' argument 'ten' is invalid/);
    expect(site.stats().requests).toBe(0);
  });
});

describe('mocra crawl', () => {
  test('crawls the whole site once, robots.txt obeyed, one JSONL record per page', async () => {
    const out = path.join(tmp, 'site.jsonl');
    const r = await mocra('crawl', `${site.url}/`, '--out', out, '--concurrency', '8');
    expect(r.code).toBe(0);
    const records = readJsonl(out);
    const expected = expectedCounts().site.pages - 1; // /private/secret is disallowed
    expect(records).toHaveLength(expected);
    expect(new Set(records.map((x) => x.url)).size).toBe(expected);
    expect(records.some((x) => x.url.endsWith('/private/secret'))).toBe(false);
    expect(site.stats().paths['/private/secret']).toBeUndefined();
    expect(site.stats().paths['/robots.txt']).toBe(1);
    const book = records.find((x) => x.url === `${site.url}/book/7`)!;
    expect(book).toMatchObject({
      finalUrl: `${site.url}/book/7`,
      status: 200,
      contentType: 'text/html',
      depth: 2, // / → /books/page/1 → /book/7
      error: null,
    });
    expect(book.title).toContain(catalogBooks()[6]!.title);
    expect(book.bytes).toBeGreaterThan(500);
    expect(book.links).toBeGreaterThan(0);
    expect(book.fetchMs).toBeGreaterThanOrEqual(0);
    expect(records.find((x) => x.url === `${site.url}/`)).toMatchObject({ depth: 0, links: 4 });
    expect(r.stderr).toMatch(/finished in/);
    expect(r.stderr).toMatch(new RegExp(`pages +${expected} `));
    expect(r.stderr).toMatch(/1 dropped by robots\.txt/);
  }, 60_000);

  test('an unreachable start URL fails clearly with exit 1', async () => {
    const r = await mocra('crawl', 'http://127.0.0.1:9/', '--retries', '0');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /cannot reach http:\/\/127\.0\.0\.1:9\/.*ECONNREFUSED.*MOCRA_ERR_START_UNREACHABLE/,
    );
    const noRobots = await mocra(
      'crawl',
      'http://127.0.0.1:9/',
      '--retries',
      '0',
      '--no-robots',
      '--out',
      path.join(tmp, 'x.jsonl'),
    );
    expect(noRobots.code).toBe(1);
    // One code on the line: the cause's words, and its own code in the record and the summary.
    expect(noRobots.stderr).toMatch(
      /^mocra: cannot reach http:\/\/127\.0\.0\.1:9\/: connect ECONNREFUSED 127\.0\.0\.1:9 \(MOCRA_ERR_START_UNREACHABLE\)$/m,
    );
    expect(noRobots.stderr).toMatch(/MOCRA_ERR_CONNECTION {2}1, e\.g\. http:\/\/127\.0\.0\.1:9\//);
    expect(readJsonl(path.join(tmp, 'x.jsonl'))).toEqual([
      expect.objectContaining({ url: 'http://127.0.0.1:9/', status: null, error: 'MOCRA_ERR_CONNECTION' }),
    ]);
  }, 60_000);

  test('without a terminal, progress is printed as plain lines', async () => {
    site.setLatency(15, 5);
    try {
      const r = await mocra(
        'crawl',
        `${site.url}/books/page/1`,
        '--max-pages',
        '120',
        '--concurrency',
        '2',
        '--progress-interval',
        '1',
      );
      expect(r.code).toBe(0);
      expect(r.stderr).toMatch(/^mocra: \d+ pages, \d+ queued, [\d.]+ pages\/s, 0 errors, 00:0\d$/m);
      expect(r.stderr.includes('\u001b[')).toBe(false); // no terminal control sequences
    } finally {
      site.setLatency(0, 0);
    }
  }, 60_000);

  test('resume after SIGKILL with --persist: nothing lost, nothing fetched twice beyond the pages in flight', async () => {
    const dir = path.join(tmp, 'state');
    const out = path.join(tmp, 'resume.jsonl');
    const args = [
      'crawl',
      `${site.url}/`,
      '--persist',
      dir,
      '--out',
      out,
      '--concurrency',
      '4',
      '--no-robots',
    ];
    site.setLatency(10, 5);
    let first: Ran;
    try {
      const run = start(args);
      // Kill it mid-crawl, once more than 300 records are on disk (complete lines: the count
      // asserted below; records are written in batches, so it can land on 300 exactly).
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        if (existsSync(out) && readFileSync(out, 'utf8').split('\n').length - 1 > 300) break;
      }
      run.child.kill('SIGKILL');
      first = await run.done;
    } finally {
      site.setLatency(0, 0);
    }
    expect(first.signal).toBe('SIGKILL');
    const before = readJsonl(out).length;
    const fetchedBefore = pageFetches();
    expect(before).toBeGreaterThan(300);
    expect(before).toBeLessThan(expectedCounts().site.pages);

    const second = await mocra(...args);
    expect(second.code).toBe(0);
    const records = readJsonl(out);
    const total = expectedCounts().site.pages;
    expect(new Set(records.map((r) => r.url)).size).toBe(total);
    expect(records).toHaveLength(total); // no URL written twice
    // Pages fetched over both runs: each once, except at most the few in flight at the kill.
    expect(pageFetches()).toBeGreaterThanOrEqual(total);
    expect(pageFetches()).toBeLessThanOrEqual(total + 8);
    expect(fetchedBefore).toBeGreaterThanOrEqual(before);
    expect(second.stderr).toMatch(/from before the resume/);
  }, 120_000);
});

/** Page requests the server saw since the last reset (robots.txt excluded). */
function pageFetches(): number {
  const s = site.stats();
  return s.requests - (s.paths['/robots.txt'] ?? 0);
}
