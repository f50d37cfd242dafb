// Journey: every command line of docs/cli.md, run with the built bin as a reader would type it
// — the site is the fixture site instead of example.com, the database a schema of the test
// Postgres — plus the file the page's books.ts example shows. The record fields and CSV columns
// are checked against the page's own Records table, so the page and the CLI cannot drift apart.
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { resolveConfig } from '@mocra/core';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { assertBuilt, FIXTURES, mocra, REPO, readCsv, readJsonl, tempDir } from './harness.js';

const PG = 'postgres://postgres@127.0.0.1:5432/test';
const DOC = readFileSync(path.join(REPO, 'docs/cli.md'), 'utf8');
const schema = `journey_cli_${process.pid}_${Date.now().toString(36)}`;

let site: FixtureSite;
let cwd: string;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  cwd = tempDir('cli-commands');
});
afterAll(async () => {
  await site?.close();
  if (cwd) rmSync(cwd, { recursive: true, force: true });
  const client = new pg.Client({ connectionString: PG });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
});

/** The `mocra …` lines of the page's sh blocks (a line may list several, joined by " · "). */
function documentedCommands(): string[] {
  const blocks = [...DOC.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  return blocks
    .flatMap((b) => b.split('\n'))
    .flatMap((line) => line.split(' · '))
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line.startsWith('mocra '));
}

/** Split like a shell would for these lines (single quotes, no escapes). */
function argv(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!).slice(1);
}

/** The reader's machine is ours: example.com is the fixture site, the database a fresh schema. */
function localise(args: string[]): string[] {
  return args.flatMap((a) => {
    if (a.startsWith('postgres://')) return [PG, '--schema', schema];
    return [a.replace('https://example.com', site.url)];
  });
}

/** The Records table: field names and CSV columns. */
function recordTable(): { fields: string[]; columns: string[] } {
  const section = DOC.slice(DOC.indexOf('## Records'), DOC.indexOf('## Progress and summary'));
  const rows = section
    .split('\n')
    .filter((l) => /^\| `/.test(l))
    .map((l) => l.split('|').map((c) => c.trim().replace(/`/g, '')));
  return { fields: rows.map((r) => r[1]!), columns: rows.map((r) => r[2]!) };
}

