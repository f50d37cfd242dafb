// Tiered escalation against a site that blocks by exit address, as real sites block IPs:
// tier 0 goes direct (exit 127.0.0.1), tier 1 is a cheap proxy (127.0.0.12), tier 2 an
// expensive one (127.0.0.13).
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createProxyPool, type ProxyPool, parseProxyConfig } from '../src/index.js';
import { type HttpProxy, type Origin, startHttpProxy, startOrigin } from './helpers/servers.js';
import { directAgent, fetchThroughPool, nextMessage } from './helpers/traffic.js';

const DIRECT = '127.0.0.1';
const CHEAP = '127.0.0.12';
const EXPENSIVE = '127.0.0.13';

let origin: Origin;
let cheap: HttpProxy;
let expensive: HttpProxy;
let pool: ProxyPool;

beforeAll(async () => {
  origin = await startOrigin();
  [cheap, expensive] = await Promise.all([startHttpProxy(CHEAP), startHttpProxy(EXPENSIVE)]);
  pool = createProxyPool(
    parseProxyConfig({
      direct: true,
      proxies: [
        { url: cheap.url, provider: 'cheap', tier: 1 },
        { url: expensive.url, provider: 'expensive', tier: 2 },
      ],
      tiers: { escalate_after: 2, deescalate_after: 3 },
    }),
  );
});

afterAll(async () => {
  await pool.close();
  await Promise.all([cheap.close(), expensive.close()]);
  await directAgent.close();
  await origin.close();
});

/** One request to the origin (tier scope: its host, 127.0.0.1); the exit it saw and the tier used. */
async function visit(path: string): Promise<{ exit: string; tier: number; status: number | undefined }> {
  const outcome = await fetchThroughPool(pool, `${origin.url}${path}`);
  return { exit: origin.exits.at(-1)!, tier: outcome.selection.tier, status: outcome.status };
}

test('a host escalates direct → cheap → expensive as blocks come, and steps back down when they stop', async () => {
  expect(pool.tiers).toEqual([0, 1, 2]);
  const trail: string[] = [];
  const step = async () => {
    const v = await visit('/shop');
    trail.push(`${v.tier}:${v.exit}:${v.status}`);
    return v;
  };

  // Direct works until the site blocks our own address.
  expect(await step()).toEqual({ exit: DIRECT, tier: 0, status: 200 });
  origin.blocked.add(DIRECT);
  const changed = nextMessage<{ scope: string; from: number; to: number }>('mocra:proxy:tier-changed');
  await step();
  await step();
  expect(await changed).toEqual({ scope: '127.0.0.1', from: 0, to: 1 });
  expect(await step()).toEqual({ exit: CHEAP, tier: 1, status: 200 });

  // The cheap exit gets blocked too: two blocks, then the expensive tier.
  origin.blocked.add(CHEAP);
  await step();
  await step();
  expect(pool.tierFor('127.0.0.1')).toBe(2);
  expect(await step()).toEqual({ exit: EXPENSIVE, tier: 2, status: 200 });

  // Blocks lifted: after 3 successes the host probes one tier lower, and keeps stepping down.
  origin.blocked.clear();
  await step();
  await step();
  expect(pool.tierFor('127.0.0.1')).toBe(1);
  expect(await step()).toEqual({ exit: CHEAP, tier: 1, status: 200 });
  await step();
  await step();
  expect(pool.tierFor('127.0.0.1')).toBe(0);
  expect(await step()).toEqual({ exit: DIRECT, tier: 0, status: 200 });

  expect(trail).toEqual([
    `0:${DIRECT}:200`,
    `0:${DIRECT}:403`,
    `0:${DIRECT}:403`,
    `1:${CHEAP}:200`,
    `1:${CHEAP}:403`,
    `1:${CHEAP}:403`,
    `2:${EXPENSIVE}:200`,
    `2:${EXPENSIVE}:200`,
    `2:${EXPENSIVE}:200`,
    `1:${CHEAP}:200`,
    `1:${CHEAP}:200`,
    `1:${CHEAP}:200`,
    `0:${DIRECT}:200`,
  ]);
  const stats = pool.stats();
  expect(stats.direct).toEqual({ requests: 4, successes: 2, failures: 2 });
  expect(stats.tiers.scopes).toBe(1);
});

