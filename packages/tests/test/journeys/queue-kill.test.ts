// Journey: one crawl spread over two `mocra crawl` processes on a shared queue, one of them
// killed with SIGKILL while it is busiest. The survivor takes over the dead worker's leases; the
// union of both output files must hold every page of the graph (a page twice is allowed — it
// is the price of at-least-once within the lease window — a page missing is not).
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { type FixtureSite, graphPageCount, startFixtureSite } from '@mocra/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { assertBuilt, readText, type Started, startMocra, tempDir, waitFor } from './harness.js';

const REDIS = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const GRAPH = { pages: 20_000, fanout: 10, bytes: 2048 };
/** A bound on one crawl of the graph by two workers, kill and reclaim included. */
const CRAWL_BOUND_MS = 240_000;

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  root = tempDir('queue-kill');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const lineCount = (file: string) => {
  const text = readText(file);
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
};

/** Page numbers of the graph in an output file (a line cut short by the kill is skipped). */
function pagesIn(file: string): number[] {
  const prefix = `/graph/${GRAPH.pages}/${GRAPH.fanout}/${GRAPH.bytes}/`;
  const out: number[] = [];
  for (const line of readText(file).split('\n')) {
    if (line === '') continue;
    let url: string;
    try {
      url = (JSON.parse(line) as { url: string }).url;
    } catch {
      continue; // the last line of the killed worker may be cut short
    }
    out.push(Number(new URL(url).pathname.slice(prefix.length)));
  }
  return out;
}

interface KillOutcome {
  union: number;
  duplicates: number;
  missing: number[];
  killedAfter: number;
  /** From the kill to the end of the survivor's run. */
  survivorMs: number;
  survivor: { code: number | null; stderr: string };
}

/**
 * Two workers crawl the graph on `env`'s queue; the one that wrote more by then is killed once
 * the two together wrote `killAt` pages (a few thousand pages in: both at full speed).
 */
async function crawlWithKill(
  label: string,
  env: Record<string, string>,
  killAt = Number(process.env.QK_KILL_AT ?? 4_000),
): Promise<KillOutcome> {
  const start = site.graphUrl(GRAPH, 0);
  const outs = [path.join(root, `${label}-a.jsonl`), path.join(root, `${label}-b.jsonl`)];
  const args = (out: string) => ['crawl', start, '--out', out, '--no-robots', '--no-progress'];
  const workers: Started[] = outs.map((out) =>
    startMocra(args(out), { env: { MOCRA_LOG_LEVEL: 'warn', ...env }, timeoutMs: CRAWL_BOUND_MS }),
  );
  try {
    const busy = await waitFor(
      () =>
        lineCount(outs[0]!) + lineCount(outs[1]!) >= killAt || workers.some((w) => w.child.exitCode !== null),
      CRAWL_BOUND_MS,
      20,
    );
    expect(busy, 'the crawl reached the kill point').toBe(true);
    for (const w of workers) expect(w.child.exitCode, w.stderr()).toBeNull();
    const victim = lineCount(outs[0]!) >= lineCount(outs[1]!) ? 0 : 1;
    const killedAfter = lineCount(outs[victim]!);
    workers[victim]!.child.kill('SIGKILL');
    const killedAt = Date.now();
    expect((await workers[victim]!.done).signal).toBe('SIGKILL');
    const survivor = await workers[1 - victim]!.done;
    const survivorMs = Date.now() - killedAt;
    const all = [...pagesIn(outs[0]!), ...pagesIn(outs[1]!)];
    const distinct = new Set(all);
    const missing: number[] = [];
    for (let p = 0; p < graphPageCount(GRAPH); p++) if (!distinct.has(p)) missing.push(p);
    const outcome = {
      union: distinct.size,
      duplicates: all.length - distinct.size,
      missing,
      killedAfter,
      survivorMs,
      survivor: { code: survivor.code, stderr: survivor.stderr },
    };
    console.log(
      `${label}: union ${outcome.union}/${graphPageCount(GRAPH)}, duplicates ${outcome.duplicates}, killed after its ${killedAfter} pages, survivor ended ${survivorMs} ms after the kill`,
    );
    return outcome;
  } finally {
    for (const w of workers) w.stopAll('SIGKILL');
  }
}

function expectNothingLost(outcome: KillOutcome): void {
  expect(outcome.survivor.code, outcome.survivor.stderr).toBe(0);
  expect(outcome.missing.slice(0, 20), `${outcome.missing.length} pages lost`).toEqual([]);
  expect(outcome.union).toBe(graphPageCount(GRAPH));
}

/** Every key of the crawl named `name` (queue, dedup, coordination keys all carry it). */
async function deleteKeys(name: string): Promise<void> {
  const redis = new Redis(REDIS);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `*${name}*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

test(
  'Redis queue: a worker SIGKILLed at full speed loses no page; the survivor finishes the crawl',
  async () => {
    const name = `qk${randomBytes(4).toString('hex')}`;
    try {
      expectNothingLost(await crawlWithKill('redis', { MOCRA_QUEUE: REDIS, MOCRA_NAME: name }));
    } finally {
      await deleteKeys(name);
    }
  },
  CRAWL_BOUND_MS + 30_000,
);
