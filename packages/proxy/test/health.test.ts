// Health checks request a check URL through every proxy on an interval (driven here by a
// manual clock); a dead proxy is retired after `maxErrors` failed rounds, a live one is not.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createProxyPool, type HealthCheckReport } from '../src/index.js';
import { ManualClock, settle } from './helpers/manual-clock.js';
import { deadProxyUrl, type Origin, startHttpProxy, startOrigin } from './helpers/servers.js';
import { directAgent, fetchThroughPool, nextMessage } from './helpers/traffic.js';

let origin: Origin;

beforeAll(async () => {
  origin = await startOrigin();
});

afterAll(async () => {
  await directAgent.close();
  await origin.close();
});

test('rounds on the interval retire a dead proxy and one that dies later; live ones stay', async () => {
  const clock = new ManualClock();
  const [live, doomed] = await Promise.all([startHttpProxy('127.0.0.31'), startHttpProxy('127.0.0.32')]);
  const dead = await deadProxyUrl();
  const pool = createProxyPool(
    {
      proxies: [live.url, doomed.url, dead],
      maxErrors: 2,
      healthCheck: { url: `${origin.url}/health`, interval: '1m', timeout: '5s', concurrency: 2 },
    },
    { clock },
  );
  try {
    const round = async (): Promise<HealthCheckReport> => {
      const done = nextMessage<HealthCheckReport>('mocra:proxy:health-check');
      await clock.advance(60_000);
      const report = await done;
      await settle(); // let the pool schedule its next round before the clock moves again
      return report;
    };
    expect(await round()).toEqual({ checked: 3, healthy: 2, failed: 1, retired: [] });
    const deadId = pool.stats().proxies.find((p) => p.url === dead)!.id;
    expect(await round()).toEqual({ checked: 3, healthy: 2, failed: 1, retired: [deadId] });
    expect(origin.hits.get('/health')).toBe(4);
    expect(origin.exits.filter((e) => e === '127.0.0.31')).toHaveLength(2);

    await doomed.close();
    expect(await round()).toMatchObject({ checked: 2, healthy: 1, failed: 1, retired: [] });
    const report = await round();
    expect(report).toMatchObject({ checked: 2, healthy: 1, failed: 1 });
    expect(report.retired).toHaveLength(1);

    const stats = pool.stats();
    expect(stats.active).toBe(1);
    expect(stats.proxies.find((p) => p.url === live.url)).toMatchObject({
      state: 'active',
      consecutiveFailures: 0,
      latencyMs: expect.any(Number),
    });
    expect(stats.proxies.filter((p) => p.state === 'retired').map((p) => p.retiredReason)).toEqual([
      'connect',
      'connect',
    ]);
    // Traffic goes on through the survivor.
    expect((await fetchThroughPool(pool, `${origin.url}/after`)).status).toBe(200);
    expect(origin.exits.at(-1)).toBe('127.0.0.31');
  } finally {
    await pool.close();
    await Promise.all([live.close(), doomed.close()]);
  }
});

test('checkHealth() runs a round on demand; without a healthCheck it is an argument error', async () => {
  const proxy = await startHttpProxy('127.0.0.33');
  const pool = createProxyPool({
    proxies: [proxy.url],
    healthCheck: { url: `${origin.url}/health`, interval: 0 },
  });
  const bare = createProxyPool({ proxies: [proxy.url] });
  try {
    const [a, b] = [pool.checkHealth(), pool.checkHealth()];
    expect(a).toBe(b); // a round already running is joined
    expect(await a).toEqual({ checked: 1, healthy: 1, failed: 0, retired: [] });
    expect(() => bare.checkHealth()).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_PROXY_INVALID_ARGUMENT' }),
    );
  } finally {
    await Promise.all([pool.close(), bare.close()]);
    await proxy.close();
  }
});
