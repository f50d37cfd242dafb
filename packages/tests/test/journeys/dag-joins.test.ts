// Journey: a module with a join node run by three worker processes on one shared queue. Each of
// many runs fans out into many units that land on every worker; the join of each run must fire
// exactly once in the whole cluster, after the last unit of its run was parsed — also when a
// worker is SIGKILLed mid-run (the survivors take over its leases). Redis Streams and NATS
// JetStream queues, with Redis and with Raft coordination.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { bounded, cleanup, NATS_URL, REDIS_URL, spawnWorker, type Worker } from '../distributed-harness.js';
import { freePort, tempDir } from './harness.js';

const WORKER = path.join(import.meta.dirname, '..', 'dag-joins-worker.ts');
const BOUND_MS = 300_000;

let server: Server;
let site: string;
let served = 0;
beforeAll(async () => {
  server = createServer((req, res) => {
    served++;
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`ok ${req.url}`);
  });
  // Longer than any pause between a worker's requests: a socket the server closes while undici
  // reuses it fails a download ("other side closed"), which the summaries would count as errors.
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  site = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

interface WorkerReport {
  reason: string;
  pages: number;
  errors: number;
  errorsByCode: Record<string, number>;
  pending: number;
  flushes: number;
  writesByRun: Record<string, number>;
}

function startWorker(env: Record<string, string>): Worker {
  return spawnWorker(WORKER, env);
}

interface Scenario {
  label: string;
  runs: number;
  units: number;
  /** Env per worker (three). */
  envs: Record<string, string>[];
  /** SIGKILL worker 1 once this share of all units was served. */
  killAt?: number;
}

async function runScenario(s: Scenario): Promise<void> {
  const name = `dj${randomBytes(4).toString('hex')}`;
  const key = `mocra-test:sink:${name}`;
  const total = s.runs * s.units;
  const servedBefore = served;
  const workers = s.envs.map((env, i) =>
    startWorker({
      ...env,
      MOCRA_NAME: name,
      SITE_URL: site,
      SINK_KEY: key,
      RUNS: String(s.runs),
      UNITS: String(s.units),
      WORKER: `w${i}`,
    }),
  );
  const started = Date.now();
  try {
    let killed = false;
    if (s.killAt !== undefined) {
      const deadline = Date.now() + BOUND_MS;
      while (served - servedBefore < total * s.killAt) {
        if (Date.now() > deadline) throw new Error('the runs did not get going');
        for (const w of workers)
          if (w.child.exitCode !== null) throw new Error(`a worker exited early: ${w.stderr}`);
        await sleep(20);
      }
      workers[1]!.child.kill('SIGKILL');
      console.log(`${s.label}: killed worker 1 at ${Date.now()}`);
      expect((await bounded(workers[1]!.exited, 10_000, 'the killed worker to go')).signal).toBe('SIGKILL');
      killed = true;
    }
    const reports: WorkerReport[] = [];
    for (const [i, w] of workers.entries()) {
      if (killed && i === 1) continue;
      const exit = await bounded(w.exited, BOUND_MS, `worker ${i} to end on its own\n${w.stderr}`);
      expect(exit.code, w.stderr).toBe(0);
      const report = JSON.parse(w.stdout.trim().split('\n').at(-1) ?? '{}') as WorkerReport;
      expect(report.reason, w.stderr).toBe('idle');
      expect(report.pending).toBe(0);
      expect(report.errors, JSON.stringify(report.errorsByCode)).toBe(0);
      reports.push(report);
    }
    const elapsedMs = Date.now() - started;

    const redis = new Redis(REDIS_URL);
    const fired = (await redis.lrange(`${key}:fired`, 0, -1)).map(
      (l) => JSON.parse(l) as { runId: string; seen: number; worker: string; inputs: number },
    );
    await redis.quit();
    // Exactly once per run, after every one of the run's units was parsed (cluster-wide).
    const runIds = Array.from({ length: s.runs }, (_, r) => `${name}-r${r}`);
    const byRun = new Map<string, typeof fired>();
    for (const f of fired) byRun.set(f.runId, [...(byRun.get(f.runId) ?? []), f]);
    for (const runId of runIds) {
      const firings = byRun.get(runId) ?? [];
      expect(
        firings.length,
        `${runId} fired ${firings.length} times: ${JSON.stringify(firings)}\n${workers.map((w) => w.stderr.slice(-3000)).join('\n---\n')}`,
      ).toBe(1);
      expect(firings[0]!.seen, `${runId}: units parsed when its join fired`).toBe(s.units);
    }
    // The seeded run (no units of its own) fires its join once too; nothing else fires.
    expect(byRun.get(name)?.length).toBe(1);
    expect(fired.length).toBe(s.runs + 1);
    // The work really spread: more than one worker fired joins, every report parsed pages.
    const firers = new Set(fired.map((f) => f.worker));
    for (const r of reports) expect(r.pages).toBeGreaterThan(0);

    // Cost: join-credit writes per run per worker (surviving workers).
    const perRunNode = reports.flatMap((r) => runIds.map((runId) => r.writesByRun[runId] ?? 0));
    const writes = perRunNode.reduce((a, b) => a + b, 0);
    const maxWrites = Math.max(...perRunNode);
    console.log(
      `${s.label}: ${s.runs} runs × ${s.units} units, ${fired.length} joins fired (by ${[...firers].join(', ')}), ` +
        `credit writes per run per worker: mean ${(writes / perRunNode.length).toFixed(2)}, max ${maxWrites}; ` +
        `${served - servedBefore} requests served for ${total} units; ${elapsedMs} ms`,
    );
  } finally {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await cleanup(name);
  }
}

const UNITS = Number(process.env.DJ_UNITS ?? 1_000);
const same = (env: Record<string, string>) => [env, env, env];

test(
  'Redis queue, Redis coordination: 50 runs × 1,000 units into one join fire once per run, after the last unit',
  () =>
    runScenario({
      label: 'redis',
      runs: Number(process.env.DJ_RUNS ?? 50),
      units: UNITS,
      envs: same({ MOCRA_QUEUE: REDIS_URL }),
    }),
  BOUND_MS + 30_000,
);

test(
  'NATS JetStream queue, Redis coordination: 50 runs × 1,000 units, one join firing per run',
  () =>
    runScenario({
      label: 'nats',
      runs: Number(process.env.DJ_RUNS ?? 50),
      units: UNITS,
      envs: same({ MOCRA_QUEUE: NATS_URL, MOCRA_COORDINATION: REDIS_URL }),
    }),
  BOUND_MS + 30_000,
);

/** Three embedded Raft nodes, one per worker, over a Redis queue. */
async function raftEnvs(dir: string): Promise<Record<string, string>[]> {
  const addrs = await Promise.all([freePort(), freePort(), freePort()]).then((ports) =>
    ports.map((p) => `127.0.0.1:${p}`),
  );
  return addrs.map((addr, i) => ({
    MOCRA_QUEUE: REDIS_URL,
    MOCRA_COORDINATION: `raft://${addr}?id=n${i}&dir=${path.join(dir, `n${i}`)}${i === 0 ? '' : `&join=${addrs[0]}`}`,
  }));
}

test(
  'Raft coordination over a Redis queue: 50 runs × 1,000 units, one join firing per run',
  async () => {
    const dir = tempDir('dag-joins-raft');
    try {
      await runScenario({
        label: 'raft',
        runs: Number(process.env.DJ_RUNS ?? 50),
        units: UNITS,
        envs: await raftEnvs(dir),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  BOUND_MS + 30_000,
);

// With a kill: the same 50 runs × 1,000 units (the survivors wait out the dead worker's leases).
const KILL_RUNS = Number(process.env.DJ_KILL_RUNS ?? 50);
const KILL_UNITS = Number(process.env.DJ_KILL_UNITS ?? 1_000);

test(
  'Redis queue: a worker SIGKILLed mid-run; every join still fires exactly once, after its last unit',
  () =>
    runScenario({
      label: 'redis, one worker killed',
      runs: KILL_RUNS,
      units: KILL_UNITS,
      envs: same({ MOCRA_QUEUE: REDIS_URL }),
      killAt: 0.4,
    }),
  BOUND_MS + 30_000,
);

test(
  'NATS JetStream queue: a worker SIGKILLed mid-run; every join still fires exactly once',
  () =>
    runScenario({
      label: 'nats, one worker killed',
      runs: KILL_RUNS,
      units: KILL_UNITS,
      envs: same({ MOCRA_QUEUE: NATS_URL, MOCRA_COORDINATION: REDIS_URL }),
      killAt: 0.4,
    }),
  BOUND_MS + 30_000,
);

test(
  'Raft coordination: one of three nodes SIGKILLed mid-run; every join still fires exactly once',
  async () => {
    const dir = tempDir('dag-joins-raft-kill');
    try {
      await runScenario({
        label: 'raft, one node killed',
        runs: KILL_RUNS,
        units: KILL_UNITS,
        envs: await raftEnvs(dir),
        killAt: 0.4,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  BOUND_MS + 30_000,
);
