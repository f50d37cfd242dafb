// Shared by distributed-redis.test.ts and distributed-nats.test.ts: three worker processes
// (distributed-worker.ts) crawl the fixture catalog as one cluster, one of them is SIGKILLed
// mid-crawl, and the fixture server's own counters and log are the evidence.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  catalogBooks,
  expectedCounts,
  type FixtureSite,
  maxConcurrency,
  maxRequestsInWindow,
  startFixtureSite,
} from '@mocra/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { expect } from 'vitest';

export const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const NATS_URL = process.env.MOCRA_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

const WORKER = path.join(import.meta.dirname, 'distributed-worker.ts');

export interface WorkerReport {
  reason: string;
  pages: number;
  items: number;
  errors: number;
  errorsByCode: Record<string, number>;
  pending: number;
}

export interface Worker {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface ClusterScenario {
  /** Env of the cluster: MOCRA_QUEUE, MOCRA_COORDINATION… */
  env: Record<string, string>;
  /** Per-host limit for the whole cluster. */
  hostMax: number;
  hostGapMs: number;
}

export interface ClusterOutcome {
  namespace: string;
  site: FixtureSite;
  survivors: {
    exit: { code: number | null; signal: NodeJS.Signals | null };
    report: WorkerReport;
    stderr: string;
  }[];
  killed: { signal: NodeJS.Signals | null; requestsBeforeKill: number };
  items: Map<string, string>;
  writes: Map<string, number>;
}

function startWorker(env: Record<string, string>): Worker {
  return spawnWorker(WORKER, env);
}

/** A TypeScript worker script as a child process (sources, not dist), its output collected. */
export function spawnWorker(script: string, env: Record<string, string>): Worker {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', script], {
    cwd: path.resolve(import.meta.dirname, '..'),
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, MOCRA_LOG_LEVEL: 'warn', ...env },
  });
  const w: Worker = {
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))),
  };
  child.stdout!.on('data', (d: Buffer) => {
    w.stdout += d;
  });
  child.stderr!.on('data', (d: Buffer) => {
    w.stderr += d;
  });
  return w;
}

/** `p`, or a rejection naming `what` after `ms`. */
export async function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Run the scenario; every wait is bounded, every worker is killed on the way out. */
export async function runCluster(scenario: ClusterScenario): Promise<ClusterOutcome> {
  const namespace = `e2e${randomBytes(5).toString('hex')}`;
  // 15 ms per page keeps the crawl going for several seconds, so the kill lands mid-crawl.
  const site = await startFixtureSite({ latencyMs: 15, requestLogSize: 20_000 });
  const env = {
    ...scenario.env,
    MOCRA_NAME: namespace,
    SITE_URL: site.url,
    SINK_REDIS: REDIS_URL,
    SINK_KEY: `mocra-test:sink:${namespace}`,
    HOST_MAX: String(scenario.hostMax),
    HOST_GAP_MS: String(scenario.hostGapMs),
  };
  const workers = [startWorker(env), startWorker(env), startWorker(env)];
  try {
    // Kill worker 1 once the cluster has fetched a fifth of the catalog (bounded wait).
    const total = expectedCounts().catalog.pages;
    const deadline = Date.now() + 60_000;
    while (site.stats({ log: false }).requests < total / 5) {
      if (Date.now() > deadline)
        throw new Error(`the crawl did not start: ${workers.map((w) => w.stderr).join('\n')}`);
      for (const w of workers)
        if (w.child.exitCode !== null) throw new Error(`a worker exited early: ${w.stderr}`);
      await sleep(20);
    }
    const requestsBeforeKill = site.stats({ log: false }).requests;
    workers[1]!.child.kill('SIGKILL');
    const killedExit = await bounded(workers[1]!.exited, 10_000, 'the killed worker to go');
    const survivors = [];
    for (const w of [workers[0]!, workers[2]!]) {
      const exit = await bounded(w.exited, 120_000, `a surviving worker to end on its own\n${w.stderr}`);
      const line = w.stdout.trim().split('\n').at(-1) ?? '';
      survivors.push({ exit, report: JSON.parse(line || '{}') as WorkerReport, stderr: w.stderr });
    }
    const sink = new Redis(REDIS_URL);
    const items = new Map(Object.entries(await sink.hgetall(`${env.SINK_KEY}:items`)));
    const writes = new Map(
      Object.entries(await sink.hgetall(`${env.SINK_KEY}:writes`)).map(([k, v]) => [k, Number(v)] as const),
    );
    await sink.quit();
    return {
      namespace,
      site,
      survivors,
      killed: { signal: killedExit.signal, requestsBeforeKill },
      items,
      writes,
    };
  } finally {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  }
}

