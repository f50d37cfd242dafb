// Service nodes, end to end: node processes (service-node-worker.ts) that are told to stay up —
// by the dashboard's keepAlive, or by a module with a cron — on a shared queue (Redis, NATS) with
// Redis or embedded-Raft coordination. They stay up with nothing to do, crawl what `/start_work`
// brings to any of them, and drain on SIGTERM or `/control/stop`. With a cron module on three
// nodes, every tick fires exactly once in the cluster, also across a SIGKILL of its owner.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { afterEach, expect, test } from 'vitest';
import { cleanup, NATS_URL, REDIS_URL } from './distributed-harness.js';
import { callApi, freePort, type NodeProc, report, running, spawnNode, until } from './service-harness.js';

const WORKER = path.join(import.meta.dirname, 'service-node-worker.ts');
const API_KEY = `k${randomBytes(8).toString('hex')}`;

const TOPOLOGIES: Record<string, Record<string, string>> = {
  redis: { MOCRA_QUEUE: REDIS_URL },
  'nats+redis': { MOCRA_QUEUE: NATS_URL, MOCRA_COORDINATION: REDIS_URL },
  'redis+raft': { MOCRA_QUEUE: REDIS_URL, RAFT: '1' },
  'nats+raft': { MOCRA_QUEUE: NATS_URL, RAFT: '1' },
};

let site: FixtureSite | undefined;
let namespace = '';
let dataDir = '';
let nodes: NodeProc[] = [];
let redis: Redis | undefined;

afterEach(async () => {
  for (const p of nodes) if (running(p)) p.child.kill('SIGKILL');
  await Promise.all(nodes.map((p) => p.exited));
  nodes = [];
  await redis?.quit();
  redis = undefined;
  await site?.close();
  site = undefined;
  if (namespace) await cleanup(namespace);
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  dataDir = '';
});

/** Start `count` nodes of one cluster (the first bootstraps the Raft cluster, the others join). */
async function startCluster(topology: string, count: number, extra: Record<string, string>) {
  namespace = `svc${randomBytes(5).toString('hex')}`;
  site = await startFixtureSite({ catalog: { books: 20 }, requestLogSize: 2_000 });
  redis = new Redis(REDIS_URL);
  const sinkKey = `mocra-test:sink:${namespace}`;
  const env: Record<string, string> = {
    ...TOPOLOGIES[topology]!,
    ...extra,
    MOCRA_NAME: namespace,
    SITE_URL: site.url,
    SINK_REDIS: REDIS_URL,
    SINK_KEY: sinkKey,
    API_KEY,
  };
  const raft = env.RAFT === '1';
  if (raft) dataDir = await mkdtemp(path.join(tmpdir(), 'mocra-service-'));
  const addrs = await Promise.all(Array.from({ length: count }, async () => `127.0.0.1:${await freePort()}`));
  nodes = addrs.map((addr, i) => {
    const name = `n${i + 1}`;
    const raftEnv = raft
      ? {
          MOCRA_NODE_ID: name,
          MOCRA_HTTP_ADDR: addr,
          MOCRA_DATA_DIR: path.join(dataDir, name),
          ...(i === 0 ? {} : { MOCRA_SEEDS: addrs.slice(0, i).join(',') }),
        }
      : {};
    return spawnNode(WORKER, name, { ...env, NODE: name, ...raftEnv });
  });
  // Every node is up and a member of the run, as a service node.
  await until('every node in /nodes as a service node', nodes, async () => {
    if (!nodes.every((p) => /^api /m.test(p.stdout))) return undefined;
    const view = (await callApi(nodes[0]!, API_KEY, '/nodes')).body as {
      nodes: { id: string; meta: Record<string, string> }[];
    };
    const members = view.nodes.filter((m) => m.meta.mode === 'service');
    return members.length === count ? true : undefined;
  });
  return { sinkKey, addrs, raft };
}

async function raftRole(addr: string): Promise<string | undefined> {
  const res = await request(`http://${addr}/raft/status`, { headersTimeout: 1_000, bodyTimeout: 1_000 });
  return ((await res.body.json()) as { role?: string }).role;
}

async function items(sinkKey: string): Promise<Map<string, { url?: string; tick?: number; node: string }>> {
  const raw = await redis!.hgetall(`${sinkKey}:items`);
  return new Map(Object.entries(raw).map(([k, v]) => [k, JSON.parse(v)] as const));
}

