// Switching between one process and a cluster by configuration only (builder, environment,
// TOML [channel_config]), and what a distributed run does at its edges: a response too large for
// the broker, a run that already finished, a queue without a coordination backend.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { resolveConfig } from '@mocra/core';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { clusterSettingsFromConfig, defineSpider, Mocra, resolveClusterOptions } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { cleanup, NATS_URL, REDIS_URL } from './distributed-harness.js';

let site: FixtureSite;
const namespaces: string[] = [];
const ns = () => {
  const n = `cfg${randomBytes(4).toString('hex')}`;
  namespaces.push(n);
  return n;
};

beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(async () => {
  await site?.close();
  for (const n of namespaces) await cleanup(n);
});

describe('choosing the queue by configuration', () => {
  test('builder settings win over the environment; memory:// or nothing is one process', () => {
    expect(resolveClusterOptions({}, {})).toBeUndefined();
    expect(resolveClusterOptions({ queue: 'memory://' }, { MOCRA_QUEUE: 'redis://r:6379' })).toBeUndefined();
    expect(
      resolveClusterOptions(
        {},
        { MOCRA_QUEUE: 'redis://r:6379', MOCRA_RUN_ID: 'crawl-7', MOCRA_NAME: 'shop' },
      ),
    ).toEqual({
      queue: 'redis://r:6379',
      runId: 'crawl-7',
      namespace: 'shop',
    });
    expect(
      resolveClusterOptions(
        { queue: 'nats://n:4222', coordination: 'redis://c:6379', cluster: { runId: 'r2', nodeId: 'w1' } },
        {
          MOCRA_QUEUE: 'redis://r:6379',
          MOCRA_COORDINATION: 'redis://other:6379',
          MOCRA_NODE_ID: 'env-node',
        },
      ),
    ).toEqual({ queue: 'nats://n:4222', coordination: 'redis://c:6379', runId: 'r2', nodeId: 'w1' });
  });

  test('the TOML [channel_config] table maps onto the cluster settings', () => {
    const config = resolveConfig({
      toml: `
name = "shop"
[channel_config]
queue = "nats://127.0.0.1:4222"
coordination = "redis://127.0.0.1:6379"
run_id = "2026-11-30"
service = true
queue_codec = "json"
compression_threshold = 4096
max_payload_bytes = 900000
lease_ms = 15000
max_deliveries = 3
`,
      env: false,
    });
    const settings = clusterSettingsFromConfig(config);
    expect(settings).toEqual({
      queue: 'nats://127.0.0.1:4222',
      coordination: 'redis://127.0.0.1:6379',
      namespace: 'shop',
      cluster: {
        runId: '2026-11-30',
        service: true,
        queueOptions: {
          codec: { format: 'json', compressThresholdBytes: 4096 },
          maxPayloadBytes: 900_000,
          topicDefaults: { leaseMs: 15_000, maxDeliveries: 3 },
        },
      },
    });
    expect(() => resolveConfig({ toml: '[channel_config]\nqueue = "not a url"\n', env: false })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_CONFIG_INVALID' }),
    );
    expect(
      resolveConfig({ env: { MOCRA_CHANNEL_CONFIG__QUEUE: 'redis://r:6379' } }).channel_config.queue,
    ).toBe('redis://r:6379');
    expect(resolveConfig({ env: { MOCRA_CHANNEL_CONFIG__SERVICE: 'false' } }).channel_config.service).toBe(
      false,
    );
  });

  test('a distributed builder connects first: build() says so; a NATS queue needs a coordination URL', async () => {
    const spider = defineSpider({ name: 's', startUrls: [`${site.url}/`], parse() {} });
    expect(() =>
      Mocra.builder()
        .spider(spider, () => {})
        .queue(REDIS_URL)
        .build(),
    ).toThrow(expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }));
    await expect(
      Mocra.builder()
        .spider(spider, () => {})
        .queue(NATS_URL)
        .handleSignals(false)
        .run(),
    ).rejects.toMatchObject({
      code: 'MOCRA_ERR_INVALID_ARGUMENT',
      message: expect.stringContaining('coordination'),
    });
    await expect(
      Mocra.builder()
        .spider(spider, () => {})
        .queue('redis://127.0.0.1:1')
        .handleSignals(false)
        .run(),
    ).rejects.toMatchObject({ code: 'MOCRA_ERR_BACKEND_UNAVAILABLE' });
  });
});