/** The assertions both backends must pass, and the figures for the report. */
export function assertCluster(outcome: ClusterOutcome, scenario: ClusterScenario): Record<string, number> {
  const { site, survivors, killed, items, writes } = outcome;
  const expected = expectedCounts().catalog;

  // The run ended on its own on every surviving process; the killed one was killed.
  expect(killed.signal).toBe('SIGKILL');
  for (const s of survivors) {
    expect(s.exit.code, s.stderr).toBe(0);
    expect(s.report.reason).toBe('idle');
    expect(s.report.pending).toBe(0);
    expect(s.report.errors, JSON.stringify(s.report.errorsByCode)).toBe(0);
  }
  // Both survivors did part of the work.
  for (const s of survivors) expect(s.report.pages).toBeGreaterThan(0);

  // Every page was fetched: the server saw every catalog path.
  const stats = site.stats({ log: true });
  const catalogPaths = Object.entries(stats.paths).filter(([p]) => p.startsWith('/book'));
  expect(catalogPaths.length).toBe(expected.pages);
  for (let id = 1; id <= expected.books; id++)
    expect(stats.paths[`/book/${id}`], `/book/${id}`).toBeGreaterThanOrEqual(1);
  const fetches = catalogPaths.reduce((n, [, c]) => n + c, 0);
  const refetched = fetches - expected.pages;

  // Every item was delivered at least once, and exactly once to the itemId-keyed sink.
  expect(items.size).toBe(expected.books);
  const ids = [...items.values()].map((v) => (JSON.parse(v) as { id: number }).id).sort((a, b) => a - b);
  expect(ids).toEqual(catalogBooks().map((b) => b.id));
  for (const key of items.keys()) expect(writes.get(key) ?? 0).toBeGreaterThanOrEqual(1);
  const deliveries = [...writes.values()].reduce((a, b) => a + b, 0);

  // The per-host limit held for the whole cluster, by the server's own log.
  expect(stats.logDropped).toBe(0);
  const log = stats.log.filter((e) => new URL(e.url, site.url).pathname.startsWith('/book'));
  const peakConcurrency = maxConcurrency(log);
  expect(peakConcurrency).toBeLessThanOrEqual(scenario.hostMax);
  // Starts are granted at least hostGapMs apart (server clock of Redis); arrivals at the site
  // can bunch by the client-side delay between grant and send, so a 1 s window is allowed one
  // start per gap plus 2 for that jitter at its two edges.
  const peakPerSecond = maxRequestsInWindow(log, 1000);
  const allowedPerSecond = Math.floor(1000 / scenario.hostGapMs) + 2;
  expect(peakPerSecond).toBeLessThanOrEqual(allowedPerSecond);

  return {
    requestsBeforeKill: killed.requestsBeforeKill,
    fetches,
    refetched,
    items: items.size,
    deliveries,
    redelivered: deliveries - items.size,
    peakConcurrency,
    hostMax: scenario.hostMax,
    peakPerSecond,
    allowedPerSecond,
    survivorPages: survivors.reduce((n, s) => n + s.report.pages, 0),
  };
}

/** Delete everything a run left in Redis and NATS (queues, dedup, budget, coordination, sink). */
export async function cleanup(namespace: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  try {
    for (const pattern of [
      `*{${namespace}:*`,
      `mocra:coord:${namespace}:*`,
      `mocra-test:sink:${namespace}:*`,
    ]) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        if (keys.length > 0) await redis.unlink(...keys);
        cursor = next;
      } while (cursor !== '0');
    }
  } finally {
    await redis.quit();
  }
  const nc = await connect({ servers: NATS_URL }).catch(() => undefined);
  if (!nc) return;
  try {
    const jsm = await jetstreamManager(nc);
    const names: string[] = [];
    for await (const s of jsm.streams.list()) names.push(s.config.name);
    for (const name of names) {
      if (name.startsWith(`mocra~${namespace}~`) || name.startsWith(`KV_mocra-dedup-${namespace}-`)) {
        await jsm.streams.delete(name).catch(() => false);
      }
    }
  } finally {
    await nc.close();
  }
}
