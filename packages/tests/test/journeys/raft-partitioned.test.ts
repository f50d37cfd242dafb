// A Raft cluster with no queue service, as a user runs one: node processes
// (raft-partitioned-worker.ts) started with `ClusterConfig.fromEnv()` and MOCRA_QUEUE=none. Each
// node runs on its own queues; every host is crawled by the one node that owns it (rendezvous
// over the live members), its start page forwarded there over the cluster's own transport.
// Several fixture sites are several hosts (`127.0.0.1:<port>`), so the partitions are real;
// each site's own request counter says how often each page was fetched.
//
//   1. finite: 3 nodes crawl 3 hosts; every page fetched once, every item once, each host's pages
//      all on its owner; every node ends when the whole cluster is idle
//   2. service: a 4th node joins and takes the hosts it now owns (and a module's `/start_work`
//      tasks run on their account's owner, whichever node they were posted to); a node is SIGKILLed mid-crawl:
//      its host moves to a survivor in the partition map, its queued work is not done by anyone
//      (lost to the run without persist) until it restarts on its persist directory and resumes
//   3. finite, no persist: a node SIGKILLed mid-crawl; its host's queued pages are lost to the run,
//      the survivors complete their own hosts and end idle once its membership lapsed
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { rendezvousOwner } from '@mocra/core';
import { accountPartitionKey, hostPartitionKey } from '@mocra/core/cluster';
import { expectedCounts, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { Redis } from 'ioredis';
import { afterAll, expect, test } from 'vitest';
import { callApi, freePort, type NodeProc, report, running, spawnNode, until } from '../service-harness.js';

const WORKER = path.join(import.meta.dirname, 'raft-partitioned-worker.ts');
const REDIS_URL = process.env.MOCRA_TEST_REDIS ?? 'redis://127.0.0.1:6379';
const API_KEY = `k${randomBytes(8).toString('hex')}`;
const BOOKS = 40;

const sites: FixtureSite[] = [];
const procs: NodeProc[] = [];
const dirs: string[] = [];
const redis = new Redis(REDIS_URL);
const sinkKeys: string[] = [];

afterAll(async () => {
  for (const p of procs) if (running(p)) p.child.kill('SIGKILL');
  await Promise.all(sites.map((s) => s.close()));
  for (const key of sinkKeys) {
    const keys = await redis.keys(`${key}:*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  await redis.quit();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

interface NodeView {
  id: string;
  live: boolean;
  partitions?: string[];
}

const nodesOf = async (p: NodeProc) =>
  ((await callApi(p, API_KEY, '/nodes')).body as { nodes: NodeView[] }).nodes;

const hostKey = (site: FixtureSite) => hostPartitionKey(site.url);
const hostOf = (site: FixtureSite) => new URL(site.url).host;

/** Fixture sites (hosts) until every one of `owners` owns one among `members`; at most 40. */
async function sitesCovering(members: string[], owners: string[], latencyMs: number): Promise<FixtureSite[]> {
  const out: FixtureSite[] = [];
  const covered = new Set<string>();
  for (let i = 0; i < 40 && owners.some((o) => !covered.has(o)); i++) {
    const site = await startFixtureSite({ catalog: { books: BOOKS }, latencyMs, maxTrackedPaths: 1_000 });
    sites.push(site);
    const owner = rendezvousOwner(hostKey(site), members)!;
    if (!owners.includes(owner) || covered.has(owner)) continue;
    covered.add(owner);
    out.push(site);
  }
  expect([...covered].sort()).toEqual([...owners].sort());
  return out;
}

/** Pages of a site: path → times fetched (robots.txt included, if it was asked for). */
const pathsOf = (site: FixtureSite) => site.stats({ log: false }).paths;
const catalogPages = (site: FixtureSite) =>
  Object.keys(pathsOf(site)).filter((p) => p.startsWith('/book')).length;
/** What a crawl from `/books/page/1` fetches: listing, category and book pages. */
const expectedPages = expectedCounts({ catalog: { books: BOOKS } }).catalog.pages;

async function cluster(tag: string, extra: (id: string, dataDir: string) => Record<string, string>) {
  const namespace = `rp${tag}${randomBytes(4).toString('hex')}`;
  const sinkKey = `mocra-test:partitioned:${namespace}`;
  sinkKeys.push(sinkKey);
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mocra-partitioned-'));
  dirs.push(dataDir);
  const addrs = new Map<string, string>();
  const seeds: string[] = [];
  const start = async (id: string): Promise<NodeProc> => {
    let addr = addrs.get(id);
    if (addr === undefined) {
      addr = `127.0.0.1:${await freePort()}`;
      addrs.set(id, addr);
    }
    const p = spawnNode(WORKER, id, {
      MOCRA_QUEUE: 'none',
      MOCRA_NAME: namespace,
      MOCRA_NODE_ID: id,
      MOCRA_HTTP_ADDR: addr,
      MOCRA_DATA_DIR: path.join(dataDir, id),
      ...(seeds.length === 0 || seeds[0] === addr
        ? {}
        : { MOCRA_SEEDS: seeds.filter((s) => s !== addr).join(',') }),
      SINK_REDIS: REDIS_URL,
      SINK_KEY: sinkKey,
      API_KEY,
      ...extra(id, dataDir),
    });
    if (!seeds.includes(addr)) seeds.push(addr);
    procs.push(p);
    return p;
  };
  return { sinkKey, dataDir, start };
}

test('3 Raft nodes without a queue service crawl 3 hosts: each page once, each host on its owner, all end when the cluster is idle', {
  timeout: 180_000,
}, async () => {
  const members = ['n1', 'n2', 'n3'];
  const hosts = await sitesCovering(members, members, 10);
  const c = await cluster('f', () => ({ SITES: hosts.map((s) => s.url).join(','), PAUSED: '1' }));
  const nodes: NodeProc[] = [];
  for (const id of members) nodes.push(await c.start(id));
  await until('3 live members, each API up', nodes, async () => {
    if (!nodes.every((p) => /^api /m.test(p.stdout))) return undefined;
    const view = await nodesOf(nodes[0]!);
    return view.filter((n) => n.live).length === 3 ? true : undefined;
  });
  // Paused until all three are in: a node alone would crawl every host before the others start.
  for (const p of nodes) expect((await callApi(p, API_KEY, '/control/resume', {})).status).toBe(200);

  const reports = await Promise.all(nodes.map((p) => report(p, 120_000)));
  for (const r of reports) {
    expect(r.exit.code, JSON.stringify(r)).toBe(0);
    expect(r.summary.reason).toBe('idle');
    expect(r.summary.errors).toBe(0);
  }

  // Every page of every host fetched exactly once (the site's own counter).
  for (const site of hosts) {
    const paths = pathsOf(site);
    expect(catalogPages(site), site.url).toBe(expectedPages);
    for (const [p, n] of Object.entries(paths)) expect(n, `${site.url}${p}`).toBe(1);
  }
  // Every item recorded once.
  const writes = await redis.hgetall(`${c.sinkKey}:writes`);
  expect(Object.keys(writes)).toHaveLength(BOOKS * hosts.length);
  expect(Object.values(writes).every((n) => n === '1')).toBe(true);
  // Each host's pages all on the node that owns it; pages per node.
  const perNode: Record<string, Record<string, string>> = {};
  for (const id of members) perNode[id] = await redis.hgetall(`${c.sinkKey}:pages:${id}`);
  for (const site of hosts) {
    const owner = rendezvousOwner(hostKey(site), members)!;
    for (const id of members) {
      const pages = Number(perNode[id]![hostOf(site)] ?? 0);
      expect(pages, `${hostOf(site)} on ${id}`).toBe(id === owner ? expectedPages : 0);
    }
  }
  const pagesPerNode = Object.fromEntries(members.map((id, i) => [id, reports[i]!.summary.pages]));
  process.stdout.write(`[raft-partitioned] finite: pages per node ${JSON.stringify(pagesPerNode)}\n`);
  for (const id of members) expect(pagesPerNode[id]).toBe(expectedPages);
});

test('a 4th node joins and takes its hosts; a SIGKILLed node’s host moves, its queued work waits for its restart on persist, which resumes it', {
  timeout: 360_000,
}, async () => {
  const three = ['n1', 'n2', 'n3'];
  const four = ['n1', 'n2', 'n3', 'n4'];
  const first = await sitesCovering(three, three, 10);
  const c = await cluster('s', (id, dataDir) => ({
    SITES: first.map((s) => s.url).join(','),
    SERVICE: '1',
    PERSIST: path.join(dataDir, `${id}-persist`),
  }));
  const nodes: NodeProc[] = [];
  for (const id of three) nodes.push(await c.start(id));
  const [n1] = nodes as [NodeProc, NodeProc, NodeProc];
  const items = async () => Object.keys(await redis.hgetall(`${c.sinkKey}:items`)).length;
  await until('the first hosts crawled', nodes, async () =>
    (await items()) === BOOKS * first.length ? true : undefined,
  );

  // ── a 4th node joins: it is a member, and new hosts it owns are crawled by it ──────────────
  const n4 = await c.start('n4');
  nodes.push(n4);
  await until(
    '4 live members',
    nodes,
    async () => ((await nodesOf(n1)).filter((n) => n.live).length === 4 ? true : undefined),
    90_000,
  );
  const second = await sitesCovering(four, ['n4', 'n1'], 10);
  const started = await callApi(n1, API_KEY, '/start_work', {
    module: 'catalog',
    params: { sites: second.map((s) => s.url) },
  });
  expect(started.status).toBe(202);
  await until('the new hosts crawled', nodes, async () =>
    (await items()) === BOOKS * (first.length + second.length) ? true : undefined,
  );
  for (const site of second) {
    const owner = rendezvousOwner(hostKey(site), four)!;
    expect(Number(await redis.hget(`${c.sinkKey}:pages:${owner}`, hostOf(site)))).toBe(expectedPages);
    for (const [p, n] of Object.entries(pathsOf(site))) expect(n, `${site.url}${p}`).toBe(1);
  }
  // n1 routed these hosts: its /nodes shows each under its owner, every node live.
  const joined = await nodesOf(n1);
  expect(joined.map((n) => [n.id, n.live])).toEqual(four.map((id) => [id, true]));
  for (const site of second) {
    const owner = rendezvousOwner(hostKey(site), four)!;
    expect(joined.find((n) => n.id === owner)?.partitions).toContain(hostKey(site));
  }

  // ── a module's tasks go by account: each runs on its account's owner, posted to n1 ─────────
  const accounts = four.map((owner) => {
    for (let i = 0; i < 1_000; i++)
      if (rendezvousOwner(accountPartitionKey(`acc${i}`), four) === owner) return `acc${i}`;
    throw new Error(`no account owned by ${owner}`);
  });
  for (const account of accounts) {
    const posted = await callApi(n1, API_KEY, '/start_work', {
      module: 'visit',
      account,
      params: { url: `${first[0]!.url}/books/page/2?account=${account}` },
    });
    expect(posted.status).toBe(202);
  }
  const visits = await until('every account task ran', nodes, async () => {
    const v = await redis.hgetall(`${c.sinkKey}:visits`);
    return Object.keys(v).length === accounts.length ? v : undefined;
  });
  expect(accounts.map((a) => visits[a])).toEqual(four);

  // ── SIGKILL the owner of a slow host mid-crawl ─────────────────────────────────────────────
  const victim = 'n3';
  const [slow] = await sitesCovering(four, [victim], 150);
  const survivors = four.filter((id) => id !== victim);
  const newOwner = rendezvousOwner(hostKey(slow!), survivors)!;
  const n3 = nodes.find((p) => p.name === victim)!;
  expect(
    (await callApi(n1, API_KEY, '/start_work', { module: 'catalog', params: { sites: [slow!.url] } })).status,
  ).toBe(202);
  await until('the slow host half crawled', nodes, async () =>
    slow!.stats({ log: false }).requests >= 15 ? true : undefined,
  );
  n3.child.kill('SIGKILL');
  const killedAt = Date.now();
  expect((await n3.exited).signal).toBe('SIGKILL');
  const alive = nodes.filter((p) => p !== n3);
  const failover = await until('the dead node’s host moves to a survivor in /nodes', alive, async () => {
    const view = await nodesOf(n1);
    const dead = view.find((n) => n.id === victim);
    const moved = view.find((n) => n.id === newOwner)?.partitions?.includes(hostKey(slow!));
    return dead?.live === false && moved ? Date.now() - killedAt : undefined;
  });
  process.stdout.write(
    `[raft-partitioned] failover: ${failover} ms from SIGKILL to the host's new owner in /nodes\n`,
  );
  // Its queued pages are on its disk only: nobody fetches them while it is down.
  const fetchedWhileDown = slow!.stats({ log: false }).requests;
  await sleep(2_000);
  expect(slow!.stats({ log: false }).requests).toBe(fetchedWhileDown);
  expect(catalogPages(slow!)).toBeLessThan(expectedPages);
  // What the dead node fetched, read once nothing more arrives: a request it wrote just before
  // the SIGKILL can reach this process's server after the exit event, so a snapshot taken at
  // the exit would miss a page that was in flight.
  const beforeRestart = { ...pathsOf(slow!) };

  // ── restart it on the same persist directory: it resumes its queue ────────────────────────
  const back = await c.start(victim);
  nodes.push(back);
  const slowItems = async () =>
    Object.values(await redis.hgetall(`${c.sinkKey}:items`)).filter(
      (v) => (JSON.parse(v) as { host: string }).host === hostOf(slow!),
    ).length;
  await until(
    'the restarted node finishes the slow host',
    [...alive, back],
    async () => ((await slowItems()) === BOOKS ? true : undefined),
    120_000,
  );
  expect(catalogPages(slow!)).toBe(expectedPages);
  const twice = Object.entries(pathsOf(slow!))
    .filter(([, n]) => n > 1)
    .map(([p]) => p);
  // Only pages in flight at the kill (fetched, their work not yet acked) are fetched again.
  expect(twice.filter((p) => beforeRestart[p] !== 1)).toEqual([]);
  expect(twice.length).toBeLessThanOrEqual(8);
  process.stdout.write(
    `[raft-partitioned] restart: ${twice.length} page(s) fetched again of ${Object.keys(beforeRestart).length} fetched before the kill\n`,
  );
  const rejoined = await until('the restarted node is live again', alive, async () => {
    const view = await nodesOf(n1);
    return view.find((n) => n.id === victim)?.live ? view : undefined;
  });
  expect(rejoined.find((n) => n.id === victim)?.partitions).toContain(hostKey(slow!));

  // Service nodes stop on SIGTERM, draining what they have.
  for (const p of [...alive, back]) p.child.kill('SIGTERM');
  for (const p of [...alive, back]) expect((await report(p, 60_000)).exit.code).toBe(0);
});

test('finite, no persist: a node SIGKILLed mid-crawl loses its queued work to the run; the survivors finish their hosts and end', {
  timeout: 180_000,
}, async () => {
  const members = ['n1', 'n2', 'n3'];
  const victim = 'n3';
  const fast = await sitesCovering(members, ['n1', 'n2'], 10);
  const [slow] = await sitesCovering(members, [victim], 300);
  const c = await cluster('k', () => ({ SITES: [...fast, slow!].map((s) => s.url).join(','), PAUSED: '1' }));
  const nodes: NodeProc[] = [];
  for (const id of members) nodes.push(await c.start(id));
  await until('3 live members, each API up', nodes, async () => {
    if (!nodes.every((p) => /^api /m.test(p.stdout))) return undefined;
    return (await nodesOf(nodes[0]!)).filter((n) => n.live).length === 3 ? true : undefined;
  });
  for (const p of nodes) expect((await callApi(p, API_KEY, '/control/resume', {})).status).toBe(200);
  await until('the slow host partly crawled', nodes, async () =>
    slow!.stats({ log: false }).requests >= 8 ? true : undefined,
  );
  const dead = nodes.find((p) => p.name === victim)!;
  dead.child.kill('SIGKILL');
  const killedAt = Date.now();
  const survivors = nodes.filter((p) => p !== dead);
  const reports = await Promise.all(survivors.map((p) => report(p, 120_000)));
  const endedAfterMs = Date.now() - killedAt;
  for (const r of reports) {
    expect(r.exit.code, JSON.stringify(r)).toBe(0);
    expect(r.summary.reason).toBe('idle');
  }
  // The survivors' hosts: complete, each page once.
  for (const site of fast) {
    expect(catalogPages(site), site.url).toBe(expectedPages);
    for (const [p, n] of Object.entries(pathsOf(site))) expect(n, `${site.url}${p}`).toBe(1);
  }
  // The dead node's host: what it had queued was lost with it — nobody fetched it.
  const slowPages = catalogPages(slow!);
  expect(slowPages).toBeLessThan(expectedPages);
  for (const id of ['n1', 'n2'])
    expect(
      await redis.hget(`${c.sinkKey}:pages:${id}`, hostOf(slow!)),
      `${id} fetched the dead node's host`,
    ).toBeNull();
  process.stdout.write(
    `[raft-partitioned] finite kill: survivors ended ${endedAfterMs} ms after the SIGKILL; the dead node's host stopped at ${slowPages}/${expectedPages} pages\n`,
  );
});