for (const topology of ['redis', 'nats+redis', 'redis+raft']) {
  test(`keepAlive nodes (${topology}) stay up idle, crawl /start_work posted to any node, drain on SIGTERM and /control/stop`, {
    timeout: 120_000,
  }, async () => {
    const { sinkKey, addrs, raft } = await startCluster(topology, 3, { MODE: 'keepalive' });
    // Idle, seeded, well past several completion checks (every 300 ms): still up.
    await sleep(3_000);
    for (const p of nodes) expect(running(p), `${p.name} ended while idle:\n${p.stderr}`).toBe(true);

    // `/start_work` to a follower (Raft's, or the second node) and to another node.
    let follower = 1;
    if (raft) {
      const roles = await Promise.all(addrs.map((a) => raftRole(a).catch(() => undefined)));
      follower = roles.indexOf('follower');
      expect(follower).toBeGreaterThanOrEqual(0);
    }
    const [other, third] = [0, 1, 2].filter((i) => i !== follower) as [number, number];
    const post = (i: number, url: string) =>
      callApi(nodes[i]!, API_KEY, '/start_work', { module: 'fetch', params: { url } });
    expect((await post(follower, `${site!.url}/book/1`)).status).toBe(202);
    expect((await post(other, `${site!.url}/book/2`)).status).toBe(202);
    await until('both pages crawled', nodes, async () =>
      (await items(sinkKey)).size === 2 ? true : undefined,
    );

    // One node stops through its API; the others stay up.
    const stop = await callApi(nodes[third]!, API_KEY, '/control/stop');
    expect(stop.status).toBe(202);
    expect(stop.body).toMatchObject({ stopping: true, node: expect.any(String) });
    const stopped = await report(nodes[third]!);
    expect(stopped.exit.code, nodes[third]!.stderr).toBe(0);
    expect(stopped.summary.reason).toBe('stopped');
    await sleep(1_000);
    for (const i of [follower, other]) expect(running(nodes[i]!), nodes[i]!.stderr).toBe(true);

    // SIGTERM to the node fetching a (slow) page: it finishes what it has in flight (drains) and
    // ends with reason 'signal'; the page is crawled once, and the last node stays up.
    site!.setLatency(1_500);
    expect((await post(follower, `${site!.url}/book/3`)).status).toBe(202);
    const up = [nodes[follower]!, nodes[other]!];
    const by = await until('/book/3 requested', up, async () => {
      const entry = site!.stats({ log: true }).log.find((e) => e.url.startsWith('/book/3?'));
      return entry === undefined ? undefined : new URL(entry.url, site!.url).searchParams.get('by')!;
    });
    const fetcher = nodes.findIndex((p) => p.name === by);
    const last = fetcher === follower ? other : follower;
    nodes[fetcher]!.child.kill('SIGTERM');
    const drained = await report(nodes[fetcher]!);
    expect(drained.exit.code, nodes[fetcher]!.stderr).toBe(0);
    expect(drained.summary.reason).toBe('signal');
    await until('/book/3 crawled', [nodes[last]!], async () =>
      (await items(sinkKey)).size === 3 ? true : undefined,
    );
    expect(running(nodes[last]!), nodes[last]!.stderr).toBe(true);
    nodes[last]!.child.kill('SIGTERM');
    const lastReport = await report(nodes[last]!);
    expect(lastReport.exit.code, nodes[last]!.stderr).toBe(0);
    expect(lastReport.summary.reason).toBe('signal');
    expect(lastReport.summary.pending).toBe(0);

    const crawled = await items(sinkKey);
    expect([...crawled.values()].map((i) => new URL(i.url!).pathname).sort()).toEqual([
      '/book/1',
      '/book/2',
      '/book/3',
    ]);
    const writes = Object.values(await redis!.hgetall(`${sinkKey}:writes`)).map(Number);
    expect(writes).toEqual([1, 1, 1]);
    const stats = site!.stats({ log: false });
    for (const p of ['/book/1', '/book/2', '/book/3']) expect(stats.paths[p], p).toBe(1);
  });
}

