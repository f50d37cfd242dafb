// The development response cache (Scrapy's HTTPCACHE) as a user iterates on a spider: the first
// run fetches and stores, the next ones replay from the cache with zero requests reaching the
// fixture server's counter and the same items; after the TTL a page is fetched again. Through
// the built bin (`--cache`, `--cache-ttl`) and the builder (`.httpCache()`).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { assertBuilt, mocra, readJsonl, tempDir } from './journeys/harness.js';

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  site = await startFixtureSite();
  root = tempDir('http-cache');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

test('journey: mocra run --cache fetches once, then replays with no request to the site', async () => {
  assertBuilt();
  const dir = path.join(root, 'bin');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'quotes.ts'),
    `import { defineSpider } from 'mocra';

export default defineSpider<{ page: string; quotes: number }>({
  name: 'quotes',
  startUrls: ['${site.url}/quotes/page/1'],
  parse(res, cx) {
    cx.emit({ page: new URL(res.url).pathname, quotes: res.$('div.quote').length });
    const next = res.$('li.next a').attr('href');
    if (next && !next.endsWith('/4')) cx.follow(next);
  },
});
`,
  );
  const run = (out: string, extra: string[] = []) =>
    mocra(['run', 'quotes.ts', '--cache', 'cache', '--no-robots', '--out', out, '--no-progress', ...extra], {
      cwd: dir,
    });

  site.resetStats();
  const first = await run('first.jsonl');
  expect(first.code, first.stderr).toBe(0);
  expect(site.stats().requests).toBe(3);

  site.resetStats();
  const second = await run('second.jsonl');
  expect(second.code, second.stderr).toBe(0);
  expect(site.stats().requests).toBe(0);
  const sorted = (f: string) =>
    readJsonl<{ page: string; quotes: number }>(path.join(dir, f)).sort((a, b) =>
      a.page.localeCompare(b.page),
    );
  expect(sorted('second.jsonl')).toEqual(sorted('first.jsonl'));
  expect(sorted('second.jsonl')).toHaveLength(3);

  // Entries older than the TTL are fetched again.
  await new Promise((r) => setTimeout(r, 1100));
  site.resetStats();
  const expired = await run('third.jsonl', ['--cache-ttl', '1s']);
  expect(expired.code, expired.stderr).toBe(0);
  expect(site.stats().requests).toBe(3);

  const usage = await mocra(['run', 'quotes.ts', '--cache-ttl', '1s', '--no-progress'], { cwd: dir });
  expect(usage.code).toBe(2);
  expect(usage.stderr).toMatch(/--cache-ttl needs --cache <dir>/);
});

test('the builder option replays a parse edit without refetching; 5xx answers are not stored', async () => {
  const cache = path.join(root, 'builder-cache');
  const crawl = async (emit: (status: number, path: string) => string) => {
    const items: string[] = [];
    await Mocra.builder()
      .spider(
        defineSpider<string>({
          name: 'edit',
          startUrls: [`${site.url}/books/page/1`, `${site.url}/status/500`],
          parse: (res, cx) => cx.emit(emit(res.status, new URL(res.url).pathname)),
        }),
        (i) => void items.push(i),
      )
      .retry({ maxRetries: 0 })
      .httpCache(cache)
      .handleSignals(false)
      .run();
    return items.sort();
  };
  site.resetStats();
  expect(await crawl((s, p) => `${p} ${s}`)).toEqual(['/books/page/1 200', '/status/500 500']);
  expect(site.stats().requests).toBe(2);
  site.resetStats();
  // The "edited" parse runs on the stored page; only the 500 goes to the site again.
  expect(await crawl((s, p) => `v2 ${p} ${s}`)).toEqual(['v2 /books/page/1 200', 'v2 /status/500 500']);
  expect(site.stats().requests).toBe(1);
});
