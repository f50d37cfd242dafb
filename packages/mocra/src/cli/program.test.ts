// The CLI in process (fast): help, every kind of usage error (exit 2), record formats, CSV,
// --max-pages, --include/--exclude, robots.txt, --strict. The bin in a real child process
// (SIGKILL resume, progress lines, `mocra run`) is tested in packages/tests/test/cli-*.test.ts.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { main } from './program.js';
import { csvField, formatOf } from './records.js';
import { durationFlag, headerFlag, intFlag, patternFlag } from './runtime-options.js';

const tmp = mkdtempSync(path.join(tmpdir(), 'mocra-cli-unit-'));
let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
beforeEach(() => site.resetStats());
afterAll(async () => {
  await site.close();
  rmSync(tmp, { recursive: true, force: true });
});

async function cli(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough() as PassThrough & { isTTY?: boolean };
  let out = '';
  let err = '';
  stdout.on('data', (b: Buffer) => {
    out += b.toString();
  });
  stderr.on('data', (b: Buffer) => {
    err += b.toString();
  });
  const quiet =
    argv[0] === 'crawl' || argv[0] === 'run' ? [argv[0], '--log-level', 'silent', ...argv.slice(1)] : argv;
  const code = await main(quiet, {
    stdout,
    stderr: stderr as unknown as NodeJS.WriteStream,
  });
  return { code, stdout: out, stderr: err };
}

describe('help', () => {
  test('every command has --help; the crawl help lists every flag the issue asks for', async () => {
    const top = await cli('--help');
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/Commands:[\s\S]*crawl[\s\S]*run/);
    const crawl = await cli('crawl', '--help');
    expect(crawl.code).toBe(0);
    for (const flag of [
      '--scope <scope>',
      '--include <pattern>',
      '--exclude <pattern>',
      '--max-pages <n>',
      '--max-depth <n>',
      '--concurrency <n>',
      '--per-host-concurrency <n>',
      '--delay <duration>',
      '--no-robots',
      '--out <file>',
      '--persist <dir>',
      '--dashboard <port>',
      '--api-key <key>',
      '--host <address>',
      '--dashboard-linger <duration>',
    ]) {
      expect(crawl.stdout, flag).toContain(flag);
    }
    const run = await cli('run', '--help');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/Usage: mocra run \[options\] <file>/);
    expect(run.stdout).toContain('--per-host-concurrency');
    expect((await cli('--version')).code).toBe(0);
  });
});