for (const topology of ['redis', 'nats+raft']) {
  test(`cron on 3 nodes (${topology}): each tick fires once in the cluster, also across a SIGKILL of its owner`, {
    timeout: 150_000,
  }, async () => {
    const { sinkKey } = await startCluster(topology, 3, { MODE: 'cron' });
    const fires = async () =>
      (await redis!.lrange(`${sinkKey}:fires`, 0, -1)).map((line) => {
        const [tick, node, firedAt] = line.split('|');
        return { tick: Number(tick), node: node!, firedAt: Number(firedAt) };
      });
    // A few ticks with every node up; the last one was fired by the job's owner.
    const before = await until('three ticks', nodes, async () => {
      const f = await fires();
      return f.length >= 3 ? f : undefined;
    });
    for (const p of nodes) expect(running(p), p.stderr).toBe(true);
    const owner = before.at(-1)!.node;
    // Killed late in a second, after its claim of that second's tick is most likely done.
    await until('a moment between two ticks', nodes, async () => {
      const ms = Date.now() % 1_000;
      return ms > 600 && ms < 850 ? true : undefined;
    });
    const victim = nodes.find((p) => p.name === owner)!;
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    await victim.exited;
    const survivors = nodes.filter((p) => p !== victim);
    const taken = await until('a tick fired by the new owner', survivors, async () =>
      (await fires()).find((f) => f.tick > killedAt && f.node !== owner),
    );
    // Then every tick from the first on, bar one, fires (late, for those nobody owned; a claim
    // stuck on a dead Raft leader fails after requestTimeoutMs and is asked again). The one that
    // may be missing is the tick of the kill's own second: claimed by the victim, which may have
    // died before it fired (a claimed time is never fired again — that keeps it at most once).
    const killSecond = Math.floor(killedAt / 1_000) * 1_000;
    const gaps = (all: { tick: number }[]) => {
      const seen = new Set(all.map((f) => f.tick));
      const ticks = [...seen].sort((a, b) => a - b);
      const missing: number[] = [];
      for (let t = ticks[0]!; t <= ticks.at(-1)!; t += 1_000) if (!seen.has(t)) missing.push(t);
      return missing;
    };
    await until('two more ticks, and no tick missing but the kill second', survivors, async () => {
      const all = await fires();
      const missing = gaps(all).filter((t) => t !== killSecond);
      return all.filter((f) => f.tick > taken.tick).length >= 2 && missing.length === 0 ? true : undefined;
    });
    for (const p of survivors) p.child.kill('SIGTERM');
    for (const p of survivors) {
      const r = await report(p);
      expect(r.exit.code, p.stderr).toBe(0);
      expect(r.summary.reason).toBe('signal');
    }

    // No tick fired twice; none lost but (maybe) the kill second's; nothing skipped silently.
    const all = await fires();
    const byTick = new Map<number, string[]>();
    for (const f of all) byTick.set(f.tick, [...(byTick.get(f.tick) ?? []), f.node]);
    for (const [tick, firedBy] of byTick) expect(firedBy, `tick ${tick}`).toHaveLength(1);
    const ticks = [...byTick.keys()].sort((a, b) => a - b);
    const lost = gaps(all);
    expect(
      lost.filter((t) => t !== killSecond),
      JSON.stringify(all),
    ).toEqual([]);
    // A claim that failed (a Raft leader gone) is reported, and its time asked about again.
    const skips = (await redis!.lrange(`${sinkKey}:skips`, 0, -1)).map((l) => l.split('|'));
    expect(skips.filter((k) => k[2] !== 'claim-failed')).toEqual([]);
    // The dead owner fired nothing after its death; the ticks nobody owned were fired late, once.
    const afterKill = all.filter((f) => f.tick > killedAt);
    expect(afterKill.every((f) => f.node !== owner)).toBe(true);
    const late = afterKill.filter((f) => f.firedAt - f.tick > 500);
    // Each firing's task ran (those fired just before the stop may still be queued), once.
    const tickItems = [...(await items(sinkKey)).values()].map((i) => i.tick!);
    expect(new Set(tickItems).size).toBe(tickItems.length);
    for (const t of tickItems) expect(byTick.has(t)).toBe(true);
    expect(tickItems.length).toBeGreaterThanOrEqual(ticks.length - 3);
    const perNode: Record<string, number> = {};
    for (const f of all) perNode[f.node] = (perNode[f.node] ?? 0) + 1;
    console.log(
      `service cron (${topology}): ${JSON.stringify({
        ticks: ticks.length,
        firings: all.length,
        perNode,
        killed: owner,
        newOwner: taken.node,
        failoverMs: taken.firedAt - killedAt,
        lateFirings: late.length,
        maxLateMs: Math.max(0, ...late.map((f) => f.firedAt - f.tick)),
        tickItems: tickItems.length,
        killSecondLost: lost.length,
        claimsFailed: skips.length,
      })}`,
    );
  });
}