describe('a distributed run at its edges', () => {
  // Parsed where downloaded (the default), a response never crosses the broker, so a page of any
  // size the downloader accepts is parsed; sent through the broker, the 20 KB page is refused
  // by it and dead-lettered with a clear error, and the crawl goes on.
  test.each([
    { parseWhereDownloaded: false, parsedPages: 6, errors: { MOCRA_ERR_PAYLOAD_TOO_LARGE: 1 }, dead: 1 },
    { parseWhereDownloaded: true, parsedPages: 7, errors: {}, dead: 0 },
  ])(
    'a page too large for the broker (parseWhereDownloaded $parseWhereDownloaded): dead-lettered with a clear error when it must cross the broker; the crawl goes on and ends',
    async ({ parseWhereDownloaded, parsedPages, errors, dead }) => {
      const namespace = ns();
      const parsed: string[] = [];
      const spider = defineSpider<string>({
        name: 'sizes',
        // A 6-page graph of 1 KB pages, and a one-page graph whose page is 20 KB.
        startUrls: [`${site.url}/graph/6/2/1000/0`, `${site.url}/graph/1/1/20000/0`],
        parse(res, cx) {
          parsed.push(new URL(res.url).pathname);
          for (const a of res.$('ul.links a').toArray()) cx.follow(a.attribs.href!);
          cx.emit(res.url);
        },
      });
      const summary = await Mocra.builder()
        .spider(spider, () => {})
        .queue(NATS_URL)
        .coordination('local://')
        .cluster({
          namespace,
          queueOptions: {
            maxPayloadBytes: 8_192,
            codec: { compressThresholdBytes: 0 },
            nats: { storage: 'memory' },
          },
          completion: { pollMs: 50, checkEveryMs: 100 },
        })
        .engineOptions({ parseWhereDownloaded })
        .handleSignals(false)
        .run();
      expect(summary.reason).toBe('idle');
      expect(summary.errorsByCode).toEqual(errors);
      expect(summary.deadLettered).toBe(dead);
      const small = Array.from({ length: 6 }, (_, i) => `/graph/6/2/1000/${i}`);
      expect(parsed.sort()).toEqual((parsedPages === 7 ? [...small, '/graph/1/1/20000/0'] : small).sort());
      expect(summary.items).toBe(parsedPages);
    },
  );

  test('a finished run stays finished: a process started later ends at once; a new run id crawls again', async () => {
    const namespace = ns();
    const run = async (runId?: string) => {
      let pages = 0;
      const spider = defineSpider({
        name: 'again',
        startUrls: [`${site.url}/graph/5/2/500/0`],
        parse(res, cx) {
          pages++;
          for (const a of res.$('ul.links a').toArray()) cx.follow(a.attribs.href!);
        },
      });
      const summary = await Mocra.builder()
        .spider(spider, () => {})
        .queue(REDIS_URL)
        .cluster({ namespace, ...(runId ? { runId } : {}), completion: { pollMs: 50, checkEveryMs: 100 } })
        .handleSignals(false)
        .run();
      return { summary, pages };
    };
    const first = await run();
    expect(first.summary.reason).toBe('idle');
    expect(first.pages).toBe(5);
    const second = await run();
    expect(second.summary.reason).toBe('idle');
    expect(second.pages).toBe(0);
    const third = await run('second-crawl');
    expect(third.pages).toBe(5);
  });

  test("MOCRA_CHANNEL_CONFIG__SERVICE=true keeps a finished crawl's node up until it is stopped", async () => {
    const namespace = ns();
    const spider = defineSpider({ name: 'tiny', startUrls: [`${site.url}/graph/3/2/500/0`], parse() {} });
    const saved = process.env.MOCRA_CHANNEL_CONFIG__SERVICE;
    process.env.MOCRA_CHANNEL_CONFIG__SERVICE = 'true';
    try {
      const stop = new AbortController();
      let ended = false;
      const run = Mocra.builder()
        .spider(spider, () => {})
        .queue(REDIS_URL)
        .cluster({ namespace, completion: { pollMs: 50, checkEveryMs: 100 } })
        .handleSignals(false)
        .signal(stop.signal)
        .run()
        .finally(() => {
          ended = true;
        });
      await sleep(2_000); // the page is crawled in a moment; twenty completion checks later, still up
      expect(ended).toBe(false);
      stop.abort();
      const summary = await run;
      expect(summary.pages).toBe(1);
      expect(summary.reason).not.toBe('idle');
    } finally {
      if (saved === undefined) delete process.env.MOCRA_CHANNEL_CONFIG__SERVICE;
      else process.env.MOCRA_CHANNEL_CONFIG__SERVICE = saved;
    }
  });
});