test('a probe that fails goes straight back up; other hosts keep their own tier', async () => {
  // Scopes given as `host` directly: escalate probe.test to tier 1, then earn the way down.
  const acquireFor = (host: string) => pool.acquire({ host });
  for (let i = 0; i < 2; i++) pool.reportFailure(await acquireFor('probe.test'), 'blocked');
  expect(pool.tierFor('probe.test')).toBe(1);
  for (let i = 0; i < 3; i++) pool.reportSuccess(await acquireFor('probe.test'));
  expect(pool.tierFor('probe.test')).toBe(0);
  // On probation: one failure, not two, sends it back.
  const probe = await acquireFor('probe.test');
  expect(probe.proxy).toBeUndefined();
  pool.reportFailure(probe, 'timeout');
  expect(pool.tierFor('probe.test')).toBe(1);
  expect(pool.tierFor('other.test')).toBe(0);

  // `connect` and `auth` blame the proxy, not the tier: they do not escalate.
  pool.reportFailure(await acquireFor('probe.test'), 'connect');
  pool.reportSuccess(await acquireFor('probe.test'));
  pool.reportFailure(await acquireFor('probe.test'), 'connect');
  expect(pool.tierFor('probe.test')).toBe(1);

  // A late report for a tier the host already left does not move it again.
  const stale = await acquireFor('late.test');
  pool.reportFailure(await acquireFor('late.test'), 'blocked');
  pool.reportFailure(await acquireFor('late.test'), 'blocked');
  expect(pool.tierFor('late.test')).toBe(1);
  pool.reportFailure(stale, 'blocked');
  expect(pool.tierFor('late.test')).toBe(1);
  // Reporting the same selection twice counts once.
  const twice = await acquireFor('late.test');
  pool.reportFailure(twice, 'blocked');
  pool.reportFailure(twice, 'blocked');
  expect(pool.tierFor('late.test')).toBe(1);
});

test('pinning a tier or a provider bypasses escalation', async () => {
  const pinned = await pool.acquire({ host: 'pinned.test', tier: 2 });
  expect(pinned.proxy?.provider).toBe('expensive');
  for (let i = 0; i < 3; i++)
    pool.reportFailure(await pool.acquire({ host: 'pinned.test', tier: 0 }), 'blocked');
  expect(pool.tierFor('pinned.test')).toBe(0);
  const byProvider = await pool.acquire({ host: 'pinned.test', provider: 'cheap' });
  expect(byProvider).toMatchObject({ tier: 1, proxy: expect.objectContaining({ provider: 'cheap' }) });
  await expect(pool.acquire({ provider: 'nope' })).rejects.toMatchObject({
    code: 'MOCRA_ERR_PROXY_INVALID_ARGUMENT',
  });
  await expect(pool.acquire({ tier: 7 })).rejects.toMatchObject({ code: 'MOCRA_ERR_PROXY_INVALID_ARGUMENT' });
});

test('a tier with no proxy left falls through to the next one up', async () => {
  const local = createProxyPool({
    direct: false,
    proxies: [
      { url: cheap.url, provider: 'cheap', tier: 1 },
      { url: expensive.url, provider: 'expensive', tier: 2 },
    ],
  });
  try {
    const first = await local.acquire({ host: 'fall.test' });
    expect(first.proxy?.provider).toBe('cheap');
    local.reportFailure(first, 'auth');
    const next = await local.acquire({ host: 'fall.test' });
    expect(next.proxy?.provider).toBe('expensive');
    const v = await fetchThroughPool(local, `${origin.url}/fall`);
    expect(v.status).toBe(200);
    expect(origin.exits.at(-1)).toBe(EXPENSIVE);
  } finally {
    await local.close();
  }
});
