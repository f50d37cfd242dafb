// Journey: two processes on one `--persist` directory. The second is refused — exit 1, one
// line naming MOCRA_ERR_STORE_LOCKED — before it opens anything, so the file the first one
// writes is never truncated, appended to or counted as the second's. Then a kill and a resume
// of the first still give every page exactly once.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { type FixtureSite, graphPageCount, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { assertBuilt, mocra, readJsonl, readText, startMocra, tempDir, waitFor } from './harness.js';

const GRAPH = { pages: 600, fanout: 4, bytes: 200 };

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite({ latencyMs: 4, latencyJitterMs: 4 });
  root = tempDir('locked');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const lineCount = (file: string) => readText(file).split('\n').length - 1;

function crawlArgs(dir: string, out: string): string[] {
  return [
    'crawl',
    site.graphUrl(GRAPH, 0),
    '--persist',
    dir,
    '--out',
    out,
    '--concurrency',
    '4',
    '--no-robots',
    '--no-progress',
  ];
}

function expectRefused(ran: { code: number | null; stderr: string }, dir: string): void {
  expect(ran.code, ran.stderr).toBe(1);
  // One clear line, nothing else (no stack, no log records, no summary counting the other's file).
  expect(ran.stderr.trim().split('\n'), ran.stderr).toEqual([
    `mocra: ${dir} is in use by another process (LevelDB lock); stop that process or use another directory (MOCRA_ERR_STORE_LOCKED)`,
  ]);
}

function expectEveryPageOnce(out: string): void {
  const urls = readJsonl<{ url: string }>(out).map((r) => r.url);
  const pages = graphPageCount(GRAPH);
  expect(urls.length).toBe(pages);
  expect(new Set(urls).size).toBe(pages);
}

test('a second crawl on a running crawl’s directory is refused and touches nothing; the first finishes with every page once', async () => {
  const dir = path.join(root, 'running');
  const out = path.join(root, 'running.jsonl');
  const first = startMocra(crawlArgs(dir, out));
  expect(await waitFor(() => lineCount(out) >= 30 || first.child.exitCode !== null, 60_000)).toBe(true);
  const before = lineCount(out);
  const second = await mocra(crawlArgs(dir, out));
  expectRefused(second, dir);
  // The first process kept writing its own file; the second neither truncated nor wrote it.
  expect(lineCount(out)).toBeGreaterThanOrEqual(before);
  const ended = await first.done;
  expect(ended.code, ended.stderr).toBe(0);
  expectEveryPageOnce(out);
}, 120_000);

test('overlapping starts: exactly one of two processes started together runs; a kill and a resume of it lose nothing', async () => {
  for (let round = 0; round < 3; round++) {
    const dir = path.join(root, `overlap-${round}`);
    const out = path.join(root, `overlap-${round}.jsonl`);
    const a = startMocra(crawlArgs(dir, out));
    const b = startMocra(crawlArgs(dir, out));
    // The loser ends on its own; the winner is killed mid-crawl once the loser is gone.
    const loser = await Promise.race([
      a.done.then(() => ({ it: a, other: b })),
      b.done.then(() => ({ it: b, other: a })),
    ]);
    expectRefused(await loser.it.done, dir);
    const winner = loser.other;
    expect(await waitFor(() => lineCount(out) >= 60 || winner.child.exitCode !== null, 60_000)).toBe(true);
    expect(winner.child.exitCode, `round ${round}: the winner ended before the kill`).toBeNull();
    winner.child.kill('SIGKILL');
    expect((await winner.done).signal).toBe('SIGKILL');
    const resumed = await mocra(crawlArgs(dir, out));
    expect(resumed.code, resumed.stderr).toBe(0);
    expectEveryPageOnce(out);
  }
}, 240_000);
