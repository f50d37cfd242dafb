// Providers that load proxies — a function and a text-list URL served by the origin — with
// expiry and refill driven by a manual clock, and traffic sent through what they loaded.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { createProxyPool, type ProviderLoadContext, type ProxyPool, parseProxyConfig } from '../src/index.js';
import { ManualClock } from './helpers/manual-clock.js';
import { type HttpProxy, type Origin, startHttpProxy, startOrigin } from './helpers/servers.js';
import { directAgent, fetchThroughPool, nextMessage } from './helpers/traffic.js';

let origin: Origin;
let fleet: HttpProxy[];
const pools: ProxyPool[] = [];

beforeAll(async () => {
  origin = await startOrigin();
  fleet = await Promise.all(
    ['127.0.0.21', '127.0.0.22', '127.0.0.23', '127.0.0.24', '127.0.0.25'].map((exit) =>
      startHttpProxy(exit),
    ),
  );
});

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

afterAll(async () => {
  await Promise.all(fleet.map((p) => p.close()));
  await directAgent.close();
  await origin.close();
});

async function exitsOf(pool: ProxyPool, n: number): Promise<Set<string>> {
  const exits = new Set<string>();
  for (let i = 0; i < n; i++) {
    const outcome = await fetchThroughPool(pool, `${origin.url}/p/${i}`);
    expect(outcome.status).toBe(200);
    exits.add(origin.exits.at(-1)!);
  }
  return exits;
}

describe('function provider', () => {
  test('loads on first use, expires proxies after their ttl, refills, and refills after a retirement', async () => {
    const clock = new ManualClock();
    const calls: ProviderLoadContext[] = [];
    let next = 0;
    const pool = createProxyPool(
      {
        providers: [
          {
            name: 'vendor',
            // Hands out the fleet in order, as many as the pool asks for.
            load: (context) => {
              calls.push(context);
              const out = fleet.slice(next, next + context.want).map((p) => `127.0.0.1:${p.port}`);
              next += out.length;
              return out;
            },
            proxyTtl: '1m',
            minSize: 2,
            maxSize: 2,
            minLoadInterval: 0,
          },
        ],
      },
      { clock },
    );
    pools.push(pool);
    expect(pool.size).toBe(0);

    // The first acquire finds the pool empty and waits for a load.
    expect(await exitsOf(pool, 4)).toEqual(new Set(['127.0.0.21', '127.0.0.22']));
    expect(calls.map((c) => [c.provider, c.want])).toEqual([['vendor', 2]]);

    // A minute later both expired; the maintenance sweep expires them and refills.
    const loaded = nextMessage<{ provider: string; added: number }>('mocra:proxy:loaded');
    await clock.advance(60_000);
    expect(await loaded).toEqual({ provider: 'vendor', added: 2, invalid: 0 });
    expect(await exitsOf(pool, 4)).toEqual(new Set(['127.0.0.23', '127.0.0.24']));

    // A retirement drops the provider below its threshold: it refills at once.
    const victim = await pool.acquire();
    const refilled = nextMessage<{ added: number }>('mocra:proxy:loaded');
    pool.reportFailure(victim, 'auth');
    expect((await refilled).added).toBe(1);
    expect(pool.size).toBe(2);
    expect(pool.stats().providers[0]).toMatchObject({
      name: 'vendor',
      kind: 'function',
      active: 2,
      retired: 1,
      retiredTotal: 1,
      expiredTotal: 2,
      loads: 3,
      loadFailures: 0,
    });
    expect(pool.stats().proxies.find((p) => p.state === 'retired')?.url).toBe(victim.proxy?.displayUrl);
  });

  test('bad entries are skipped and counted; a throwing provider backs off and recovers', async () => {
    const clock = new ManualClock();
    let mode: 'garbage' | 'throw' | 'ok' = 'garbage';
    const pool = createProxyPool(
      {
        providers: [
          {
            name: 'flaky',
            load: () => {
              if (mode === 'throw') throw new Error('vendor API down');
              if (mode === 'garbage') {
                return [
                  'nonsense',
                  { url: `127.0.0.1:${fleet[0]!.port}`, rateLimit: -3 },
                  42 as unknown as string,
                ];
              }
              return [{ url: `127.0.0.1:${fleet[0]!.port}`, expiresAt: clock.now() + 5_000, rateLimit: 100 }];
            },
            maxSize: 3,
            minLoadInterval: '2s',
          },
        ],
        // Loads happen only when the test asks, so each one can be inspected.
        maintenanceInterval: '1h',
      },
      { clock },
    );
    pools.push(pool);
    // The provider may load something later: retryable.
    await expect(pool.acquire()).rejects.toMatchObject({
      code: 'MOCRA_ERR_PROXY_POOL_EMPTY',
      retryable: true,
    });
    expect(pool.stats().providers[0]).toMatchObject({ loads: 1, invalidEntries: 3, active: 0 });

    mode = 'throw';
    await clock.advance(2_000);
    const report = await pool.refill();
    expect(report.added).toBe(0);
    expect(report.errors[0]).toMatchObject({
      code: 'MOCRA_ERR_PROXY_PROVIDER',
      message: "provider 'flaky': vendor API down",
    });
    expect(pool.stats().providers[0]).toMatchObject({
      loadFailures: 1,
      lastLoadError: "provider 'flaky': vendor API down",
      nextLoadAt: clock.now() + 2_000,
    });
    // Inside the back-off nothing is asked; after it, a second failure doubles the wait.
    expect(await pool.refill()).toEqual({ added: 0, errors: [] });
    await clock.advance(2_000);
    expect((await pool.refill()).errors).toHaveLength(1);
    expect(pool.stats().providers[0]).toMatchObject({ loadFailures: 2, nextLoadAt: clock.now() + 4_000 });

    mode = 'ok';
    await clock.advance(4_000);
    expect(await pool.refill()).toEqual({ added: 1, errors: [] });
    expect(pool.stats().providers[0]).toMatchObject({ active: 1, loads: 2 });
    const proxy = pool.stats().proxies[0]!;
    expect(proxy).toMatchObject({
      expiresAt: clock.now() + 5_000,
      rateLimit: { limit: 100, interval: 1_000 },
    });
    expect(await exitsOf(pool, 1)).toEqual(new Set(['127.0.0.21']));
  });
});

