// Service nodes on the backends the multi-process journeys do not run (packages/tests has Redis,
// NATS and Raft): a distributed runtime on the in-process memory queue and on Kafka (the fake
// broker: no Kafka runs here) with local coordination. A node told to stay up outlasts many
// completion checks and crawls what is submitted later, until it is stopped; the same node
// without it ends by itself once the crawl is done.
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { connectDistributed, type DistributedOptions } from '../src/entries/cluster.js';
import { createEngine, type Module, Request } from '../src/index.js';
import { FakeKafkaBroker } from './fake-kafka-broker.js';

let site: FixtureSite;
const broker = new FakeKafkaBroker({ defaultPartitions: 2 });
beforeAll(async () => {
  site = await startFixtureSite({ catalog: { books: 5 } });
});
afterAll(async () => {
  broker.shutdown();
  await site.close();
});

const fetchPage: Module<{ url: string }> = {
  name: 'fetch',
  nodes: [
    {
      id: 'get',
      generate: (ctx) => (typeof ctx.params.url === 'string' ? [new Request(ctx.params.url)] : []),
      parse(res, cx) {
        cx.emit({ url: new URL(res.url).pathname });
      },
    },
  ],
};

let n = 0;
const backends: Record<string, () => DistributedOptions> = {
  memory: () => ({ queue: 'memory://', coordination: 'local://' }),
  'kafka (fake broker)': () => ({
    queue: 'kafka://fake:9092',
    coordination: 'local://',
    queueOptions: {
      kafka: { kafka: broker.client(), sessionTimeoutMs: 300, heartbeatIntervalMs: 50, pollMs: 20 },
    },
  }),
};

for (const [name, options] of Object.entries(backends)) {
  test(`${name}: a service node stays up past the completion checks, crawls later work, ends when stopped; a finite one ends by itself`, async () => {
    for (const service of [true, false]) {
      const runtime = await connectDistributed({
        ...options(),
        namespace: `svc-${process.pid}-${n++}`,
        completion: { pollMs: 20, checkEveryMs: 50 },
      });
      try {
        const items: string[] = [];
        const engine = createEngine(
          runtime.engineOptions({ endWhenIdle: !service, logLevel: 'silent', concurrency: 2 }),
        );
        engine.register(fetchPage, {
          write(item) {
            items.push(item.url);
          },
        });
        expect(runtime.isService(engine)).toBe(service);
        const run = runtime.run(engine);
        let ended = false;
        void run.finally(() => {
          ended = true;
        });
        if (!service) {
          const summary = await Promise.race([run, sleep(15_000).then(() => undefined)]);
          expect(summary?.reason).toBe('idle');
          continue;
        }
        await sleep(1_000); // twenty completion checks
        expect(ended).toBe(false);
        await engine.submit({ module: 'fetch', params: { url: `${site.url}/book/2` } });
        for (let i = 0; i < 200 && items.length === 0; i++) await sleep(25);
        expect(items).toEqual(['/book/2']);
        await sleep(300);
        expect(ended).toBe(false);
        const summary = await engine.stop();
        expect(summary.reason).toBe('stopped');
        expect((await run).reason).toBe('stopped');
      } finally {
        await runtime.close();
      }
    }
  }, 40_000);
}
