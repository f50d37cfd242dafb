/**
 * The mocra engine on a 3-node Raft cluster: three processes on loopback crawl the fixture
 * catalog as one crawl. The control plane (leader, locks, membership, cron ownership, DAG
 * checkpoints) is the embedded Raft cluster — `.cluster(ClusterConfig.bootstrap(…))` on the first
 * node, `.cluster(ClusterConfig.join(…))` on the others; the data plane (the stage queues, the
 * shared dedup set) is Redis — or nothing, with MOCRA_QUEUE=none (below). The spider is the same
 * one you would run on one machine.
 *
 *   node --import tsx --conditions=@mocra/source examples/cluster-crawl.ts    (from sources)
 *   MOCRA_QUEUE=redis://10.0.0.5:6379 …   another Redis (default: redis://127.0.0.1:6379)
 *   MOCRA_QUEUE=nats://127.0.0.1:4222 …   NATS JetStream as the data plane, nothing else changes
 *                                         (its streams `mocra~cluster-crawl-…` are left behind;
 *                                         the Redis keys of a run are deleted at the end)
 *   MOCRA_QUEUE=none …                    no queue service at all: the Raft cluster alone. Each
 *                                         node runs on its own in-memory queues and crawls the
 *                                         hosts it owns (the site is served on 3 hosts,
 *                                         127.0.0.1–3, so there are 3 partitions to spread)
 *
 * It seeds once (whichever node takes the seed lock), every book is fetched once across the
 * cluster, and each node ends on its own when the whole cluster is idle. The parent prints what
 * each node did and exits 0 when every book arrived exactly once. (examples/cluster-quickstart.ts
 * shows the Raft cluster alone: election, fenced locks, a leader SIGKILLed.)
 *
 * The children are this same file, started with this process's own flags.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { catalogBooks, startFixtureSite } from '@mocra/testkit';
import { Redis } from 'ioredis';
import { ClusterConfig, defineSpider, Mocra } from 'mocra';

type ToParent =
  | { type: 'ready'; id: string }
  | { type: 'item'; itemId: string; book: number }
  | { type: 'done'; id: string; pages: number; items: number; reason: string };

const BOOKS = 200;
const QUEUE = process.env.MOCRA_QUEUE ?? 'redis://127.0.0.1:6379';
// No queue service: work is partitioned by host, so the site is served on several hosts.
const HOSTS = /^none$/i.test(QUEUE) ? 3 : 1;

// ── a node (child process) ──────────────────────────────────────────────────────────────────
async function runNode(): Promise<void> {
  const env = process.env;
  const send = (m: ToParent) => process.send?.(m);
  const id = env.NODE_ID!;
  const dir = env.NODE_DIR!;
  // The only cluster-specific line: which node this is and how it gets into the cluster.
  const cluster = env.JOIN
    ? ClusterConfig.join(id, env.NODE_ADDR!, dir, env.JOIN)
    : ClusterConfig.bootstrap(id, env.NODE_ADDR!, dir);

  const spider = defineSpider<{ id: number; title: string }>({
    name: 'catalog',
    startUrls: env.SITE_URLS!.split(',').map((url) => `${url}/books/page/1`),
    parse(res, cx) {
      for (const a of res.$('a[href]').toArray()) {
        const href = a.attribs.href!;
        if (href.startsWith('/book')) cx.follow(href);
      }
      const book = res.$('article.product');
      if (book.length > 0) cx.emit({ id: Number(book.attr('data-id')), title: book.find('h1').text() });
    },
  });

  const summary = await Mocra.builder()
    .spider(spider, (item, meta) => {
      send({ type: 'item', itemId: meta.itemId, book: item.id });
    })
    .queue(QUEUE)
    .cluster(cluster, { runId: env.RUN_ID!, namespace: env.NAMESPACE! })
    .concurrency(8)
    .onStart((engine) => {
      // For the demo only: wait, paused, until all three nodes are in, so that all take part
      // (one node alone would finish this small catalog before the others have started).
      engine.pause();
      process.once('message', () => engine.resume());
      send({ type: 'ready', id });
    })
    .run();
  send({ type: 'done', id, pages: summary.pages, items: summary.items, reason: summary.reason });
}

// ── the parent: the fixture site, three nodes, the tally ────────────────────────────────────
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function main(): Promise<void> {
  const site = await startFixtureSite({ catalog: { books: BOOKS }, latencyMs: 10, hosts: HOSTS });
  const dir = await mkdtemp(path.join(tmpdir(), 'mocra-cluster-crawl-'));
  const namespace = `cluster-crawl-${randomBytes(4).toString('hex')}`;
  const children: ChildProcess[] = [];
  const items = new Map<string, number>();
  const done: Extract<ToParent, { type: 'done' }>[] = [];
  const file = fileURLToPath(import.meta.url);
  const addrs = await Promise.all([0, 1, 2].map(async () => `127.0.0.1:${await freePort()}`));

  const start = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const child = fork(file, [], {
        execArgv: process.execArgv,
        env: {
          ...process.env,
          NODE_ROLE: 'node',
          NODE_ID: `n${i + 1}`,
          NODE_ADDR: addrs[i]!,
          NODE_DIR: path.join(dir, `n${i + 1}`),
          ...(i === 0 ? {} : { JOIN: addrs[0]! }),
          SITE_URLS: site.urls.join(','),
          RUN_ID: namespace,
          NAMESPACE: namespace,
        },
      });
      children.push(child);
      child.on('message', (m: ToParent) => {
        if (m.type === 'ready') resolve();
        else if (m.type === 'item') items.set(m.itemId, (items.get(m.itemId) ?? 0) + 1);
        else done.push(m);
      });
      child.on('exit', (code) => {
        if (code !== 0) reject(new Error(`node n${i + 1} exited with ${code}`));
      });
    });

  try {
    await start(0); // the bootstrap node is up (and leads) before the others join through it
    await Promise.all([start(1), start(2)]);
    for (const c of children) c.send('go');
    const exits = children.map((c) => new Promise((resolve) => c.on('exit', resolve)));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(exits),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('the crawl did not end in 120 s')), 120_000);
      }),
    ]).finally(() => clearTimeout(timer));
    for (const d of done.sort((a, b) => a.id.localeCompare(b.id)))
      console.log(`${d.id}: ${d.pages} pages, ${d.items} items, ended: ${d.reason}`);
    const books = new Set([...items.keys()]);
    const catalog = catalogBooks({ catalog: { books: BOOKS } }).length;
    console.log(
      HOSTS === 1
        ? `${books.size} distinct items (catalog: ${catalog} books)`
        : `${books.size} distinct items (catalog: ${catalog} books on each of ${HOSTS} hosts)`,
    );
    if (books.size !== BOOKS * HOSTS || done.length !== 3) process.exitCode = 1;
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await site.close();
    await rm(dir, { recursive: true, force: true });
    // The queues and the dedup set of this run live in Redis under its namespace.
    if (/^rediss?:/.test(QUEUE)) {
      const redis = new Redis(QUEUE);
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `*{${namespace}:*`, 'COUNT', 1000);
        if (keys.length > 0) await redis.unlink(...keys);
        cursor = next;
      } while (cursor !== '0');
      await redis.quit();
    }
  }
}

if (process.env.NODE_ROLE === 'node') await runNode();
else await main();
