// Joins across a cluster on the Kafka queue — the backend the multi-process journey
// (packages/tests/test/journeys/dag-joins.test.ts) cannot run, since no broker runs here: three
// distributed runtimes in this process on the fake broker, coordinated through the real local
// Redis. Each run fans out into units spread over the three engines; its join must fire exactly
// once, after the last unit.
import { createServer, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { connectDistributed } from '../src/entries/cluster.js';
import { createEngine, defineModule, type Engine, graph, Request, type RunSummary } from '../src/index.js';
import { connectRedis } from '../src/queue/redis-connection.js';
import { FakeKafkaBroker } from './fake-kafka-broker.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const RUNS = 10;
const UNITS = 200;

let server: Server;
let site: string;
const broker = new FakeKafkaBroker({ defaultPartitions: 3 });
beforeAll(async () => {
  server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  site = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  broker.shutdown();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

test('Kafka (fake broker) with Redis coordination: three engines, each run’s join fires once, after its last unit', async () => {
  const namespace = `cjk${process.pid}${Date.now().toString(36)}`;
  const parsed = new Map<string, Set<number>>();
  const fired: { runId: string; seen: number; engine: number }[] = [];
  const engines: Engine[] = [];
  const moduleFor = (index: number) =>
    defineModule({
      name: 'fanin',
      graph: graph()
        .edge(
          {
            id: 'fan',
            async generate(ctx) {
              if (ctx.params.run === undefined) {
                for (let r = 0; r < RUNS; r++)
                  await engines[index]!.submit({
                    module: 'fanin',
                    runId: `${ctx.runId}-r${r}`,
                    params: { run: r },
                  });
                return [];
              }
              return Array.from(
                { length: UNITS },
                (_, u) => new Request(`${site}/run/${String(ctx.params.run)}/unit/${u}`, { meta: { u } }),
              );
            },
            parse(res, cx) {
              const seen = parsed.get(cx.runId) ?? new Set<number>();
              seen.add(res.request.meta.u as number);
              parsed.set(cx.runId, seen);
              cx.next({});
            },
          },
          {
            id: 'merge',
            join: true,
            generate(ctx) {
              fired.push({ runId: ctx.runId, seen: parsed.get(ctx.runId)?.size ?? 0, engine: index });
              return [];
            },
            parse() {},
          },
        )
        .build(),
    });
  const runtimes = await Promise.all(
    [0, 1, 2].map(() =>
      connectDistributed({
        queue: 'kafka://fake:9092',
        coordination: REDIS_URL,
        namespace,
        completion: { pollMs: 50, checkEveryMs: 150 },
        queueOptions: {
          kafka: { kafka: broker.client(), sessionTimeoutMs: 1_000, heartbeatIntervalMs: 100 },
        },
      }),
    ),
  );
  try {
    const runs: Promise<RunSummary>[] = [];
    for (const [i, runtime] of runtimes.entries()) {
      const engine = createEngine(runtime.engineOptions({ logLevel: 'silent', concurrency: 8 }));
      engine.register(moduleFor(i), { write() {} });
      engines.push(engine);
    }
    for (const [i, runtime] of runtimes.entries()) runs.push(runtime.run(engines[i]!));
    const summaries = await Promise.race([
      Promise.all(runs),
      sleep(120_000).then(() => {
        throw new Error(`not done in 120 s: ${fired.length} joins fired`);
      }),
    ]);
    for (const s of summaries) expect(s.reason).toBe('idle');
    for (let r = 0; r < RUNS; r++) {
      const runId = `${namespace}-r${r}`;
      const firings = fired.filter((f) => f.runId === runId);
      expect(firings, runId).toHaveLength(1);
      expect(firings[0]!.seen, `${runId}: units parsed when its join fired`).toBe(UNITS);
    }
    expect(fired).toHaveLength(RUNS + 1); // and the seeded run's own, with no units
    // The units really were spread: every engine parsed some.
    for (const s of summaries) expect(s.pages).toBeGreaterThan(0);
  } finally {
    for (const runtime of runtimes) await runtime.close();
    const redis = await connectRedis({ url: REDIS_URL, feature: 'cluster-joins-kafka.test' });
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `*${namespace}*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
    await redis.quit();
  }
}, 150_000);
