// A Redis that goes away right after it ran a command and before its reply reached the worker
// (a restart, a cut connection): the worker sees the call fail although Redis did it. The
// dangerous call is the dedup mark: it is not idempotent — marked links read as seen to anyone
// but the claim that marked them. A TCP relay in front of the real Redis passes the first mark
// made under the chosen claim, then drops every reply, cuts every connection and refuses new ones
// for a while — long enough for ioredis to give up on the calls in flight (maxRetriesPerRequest),
// short enough that the failure reports that follow go through once it is back.
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { connectDistributed } from '../src/entries/cluster.js';
import { createRedisDeduplicator } from '../src/entries/redis.js';
import {
  BackendUnavailableError,
  createEngine,
  type Deduplicator,
  type MarkSeenOptions,
  type Module,
  Request,
} from '../src/index.js';
import { connectRedis } from '../src/queue/redis-connection.js';
import { startTestSite, type TestSite, TREE_PAGES } from './helpers/site.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** Past ioredis' fourth failed reconnect (~0.3 s: the calls in flight fail), before its eighth (~1.4 s). */
const DOWN_MS = 800;

let site: TestSite;
beforeAll(async () => {
  site = await startTestSite();
});
afterAll(async () => {
  await site?.close();
});

interface CuttingRelay {
  port: number;
  /** Whether the matching command went through (the connections are cut once, after the first). */
  cut(): boolean;
  close(): Promise<void>;
}

/**
 * Passes everything on until a command matching `match` was sent to Redis; from then on nothing
 * more in either direction: its reply (and any other in flight) is swallowed, every connection
 * is cut 100 ms later and new ones are refused for `downMs` — a server that did the work and
 * died before saying so.
 */
async function cuttingRelay(redisPort: number, match: RegExp, downMs: number): Promise<CuttingRelay> {
  let frozen = false;
  let cut = false;
  const sockets = new Set<Socket>();
  let server: Server = createServer();
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server = createServer((client) => {
        if (frozen) {
          client.destroy();
          return;
        }
        const upstream = tcpConnect(redisPort, '127.0.0.1');
        sockets.add(client).add(upstream);
        for (const s of [client, upstream]) {
          s.on('error', () => s.destroy());
          s.on('close', () => sockets.delete(s));
        }
        // The tail of the previous chunk: a key may straddle two chunks.
        let tail = '';
        client.on('data', (chunk: Buffer) => {
          if (frozen) return;
          upstream.write(chunk);
          const text = tail + chunk.toString('latin1');
          tail = text.slice(-256);
          if (!cut && match.test(text)) void goDown();
        });
        upstream.on('data', (chunk: Buffer) => {
          if (!frozen) client.write(chunk);
        });
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
    });
  const port = await listen(0);
  async function goDown(): Promise<void> {
    frozen = true;
    cut = true;
    await sleep(100); // Redis has run the command; its reply is dropped
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await sleep(downMs);
    frozen = false;
    await listen(port);
  }
  return {
    port,
    cut: () => cut,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The test site's tree: one item per page, every link followed. */
const tree: Module<{ path: string }> = {
  name: 'tree',
  nodes: [
    {
      id: 'page',
      generate: () => [new Request(`${site.url}/t/0`)],
      parse(res, cx) {
        const $ = res.$;
        cx.emit({ path: $('h1').text() });
        for (const a of $('a').toArray()) cx.follow($(a).attr('href')!);
      },
    },
  ],
};

async function dropKeys(namespace: string): Promise<void> {
  const redis = await connectRedis({ url: REDIS_URL, feature: 'redis-reply-lost.test' });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `mocra:*${namespace}*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    await redis.quit();
  }
}

const claimed = (claim: string) => new RegExp(`mocra:dedup:\\{[^}]*\\}:c:${claim}\\r\\n`);

const cases = [
  {
    what: 'the links a parse marked (parsed where downloaded)',
    match: claimed('[^\\r\\n]*>parse'),
    parseWhereDownloaded: true,
  },
  {
    what: 'the links a parse marked (parsed from the response topic)',
    match: claimed('[^\\r\\n]*>parse'),
    parseWhereDownloaded: false,
  },
  { what: 'the seed the task marked', match: claimed('[^\\r\\n>]+'), parseWhereDownloaded: true },
];

for (const c of cases) {
  test(`the reply of the dedup mark of ${c.what} is lost in an outage: no page is lost`, async () => {
    const namespace = `rl${randomBytes(4).toString('hex')}`;
    const relay = await cuttingRelay(Number(new URL(REDIS_URL).port || 6379), c.match, DOWN_MS);
    const runtime = await connectDistributed({
      queue: `redis://127.0.0.1:${relay.port}`,
      namespace,
      completion: { pollMs: 20, checkEveryMs: 50 },
    });
    try {
      const paths: string[] = [];
      const engine = createEngine(
        runtime.engineOptions({
          logLevel: 'silent',
          concurrency: 2,
          parseWhereDownloaded: c.parseWhereDownloaded,
          retry: { baseDelayMs: 5, maxDelayMs: 20 },
        }),
      );
      engine.register(tree, {
        write(item) {
          paths.push(item.path);
        },
      });
      const summary = await Promise.race([runtime.run(engine), sleep(60_000).then(() => undefined)]);
      expect(relay.cut()).toBe(true);
      expect(summary?.reason).toBe('idle');
      expect(new Set(paths).size).toBe(TREE_PAGES);
    } finally {
      await runtime.close().catch(() => undefined);
      await relay.close();
      await dropKeys(namespace);
    }
  }, 90_000);
}

test('a parse put back after its mark failed looks its marks up again, although this process met them as seen meanwhile', async () => {
  const namespace = `rl${randomBytes(4).toString('hex')}`;
  const open = () => createRedisDeduplicator({ url: REDIS_URL, namespace, scope: 'run' });
  // `shared` is this process's; `server` does a mark as Redis would, its reply never reaching
  // `shared` (nor its local cache).
  const [shared, server] = await Promise.all([open(), open()]);
  let failed = false;
  // The first mark of a parse that finds new links is done, then (before its caller hears of
  // it) the same links come up in another page of this process, which learns them as seen; the
  // caller gets an outage.
  const flaky: Deduplicator = {
    async markSeen(fingerprints: readonly string[], options?: MarkSeenOptions) {
      if (failed || !options?.claim?.endsWith('>parse')) return shared.markSeen(fingerprints, options);
      const fresh = await server.markSeen(fingerprints, options);
      if (!fresh.some(Boolean)) return fresh;
      failed = true;
      await shared.markSeen(fingerprints, { claim: 'another-page>parse' });
      throw new BackendUnavailableError(
        'the Redis deduplicator',
        'marking fingerprints failed: connection lost',
      );
    },
    releaseClaim: (claim) => shared.releaseClaim(claim),
    size: () => shared.size(),
    close: () => shared.close(),
  };
  try {
    const paths: string[] = [];
    const engine = createEngine({
      logLevel: 'silent',
      concurrency: 2,
      frontier: { deduplicator: flaky },
      retry: { baseDelayMs: 5, maxDelayMs: 20 },
    });
    engine.register(tree, {
      write(item) {
        paths.push(item.path);
      },
    });
    const summary = await engine.run();
    expect(failed).toBe(true);
    expect(summary.reason).toBe('idle');
    expect(new Set(paths).size).toBe(TREE_PAGES);
  } finally {
    await server.close();
    await dropKeys(namespace);
  }
}, 60_000);