describe('text-list provider', () => {
  test('fetches ip:port[:user:pass] lines over HTTP, reloads after expiry, and reports HTTP failures', async () => {
    const clock = new ManualClock();
    const guarded = await startHttpProxy('127.0.0.26', { username: 'list-user', password: 'pw' });
    try {
      origin.list = [
        '# today’s proxies',
        `127.0.0.1:${fleet[0]!.port}`,
        '',
        'not a proxy line',
        `127.0.0.1:${guarded.port}:list-user:pw`,
      ].join('\n');
      // Shaped as the engine's TOML loader hands over a `[[proxy.providers]]` table.
      const section: unknown = {
        providers: [
          {
            name: 'list',
            url: `${origin.url}/list.txt`,
            headers: { authorization: 'Bearer t0ken' },
            proxy_ttl: '30s',
            min_size: 2,
            max_size: 5,
            min_load_interval: 0,
          },
        ],
      };
      const pool = createProxyPool(parseProxyConfig(section), { clock });
      pools.push(pool);
      expect(await exitsOf(pool, 4)).toEqual(new Set(['127.0.0.21', '127.0.0.26']));
      expect(pool.stats().providers[0]).toMatchObject({
        kind: 'list',
        active: 2,
        invalidEntries: 1,
        loads: 1,
      });
      // The credentials from the list reached the guarded proxy (it answers 407 otherwise).
      expect(guarded.counts.connects).toBeGreaterThanOrEqual(1);

      // The list changes; once the loaded proxies expire, the reload brings the new ones.
      origin.list = `127.0.0.1:${fleet[2]!.port}\n127.0.0.1:${fleet[3]!.port}\n`;
      const loaded = nextMessage<{ added: number }>('mocra:proxy:loaded');
      await clock.advance(30_000);
      expect((await loaded).added).toBe(2);
      expect(await exitsOf(pool, 4)).toEqual(new Set(['127.0.0.23', '127.0.0.24']));
      expect(pool.stats().providers[0]).toMatchObject({ expiredTotal: 2, loads: 2 });

      origin.listStatus = 503;
      const report = await pool.refill({ force: true });
      expect(report.errors[0]).toMatchObject({ code: 'MOCRA_ERR_PROXY_PROVIDER', status: 503 });
      expect(pool.stats().providers[0]!.lastLoadError).toContain('HTTP 503');
      expect(pool.size).toBe(2);
      expect(origin.hits.get('/list.txt')).toBe(3);
    } finally {
      origin.listStatus = 200;
      await guarded.close();
    }
  });

  test('a provider past its expiresAt drops its proxies and loads no more', async () => {
    const clock = new ManualClock();
    origin.list = `127.0.0.1:${fleet[4]!.port}\n`;
    const pool = createProxyPool(
      {
        providers: [
          {
            name: 'trial',
            url: `${origin.url}/list.txt`,
            expiresAt: clock.now() + 10_000,
            minLoadInterval: '10s',
          },
        ],
      },
      { clock },
    );
    pools.push(pool);
    expect(await exitsOf(pool, 1)).toEqual(new Set(['127.0.0.25']));
    // Loaded proxies never outlive their provider.
    expect(pool.stats().proxies[0]!.expiresAt).toBe(clock.now() + 10_000);
    await clock.advance(10_000);
    expect(pool.size).toBe(0);
    expect(pool.stats().providers[0]).toMatchObject({ ended: true, expiredTotal: 1 });
    const hits = origin.hits.get('/list.txt');
    // Nothing can bring proxies back, so the error says retrying is pointless.
    await expect(pool.acquire()).rejects.toMatchObject({
      code: 'MOCRA_ERR_PROXY_POOL_EMPTY',
      retryable: false,
    });
    expect(origin.hits.get('/list.txt')).toBe(hits);
  });
});
