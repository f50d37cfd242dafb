/**
 * What joins cost in a cluster: three workers on one Redis queue (Redis coordination) run RUNS
 * runs of a module that fans out UNITS requests per run into a join node. Reports the
 * coordination writes of join credit per run per worker (the design keeps it O(1): it grows with
 * how long a run stays busy on a worker, not with its units), that every run's join fired
 * exactly once, and units/s.
 *
 *   node --import tsx --conditions=@mocra/source bench/cluster-joins.ts [runs] [units] [workers]
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import path from 'node:path';

const [runs = 20, units = 1000, workers = 3] = process.argv.slice(2).map(Number);
const REDIS = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const root = path.resolve(import.meta.dirname, '..');
const nodeArgs = ['--import', 'tsx', '--conditions=@mocra/source'];

const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
const name = `cj${randomBytes(4).toString('hex')}`;

interface Result {
  reason: string;
  pages: number;
  startedAt: number;
  endedAt: number;
  flushes: number;
  writesByRun: Record<string, number>;
  triggers: Record<string, number>;
  fired: string[];
}

function run(script: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, script, ...args], {
      cwd: root,
      env: { ...process.env, MOCRA_LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d;
    });
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${script} exited ${code}`))));
  });
}

const env = { BASE: base, RUNS: String(runs), UNITS: String(units), MOCRA_QUEUE: REDIS, MOCRA_NAME: name };
const worker = path.join(import.meta.dirname, 'cluster-joins-worker.ts');
try {
  const outs = await Promise.all(Array.from({ length: workers }, () => run(worker, [], env)));
  const results = outs.map((o) => JSON.parse(o.trim().split('\n').at(-1)!) as Result);
  const runIds = Array.from({ length: runs }, (_, r) => `${name}-r${r}`);
  const perRunNode = results.flatMap((r) => runIds.map((id) => r.writesByRun[id] ?? 0));
  const fired = results.flatMap((r) => r.fired);
  const firedOnce = runIds.filter((id) => fired.filter((f) => f === id).length === 1).length;
  const seconds =
    (Math.max(...results.map((r) => r.endedAt)) - Math.min(...results.map((r) => r.startedAt))) / 1000;
  const pages = results.reduce((n, r) => n + r.pages, 0);
  const sorted = [...perRunNode].sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      runs,
      unitsPerRun: units,
      workers,
      pages,
      unitsPerSecond: Math.round(pages / seconds),
      seconds,
      joinsFiredExactlyOnce: `${firedOnce}/${runs}`,
      creditWritesPerRunPerWorker: {
        mean: Number((perRunNode.reduce((a, b) => a + b, 0) / perRunNode.length).toFixed(2)),
        median: sorted[Math.floor(sorted.length / 2)],
        max: sorted.at(-1),
      },
      writesByTrigger: results.map((r) => r.triggers),
      reasons: results.map((r) => r.reason),
    }),
  );
} finally {
  server.close();
  await run(path.join(import.meta.dirname, 'distributed-worker.ts'), ['--cleanup', name], {}).catch(() => '');
}
