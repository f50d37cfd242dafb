// Journey: a crawl interrupted again and again and resumed with the same command.
// `mocra crawl` and `mocra run`, each with a JSON Lines and a CSV output and `--persist`: the
// built bin is stopped by SIGKILL and by SIGINT at seeded random points (each kill lands right
// after the output file grew, where a line is written and its page not yet acknowledged), then
// the same command runs to the end. The file then holds every record or item exactly once.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { type FixtureSite, graphPageCount, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  assertBuilt,
  FIXTURES,
  mocra,
  prng,
  readCsv,
  readJsonl,
  readText,
  startMocra,
  tempDir,
  waitFor,
} from './harness.js';

const GRAPH = { pages: 300, fanout: 3, bytes: 300 };
/** Seed of the kill points; the points are printed, and a failure names them. */
const SEED = 0x2a17;
const SIGNALS: readonly NodeJS.Signals[] = ['SIGKILL', 'SIGINT', 'SIGKILL'];
const SPIDER = path.join(FIXTURES, 'journey-graph-spider.ts');

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  assertBuilt();
  // Latency keeps several pages in flight at every interruption.
  site = await startFixtureSite({ latencyMs: 3, latencyJitterMs: 5 });
  root = tempDir('resume');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const lineCount = (file: string) => readText(file).split('\n').length - 1;

interface Case {
  command: 'crawl' | 'run';
  format: 'jsonl' | 'csv';
}

const CASES: Case[] = [
  { command: 'crawl', format: 'jsonl' },
  { command: 'crawl', format: 'csv' },
  { command: 'run', format: 'jsonl' },
  { command: 'run', format: 'csv' },
];

describe('resume with --persist after SIGKILL and SIGINT: every line exactly once', () => {
  test.each(CASES.map((c, i) => ({ ...c, seed: SEED + i })))(
    'mocra $command, $format (seed $seed)',
    async ({ command, format, seed }) => {
      const pages = graphPageCount(GRAPH);
      const dir = path.join(root, `${command}-${format}`);
      const out = path.join(root, `${command}.${format}`);
      const start = site.graphUrl(GRAPH, 0);
      const args = [
        ...(command === 'crawl' ? ['crawl', start] : ['run', SPIDER]),
        '--persist',
        dir,
        '--out',
        out,
        '--concurrency',
        '6',
        '--no-robots',
        '--no-progress',
      ];
      const env = { JOURNEY_START_URL: start };
      const expected = (command === 'crawl' ? pages : 2 * pages) + (format === 'csv' ? 1 : 0);
      const random = prng(seed);
      // Interrupt once the file has passed these line counts (ascending, spread over the run).
      const marks = SIGNALS.map((_, k) =>
        Math.floor(((k + 0.15 + 0.7 * random()) / SIGNALS.length) * expected * 0.9),
      );
      const report = `seed ${seed}: ${SIGNALS.map((s, k) => `${s} at ${marks[k]} lines`).join(', ')}`;
      console.info(`mocra ${command} ${format}: ${report}`);

      const seen: number[] = [];
      for (const [k, signal] of SIGNALS.entries()) {
        const run = startMocra(args, { env });
        let before = lineCount(out);
        // Interrupt right after the file grew past the mark: a line is written, its page not yet acknowledged.
        const reached = await waitFor(
          () => {
            const now = lineCount(out);
            const grew = now > before;
            before = now;
            return (grew && now >= marks[k]!) || run.child.exitCode !== null;
          },
          60_000,
          1,
        );
        expect(
          reached && run.child.exitCode === null,
          `${report}: the run ended before interruption ${k}`,
        ).toBe(true);
        run.child.kill(signal);
        const ended = await run.done;
        if (signal === 'SIGKILL') expect(ended.signal, report).toBe('SIGKILL');
        else expect(ended.code, `${report}\n${ended.stderr}`).toBe(130);
        seen.push(lineCount(out));
      }
      const last = await mocra(args, { env });
      expect(last.code, `${report}\n${last.stderr}`).toBe(0);
      expect(last.stderr).toMatch(/from before the resume/);
      // The interruptions landed mid-run.
      expect(
        seen.every((n) => n > 0 && n < expected),
        `${report}: lines at the interruptions ${seen}`,
      ).toBe(true);

      if (command === 'crawl') {
        const urls =
          format === 'jsonl'
            ? readJsonl<{ url: string; status: number }>(out).map((r) => r.url)
            : readCsv(out).rows.map((r) => r.url!);
        expect(urls.length, report).toBe(pages);
        expect(new Set(urls).size, report).toBe(pages);
        expect(new Set(urls)).toEqual(
          new Set(Array.from({ length: pages }, (_, i) => site.graphUrl(GRAPH, i))),
        );
        if (format === 'csv') expect(readCsv(out).header[0]).toBe('url');
      } else {
        const items =
          format === 'jsonl'
            ? readJsonl<{ page: number; part: number; label: string }>(out)
            : readCsv(out).rows.map((r) => ({ page: Number(r.page), part: Number(r.part), label: r.label! }));
        const keys = items.map((i) => `${i.page}:${i.part}`);
        expect(keys.length, report).toBe(2 * pages);
        expect(new Set(keys).size, report).toBe(2 * pages);
        for (const item of items) expect(item.label).toBe(`page ${item.page}, "part" ${item.part}`);
        if (format === 'csv') expect(readCsv(out).header).toEqual(['page', 'part', 'label']);
      }
    },
    240_000,
  );
});
