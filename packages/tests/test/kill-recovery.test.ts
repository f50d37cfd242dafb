// Crash-safe single-node runs: a child process crawls the fixture link graph with
// `persist: <dir>` and is killed with SIGKILL at random points (seeded, bounded), then started
// again on the same directory, until the crawl ends by itself. Checked against the fixture
// server's own request log:
//   - the final item set equals an uninterrupted run's (nothing acknowledged was lost, work in
//     flight at a kill was redone), and the idempotent sink holds every item exactly once;
//   - no page whose item was written before a kill is fetched again after it.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type FixtureSite, graphPageCount, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';

const GRAPH = { pages: 400, fanout: 3, bytes: 400 };
const KILLS = 4;
/** Seed of the kill points; change it to explore other interleavings. */
const SEED = 0x6b11;
const CHILD = path.join(import.meta.dirname, 'fixtures', 'kill-crawl-child.ts');

let site: FixtureSite;
let root: string;

beforeAll(async () => {
  // A little latency per request keeps several downloads in flight at any kill.
  site = await startFixtureSite({ latencyMs: 4, latencyJitterMs: 6 });
  root = await mkdtemp(path.join(tmpdir(), 'mocra-kill-'));
});

afterAll(async () => {
  await site?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

/** mulberry32: a small seeded PRNG, so every run of the test kills at the same item counts. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface ItemLine {
  id: string;
  page: number;
}

async function readItems(file: string): Promise<ItemLine[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return [];
  }
  const out: ItemLine[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      out.push(JSON.parse(line) as ItemLine);
    } catch {
      // cut short by a kill
    }
  }
  return out;
}

function startChild(
  dir: string,
  itemsFile: string,
): {
  child: ChildProcess;
  done: Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>;
} {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=@mocra/source', CHILD, site.graphUrl(GRAPH, 0), dir, itemsFile],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MOCRA_LOG_LEVEL: 'error' } },
  );
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (b: Buffer) => {
    stdout += b.toString();
  });
  child.stderr?.on('data', (b: Buffer) => {
    stderr += b.toString();
  });
  const done = new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>(
    (resolve) => child.once('exit', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return { child, done };
}

/** Pages fetched (from the server's log) that arrived at or after `since`. */
function pagesFetchedSince(since: number): number[] {
  const prefix = `/graph/${GRAPH.pages}/${GRAPH.fanout}/${GRAPH.bytes}/`;
  return site
    .stats({ log: true })
    .log.filter((e) => e.start >= since && e.url.startsWith(prefix))
    .map((e) => Number(e.url.slice(prefix.length)));
}

async function runToEnd(dir: string, itemsFile: string): Promise<{ reason: string; duplicates: number }> {
  const { done } = startChild(dir, itemsFile);
  const result = await done;
  if (result.code !== 0)
    throw new Error(`child exited with ${result.code} ${result.signal}: ${result.stderr}`);
  return JSON.parse(result.stdout.trim().split('\n').at(-1)!) as { reason: string; duplicates: number };
}

test('SIGKILLed several times and restarted on the same dir, the crawl ends with the same items and no finished page fetched again', async () => {
  const pages = graphPageCount(GRAPH);

  // The reference: one uninterrupted run.
  const refDir = path.join(root, 'reference');
  const refItems = path.join(root, 'reference.jsonl');
  const ref = await runToEnd(refDir, refItems);
  expect(ref.reason).toBe('idle');
  const reference = await readItems(refItems);
  expect(new Set(reference.map((i) => i.page)).size).toBe(pages);

  // The same crawl, killed at seeded random points.
  const dir = path.join(root, 'killed');
  const itemsFile = path.join(root, 'killed.jsonl');
  site.resetStats();
  const random = prng(SEED);
  // Kill once the item count passed these marks (ascending, spread over the crawl).
  const marks = Array.from({ length: KILLS }, (_, k) =>
    Math.floor(((k + 0.2 + 0.6 * random()) / (KILLS + 0.5)) * pages),
  );
  const kills: { mark: number; completed: number; refetched: number[]; inFlightRedone: number }[] = [];
  let completedBefore = new Set<number>();
  let killedAt = 0;
  for (const mark of marks) {
    const { child, done } = startChild(dir, itemsFile);
    let fetchedAfterRestart: number[] = [];
    // Wait (bounded) until enough items are written, then kill at once.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const n = (await readItems(itemsFile)).length;
      if (n >= mark) break;
      if (child.exitCode !== null) throw new Error(`child ended before the kill mark ${mark} (${n} items)`);
      if (Date.now() > deadline) throw new Error(`no progress to ${mark} items`);
      await new Promise((r) => setTimeout(r, 5));
    }
    child.kill('SIGKILL');
    const exit = await done;
    expect(exit.signal).toBe('SIGKILL');
    // Since the previous kill: did this process fetch any page finished before that kill?
    if (killedAt > 0) fetchedAfterRestart = pagesFetchedSince(killedAt);
    const refetched = fetchedAfterRestart.filter((p) => completedBefore.has(p));
    killedAt = Date.now();
    const fetchedBeforeKill = new Set(pagesFetchedSince(0));
    completedBefore = new Set((await readItems(itemsFile)).map((i) => i.page));
    kills.push({
      mark,
      completed: completedBefore.size,
      refetched,
      inFlightRedone: [...fetchedBeforeKill].filter((p) => !completedBefore.has(p)).length,
    });
  }

  // The last restart runs to the end.
  const last = await runToEnd(dir, itemsFile);
  expect(last.reason).toBe('idle');
  const refetchedAtEnd = pagesFetchedSince(killedAt).filter((p) => completedBefore.has(p));

  // No page whose item was written before a kill was fetched again after it.
  expect(kills.flatMap((k) => k.refetched)).toEqual([]);
  expect(refetchedAtEnd).toEqual([]);
  // The kills really landed mid-crawl.
  expect(kills.every((k) => k.completed > 0 && k.completed < pages)).toBe(true);

  // Same items as the uninterrupted run, each exactly once in the idempotent sink.
  const final = await readItems(itemsFile);
  expect(new Set(final.map((i) => i.id)).size).toBe(final.length);
  const have = new Set(final.map((i) => i.page));
  expect(
    reference.filter((r) => !have.has(r.page)).map((r) => r.page),
    'pages lost across the kills',
  ).toEqual([]);
  expect(final.map((i) => i.id).sort()).toEqual(reference.map((i) => i.id).sort());
  // Work in flight at the kills (fetched, not finished) was there, and was redone.
  expect(kills.some((k) => k.inFlightRedone > 0)).toBe(true);
  // Every page was fetched; any page fetched twice was one not finished before a kill.
  const fetches = new Map<number, number>();
  for (const p of pagesFetchedSince(0)) fetches.set(p, (fetches.get(p) ?? 0) + 1);
  expect(fetches.size).toBe(pages);
}, 240_000);
