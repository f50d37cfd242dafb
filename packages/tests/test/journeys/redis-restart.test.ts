// Journey: the Redis a distributed crawl runs on restarts mid-crawl. The test runs a redis-server
// of its own on a free port (the shared one is never touched), two `mocra crawl` workers on it,
// and stops Redis (SIGTERM) while both are at full speed, then starts it again on the same port.
//   - With an append-only file (fsync on every write) Redis comes back with everything it held:
//     the workers wait, say so on stderr, reconnect and finish — every page in the union.
//   - Without persistence the restarted Redis is empty: the queue, the dedup set and the run's
//     markers are gone. The workers must not report that as a finished crawl.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, graphPageCount, startFixtureSite } from '@mocra/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, test } from 'vitest';
import {
  assertBuilt,
  freePort,
  graphPagesIn,
  lineCount,
  type Started,
  startMocra,
  tempDir,
  waitFor,
} from './harness.js';

const GRAPH = { pages: 20_000, fanout: 10, bytes: 2048 };
/** Page numbers of the graph in one output file. */
const pagesOf = (file: string) => graphPagesIn(file, GRAPH);
const CRAWL_BOUND_MS = 240_000;

let site: FixtureSite;
let root: string;
const servers = new Set<ChildProcess>();
beforeAll(async () => {
  assertBuilt();
  site = await startFixtureSite();
  root = tempDir('redis-restart');
});
afterAll(async () => {
  for (const s of servers) s.kill('SIGKILL');
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** A redis-server of this test's own; resolves once it answers PING. */
async function startRedis(port: number, dir: string, persistent: boolean): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir];
  args.push(...(persistent ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']));
  const server = spawn('redis-server', args, { stdio: 'ignore' });
  servers.add(server);
  server.once('exit', () => servers.delete(server));
  const client = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    for (let i = 0; i < 200; i++) {
      try {
        await client.connect();
        if ((await client.ping()) === 'PONG') return server;
      } catch {
        client.disconnect();
      }
      if (server.exitCode !== null) throw new Error(`redis-server exited with ${server.exitCode}`);
      await sleep(25);
    }
    throw new Error(`redis-server on ${port} did not answer`);
  } finally {
    client.disconnect();
  }
}

async function stopRedis(server: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGTERM');
  await exited;
}

interface RestartOutcome {
  port: number;
  workers: { code: number | null; stderr: string }[];
  union: number;
  duplicates: number;
  downMs: number;
}

/**
 * Two workers on a Redis of our own, which is stopped once they wrote `stopAt` pages and started
 * again after `downMs`. With `coordinationApart` that Redis holds only the coordination (and the
 * dedup set); the queue is on a second one, with an append-only file, that keeps running.
 */
async function crawlAcrossRestart(
  label: string,
  persistent: boolean,
  { coordinationApart = false, stopAt = 4_000, downMs = 3_000 } = {},
) {
  const dir = path.join(root, label);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  let server = await startRedis(port, dir, persistent);
  const env: Record<string, string> = { MOCRA_QUEUE: `redis://127.0.0.1:${port}`, MOCRA_NAME: label };
  if (coordinationApart) {
    const queueDir = path.join(dir, 'queue');
    mkdirSync(queueDir);
    const queuePort = await freePort();
    await startRedis(queuePort, queueDir, true);
    env.MOCRA_QUEUE = `redis://127.0.0.1:${queuePort}`;
    env.MOCRA_COORDINATION = `redis://127.0.0.1:${port}`;
  }
  const outs = [0, 1].map((i) => path.join(root, `${label}-${i}.jsonl`));
  const start = site.graphUrl(GRAPH, 0);
  const workers: Started[] = outs.map((out) =>
    startMocra(['crawl', start, '--out', out, '--no-robots', '--no-progress'], {
      env,
      timeoutMs: CRAWL_BOUND_MS,
    }),
  );
  try {
    const busy = await waitFor(
      () =>
        lineCount(outs[0]!) + lineCount(outs[1]!) >= stopAt || workers.some((w) => w.child.exitCode !== null),
      CRAWL_BOUND_MS,
      20,
    );
    expect(busy).toBe(true);
    for (const w of workers) expect(w.child.exitCode, w.stderr()).toBeNull();
    await stopRedis(server);
    await sleep(downMs);
    server = await startRedis(port, dir, persistent);
    const ended = await Promise.all(workers.map((w) => w.done));
    const all = outs.flatMap(pagesOf);
    const distinct = new Set(all);
    const outcome: RestartOutcome = {
      port,
      workers: ended.map(({ code, stderr }) => ({ code, stderr })),
      union: distinct.size,
      duplicates: all.length - distinct.size,
      downMs,
    };
    console.log(
      `${label}: union ${outcome.union}/${graphPageCount(GRAPH)}, duplicates ${outcome.duplicates}, exit codes ${ended.map((e) => e.code).join(',')}\n${ended.map((e) => e.stderr.slice(0, 3000)).join('\n---\n')}`,
    );
    return outcome;
  } finally {
    for (const w of workers) w.stopAll('SIGKILL');
    await stopRedis(server).catch(() => undefined);
  }
}

const server = (port: number) => `the Redis queue backend (redis://127.0.0.1:${port})`;

test(
  'Redis with an append-only file restarted mid-crawl: the workers wait, say so, reconnect and lose nothing',
  async () => {
    const outcome = await crawlAcrossRestart('aof', true);
    for (const w of outcome.workers) {
      expect(w.code, w.stderr).toBe(0);
      expect(w.stderr).toContain(`mocra: warning: lost the connection of ${server(outcome.port)}`);
      expect(w.stderr).toContain('waiting for it to come back (MOCRA_ERR_BACKEND_UNAVAILABLE)');
      expect(w.stderr).toContain(`mocra: ${server(outcome.port)} is connected again after`);
      expect(w.stderr).toMatch(/is connected again after \d+\.\d s/);
      // One warning per outage and backend, not one per failed call.
      expect(w.stderr.split(`lost the connection of ${server(outcome.port)}`).length - 1).toBe(1);
    }
    expect(outcome.union).toBe(graphPageCount(GRAPH));
  },
  CRAWL_BOUND_MS + 30_000,
);

test(
  'a coordination Redis apart from the queue restarted without persistence: the run markers are gone, and the workers stop with a typed error instead of waiting forever',
  async () => {
    const outcome = await crawlAcrossRestart('coordination', false, { coordinationApart: true });
    for (const w of outcome.workers) {
      expect(w.code, w.stderr).toBe(1);
      expect(w.stderr).toContain(
        `mocra: the Redis coordination backend: redis://127.0.0.1:${outcome.port} came back without this crawl's coordination data`,
      );
      expect(w.stderr).toContain('(MOCRA_ERR_COORDINATION_DATA_LOST)');
    }
    expect(outcome.union).toBeGreaterThan(0);
  },
  CRAWL_BOUND_MS + 30_000,
);

test(
  'Redis without persistence restarted mid-crawl: its work is gone, and the workers stop with a typed error instead of waiting forever or calling the crawl finished',
  async () => {
    const outcome = await crawlAcrossRestart('volatile', false);
    for (const w of outcome.workers) {
      expect(w.code, w.stderr).toBe(1);
      expect(w.stderr).toContain(
        `mocra: the Redis queue backend: redis://127.0.0.1:${outcome.port} came back without this crawl's queues`,
      );
      expect(w.stderr).toContain('(MOCRA_ERR_QUEUE_DATA_LOST)');
    }
    // What was written before the restart stays written.
    expect(outcome.union).toBeGreaterThan(0);
  },
  CRAWL_BOUND_MS + 30_000,
);
