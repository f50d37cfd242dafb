// The engine on the embedded Raft cluster, end to end: three node processes
// (cluster-raft-worker.ts) form a Raft control plane (bootstrap + two joins through
// ClusterConfig.fromEnv()) over a Redis Streams data plane and crawl the fixture catalog, with a
// cron module firing every second and a DAG job with remote-placed steps. Mid-run the Raft
// leader — which is also the node running the DAG job — is SIGKILLed. The evidence is in Redis
// and in the fixture server's own counters.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpTransport } from '@mocra/cluster/internal';
import { catalogBooks, expectedCounts, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { afterAll, expect, test } from 'vitest';
import { cleanup, REDIS_URL } from './distributed-harness.js';

const WORKER = path.join(import.meta.dirname, 'cluster-raft-worker.ts');
const BOOKS = 300;
const API_KEY = `k${randomBytes(8).toString('hex')}`;

interface Proc {
  id: string;
  addr: string;
  child: ChildProcess;
  stdout: string;
  stderr: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

interface RaftStatus {
  id: string;
  role: string;
  term: number;
  leaderId: string | null;
  voters: string[];
  commitIndex: number;
}

let site: FixtureSite | undefined;
let namespace = '';
let dataDir = '';
const procs: Proc[] = [];

afterAll(async () => {
  for (const p of procs)
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await site?.close();
  if (namespace) await cleanup(namespace);
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function start(id: string, addr: string, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', WORKER], {
    cwd: path.resolve(import.meta.dirname, '..'),
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      MOCRA_LOG_LEVEL: 'warn',
      ...env,
      MOCRA_NODE_ID: id,
      MOCRA_HTTP_ADDR: addr,
      MOCRA_DATA_DIR: path.join(dataDir, id),
    },
  });
  const p: Proc = {
    id,
    addr,
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))),
  };
  child.stdout!.on('data', (d: Buffer) => {
    p.stdout += d;
  });
  child.stderr!.on('data', (d: Buffer) => {
    p.stderr += d;
  });
  procs.push(p);
  return p;
}

async function status(p: Proc): Promise<RaftStatus | undefined> {
  try {
    const res = await request(`http://${p.addr}/raft/status`, { headersTimeout: 1_000, bodyTimeout: 1_000 });
    const body = (await res.body.json()) as RaftStatus & { starting?: boolean };
    return body.starting ? undefined : body;
  } catch {
    return undefined;
  }
}

