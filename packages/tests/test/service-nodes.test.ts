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
