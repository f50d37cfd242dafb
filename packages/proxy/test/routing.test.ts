// Requests really leave through the proxy the pool chose: every HTTP proxy here sends its
// outbound traffic from its own loopback address, and the origin records the address each
// request arrived from.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { classifyProxyError, createProxyPool, type ProxyPool } from '../src/index.js';
import { ManualClock } from './helpers/manual-clock.js';
import {
  deadProxyUrl,
  type HttpProxy,
  type Origin,
  proxyTlsCert,
  startHttpProxy,
  startHttpsProxy,
  startOrigin,
  startSocksProxy,
} from './helpers/servers.js';
import { directAgent, fetchThroughPool, send } from './helpers/traffic.js';

let origin: Origin;
let proxies: HttpProxy[];
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  origin = await startOrigin();
  proxies = await Promise.all(['127.0.0.2', '127.0.0.3', '127.0.0.4'].map((exit) => startHttpProxy(exit)));
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close()));
  await directAgent.close();
  await origin.close();
});

function track(pool: ProxyPool): ProxyPool {
  cleanups.push(() => pool.close());
  return pool;
}

const exitOf = (url: string | undefined) => proxies.find((p) => p.url === url)?.exit ?? '127.0.0.1';

describe('routing through the chosen proxy', () => {
  test('every request exits through the selected proxy, and load spreads over all of them', async () => {
    const pool = track(createProxyPool({ proxies: proxies.map((p) => p.url) }));
    const used = new Map<string, number>();
    for (let i = 0; i < 9; i++) {
      const before = origin.exits.length;
      const outcome = await fetchThroughPool(pool, `${origin.url}/page/${i}`);
      expect(outcome.status).toBe(200);
      const url = outcome.selection.proxy?.url;
      expect(origin.exits.slice(before)).toEqual([exitOf(url)]);
      expect(outcome.body).toBe(`ok ${exitOf(url)}`);
      used.set(url!, (used.get(url!) ?? 0) + 1);
    }
    // Nine successes over three equally good proxies: least-recently-used among near-equals.
    expect([...used.values()].sort()).toEqual([3, 3, 3]);
    // The proxies themselves saw the traffic: one CONNECT tunnel each, reused by keep-alive.
    for (const p of proxies) expect(p.counts.connects).toBeGreaterThanOrEqual(1);
    const stats = pool.stats();
    expect(stats.providers).toEqual([
      expect.objectContaining({
        name: 'static',
        kind: 'static',
        active: 3,
        requests: 9,
        successes: 9,
        failures: 0,
      }),
    ]);
    expect(
      stats.proxies.every((p) => p.requests === 3 && p.successes === 3 && p.latencyMs !== undefined),
    ).toBe(true);
  });

  test('forwarding instead of tunnelling: the agent options reach every ProxyAgent', async () => {
    const pool = track(createProxyPool({ proxies: [proxies[0]!.url] }, { agent: { proxyTunnel: false } }));
    const before = proxies[0]!.counts.requests;
    for (let i = 0; i < 3; i++)
      expect((await fetchThroughPool(pool, `${origin.url}/fwd/${i}`)).status).toBe(200);
    // Without CONNECT, the proxy handles each request itself.
    expect(proxies[0]!.counts.requests - before).toBe(3);
  });

  test('a dead proxy is avoided at once, retried later, retired, and the crawl goes on', async () => {
    const clock = new ManualClock();
    const dead = await deadProxyUrl();
    const pool = track(
      createProxyPool({ proxies: [dead, proxies[0]!.url, proxies[1]!.url], maxErrors: 2 }, { clock }),
    );
    const outcomes = [];
    for (let i = 0; i < 6; i++) outcomes.push(await fetchThroughPool(pool, `${origin.url}/d/${i}`));
    // The first round reaches the dead proxy once; the failure drops it out of rotation.
    const deadUses = outcomes.filter((o) => o.selection.proxy?.url === dead);
    expect(deadUses).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 200)).toHaveLength(5);
    let deadStats = pool.stats().proxies.find((p) => p.url === dead)!;
    expect(deadStats).toMatchObject({
      state: 'active',
      consecutiveFailures: 1,
      lastFailureReason: 'connect',
    });
    expect(deadStats.lastError).toContain('ECONNREFUSED');

    // Its failure penalty fades: a minute later it gets another chance, fails again, and is retired.
    await clock.advance(90_000);
    for (let i = 0; i < 4; i++) outcomes.push(await fetchThroughPool(pool, `${origin.url}/d2/${i}`));
    deadStats = pool.stats().proxies.find((p) => p.url === dead)!;
    expect(deadStats).toMatchObject({ state: 'retired', retiredReason: 'connect', failures: 2 });
    expect(pool.size).toBe(2);
    for (let i = 0; i < 6; i++) {
      const outcome = await fetchThroughPool(pool, `${origin.url}/d3/${i}`);
      expect(outcome.status).toBe(200);
      expect(outcome.selection.proxy?.url).not.toBe(dead);
    }
  });

  test('a proxy that goes down mid-crawl is retired; the others carry the crawl', async () => {
    const clock = new ManualClock();
    const [a, b] = await Promise.all([startHttpProxy('127.0.0.5'), startHttpProxy('127.0.0.6')]);
    cleanups.push(
      () => a.close(),
      () => b.close(),
    );
    const pool = track(createProxyPool({ proxies: [a.url, b.url], maxErrors: 1 }, { clock }));
    for (let i = 0; i < 4; i++)
      expect((await fetchThroughPool(pool, `${origin.url}/m/${i}`)).status).toBe(200);
    expect(origin.exits.slice(-4).sort()).toEqual(['127.0.0.5', '127.0.0.5', '127.0.0.6', '127.0.0.6']);

    await a.close();
    const after = [];
    for (let i = 0; i < 6; i++) after.push(await fetchThroughPool(pool, `${origin.url}/m2/${i}`));
    expect(after.filter((o) => o.error !== undefined).length).toBeLessThanOrEqual(1);
    expect(after.filter((o) => o.status === 200).length).toBeGreaterThanOrEqual(5);
    expect(after.slice(-4).every((o) => o.selection.proxy?.url === b.url)).toBe(true);
    expect(pool.stats().proxies.find((p) => p.url === a.url)).toMatchObject({ state: 'retired' });
  });

  test('sticky sessions keep their proxy, and move once it is retired', async () => {
    const pool = track(createProxyPool({ proxies: proxies.map((p) => p.url) }));
    const exits = async (session: string, n: number) => {
      const seen: string[] = [];
      for (let i = 0; i < n; i++) {
        const outcome = await fetchThroughPool(pool, `${origin.url}/s/${session}/${i}`, { session });
        expect(outcome.status).toBe(200);
        seen.push(origin.exits.at(-1)!);
      }
      return seen;
    };
    const alice = await exits('alice', 5);
    expect(new Set(alice).size).toBe(1);
    const bob = await exits('bob', 5);
    expect(new Set(bob).size).toBe(1);
    // Unpinned traffic in between still rotates over all three.
    const free = new Set<string>();
    for (let i = 0; i < 3; i++) {
      await fetchThroughPool(pool, `${origin.url}/free/${i}`);
      free.add(origin.exits.at(-1)!);
    }
    expect(free.size).toBe(3);
    expect(await exits('alice', 2)).toEqual([alice[0], alice[0]]);

    // Alice's proxy is retired (its credentials were refused): she moves, and stays on the new one.
    const selection = await pool.acquire({ session: 'alice' });
    pool.reportFailure(selection, 'auth');
    const moved = await exits('alice', 4);
    expect(new Set(moved).size).toBe(1);
    expect(moved[0]).not.toBe(alice[0]);
    expect(pool.stats().sessions).toBe(2);
  });
});

