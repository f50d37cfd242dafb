/**
 * A fleet of service nodes: three processes on loopback that stay up, fed by cron and by
 * `/start_work`, until they are told to stop. Each node has a `report` module that runs every
 * second (a cron: the cluster fires each tick once, on the owner of the job's partition) and a
 * `fetch` module that crawls the URL a `/start_work` task names. The queue and the coordination
 * are Redis (`MOCRA_QUEUE`, default redis://127.0.0.1:6379); nothing else leaves the machine.
 *
 *   node --import tsx --conditions=@mocra/source examples/cluster-service.ts    (from sources)
 *
 * What it shows, in order: the nodes join as service nodes (`/nodes`, `meta.mode`); the cron
 * fires once per second somewhere in the cluster; tasks posted to different nodes are crawled;
 * with nothing left to do the nodes stay up; then one is stopped with `POST /control/stop` and
 * the others with SIGTERM, and each ends cleanly. The parent exits 0 when all of that held.
 *
 * The children are this same file, started with this process's own flags.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { startFixtureSite } from '@mocra/testkit';
import { Redis } from 'ioredis';
import { defineModule, Mocra, Request } from 'mocra';

type ToParent =
  | { type: 'api'; id: string; url: string }
  | { type: 'item'; id: string; kind: 'tick' | 'page'; what: string }
  | { type: 'done'; id: string; pages: number; reason: string };

const QUEUE = process.env.MOCRA_QUEUE ?? 'redis://127.0.0.1:6379';
// The children get the parent's key (they are forked with its environment).
process.env.API_KEY ??= randomBytes(12).toString('hex');
const API_KEY = process.env.API_KEY;

// ── a node (child process) ──────────────────────────────────────────────────────────────────
async function runNode(): Promise<void> {
  const env = process.env;
  const id = env.NODE_ID!;
  const site = env.SITE_URL!;
  const send = (m: ToParent) => process.send?.(m);

  // Every second: fetch the site's front page for that tick (a stand-in for a periodic report).
  const report = defineModule<{ tick: number }>({
    name: 'report',
    cron: '* * * * * *',
    nodes: [
      {
        id: 'front',
        generate: (ctx) => {
          const tick = (ctx.params.cron as { scheduledAt: number }).scheduledAt;
          return [new Request(`${site}/?tick=${tick}`, { meta: { tick } })];
        },
        parse: (res, cx) => cx.emit({ tick: res.request.meta.tick as number }),
      },
    ],
  });
  // Whatever URL a `/start_work` task names (`{ module: 'fetch', params: { url } }`).
  const fetchPage = defineModule<{ title: string }>({
    name: 'fetch',
    nodes: [
      {
        id: 'page',
        generate: (ctx) => (typeof ctx.params.url === 'string' ? [new Request(ctx.params.url)] : []),
        parse: (res, cx) => cx.emit({ title: res.$('h1').first().text() }),
      },
    ],
  });

  const summary = await Mocra.builder()
    .module(report, (item) => {
      send({ type: 'item', id, kind: 'tick', what: String(item.tick) });
    })
    .module(fetchPage, (item) => {
      send({ type: 'item', id, kind: 'page', what: item.title });
    })
    .queue(QUEUE)
    .cluster({ nodeId: id, namespace: env.NAMESPACE!, coordinationOptions: { memberTtlMs: 2_000 } })
    // keepAlive (and the cron module too) makes this a service node: it stays up when idle.
    .dashboard({
      port: 0,
      apiKey: API_KEY,
      keepAlive: true,
      onListen: (url) => send({ type: 'api', id, url }),
    })
    .run();
  send({ type: 'done', id, pages: summary.pages, reason: summary.reason });
}

// ── the parent: the fixture site, three nodes, what they did ───────────────────────────────
async function call(url: string, route: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}${route}`, {
    method: body === undefined && !route.startsWith('/control/') ? 'GET' : 'POST',
    headers: { 'x-api-key': API_KEY, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${route}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

/** Wait until `ok()` holds, at most `ms`. */
async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
}

