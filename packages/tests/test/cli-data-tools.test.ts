// The built `mocra` bin writing Parquet and Arrow: `mocra crawl --out pages.parquet` (page
// records, schema fixed) and `mocra run spider.ts --out items.arrow` (items, schema inferred),
// each read back with polars and checked row by row; a crawl killed with SIGKILL and resumed
// with --persist ends with every page once in its Parquet file.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expectedCounts, type FixtureSite, priceTableRows, startFixtureSite } from '@mocra/testkit';
import { toNumeric } from 'mocra';
import { readDataFrame } from 'mocra/dataframe';
import { afterAll, beforeAll, expect, test } from 'vitest';

const BIN = path.resolve(import.meta.dirname, '../../mocra/dist/cli.js');
const fixtures = path.resolve(import.meta.dirname, 'fixtures');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-cli-frames-'));
const BOOKS = 1000; // 10 pages of the price table

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ catalog: { books: BOOKS } });
});
afterAll(async () => {
  await site.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

function mocra(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, MOCRA_TEST_SITE: site.url },
    cwd: path.resolve(import.meta.dirname, '..'),
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => {
    stdout += b.toString();
  });
  child.stderr.on('data', (b: Buffer) => {
    stderr += b.toString();
  });
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

const pageUrl = (n: number) => `${site.url}/data/prices?page=${n}`;

test('mocra crawl --out pages.parquet: one typed record per page, read back row by row', async () => {
  const out = path.join(tmp, 'pages.parquet');
  const r = await mocra('crawl', pageUrl(1), '--out', out, '--no-progress');
  expect(r.code, r.stderr).toBe(0);
  const frame = readDataFrame(out);
  expect(frame.columns).toEqual([
    'url',
    'finalUrl',
    'status',
    'contentType',
    'bytes',
    'depth',
    'title',
    'links',
    'fetchMs',
    'error',
  ]);
  const rows = frame.sort('depth').toRecords() as Record<string, unknown>[];
  expect(rows.map((row) => row.url)).toEqual(Array.from({ length: 10 }, (_, i) => pageUrl(i + 1)));
  rows.forEach((row, i) => {
    expect(row).toMatchObject({
      finalUrl: pageUrl(i + 1),
      status: 200,
      contentType: 'text/html',
      depth: i,
      title: `Prices, page ${i + 1} of 10`,
      links: i < 9 ? 1 : 0,
      error: null,
    });
    expect(row.bytes).toBeGreaterThan(1000);
  });
}, 120_000);

test('kill -9 mid-crawl, resume with --persist: the Parquet file has every page once', async () => {
  const out = path.join(tmp, 'resume.parquet');
  const args = [
    'crawl',
    `${site.url}/`,
    '--persist',
    path.join(tmp, 'state'),
    '--out',
    out,
    '--concurrency',
    '4',
    '--no-robots',
    '--no-progress',
  ];
  const journal = `${out}.parts/journal.ndjson`;
  site.setLatency(10, 5);
  try {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.once('exit', (_code, signal) => resolve(signal)),
    );
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      if (fs.existsSync(journal) && fs.readFileSync(journal, 'utf8').split('\n').length > 300) break;
    }
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
  } finally {
    site.setLatency(0, 0);
  }
  expect(fs.existsSync(out)).toBe(false); // the records so far are only in the journal
  const second = await mocra(...args);
  expect(second.code, second.stderr).toBe(0);
  expect(second.stderr).toMatch(/from before the resume/);
  const urls = readDataFrame(out).getColumn('url').toArray() as string[];
  const total = expectedCounts({ catalog: { books: BOOKS } }).site.pages;
  expect(new Set(urls).size).toBe(total);
  expect(urls).toHaveLength(total); // no page written twice
}, 180_000);

test('mocra run spider.ts --out items.arrow: items with an inferred schema, read back row by row', async () => {
  const out = path.join(tmp, 'items.arrow');
  const r = await mocra('run', path.join(fixtures, 'cli-prices-spider.ts'), '--out', out, '--no-progress');
  expect(r.code, r.stderr).toBe(0);
  const frame = readDataFrame(out);
  expect(frame.height).toBe(BOOKS);
  const rows = frame.sort('id').toRecords();
  const expected = priceTableRows({ catalog: { books: BOOKS } });
  for (let i = 0; i < BOOKS; i++) {
    const e = expected[i]!;
    expect(rows[i]).toEqual({
      id: Number(e.ID),
      title: e.Title,
      price: toNumeric(e.Price),
      tags: JSON.stringify([e.Rating]),
    });
  }
}, 120_000);

test('an unknown --out extension names the formats', async () => {
  const r = await mocra('crawl', pageUrl(1), '--out', path.join(tmp, 'pages.xlsx'));
  expect(r.code).not.toBe(0);
  expect(r.stderr).toMatch(/\.jsonl, \.csv, \.parquet or \.arrow/);
});
