// The facade's cluster and DAG-job knobs, in one process: `.cluster(ClusterConfig…)` without a
// queue is a partitioned cluster (here of one node), `queue('none')` needs one, and `.dag()` runs
// a graph as a job of the crawl with no cluster at all.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createDag, jsonPayload } from '@mocra/dag';
import { maxConcurrency, startFixtureSite } from '@mocra/testkit';
import { ClusterConfig, type DagJobResult, defineSpider, Mocra } from 'mocra';
import { expect, test } from 'vitest';
import { cleanup, NATS_URL } from './distributed-harness.js';
import { freePort } from './service-harness.js';

test('.cluster(ClusterConfig) without a queue is a partitioned cluster: one node crawls and ends idle', {
  timeout: 60_000,
}, async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mocra-cluster-builder-'));
  const site = await startFixtureSite({ catalog: { books: 5 } });
  const saved = process.env.MOCRA_QUEUE;
  delete process.env.MOCRA_QUEUE;
  try {
    const titles: string[] = [];
    const summary = await Mocra.builder()
      .spider(
        defineSpider<{ title: string }>({
          name: 'books',
          startUrls: [`${site.url}/books/page/1`],
          parse(res, cx) {
            for (const a of res.$('a[href^="/book/"]').toArray()) cx.follow(a.attribs.href!);
            if (res.$('article.product').length > 0) cx.emit({ title: res.$('h1').text() });
          },
        }),
        (item) => {
          titles.push(item.title);
        },
      )
      .cluster(ClusterConfig.bootstrap('n1', `127.0.0.1:${await freePort()}`, path.join(dir, 'n1')), {
        coordinationOptions: { memberTtlMs: 2_000 },
        completion: { pollMs: 50, checkEveryMs: 100 },
      })
      .run();
    expect(summary.reason).toBe('idle');
    expect(titles).toHaveLength(5);
  } finally {
    if (saved !== undefined) process.env.MOCRA_QUEUE = saved;
    await site.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test("queue 'none' without a Raft cluster is refused with a typed error", async () => {
  const builder = Mocra.builder()
    .spider(defineSpider({ name: 's', startUrls: ['http://127.0.0.1:9/'], parse() {} }), () => {})
    .queue('none');
  await expect(builder.run()).rejects.toMatchObject({
    code: 'MOCRA_ERR_INVALID_ARGUMENT',
    message: expect.stringContaining('.cluster(ClusterConfig'),
  });
});

test('.dag() runs a graph as a job of a single-process crawl, beside a spider', async () => {
  const site = await startFixtureSite({ catalog: { books: 5 } });
  try {
    const results: DagJobResult[] = [];
    const titles: string[] = [];
    const summary = await Mocra.builder()
      .spider(
        defineSpider<{ title: string }>({
          name: 'one-book',
          startUrls: [`${site.url}/book/1`],
          parse(res, cx) {
            cx.emit({ title: res.$('h1').text() });
          },
        }),
        (item) => {
          titles.push(item.title);
        },
      )
      .dag(
        'totals',
        () =>
          createDag([
            { id: 'count', run: async () => jsonPayload(3) },
            {
              id: 'double',
              after: ['count'],
              placement: { kind: 'remote', workerGroup: 'math' },
              run: async (ctx) =>
                jsonPayload(2 * (JSON.parse(Buffer.from(ctx.input('count').bytes).toString()) as number)),
            },
          ]),
        { sink: (result) => void results.push(result) },
      )
      .handleSignals(false)
      .run();
    expect(summary.reason).toBe('idle');
    expect(titles).toHaveLength(1);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ job: 'totals', outputs: { count: 3, double: 6 }, restored: [] });
  } finally {
    await site.close();
  }
});

test('Raft + NATS: cluster-wide politeness is refused naming what works, and per-node politeness crawls', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mocra-cluster-polite-'));
  const site = await startFixtureSite({ catalog: { books: 3 }, requestLogSize: 100 });
  const namespace = `polite${Date.now().toString(36)}`;
  const spider = defineSpider({
    name: 'catalog',
    startUrls: [`${site.url}/books/page/1`],
    parse(res, cx) {
      for (const a of res.$('a[href]').toArray())
        if (a.attribs.href!.startsWith('/book/')) cx.follow(a.attribs.href!);
    },
  });
  const node = async (name: string) =>
    ClusterConfig.bootstrap(name, `127.0.0.1:${await freePort()}`, path.join(dir, name));
  try {
    await expect(
      Mocra.builder()
        .spider(spider, () => {})
        .queue(NATS_URL)
        .cluster(await node('a'), { namespace, politeness: { maxConcurrency: 1 } })
        .handleSignals(false)
        .run(),
    ).rejects.toMatchObject({
      code: 'MOCRA_ERR_INVALID_ARGUMENT',
      message: expect.stringMatching(
        /Raft cluster keeps no host budgets.*\.queue\('redis:\/\/.*\.politeness\(\)/,
      ),
    });
    // What the message suggests: each node's own politeness, on the same Raft + NATS cluster.
    const summary = await Mocra.builder()
      .spider(spider, () => {})
      .queue(NATS_URL)
      .cluster(await node('b'), {
        namespace,
        queueOptions: { nats: { storage: 'memory' } },
        completion: { pollMs: 50, checkEveryMs: 100 },
      })
      .politeness({ maxConcurrency: 1, delayMs: 50, jitter: 0 })
      .handleSignals(false)
      .run();
    expect(summary.reason).toBe('idle');
    expect(summary.pages).toBe(4);
    expect(maxConcurrency(site.stats({ log: true }).log)).toBe(1);
  } finally {
    await site.close();
    await cleanup(namespace);
    await rm(dir, { recursive: true, force: true });
  }
}, 60_000);
