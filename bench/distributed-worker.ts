/**
 * One crawler process of bench/distributed-throughput.ts: crawls the fixture link graph with
 * the same spider whatever the queue (chosen by MOCRA_QUEUE, as a deployment would), and prints
 * one JSON line: pages, the crawl's start and end (epoch ms), peak RSS and CPU time.
 *
 *   BASE=<site origin> SPEC=/graph/5000/10/2000 CONCURRENCY=32 [MOCRA_QUEUE=…] node … distributed-worker.ts
 *   node … distributed-worker.ts --cleanup <namespace>     (delete what a run left in Redis / NATS)
 */
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TOPICS } from '@mocra/core';
import { createNatsQueueBackend } from '@mocra/core/nats';
import { createRedisQueueBackend } from '@mocra/core/redis';
import { Parser } from 'htmlparser2';
import { defineSpider, Mocra } from 'mocra';

if (process.argv[2] === '--cleanup') {
  const namespace = process.argv[3]!;
  const redis = await createRedisQueueBackend({
    url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    namespace,
  });
  const client = (
    redis as unknown as {
      client: {
        scan(c: string, ...a: (string | number)[]): Promise<[string, string[]]>;
        unlink(...k: string[]): Promise<number>;
      };
    }
  ).client;
  for (const pattern of [`*{${namespace}:*`, `mocra:coord:${namespace}:*`]) {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      if (keys.length > 0) await client.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  }
  await redis.close();
  const nats = await createNatsQueueBackend({
    servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    namespace,
  });
  const jsm = (nats as unknown as { jsm: { streams: { delete(name: string): Promise<boolean> } } }).jsm;
  for (const topic of Object.values(TOPICS)) {
    const names = nats.namesOf(topic);
    await jsm.streams.delete(names.stream).catch(() => false);
    await jsm.streams.delete(names.dlqStream).catch(() => false);
  }
  await jsm.streams.delete(`KV_mocra-dedup-${namespace}-${namespace}`).catch(() => false);
  await nats.close();
  process.exit(0);
}

const base = process.env.BASE!;
const spec = process.env.SPEC ?? '/graph/5000/10/2000';
const concurrency = Number(process.env.CONCURRENCY ?? 32);

function links(html: string): string[] {
  const out: string[] = [];
  const parser = new Parser({
    onopentag(name, attrs) {
      if (name === 'a' && attrs.href) out.push(attrs.href);
    },
  });
  parser.write(html);
  parser.end();
  return out;
}

let pages = 0;
let firstParseAt = 0;
let lastParseAt = 0;
const spider = defineSpider({
  name: 'graph',
  startUrls: [`${base}${spec}/0`],
  parse(res, cx) {
    pages++;
    lastParseAt = Date.now();
    if (firstParseAt === 0) firstParseAt = lastParseAt;
    for (const href of links(res.text())) cx.follow(href);
  },
});

// Module loading is outside the clock for every case, as in crawl-benchmark.ts: the memory
// queue loaded with `mocra` above, while a broker's client library loads on first use (ioredis
// takes ~80–150 ms), so it is loaded here, from where @mocra/core resolves it.
const queueUrl = process.env.MOCRA_QUEUE ?? '';
const clientPackages = queueUrl.startsWith('redis')
  ? ['ioredis']
  : queueUrl.startsWith('nats')
    ? ['@nats-io/transport-node', '@nats-io/jetstream', '@nats-io/kv', 'ioredis']
    : [];
const fromCore = createRequire(fileURLToPath(import.meta.resolve('@mocra/core')));
for (const pkg of clientPackages) await import(pathToFileURL(fromCore.resolve(pkg)).href);

const cpu = process.cpuUsage();
const startedAt = Date.now();
const summary = await Mocra.builder()
  .spider(spider, () => {})
  .concurrency(concurrency)
  .cluster(process.env.BENCH_POLL_MS ? { queueOptions: { pollMs: Number(process.env.BENCH_POLL_MS) } } : {})
  .logging({ level: process.env.BENCH_LOG_LEVEL === 'info' ? 'info' : 'warn' })
  .handleSignals(false)
  .run();
const endedAt = Date.now();
const used = process.cpuUsage(cpu);
process.stdout.write(
  `${JSON.stringify({
    pages,
    reason: summary.reason,
    errors: summary.errors,
    startedAt,
    endedAt,
    /** From the start to the first parse: connecting, joining the cluster, seeding. */
    headMs: firstParseAt - startedAt,
    /** From the last parse to the end of the run: how long the end took to be confirmed. */
    tailMs: endedAt - lastParseAt,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
    cpuSec: (used.user + used.system) / 1e6,
  })}\n`,
);
