// `mocra crawl` (the built bin) of a healthy site whose host also serves 60 URLs that fail on
// their own — a 503, a dropped connection, a redirect loop, 20 of each. Those URLs must not
// stop the host: every page of the healthy graph is fetched, the crawl ends on its own, the
// summary says what was dead-lettered, and --strict turns that into exit 1.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startBin } from './cli-bin.js';

const GRAPH = { pages: 300, fanout: 4, bytes: 512 };

let site: FixtureSite;
let tmp: string;
beforeAll(async () => {
  [site, tmp] = await Promise.all([
    startFixtureSite(),
    mkdtempSync(path.join(tmpdir(), 'mocra-cli-breaker-')),
  ]);
});
afterAll(async () => {
  rmSync(tmp, { recursive: true, force: true });
  await site.close();
});

async function mocra(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const run = startBin(args);
  return { code: await run.exited, stderr: run.stderr() };
}

function startUrls(): string[] {
  const urls = [site.graphUrl(GRAPH)];
  for (let i = 0; i < 20; i++) {
    urls.push(
      `${site.url}/status/503?own=${i}`,
      `${site.url}/drop/before-headers?own=${i}`,
      `${site.url}/redirect-loop/2/0?own=${i}`,
    );
  }
  return urls;
}

interface PageRecord {
  url: string;
  status: number | null;
  error: string | null;
}

test('a healthy crawl next to 60 failing URLs of its host fetches every page; --strict exits 1 for what was dead-lettered', async () => {
  const out = path.join(tmp, 'pages.jsonl');
  const r = await mocra(['crawl', ...startUrls(), '--no-robots', '--no-progress', '--out', out]);
  expect(r.code, r.stderr).toBe(0);
  const records = readFileSync(out, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as PageRecord);
  const pages = records.filter((x) => x.url.includes('/graph/'));
  expect(new Set(pages.map((x) => x.url)).size).toBe(GRAPH.pages);
  expect(pages.every((x) => x.status === 200 && x.error === null)).toBe(true);
  // Each failing URL is reported on its own terms: its last 503 as a page, the others as errors.
  const own = (kind: string) => records.filter((x) => x.url.includes(kind));
  expect(own('/status/503').map((x) => x.status)).toEqual(Array<number>(20).fill(503));
  expect(own('/drop/').map((x) => x.error)).toEqual(Array<string>(20).fill('MOCRA_ERR_CONNECTION'));
  expect(own('/redirect-loop/').map((x) => x.error)).toEqual(
    Array<string>(20).fill('MOCRA_ERR_REDIRECT_LOOP'),
  );
  expect(r.stderr).toMatch(/finished in/);
  expect(r.stderr).toMatch(/dlq +40 given up for good and dead-lettered \(--strict makes this exit 1\)/);

  const strict = await mocra([
    'crawl',
    ...startUrls(),
    '--no-robots',
    '--no-progress',
    '--out',
    path.join(tmp, 'strict.jsonl'),
    '--strict',
  ]);
  expect(strict.code, strict.stderr).toBe(1);
  expect(strict.stderr).toMatch(/dlq +40 given up for good and dead-lettered \(exit 1: --strict\)/);
}, 120_000);
