/**
 * @mocra/cluster quick start: three nodes on loopback, each a child process with its own LevelDB
 * log. Every node runs a worker that takes the lock "counter" and increments a counter under its
 * fencing token. Then the leader is SIGKILLed, and later the lock holder is frozen (SIGSTOP) past
 * its TTL — and the counter still equals the number of increments the cluster acknowledged.
 *
 *   pnpm exec tsx examples/cluster-quickstart.ts                                    (after a build)
 *   node --import tsx --conditions=@mocra/source examples/cluster-quickstart.ts    (from sources)
 *
 * The children are this same file, started with this process's own flags (so they run the built
 * package or the sources, whichever the parent does).
 *
 * This is the Raft cluster alone. For the crawler on it — three processes crawling the fixture
 * catalog with `.cluster(ClusterConfig.bootstrap(…))` / `.join(…)` and a Redis data plane — see
 * examples/cluster-crawl.ts.
 */
import type { ChildProcess } from 'node:child_process';
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClusterStatus, LockLease } from '@mocra/cluster';
import { ClusterConfig, createClusterNode } from '@mocra/cluster';

type ToParent =
  | { type: 'ready'; addr: string }
  | { type: 'status'; status: ClusterStatus }
  | { type: 'increment'; value: number; token: number }
  | { type: 'fenced-out'; token: number }
  | { type: 'final'; value: number };
type ToChild = { type: 'status' } | { type: 'work' } | { type: 'stop' } | { type: 'read' };

const LOCK = 'counter';
const TTL_MS = 800;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ── a node (child process) ──────────────────────────────────────────────────────────────────
async function runNode(): Promise<void> {
  const send = (m: ToParent) => process.send?.(m);
  const node = await createClusterNode(ClusterConfig.fromEnv(), { tickMs: 25, electionTicks: 20 });
  let working = false;
  const work = async () => {
    working = true;
    while (working) {
      let lease: LockLease | undefined;
      try {
        lease = await node.acquireLock(LOCK, { ttlMs: TTL_MS });
        if (!lease) {
          await sleep(20);
          continue;
        }
        // Read and write the counter under the token: the cluster refuses both if a newer
        // holder has touched it since, so no increment can be lost or doubled.
        const read = await node.fencedGet('counter-value', lease.token);
        const write = read.accepted
          ? await node.fencedPut('counter-value', lease.token, String(Number(read.value ?? '0') + 1))
          : read;
        if (write.accepted)
          send({ type: 'increment', value: Number(read.value ?? '0') + 1, token: lease.token });
        else send({ type: 'fenced-out', token: lease.token });
        await node.releaseLock(lease);
      } catch {
        await sleep(50); // no leader for a moment (an election is running); try again
      }
    }
  };
  process.on('message', async (m: ToChild) => {
    if (m.type === 'status') send({ type: 'status', status: node.status() });
    if (m.type === 'work') void work();
    if (m.type === 'stop') working = false;
    if (m.type === 'read') {
      const lease = await node.acquireLock(LOCK, { ttlMs: TTL_MS, owner: 'reader' });
      const read = lease ? await node.fencedGet('counter-value', lease.token) : undefined;
      send({ type: 'final', value: Number(read?.value ?? '-1') });
      await node.close();
      process.exit(0);
    }
  });
  send({ type: 'ready', addr: node.addr });
}

// ── the demo (parent process) ───────────────────────────────────────────────────────────────
interface Child {
  id: string;
  proc: ChildProcess;
  addr: string;
  alive: boolean;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mocra-quickstart-'));
  const self = fileURLToPath(import.meta.url);
  const children: Child[] = [];
  let acknowledged = 0;
  let fencedOut = 0;
  let lastValue = 0;
  const statusWaiters: Array<(s: ClusterStatus) => void> = [];

