/**
 * The distributed data plane against the in-memory one, on the fixture link graph:
 *
 *   memory   1 process   (the baseline: payloads by reference, no server)
 *   redis    1 process   (Redis Streams queue + Redis dedup + Redis coordination)
 *   nats     1 process   (NATS JetStream queue + NATS KV dedup, Redis coordination)
 *   redis    2 processes (one crawl shared by two workers)
 *
 * Every case runs its crawlers as child processes (bench/distributed-worker.ts) against the
 * fixture site in a process of its own (the testkit's `mocra-fixture-site` bin), alternating
 * cases round by round so drift hits all of them. pages/s = pages ÷ (last worker's end − first
 * worker's start); peak RSS is the largest crawler process's maxRSS. Every run must fetch exactly
 * the graph's page count (the sum over workers of a cluster).
 *
 *   node --import tsx --conditions=@mocra/source bench/distributed-throughput.ts [pages] [fanout] [bytes] [concurrency] [rounds]
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';

const [pages = 5000, fanout = 10, bytes = 2000, concurrency = 32, rounds = 3] = process.argv
  .slice(2)
  .map(Number);
const spec = `/graph/${pages}/${fanout}/${bytes}`;
const REDIS = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const NATS = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const root = path.resolve(import.meta.dirname, '..');
const workerScript = path.join(import.meta.dirname, 'distributed-worker.ts');
const nodeArgs = ['--import', 'tsx', '--conditions=@mocra/source'];

interface WorkerResult {
  pages: number;
  reason: string;
  errors: number;
  startedAt: number;
  endedAt: number;
  maxRssMb: number;
  cpuSec: number;
}

interface Case {
  name: string;
  processes: number;
  env: Record<string, string>;
}

const cases: Case[] = [
  { name: 'memory, 1 process', processes: 1, env: {} },
  { name: 'redis, 1 process', processes: 1, env: { MOCRA_QUEUE: REDIS } },
  { name: 'nats, 1 process', processes: 1, env: { MOCRA_QUEUE: NATS, MOCRA_COORDINATION: REDIS } },
  { name: 'redis, 2 processes', processes: 2, env: { MOCRA_QUEUE: REDIS } },
];

// CASES=memory,redis-1 runs a subset (names without spaces and commas: 'redis, 2 processes' → 'redis-2').
const only = process.env.CASES?.split(',').map((s) => s.trim());
const selected = cases.filter((c) => !only || only.includes(`${c.name.split(',')[0]}-${c.processes}`));

// BENCH_CPU_PROF=<dir> writes a V8 CPU profile of every crawler process there (to see where a
// backend's time goes); it slows the crawlers, so its figures are not the benchmark's.
const profileArgs = process.env.BENCH_CPU_PROF
  ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`]
  : [];

function run(args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, ...profileArgs, ...args], {
      cwd: root,
      env: { ...process.env, MOCRA_LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${args.join(' ')} exited with ${code}`));
    });
  });
}

async function measure(
  c: Case,
  base: string,
  round: number,
): Promise<{ pagesPerSec: number; rssMb: number; cpuSec: number }> {
  const namespace = `bench${Date.now().toString(36)}${round}${c.processes}`;
  const env = { ...c.env, BASE: base, SPEC: spec, CONCURRENCY: String(concurrency), MOCRA_NAME: namespace };
  try {
    const outs = await Promise.all(Array.from({ length: c.processes }, () => run([workerScript], env)));
    const results = outs.map((o) => JSON.parse(o.trim().split('\n').at(-1)!) as WorkerResult);
    const fetched = results.reduce((n, r) => n + r.pages, 0);
    if (fetched !== pages || results.some((r) => r.errors > 0 || r.reason !== 'idle')) {
      throw new Error(`${c.name}: fetched ${fetched} of ${pages} (${JSON.stringify(results)})`);
    }
    const start = Math.min(...results.map((r) => r.startedAt));
    const end = Math.max(...results.map((r) => r.endedAt));
    return {
      pagesPerSec: fetched / ((end - start) / 1000),
      rssMb: Math.max(...results.map((r) => r.maxRssMb)),
      cpuSec: results.reduce((n, r) => n + r.cpuSec, 0),
    };
  } finally {
    if (c.env.MOCRA_QUEUE) await run([workerScript, '--cleanup', namespace], {}).catch(() => undefined);
  }
}

const dist = path.join(root, 'packages/testkit/dist/cli.js');
const siteArgs = existsSync(dist) ? [dist] : [...nodeArgs, path.join(root, 'packages/testkit/src/cli.ts')];
const site = spawn(process.execPath, [...siteArgs, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const base = await new Promise<string>((resolve) => {
  site.stdout.once('data', (d: Buffer) => resolve(d.toString().trim().split('\n')[0]!));
});

console.log(
  `graph ${spec}: ${pages} pages, fan-out ${fanout}, ${bytes} bytes/page, concurrency ${concurrency}, ${rounds} rounds`,
);
console.log(
  `load average before: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
const results = new Map<string, { pagesPerSec: number; rssMb: number; cpuSec: number }[]>();
try {
  await measure(cases[0]!, base, -1); // warm-up: page cache, the site's JIT
  for (let round = 0; round < rounds; round++) {
    for (const c of selected) {
      const r = await measure(c, base, round);
      console.log(
        `round ${round + 1}  ${c.name.padEnd(20)} ${r.pagesPerSec.toFixed(0).padStart(6)} pages/s  peak RSS ${r.rssMb.toFixed(0)} MB  cpu ${r.cpuSec.toFixed(1)} s  (load ${loadavg()[0]!.toFixed(2)})`,
      );
      const list = results.get(c.name) ?? [];
      list.push(r);
      results.set(c.name, list);
    }
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)]!;
  };
  const memory = median(results.get(cases[0]!.name)!.map((r) => r.pagesPerSec));
  console.log('\nmedian of rounds:');
  console.log('| case | pages/s | of memory | peak RSS (MB) | CPU s (all processes) |');
  console.log('| --- | ---: | ---: | ---: | ---: |');
  for (const c of selected) {
    const list = results.get(c.name)!;
    const pps = median(list.map((r) => r.pagesPerSec));
    console.log(
      `| ${c.name} | ${pps.toFixed(0)} | ${((pps / memory) * 100).toFixed(0)} % | ${median(list.map((r) => r.rssMb)).toFixed(0)} | ${median(list.map((r) => r.cpuSec)).toFixed(1)} |`,
    );
  }
  console.log(
    `load average after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
} finally {
  site.kill('SIGTERM');
}