describe('usage errors exit 2 and name what was wrong', () => {
  test.each([
    [
      ['crawl', 'http://x.test/', '--max-pages', 'ten'],
      /'--max-pages <n>' argument 'ten' is invalid. expected a whole number/,
    ],
    [['crawl', 'http://x.test/', '--max-pages', '0'], /expected a number from 1/],
    [
      ['crawl', 'http://x.test/', '--scope', 'nowhere'],
      /Allowed choices are same-host, same-domain, prefix, any/,
    ],
    [['crawl', 'http://x.test/', '--delay', 'soon'], /expected a duration/],
    [['crawl', 'http://x.test/', '--include', '/(/'], /invalid regular expression/],
    [['crawl', 'http://x.test/', '--frobnicate'], /unknown option '--frobnicate'/],
    [['crawl', 'http://x.test/', '--log-level', 'loud'], /Allowed choices are trace/],
    // The V8 settings the CLI once applied to its own process are gone: node's own flags do it.
    [['crawl', 'http://x.test/', '--heap-growth', '50'], /unknown option '--heap-growth'/],
    [['run', 'spider.ts', '--young-generation', '8'], /unknown option '--young-generation'/],
    [['crawl', 'http://x.test/', '--wasm-tier-up'], /unknown option '--wasm-tier-up'/],
    [['crawl', 'not-a-url'], /'not-a-url' is not an absolute URL.*MOCRA_ERR_CLI_USAGE/],
    [['crawl', 'ftp://x.test/'], /only http and https.*MOCRA_ERR_CLI_USAGE/],
    [['crawl', 'http://x.test/', '--out', 'pages.txt'], /must end in \.jsonl, \.csv, \.parquet or \.arrow/],
    [
      ['crawl', 'http://x.test/', '--api-key', 'k'],
      /--api-key needs --dashboard <port>.*MOCRA_ERR_CLI_USAGE/,
    ],
    [
      ['run', 'spider.ts', '--host', '0.0.0.0', '--dashboard-linger', '1m'],
      /--host, --dashboard-linger need --dashboard/,
    ],
    [['crawl', 'http://x.test/', '--dashboard', '0', '--dashboard-linger', 'later'], /expected a duration/],
    [['crawl', 'http://x.test/', '-H', 'no colon here'], /expected 'name: value', got 'no colon here'/],
    [['shell', 'ftp://x.test/'], /only http and https.*MOCRA_ERR_CLI_USAGE/],
    [['shell'], /missing required argument 'url'/],
    [['shell', 'http://x.test/', '--max-pages', '3'], /unknown option '--max-pages'/],
    [['create'], /missing required argument 'dir'/],
    [['crawl'], /missing required argument 'url'/],
    [['run'], /missing required argument 'file'/],
    [['fly'], /unknown command 'fly'/],
    [[], /Usage: mocra/],
  ])('%j', async (argv, message) => {
    const r = await cli(...argv);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  test('the flag parsers', () => {
    expect(durationFlag('1.5s')).toBe(1500);
    expect(durationFlag('250')).toBe(250);
    expect(durationFlag('2m')).toBe(120_000);
    expect(durationFlag('1h')).toBe(3_600_000);
    expect(durationFlag('20ms')).toBe(20);
    expect(intFlag(1)('12')).toBe(12);
    expect(() => intFlag(1)('-3')).toThrow();
    expect(patternFlag('/a\\d+/i', ['/x/**'])).toEqual(['/x/**', /a\d+/i]);
    expect(patternFlag('/books/**')).toEqual(['/books/**']); // a glob, not a regex
    expect(headerFlag('X-Demo: a: b', { accept: 'text/html' })).toEqual({
      accept: 'text/html',
      'x-demo': 'a: b',
    });
    expect(headerFlag('accept:', { accept: 'text/html' })).toEqual({ accept: '' });
    expect(() => headerFlag(': value')).toThrow();
  });
});

describe('records', () => {
  test('formats by extension; CSV fields quoted per RFC 4180', () => {
    expect(formatOf('a.jsonl')).toBe('jsonl');
    expect(formatOf('A.CSV')).toBe('csv');
    expect(formatOf('-')).toBe('jsonl');
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a, "b"\nc')).toBe('"a, ""b""\nc"');
    expect(csvField(null)).toBe('');
  });
});

describe('mocra crawl, in process', () => {
  test('CSV, exact --max-pages, repeatable --include (glob and regex) and --exclude, --no-robots', async () => {
    const out = path.join(tmp, 'books.csv');
    const r = await cli(
      'crawl',
      `${site.url}/books/page/1`,
      '--out',
      out,
      '--max-pages',
      '25',
      '--include',
      '/books/page/*',
      '--include',
      '/\\/book\\/\\d+$/',
      '--exclude',
      '/book/1*',
      '--no-robots',
      '--no-progress',
    );
    expect(r.code).toBe(0);
    const lines = readFileSync(out, 'utf8').trim().split('\n');
    expect(lines[0]).toBe('url,final_url,status,content_type,bytes,depth,title,links,fetch_ms,error');
    expect(lines).toHaveLength(26);
    const urls = lines.slice(1).map((l) => l.split(',', 1)[0]!);
    expect(urls.every((u) => /\/books\/page\/\d+$|\/book\/\d+$/.test(u))).toBe(true);
    expect(urls.some((u) => /\/book\/1\d*$/.test(u))).toBe(false);
    expect(site.stats().requests).toBe(25);
    expect(site.stats().paths['/robots.txt']).toBeUndefined();
    expect(r.stderr).toMatch(/25 admitted, \d+ duplicates, 0 over max depth, \d+ over max pages/);
  });

  test('--max-depth and --scope prefix', async () => {
    const out = path.join(tmp, 'prefix.jsonl');
    const r = await cli(
      'crawl',
      `${site.url}/quotes/page/1`,
      '--scope',
      'prefix',
      '--max-depth',
      '1',
      '--out',
      out,
      '--no-progress',
    );
    expect(r.code).toBe(0);
    const records = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { url: string; depth: number });
    expect(Math.max(...records.map((x) => x.depth))).toBe(1);
    expect(records.every((x) => new URL(x.url).pathname.startsWith('/quotes/'))).toBe(true);
  });

  test('a start URL disallowed by robots.txt fails (exit 1) and says why', async () => {
    const r = await cli('crawl', `${site.url}/private/secret`, '--no-progress');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/robots\.txt disallows the start URL \(use --no-robots/);
    expect(site.stats().paths['/private/secret']).toBeUndefined();
  });

  test('--strict: a URL given up on fails the crawl; a 500 page is still a page', async () => {
    const page500 = await cli(
      'crawl',
      `${site.url}/status/500`,
      '--retries',
      '0',
      '--strict',
      '--no-robots',
      '--no-progress',
    );
    expect(page500.code).toBe(0);
    const out = path.join(tmp, 'strict.jsonl');
    const gone = await cli(
      'crawl',
      `${site.url}/`,
      `${site.url}/drop/before-headers`,
      '--retries',
      '0',
      '--strict',
      '--no-robots',
      '--max-pages',
      '3',
      '--out',
      out,
      '--no-progress',
    );
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/1 given up/);
    expect(readFileSync(out, 'utf8')).toMatch(
      /"url":"http:\/\/127\.0\.0\.1:\d+\/drop\/before-headers".*"error":"MOCRA_ERR_CONNECTION"/,
    );
    const lenient = await cli(
      'crawl',
      `${site.url}/`,
      `${site.url}/drop/before-headers`,
      '--retries',
      '0',
      '--no-robots',
      '--max-pages',
      '3',
      '--no-progress',
    );
    expect(lenient.code).toBe(0);
  });
});
