// The standards a crawler follows, as a user meets them: `mocra crawl --sitemaps` (a child
// process) over the fixture site's /standards/ pages. robots.txt (RFC 9309) decides what is
// fetched and what never reaches the server, legacy-encoded pages come out readable, `/x` and
// `/x?` are one page, a sitemap cannot seed another host, and a gzip bomb of a sitemap costs that
// sitemap only.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  EMPTY_GROUP_ROBOTS,
  type FixtureSite,
  FOREIGN_SITEMAP_PATH,
  LATE_META_TITLE,
  LEGACY_TITLE,
  STANDARDS_PATHS,
  STANDARDS_ROBOTS,
  startFixtureSite,
} from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';

const CLI = path.resolve(import.meta.dirname, '../../mocra/src/cli/main.ts');
const tmp = mkdtempSync(path.join(tmpdir(), 'mocra-cli-standards-'));

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ hosts: 2 });
  site.setRobots(STANDARDS_ROBOTS, 0);
  site.setRobots(EMPTY_GROUP_ROBOTS, 1);
});
afterAll(async () => {
  await site.close();
  rmSync(tmp, { recursive: true, force: true });
});

function mocra(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', CLI, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    cwd: path.resolve(import.meta.dirname, '..'),
  });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => {
    stderr += b.toString();
  });
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stderr })));
}

const records = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map(
      (l) =>
        JSON.parse(l) as { url: string; status: number | null; title: string | null; error: string | null },
    );

test('robots.txt, charsets, URL forms and sitemaps through the real CLI', { timeout: 120_000 }, async () => {
  site.resetStats();
  const out = path.join(tmp, 'standards.jsonl');
  // --scope any: only robots.txt and the sitemap's location keep pages out. Warnings show the
  // skipped sitemap entries and the sitemap given up.
  const run = await mocra([
    'crawl',
    `${site.url}${STANDARDS_PATHS.index}`,
    ...['--sitemaps', '--scope', 'any', '--log-level', 'warn', '--out', out],
  ]);
  expect(run.code, run.stderr).toBe(0);

  const byPath = new Map(records(out).map((r) => [new URL(r.url).pathname + new URL(r.url).search, r]));
  const { index, legacy, lateMeta, query, joe, baz, fromSitemap, zeros } = STANDARDS_PATHS;
  // mocra's own group applies (its Sitemap: lines do not split it), so the `*` group's
  // Disallow: / does not; the two percent-encoded pages are disallowed.
  expect([...byPath.keys()].sort()).toEqual([index, lateMeta, legacy, query, fromSitemap].sort());
  for (const r of byPath.values()) expect(r).toMatchObject({ status: 200, error: null });
  const paths = site.stats().paths;
  expect(paths[joe]).toBeUndefined();
  expect(paths[baz]).toBeUndefined();
  // One fetch serves the robots rules and the sitemap discovery.
  expect(paths['/robots.txt']).toBe(1);

  // Encoding sniffing: the decoy in a comment is ignored; a <meta> past 1 KB of head is found.
  expect(byPath.get(legacy)!.title).toBe(LEGACY_TITLE);
  expect(byPath.get(lateMeta)!.title).toBe(LATE_META_TITLE);

  // `x` and `x?` are one page, fetched once.
  expect(paths[query]).toBe(1);

  // The sitemap's page of another host (localhost) is never requested; the 1 GiB gzip of zeros
  // is read up to the size limit, reported, and the crawl goes on.
  expect(paths[fromSitemap]).toBe(1);
  expect(paths[FOREIGN_SITEMAP_PATH]).toBeUndefined();
  expect(paths[zeros]).toBe(1);
  expect(run.stderr).toMatch(/zeros\.xml\.gz/);
  expect(run.stderr).toMatch(/outside the sitemap's location/);
});

test('a group for mocra with no rules lets it fetch what `*` disallows', { timeout: 60_000 }, async () => {
  site.resetStats();
  const out = path.join(tmp, 'empty-group.jsonl');
  const page = `${site.hostUrl(1)}${STANDARDS_PATHS.query}`;
  const run = await mocra(['crawl', page, '--out', out]);
  expect(run.code, run.stderr).toBe(0);
  expect(records(out)).toEqual([expect.objectContaining({ url: page, status: 200, error: null })]);
});
