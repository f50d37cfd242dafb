// `mocra run <spider-file>` end to end: a TypeScript spider module loaded through tsx, its items
// written as JSON Lines, the runtime flags applied; a file with no spider fails clearly.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { catalogBooks, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';

const CLI = path.resolve(import.meta.dirname, '../../mocra/src/cli/main.ts');
const fixtures = path.resolve(import.meta.dirname, 'fixtures');
const tmp = mkdtempSync(path.join(tmpdir(), 'mocra-cli-run-'));

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(async () => {
  await site.close();
  rmSync(tmp, { recursive: true, force: true });
});

function mocra(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', CLI, ...args], {
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

test('a TypeScript spider runs with the runtime flags; its items go to --out', async () => {
  site.resetStats();
  const out = path.join(tmp, 'books.jsonl');
  const r = await mocra(
    'run',
    path.join(fixtures, 'cli-books-spider.ts'),
    '--out',
    out,
    '--per-host-concurrency',
    '1',
  );
  expect(r.code).toBe(0);
  const items = readFileSync(out, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { title: string; price: string });
  const expected = catalogBooks()
    .slice(0, 60)
    .map((b) => ({ title: b.title, price: b.price }));
  const byTitle = (a: { title: string }, b: { title: string }) => a.title.localeCompare(b.title);
  expect(items.sort(byTitle)).toEqual(expected.sort(byTitle));
  expect(site.hostStats(0).maxInFlight).toBe(1);
  expect(site.stats().paths['/robots.txt']).toBe(1); // robots.txt is obeyed by default
  expect(r.stderr).toMatch(/spider cli-books finished/);
}, 60_000);

test('items go to standard output as JSON Lines without --out', async () => {
  const r = await mocra(
    'run',
    path.join(fixtures, 'cli-books-spider.ts'),
    '--max-pages',
    '1',
    '--no-progress',
  );
  expect(r.code).toBe(0);
  expect(r.stdout.trim().split('\n')).toHaveLength(20);
}, 60_000);

test('a file without a spider, or no file at all: exit 1 with MOCRA_ERR_SPIDER_LOAD', async () => {
  const none = await mocra('run', path.join(fixtures, 'cli-no-spider.ts'));
  expect(none.code).toBe(1);
  expect(none.stderr).toMatch(/exports no spider.*MOCRA_ERR_SPIDER_LOAD/);
  const missing = await mocra('run', path.join(tmp, 'nope.ts'));
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/no such file.*MOCRA_ERR_SPIDER_LOAD/);
}, 60_000);

test('-H and --user-agent are sent with every request of the spider', async () => {
  const file = path.join(tmp, 'echo-spider.ts');
  writeFileSync(
    file,
    `import { defineSpider } from 'mocra';
export default defineSpider({
  name: 'echo',
  startUrls: [\`\${process.env.MOCRA_TEST_SITE}/echo\`],
  parse(res, cx) {
    const { headers } = res.json() as { headers: Record<string, string> };
    cx.emit({ demo: headers['x-demo'], accept: headers['accept-language'], ua: headers['user-agent'] });
  },
});
`,
  );
  const r = await mocra(
    'run',
    file,
    '-H',
    'X-Demo: from the flag',
    '--header',
    'accept-language: fr',
    '--user-agent',
    'flag-test/2',
    '--no-progress',
  );
  expect(r.code, r.stderr).toBe(0);
  expect(JSON.parse(r.stdout.trim())).toEqual({ demo: 'from the flag', accept: 'fr', ua: 'flag-test/2' });
}, 60_000);