describe('the commands of docs/cli.md', () => {
  const commands = documentedCommands();

  test('the page has the commands this journey knows how to check', () => {
    expect(commands).toEqual([
      'mocra crawl https://example.com/ --out pages.jsonl',
      'mocra run ./spiders/books.ts --out books.jsonl',
      'mocra create my-crawler',
      'mocra shell https://example.com/books/page/1',
      'mocra store migrate --url postgres://postgres@127.0.0.1:5432/crawl',
      'mocra config migrate ./rust/config.toml',
      'mocra --help',
      'mocra crawl --help',
      'mocra run --help',
      'mocra create --help',
      'mocra shell --help',
      'mocra store --help',
      'mocra config migrate --help',
      'mocra crawl https://example.com/docs/ --scope prefix --max-pages 500 --out docs.csv',
      "mocra crawl https://example.com/ --include '/blog/**' --exclude '/blog/tag/**' --delay 1s",
      'mocra crawl https://example.com/ --persist ./state --out pages.jsonl',
      'mocra create my-crawler',
      'mocra config migrate ./config.toml',
      'mocra config migrate ./config.toml -o deploy/mocra.toml --force',
      'mocra config migrate ./config.toml -o -',
    ]);
  });

  test.each(documentedCommands())('%s', async (line) => {
    if (line.startsWith('mocra run ./spiders/books.ts')) writeBooksSpider();
    // Each example of `mocra create` starts in a directory of its own, as a reader's would.
    if (line.startsWith('mocra create ') && !line.includes('--help')) {
      rmSync(path.join(cwd, 'my-crawler'), { recursive: true, force: true });
    }
    if (line.startsWith('mocra config migrate ./')) writeRustConfig(argv(line)[2]!);
    const args = localise(argv(line));
    // A test's stderr is no terminal: progress lines would only pad the output checked below.
    const quiet = ['crawl', 'run'].includes(args[0]!) && !args.includes('--help') ? ['--no-progress'] : [];
    const r = await mocra([...args, ...quiet], { cwd });
    expect(r.code, `${line}\n${r.stderr}`).toBe(0);
    if (args.includes('--help')) {
      expect(r.stdout).toMatch(/^Usage: mocra/);
      return;
    }
    const { fields, columns } = recordTable();
    if (line.endsWith('--out pages.jsonl')) {
      const records = readJsonl<Record<string, unknown>>(path.join(cwd, 'pages.jsonl'));
      expect(records.length).toBeGreaterThan(10);
      for (const record of records) expect(Object.keys(record)).toEqual(fields);
      if (line.includes('--persist')) expect(r.stderr).toMatch(/out {7}pages\.jsonl: \d+ records/);
    } else if (line.endsWith('--out docs.csv')) {
      expect(readCsv(path.join(cwd, 'docs.csv')).header).toEqual(columns);
    } else if (line.includes('books.jsonl')) {
      const books = readJsonl<{ title: string }>(path.join(cwd, 'books.jsonl'));
      expect(books.length).toBeGreaterThan(20);
      expect(books.every((b) => b.title !== '')).toBe(true);
    } else if (line.startsWith('mocra create ')) {
      expect(r.stdout).toContain('cd my-crawler');
      expect(readFileSync(path.join(cwd, 'my-crawler/src/spider.ts'), 'utf8')).toContain('defineSpider');
    } else if (line.startsWith('mocra shell ')) {
      // Standard input is empty here: the page is fetched, then the REPL ends with its input.
      expect(r.stdout).toMatch(/\[mocra\] 200 http:\/\/127\.0\.0\.1:\d+\/books\/page\/1 /);
    } else if (line.includes('store migrate')) {
      expect(r.stdout).toMatch(/applied 1 /);
    } else if (line.includes('config migrate')) {
      const written = args.includes('-o')
        ? args[args.indexOf('-o') + 1]!
        : path.join(path.dirname(args[2]!), 'mocra.toml');
      const toml = written === '-' ? r.stdout : readFileSync(path.join(cwd, written), 'utf8');
      expect(toml).toMatch(/^# mocra\.toml, migrated from config\.toml/);
      expect(resolveConfig({ toml, env: false }).name).toBe('shop-crawler');
      expect(written === '-' ? r.stderr : r.stdout).toMatch(/\d+ keys carried over, \d+ not\n/);
    } else if (line.includes('--include')) {
      expect(r.stderr).toMatch(/pages {5}1 /); // the home page links to no /blog/ page
    }
  });

  test('the persist example, run again, resumes: nothing fetched twice, the file kept', async () => {
    const line = 'mocra crawl https://example.com/ --persist ./state --out pages.jsonl';
    expect(commands).toContain(line);
    const before = readJsonl(path.join(cwd, 'pages.jsonl')).length;
    site.resetStats();
    const again = await mocra([...localise(argv(line)), '--no-progress'], { cwd });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`pages.jsonl: 0 records (+ ${before} from before the resume)`);
    expect(site.stats().requests).toBe(0);
  });
});

/** A Rust mocra config.toml where a line of the page expects one (and the `-o` directory). */
function writeRustConfig(file: string): void {
  mkdirSync(path.join(cwd, path.dirname(file)), { recursive: true });
  mkdirSync(path.join(cwd, 'deploy'), { recursive: true });
  copyFileSync(path.join(FIXTURES, 'rust-config/full.toml'), path.join(cwd, file));
}

/** docs/cli.md's books.ts, as a reader would save it, pointed at the fixture site. */
function writeBooksSpider(): void {
  const example = /```ts\n\/\/ books\.ts\n([\s\S]*?)```/.exec(DOC);
  expect(example, 'docs/cli.md shows books.ts').not.toBeNull();
  mkdirSync(path.join(cwd, 'spiders'), { recursive: true });
  writeFileSync(path.join(cwd, 'spiders/books.ts'), example![1]!.replace('https://example.com', site.url));
}