async function main(): Promise<void> {
  const site = await startFixtureSite({ catalog: { books: 10 } });
  const namespace = `cluster-service-${randomBytes(4).toString('hex')}`;
  const file = fileURLToPath(import.meta.url);
  const children: ChildProcess[] = [];
  const apis = new Map<string, string>();
  const ticks = new Map<string, string>(); // tick → node that crawled it
  const pages: { id: string; title: string }[] = [];
  const done = new Map<string, Extract<ToParent, { type: 'done' }>>();
  const ids = ['n1', 'n2', 'n3'];
  let twice = 0; // ticks crawled more than once (never, with an itemId-keyed sink)
  try {
    for (const id of ids) {
      const child = fork(file, [], {
        execArgv: process.execArgv,
        env: { ...process.env, NODE_ROLE: 'node', NODE_ID: id, SITE_URL: site.url, NAMESPACE: namespace },
      });
      children.push(child);
      child.on('message', (m: ToParent) => {
        if (m.type === 'api') apis.set(m.id, m.url);
        else if (m.type === 'item' && m.kind === 'tick') {
          if (ticks.has(m.what)) twice++;
          ticks.set(m.what, m.id);
        } else if (m.type === 'item') pages.push({ id: m.id, title: m.what });
        else done.set(m.id, m);
      });
    }
    const url = (id: string) => apis.get(id)!;

    // 1. Three service nodes in one cluster.
    await until('three APIs', () => apis.size === 3);
    await until('three service members', async () => {
      const { nodes } = (await call(url('n1'), '/nodes')) as { nodes: { meta: { mode?: string } }[] };
      return nodes.filter((n) => n.meta.mode === 'service').length === 3;
    });
    console.log('3 service nodes up: n1, n2, n3');

    // 2. Fed by cron: one report per second, each tick crawled once, somewhere in the cluster.
    await until('three cron ticks', () => ticks.size >= 3);
    // 3. Fed by /start_work, posted to different nodes.
    for (const [i, id] of ids.entries())
      await call(url(id), '/start_work', { module: 'fetch', params: { url: `${site.url}/book/${i + 1}` } });
    await until('three pages', () => pages.length === 3);
    for (const p of pages) console.log(`/start_work → crawled "${p.title}" on ${p.id}`);

    // 4. Nothing left to do (bar the cron): every node stays up.
    await sleep(3_000);
    const up = children.filter((c) => c.exitCode === null).length;
    console.log(`after 3 s with nothing posted: ${up} of 3 nodes up, ${ticks.size} cron ticks so far`);

    // 5. Stop them: one through its API, the others with SIGTERM (both drain what is in flight).
    await call(url('n1'), '/control/stop');
    await until('n1 to stop', () => done.has('n1'));
    for (const c of children.slice(1)) c.kill('SIGTERM');
    await until('every node to stop', () => done.size === 3);
    for (const id of ids) {
      const d = done.get(id)!;
      console.log(`${id}: ${d.pages} pages, ended: ${d.reason}`);
    }
    const byNode = new Map<string, number>();
    for (const node of ticks.values()) byNode.set(node, (byNode.get(node) ?? 0) + 1);
    console.log(
      `cron ticks crawled: ${ticks.size}, ${twice} twice (${[...byNode].map(([n, c]) => `${n} ${c}`).join(', ')})`,
    );
    const ok =
      up === 3 &&
      twice === 0 &&
      pages.length === 3 &&
      done.get('n1')!.reason === 'stopped' &&
      ids.slice(1).every((id) => done.get(id)!.reason === 'signal');
    if (!ok) process.exitCode = 1;
  } finally {
    await Promise.all(
      children.map((c) =>
        c.exitCode === null && c.signalCode === null
          ? new Promise((resolve) => c.once('exit', resolve).kill('SIGKILL'))
          : undefined,
      ),
    );
    await site.close();
    // The queues and the coordination keys of this fleet live in Redis under its namespace.
    const redis = new Redis(QUEUE);
    for (const pattern of [`*{${namespace}:*`, `mocra:coord:${namespace}:*`]) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        if (keys.length > 0) await redis.unlink(...keys);
        cursor = next;
      } while (cursor !== '0');
    }
    await redis.quit();
  }
}

if (process.env.NODE_ROLE === 'node') await runNode();
else await main();