/** Poll (bounded) until `probe` answers; fail with the workers' stderr otherwise. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    for (const p of procs) {
      if (p.child.exitCode !== null && p.child.signalCode === null)
        throw new Error(`${p.id} exited early while waiting for ${what}:\n${p.stderr}`);
    }
    if (Date.now() > deadline)
      throw new Error(
        `${what}: not within ${timeoutMs} ms\n${procs.map((p) => `${p.id}: ${p.stderr}`).join('\n')}`,
      );
    await sleep(50);
  }
}

async function api(p: Proc, route: string, method: 'GET' | 'POST' = 'GET'): Promise<Record<string, unknown>> {
  const url = /^api (\S+)$/m.exec(p.stdout)?.[1];
  if (url === undefined) throw new Error(`${p.id} has not printed its API URL`);
  const res = await request(`${url}${route}`, {
    method,
    headers: { 'x-api-key': API_KEY },
    headersTimeout: 5_000,
    bodyTimeout: 5_000,
  });
  return (await res.body.json()) as Record<string, unknown>;
}

test('3 Raft nodes crawl the catalog; the leader (running the DAG job) is SIGKILLed mid-run', {
  timeout: 240_000,
}, async () => {
  namespace = `raft${randomBytes(5).toString('hex')}`;
  dataDir = await mkdtemp(path.join(tmpdir(), 'mocra-raft-e2e-'));
  // 120 ms per page while the cluster forms and the kill is staged; sped up after the kill.
  site = await startFixtureSite({ latencyMs: 120, catalog: { books: BOOKS }, requestLogSize: 5_000 });
  const sinkKey = `mocra-test:sink:${namespace}`;
  const env = {
    MOCRA_QUEUE: REDIS_URL,
    MOCRA_NAME: namespace,
    SITE_URL: site.url,
    SINK_REDIS: REDIS_URL,
    SINK_KEY: sinkKey,
    API_KEY,
  };
  const addrs = await Promise.all([1, 2, 3].map(async () => `127.0.0.1:${await freePort()}`));
  // All three start at once: a seed that is not listening yet, or is still opening its log
  // (503 MOCRA_ERR_CLUSTER_STARTING), is simply asked again by the joiner.
  const n1 = start('n1', addrs[0]!, env);
  const n2 = start('n2', addrs[1]!, { ...env, MOCRA_SEEDS: addrs[0]! });
  const n3 = start('n3', addrs[2]!, { ...env, MOCRA_SEEDS: `${addrs[0]!},${addrs[1]!}` });
  const nodes = [n1, n2, n3];
  const redis = new Redis(REDIS_URL);
  try {
    // ── the cluster forms: three voters, one leader ──────────────────────────────────────
    await until('three voters', async () => {
      const s = await status(n1);
      return s && s.voters.length === 3 && s.leaderId !== null ? s : undefined;
    });

    // ── the node registry, the cluster view and a cluster-wide pause, through the API ────
    await until('every API up', async () => (nodes.every((p) => /^api /m.test(p.stdout)) ? true : undefined));
    const registry = await until('/nodes lists every member', async () => {
      // An answer without `nodes` (the cluster is still electing its first leader) means: not
      // yet; so does a member listed before its own heartbeat told the registry its hostname.
      const v = (await api(n2, '/nodes')) as { nodes?: { id: string; hostname: string | null }[] };
      return v.nodes?.length === 3 && v.nodes.every((m) => typeof m.hostname === 'string')
        ? { nodes: v.nodes }
        : undefined;
    });
    expect(registry.nodes.map((m) => m.id)).toEqual(['n1', 'n2', 'n3']);
    expect(registry.nodes.every((m) => typeof m.hostname === 'string')).toBe(true);
    const view = (await api(n3, '/observability/cluster')) as {
      kind: string;
      leader: string;
      members: { id: string; leader: boolean; meta: Record<string, string> }[];
      details: Record<string, unknown>;
    };
    expect(view.kind).toBe('raft');
    expect(['n1', 'n2', 'n3']).toContain(view.leader);
    expect(view.members.filter((m) => m.leader).map((m) => m.id)).toEqual([view.leader]);
    expect(view.members.map((m) => m.meta.role).sort()).toEqual(['leader', 'voter', 'voter']);
    expect(view.details['raft term']).toBeGreaterThan(0);
    expect(view.details['commit index']).toBeGreaterThan(0);
    const partitionRows = Object.keys(view.details).filter((k) => k.startsWith('partitions · '));
    expect(partitionRows).toHaveLength(3);
    expect(await api(n1, '/control/pause', 'POST')).toMatchObject({ paused: true, scope: 'cluster' });
    await until('the pause reaches every node', async () => {
      const views = await Promise.all(nodes.map((p) => api(p, '/observability/engine')));
      return views.every((v) => v.paused === true) ? true : undefined;
    });
    expect(await api(n3, '/control/resume', 'POST')).toMatchObject({ paused: false, scope: 'cluster' });
    await until('the resume reaches every node', async () => {
      const views = await Promise.all(nodes.map((p) => api(p, '/observability/engine')));
      return views.every((v) => v.paused === false) ? true : undefined;
    });

    // ── the DAG job: wait until its run is in its long local step, on some node H ────────
    const dagDone = async () => (await redis.lrange(`${sinkKey}:dag`, 0, -1)).map((l) => l.split('|'));
    const enriched = await until('the DAG run to reach its long step', async () => {
      const rows = await dagDone();
      return rows.some((r) => r[0] === 'enrich') ? rows : undefined;
    });
    const holderId = enriched.find((r) => r[0] === 'extract')![1]!;
    const holder = nodes.find((p) => p.id === holderId)!;
    const firstToken = Number(enriched[0]![2]);

    // ── make H the Raft leader, then SIGKILL it between two cron ticks ───────────────────
    const before = (await status(holder))!;
    if (before.leaderId !== holderId) {
      const leader = nodes.find((p) => p.id === before.leaderId)!;
      await new HttpTransport().call(leader.addr, { kind: 'transfer', to: holderId }, 5_000);
      await until('the DAG holder to lead', async () =>
        (await status(holder))?.role === 'leader' ? true : undefined,
      );
    }
    await until('a moment between two cron ticks', async () => {
      const ms = Date.now() % 1_000;
      return ms > 300 && ms < 650 ? true : undefined;
    });
    const killedTerm = (await status(holder))!.term;
    const rowsAtKill = await dagDone();
    expect(rowsAtKill.map((r) => r[0])).not.toContain('hold'); // still inside the long step
    const firesAtKill = await redis.llen(`${sinkKey}:fires`);
    holder.child.kill('SIGKILL');
    const killedExit = await holder.exited;
    // Read once the holder is dead, so that nothing starts after. A step's output is
    // checkpointed before its successors may start, so a step is checkpointed once a successor
    // has started. A remote step writes its row before its result is back on the holder: killed
    // in that gap, it rightly runs again (at least once).
    const startedAtKill = (await redis.lrange(`${sinkKey}:dagstart`, 0, -1)).map((l) => l.split('|')[0]);
    // Each step of the chain is checkpointed once the next one has started.
    const next: Record<string, string> = { extract: 'enrich', enrich: 'hold' };
    const checkpointedAtKill = Object.keys(next).filter((step) => startedAtKill.includes(next[step]));
    site.setLatency(5);
    const survivors = nodes.filter((p) => p !== holder);

    // ── a new leader among the survivors, in a later term ────────────────────────────────
    const after = await until('a new leader', async () => {
      const s = await status(survivors[0]!);
      return s?.role !== undefined && s.leaderId !== null && s.leaderId !== holderId ? s : undefined;
    });
    expect(after.term).toBeGreaterThan(killedTerm);

    // ── the run ends on its own on both survivors ────────────────────────────────────────
    const reports = [];
    for (const p of survivors) {
      let timer: NodeJS.Timeout | undefined;
      const exit = await Promise.race([
        p.exited,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error(
                  `${p.id} did not end:\n${procs.map((q) => `${q.id}: ${q.stderr.slice(-3_000)}`).join('\n')}`,
                ),
              ),
            150_000,
          );
        }),
      ]).finally(() => clearTimeout(timer));
      expect(exit.code, p.stderr).toBe(0);
      const line = p.stdout.trim().split('\n').at(-1) ?? '{}';
      reports.push(
        JSON.parse(line) as { reason: string; pending: number; errorsByCode: Record<string, number> },
      );
    }
    expect(killedExit.signal).toBe('SIGKILL');
    for (const r of reports) {
      expect(r.reason).toBe('idle');
      // The only errors allowed are the DAG task coming back while the dead holder's guard lapses.
      const unexpected = Object.entries(r.errorsByCode).filter(([code]) => code !== 'MOCRA_ERR_RETRY_LATER');
      expect(unexpected, JSON.stringify(r.errorsByCode)).toEqual([]);
    }

    // ── seeding happened once ────────────────────────────────────────────────────────────
    expect(await redis.lrange(`${sinkKey}:starts`, 0, -1)).toHaveLength(1);

    // ── the crawl is complete; every item exactly once in the itemId-keyed sink ──────────
    const expected = expectedCounts({ catalog: { books: BOOKS } }).catalog;
    const stats = site.stats({ log: false });
    for (let id = 1; id <= BOOKS; id++)
      expect(stats.paths[`/book/${id}`], `/book/${id}`).toBeGreaterThanOrEqual(1);
    const items = await redis.hgetall(`${sinkKey}:items`);
    expect(Object.keys(items)).toHaveLength(expected.books);
    const ids = Object.values(items)
      .map((v) => (JSON.parse(v) as { id: number }).id)
      .sort((a, b) => a - b);
    expect(ids).toEqual(catalogBooks({ catalog: { books: BOOKS } }).map((b) => b.id));

    // ── cron: every tick of the run fired exactly once across the cluster ────────────────
    const fires = (await redis.lrange(`${sinkKey}:fires`, 0, -1)).map((l) => l.split('|'));
    const byTick = new Map<number, string[]>();
    for (const [t, node] of fires) byTick.set(Number(t), [...(byTick.get(Number(t)) ?? []), node!]);
    const ticks = [...byTick.keys()].sort((a, b) => a - b);
    for (const [t, firedBy] of byTick) expect(firedBy, `tick ${t}`).toHaveLength(1);
    for (let i = 1; i < ticks.length; i++)
      expect(ticks[i]! - ticks[i - 1]!, `gap after ${ticks[i - 1]}`).toBe(1_000);
    expect(fires.length).toBeGreaterThan(firesAtKill); // ticks went on after the kill
    const tickItems = Object.values(await redis.hgetall(`${sinkKey}:ticks`)).map(
      (v) => (JSON.parse(v) as { tick: number }).tick,
    );
    // Each firing's task ran and its item arrived once (a firing right at the end may not have
    // been crawled before the run ended).
    expect(new Set(tickItems).size).toBe(tickItems.length);
    for (const t of tickItems) expect(byTick.has(t)).toBe(true);
    expect(tickItems.length).toBeGreaterThanOrEqual(ticks.length - 2);
    // What is left queued when the run ends can only be such a late firing's task: the cron fires
    // every second, so one may be published after the cluster decided the crawl was done.
    const uncrawled = ticks.length - tickItems.length;
    for (const r of reports)
      expect(r.pending, 'left queued besides late cron firings').toBeLessThanOrEqual(uncrawled);

    // ── the DAG run resumed on a survivor without redoing finished steps ─────────────────
    // A remote step is at least once: on a loaded machine its lease can lapse and a second
    // worker run it too, under the same fencing token. What must not happen is a finished step
    // redone after the kill, which would carry the new holder's (greater) token.
    const rows = await dagDone();
    expect([...new Set(rows.map((r) => r[0]))]).toEqual(['extract', 'enrich', 'hold', 'score', 'publish']);
    const finishedBeforeKill = [...new Set(rowsAtKill.map((r) => r[0]))];
    expect(finishedBeforeKill).toEqual(['extract', 'enrich']);
    expect(checkpointedAtKill).toContain('extract');
    for (const [step, ranOn, token] of rows) {
      if (checkpointedAtKill.includes(step!)) {
        expect(Number(token), `${step} ran again after the kill`).toBe(firstToken);
        continue;
      }
      // Finished but not yet checkpointed on the holder when it died: run again, by a survivor.
      if (finishedBeforeKill.includes(step!) && Number(token) === firstToken) continue;
      expect(ranOn, step).not.toBe(holderId);
      expect(Number(token), step).toBeGreaterThan(firstToken);
    }
    const results = Object.values(await redis.hgetall(`${sinkKey}:dagresult`)).map(
      (v) => JSON.parse(v) as { restored: string[]; fencingToken: number },
    );
    expect(results).toHaveLength(1);
    expect(results[0]!.restored.sort()).toEqual([...checkpointedAtKill].sort());
    expect(results[0]!.fencingToken).toBeGreaterThan(firstToken);
    console.log(
      `raft cluster e2e: ${JSON.stringify({
        killed: holderId,
        newLeader: after.leaderId,
        termBefore: killedTerm,
        termAfter: after.term,
        ticks: ticks.length,
        ticksAfterKill: fires.length - firesAtKill,
        items: Object.keys(items).length,
        dagTokens: [firstToken, results[0]!.fencingToken],
      })}`,
    );
  } finally {
    await redis.quit();
  }
});
