/**
 * Raft control plane benchmark: a 3-node @mocra/cluster on loopback, one child process per node,
 * the real LevelDB log with fsync on every write.
 *
 *   node --import tsx --conditions=@mocra/source bench/raft-bench.ts [--ops1 2000] [--ops64 30000] [--failovers 3]
 *
 * Measures (clients run inside the leader's process, as the engine embeds the node):
 *   1. commits/s and p50/p99 latency of 1 sequential client (each write waits for its commit);
 *   2. the same for 64 concurrent clients (group commit + pipelining), on the leader and on a
 *      follower (which forwards every write to the leader);
 *   3. failover: SIGKILL the leader, time until the two survivors agree on a new leader and until
 *      a write commits through it; repeated `--failovers` times (the victim restarts in between).
 *
 * Prints a markdown table and the machine, Node version and load average around the run.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { request } from 'undici';

interface BenchNode {
  id: string;
  dir: string;
  raftAddr: string;
  control: string;
  proc: ChildProcess | undefined;
}

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2)
  args.set(process.argv[i]!.replace(/^--/, ''), process.argv[i + 1] ?? '');
const OPS_1 = Number(args.get('ops1') ?? 2000);
const OPS_64 = Number(args.get('ops64') ?? 30_000);
const FAILOVERS = Number(args.get('failovers') ?? 3);
const VALUE_BYTES = Number(args.get('value-bytes') ?? 128);

const childEntry = path.join(import.meta.dirname, 'raft-node.ts');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function spawnNode(n: BenchNode, seeds: string[]): Promise<void> {
  const child = spawn(process.execPath, [...process.execArgv, childEntry], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      MOCRA_NODE_ID: n.id,
      MOCRA_HTTP_ADDR: n.raftAddr,
      MOCRA_DATA_DIR: n.dir,
      MOCRA_SEEDS: seeds.join(','),
    },
  });
  n.proc = child;
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (c: Buffer) => {
      buf += c.toString();
      const m = /ready (\{.*\})\n/.exec(buf);
      if (m) {
        const info = JSON.parse(m[1]!) as { control: string; raftAddr: string };
        n.control = info.control;
        n.raftAddr = info.raftAddr;
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`${n.id} exited with ${code} before it was ready`)));
  });
}

async function call<T>(n: BenchNode, route: string, body?: unknown, timeoutMs = 600_000): Promise<T> {
  const res = await request(`http://${n.control}${route}`, {
    method: body === undefined ? 'GET' : 'POST',
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  return (await res.body.json()) as T;
}

interface Status {
  id: string;
  role: string;
  leaderId: string | null;
  voters: string[];
}

async function status(n: BenchNode): Promise<Status | undefined> {
  try {
    return await call<Status>(n, '/status', undefined, 500);
  } catch {
    return undefined;
  }
}

async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 30_000,
  everyMs = 20,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const v = await fn();
    if (v !== undefined) return v;
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function agreedLeader(nodes: BenchNode[]): Promise<BenchNode | undefined> {
  const st = await Promise.all(nodes.map(status));
  const leaders = st.filter((s) => s?.role === 'leader');
  if (leaders.length !== 1) return undefined;
  const id = leaders[0]!.id;
  if (!st.every((s) => s !== undefined && s.leaderId === id)) return undefined;
  return nodes.find((n) => n.id === id);
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function measure(leader: BenchNode, ops: number, concurrency: number) {
  const r = await call<{ elapsedMs: number; latencies: number[]; errors: number }>(leader, '/load', {
    ops,
    concurrency,
    valueBytes: VALUE_BYTES,
  });
  const sorted = [...r.latencies].sort((a, b) => a - b);
  return {
    commitsPerSec: (r.latencies.length / r.elapsedMs) * 1000,
    p50: pct(sorted, 50),
    p99: pct(sorted, 99),
    errors: r.errors,
  };
}

const base = await mkdtemp(path.join(os.tmpdir(), 'mocra-raft-bench-'));
const nodes: BenchNode[] = ['n1', 'n2', 'n3'].map((id) => ({
  id,
  dir: path.join(base, id),
  raftAddr: '127.0.0.1:0',
  control: '',
  proc: undefined,
}));
const loadBefore = os.loadavg();
try {
  await spawnNode(nodes[0]!, []);
  await waitFor('n1 to lead', async () => ((await status(nodes[0]!))?.role === 'leader' ? true : undefined));
  await spawnNode(nodes[1]!, [nodes[0]!.raftAddr]);
  await spawnNode(nodes[2]!, [nodes[0]!.raftAddr]);
  await waitFor('3 voters', async () => ((await status(nodes[0]!))?.voters.length === 3 ? true : undefined));

  let leader = await waitFor('a leader', () => agreedLeader(nodes));
  await measure(leader, 300, 8); // warm-up (JIT, connections, LevelDB files)
  const one = await measure(leader, OPS_1, 1);
  const many = await measure(leader, OPS_64, 64);
  // The same load through a follower: every write is forwarded to the leader over HTTP.
  const follower = nodes.find((n) => n !== leader)!;
  const forwarded = await measure(follower, Math.floor(OPS_64 / 2), 64);

  const failovers: Array<{ electedMs: number; firstCommitMs: number }> = [];
  for (let i = 0; i < FAILOVERS; i++) {
    leader = await waitFor('a leader', () => agreedLeader(nodes));
    const survivors = nodes.filter((n) => n !== leader);
    const killedAt = performance.now();
    leader.proc!.kill('SIGKILL');
    const next = await waitFor('a new leader', () => agreedLeader(survivors), 30_000, 5);
    const electedMs = performance.now() - killedAt;
    await measure(next, 1, 1);
    const firstCommitMs = performance.now() - killedAt;
    failovers.push({ electedMs, firstCommitMs });
    // Bring the victim back on its old port and data before the next round.
    const victim = leader.proc!;
    if (victim.exitCode === null && victim.signalCode === null)
      await new Promise((r) => victim.once('exit', r));
    await spawnNode(leader, []);
    await waitFor('all three to agree', () => agreedLeader(nodes));
    await sleep(500);
  }
  const loadAfter = os.loadavg();

  const f = (n: number, d = 0) => n.toFixed(d);
  const cpu = os.cpus();
  console.log(
    `\nmachine: ${cpu[0]?.model ?? 'unknown'} × ${cpu.length}, ${os.platform()} ${os.release()}, Node ${process.version}`,
  );
  console.log(
    `load average before: ${loadBefore.map((l) => l.toFixed(2)).join(' ')}; after: ${loadAfter.map((l) => l.toFixed(2)).join(' ')}`,
  );
  console.log(
    `value size ${VALUE_BYTES} B, LevelDB sync writes, 3 nodes on loopback, clients in the leader's process\n`,
  );
  console.log('| workload | writes | commits/s | p50 ms | p99 ms | errors |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  console.log(
    `| 1 client | ${OPS_1} | ${f(one.commitsPerSec)} | ${f(one.p50, 2)} | ${f(one.p99, 2)} | ${one.errors} |`,
  );
  console.log(
    `| 64 clients | ${OPS_64} | ${f(many.commitsPerSec)} | ${f(many.p50, 2)} | ${f(many.p99, 2)} | ${many.errors} |`,
  );
  console.log(
    `| 64 clients on a follower (forwarded) | ${Math.floor(OPS_64 / 2)} | ${f(forwarded.commitsPerSec)} | ${f(forwarded.p50, 2)} | ${f(forwarded.p99, 2)} | ${forwarded.errors} |`,
  );
  console.log('\n| failover (SIGKILL of the leader) | new leader agreed, ms | first commit through it, ms |');
  console.log('| --- | ---: | ---: |');
  for (const [i, x] of failovers.entries()) {
    console.log(`| round ${i + 1} | ${f(x.electedMs)} | ${f(x.firstCommitMs)} |`);
  }
  console.log(
    JSON.stringify({
      one,
      many,
      forwarded,
      failovers,
      loadBefore,
      loadAfter,
      node: process.version,
      cpu: cpu[0]?.model,
      cores: cpu.length,
    }),
  );
} finally {
  for (const n of nodes) n.proc?.kill('SIGKILL');
  await sleep(200);
  await rm(base, { recursive: true, force: true });
}