  const spawnNode = (id: string, seeds: string[]): Promise<Child> =>
    new Promise((resolve, reject) => {
      const proc = fork(self, [], {
        execArgv: process.execArgv,
        env: {
          ...process.env,
          QUICKSTART_ROLE: 'node',
          MOCRA_NODE_ID: id,
          MOCRA_HTTP_ADDR: '127.0.0.1:0',
          MOCRA_DATA_DIR: path.join(dir, id),
          MOCRA_SEEDS: seeds.join(','),
        },
      });
      const child: Child = { id, proc, addr: '', alive: true };
      proc.on('message', (m: ToParent) => {
        if (m.type === 'ready') {
          child.addr = m.addr;
          resolve(child);
        } else if (m.type === 'status') statusWaiters.shift()?.(m.status);
        else if (m.type === 'increment') {
          acknowledged++;
          lastValue = Math.max(lastValue, m.value);
        } else if (m.type === 'fenced-out') {
          fencedOut++;
          console.log(`  ${id}: its lease (token ${m.token}) had lapsed — the cluster refused its write`);
        }
      });
      proc.once('exit', () => {
        child.alive = false;
        reject(new Error(`${id} exited before it was ready`));
      });
      children.push(child);
    });

  const status = (c: Child): Promise<ClusterStatus> =>
    new Promise((resolve) => {
      statusWaiters.push(resolve);
      c.proc.send({ type: 'status' } satisfies ToChild);
    });
  const leaderOf = async (): Promise<Child> => {
    for (let i = 0; i < 200; i++) {
      for (const c of children.filter((x) => x.alive)) {
        const s = await status(c);
        if (s.role === 'leader') return c;
      }
      await sleep(50);
    }
    throw new Error('no leader');
  };

  try {
    console.log('starting n1 (bootstrap), n2 and n3 (join through n1)…');
    const n1 = await spawnNode('n1', []);
    await leaderOf();
    await spawnNode('n2', [n1.addr]);
    await spawnNode('n3', [n1.addr]);
    for (let i = 0; i < 200 && (await status(n1)).voters.length < 3; i++) await sleep(50);
    const leader = await leaderOf();
    console.log(`elected: ${leader.id} leads, voters ${(await status(leader)).voters.join(', ')}`);

    for (const c of children) c.proc.send({ type: 'work' } satisfies ToChild);
    await sleep(1500);
    console.log(`${acknowledged} increments so far; SIGKILL the leader ${leader.id}`);
    leader.proc.kill('SIGKILL');
    leader.alive = false;
    const next = await leaderOf();
    console.log(`new leader: ${next.id}`);
    await sleep(1500);

    // Freeze whoever holds the lock well past its TTL, then let it continue.
    const holder = children.find((c) => c.alive && c !== next) ?? next;
    console.log(`SIGSTOP ${holder.id} for ${3 * TTL_MS} ms (its lease lapses meanwhile), then SIGCONT`);
    holder.proc.kill('SIGSTOP');
    await sleep(3 * TTL_MS);
    holder.proc.kill('SIGCONT');
    await sleep(1500);

    for (const c of children.filter((x) => x.alive)) c.proc.send({ type: 'stop' } satisfies ToChild);
    await sleep(500);
    const reader = children.find((c) => c.alive)!;
    const final = await new Promise<number>((resolve) => {
      reader.proc.on('message', (m: ToParent) => {
        if (m.type === 'final') resolve(m.value);
      });
      reader.proc.send({ type: 'read' } satisfies ToChild);
    });
    console.log(
      `counter = ${final}; increments acknowledged = ${acknowledged}; stale writes refused = ${fencedOut}`,
    );
    // The killed leader may have committed one increment it never got to report.
    const ok = final >= acknowledged && final <= acknowledged + 1 && final >= lastValue;
    console.log(ok ? 'the protected counter is exact: no increment lost, none applied twice' : 'MISMATCH');
    process.exitCode = ok ? 0 : 1;
  } finally {
    for (const c of children) if (c.alive) c.proc.kill('SIGKILL');
    await sleep(200);
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.env.QUICKSTART_ROLE === 'node') await runNode();
else await main();