describe('protocols', () => {
  test('socks5 proxies work through undici, with user/password auth', async () => {
    const socks = await startSocksProxy('sam', 's3cret');
    cleanups.push(() => socks.close());
    const good = `socks5://sam:s3cret@127.0.0.1:${socks.port}`;
    const pool = track(createProxyPool({ proxies: [good] }));
    for (let i = 0; i < 2; i++) {
      const outcome = await fetchThroughPool(pool, `${origin.url}/socks/${i}`);
      expect(outcome.status).toBe(200);
      expect(outcome.selection.proxy?.protocol).toBe('socks5');
    }
    expect(socks.counts.connects).toBeGreaterThanOrEqual(1);

    // Wrong password: SOCKS5 auth fails, classified as `auth`, which retires the proxy at once.
    const bad = track(createProxyPool({ proxies: [`socks5://sam:wrong@127.0.0.1:${socks.port}`] }));
    const outcome = await fetchThroughPool(bad, `${origin.url}/socks/bad`);
    expect(outcome.error).toBeDefined();
    expect(bad.stats().proxies[0]).toMatchObject({ state: 'retired', retiredReason: 'auth' });
    await expect(bad.acquire()).rejects.toMatchObject({ code: 'MOCRA_ERR_PROXY_POOL_EMPTY' });
  });

  test('https proxies: TLS to the proxy itself, trusted through the agent options', async () => {
    const secure = await startHttpsProxy('127.0.0.8');
    cleanups.push(() => secure.close());
    const pool = track(
      createProxyPool(
        { proxies: [secure.url] },
        { agent: { proxyTls: { ca: proxyTlsCert, servername: 'localhost' } } },
      ),
    );
    const outcome = await fetchThroughPool(pool, `${origin.url}/tls`);
    expect(outcome.status).toBe(200);
    expect(outcome.selection.proxy?.protocol).toBe('https');
    expect(origin.exits.at(-1)).toBe('127.0.0.8');
    expect(secure.counts.connects).toBe(1);

    // Without trusting the certificate the TLS handshake fails: an `error`, not a proxy outage.
    const untrusting = track(createProxyPool({ proxies: [secure.url] }));
    const refused = await fetchThroughPool(untrusting, `${origin.url}/tls`);
    expect(refused.error).toBeDefined();
    expect(untrusting.stats().proxies[0]).toMatchObject({ failures: 1, lastFailureReason: 'error' });
  });

  test('tunnels: credentials from the config, blocks never retire them, refused auth does', async () => {
    const gateway = await startHttpProxy('127.0.0.7', { username: 'cust-1', password: 'p@ss:word' });
    cleanups.push(() => gateway.close());
    const pool = track(
      createProxyPool({
        tunnels: [
          {
            name: 'rotating',
            endpoint: `127.0.0.1:${gateway.port}`,
            username: 'cust-1',
            password: 'p@ss:word',
          },
          { name: 'misconfigured', endpoint: `http://cust-2:nope@127.0.0.1:${gateway.port}`, tier: 2 },
        ],
        maxErrors: 2,
      }),
    );
    const ok = await fetchThroughPool(pool, `${origin.url}/tunnel`);
    expect(ok.status).toBe(200);
    expect(origin.exits.at(-1)).toBe('127.0.0.7');
    expect(ok.selection.proxy?.kind).toBe('tunnel');
    expect(JSON.stringify(ok.selection)).not.toContain('p%40ss');

    // Blocks say nothing about a rotating tunnel's next exit: they lower its score, never retire it.
    for (let i = 0; i < 5; i++) pool.reportFailure(await pool.acquire({ provider: 'rotating' }), 'blocked');
    expect(pool.stats().proxies.find((p) => p.provider === 'rotating')).toMatchObject({
      state: 'active',
      failures: 5,
      consecutiveFailures: 0,
    });

    const refused = await pool.acquire({ provider: 'misconfigured' });
    const outcome = await send(pool, refused, `${origin.url}/tunnel`);
    expect(outcome.error).toBeDefined();
    expect(classifyProxyError(outcome.error)).toBe('auth');
    pool.reportFailure(refused, classifyProxyError(outcome.error), { error: outcome.error });
    expect(pool.stats().providers.find((p) => p.name === 'misconfigured')).toMatchObject({
      active: 0,
      retired: 1,
      retiredTotal: 1,
    });
  });
});
