// Per-proxy rate limits, sticky waits, retirement cooldown and close(), on a manual clock.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';
import { createProxyPool, ProxyClosedError, ProxyInfo, ProxyRateLimitedError } from '../src/index.js';
import { ManualClock, settle } from './helpers/manual-clock.js';

const A = 'http://127.0.0.1:3001';
const B = 'http://127.0.0.1:3002';

test('each proxy starts at most `limit` requests per interval; acquire waits for the first free slot', async () => {
  const clock = new ManualClock();
  const pool = createProxyPool({ proxies: [A, B], rateLimit: { limit: 2, interval: '1s' } }, { clock });
  try {
    const first = await Promise.all([1, 2, 3, 4].map(() => pool.acquire()));
    expect(first.map((s) => s.proxy?.url).sort()).toEqual([A, A, B, B]);
    expect(pool.stats().proxies.map((p) => p.rateUsed)).toEqual([2, 2]);

    let resolved: string | undefined;
    const waiting = pool.acquire().then((s) => {
      resolved = s.proxy?.url;
    });
    await clock.advance(999);
    expect(resolved).toBeUndefined();
    await clock.advance(1);
    await waiting;
    expect([A, B]).toContain(resolved);

    // A caller that cannot wait that long gets a retryable error saying how long.
    await clock.advance(0);
    await pool.acquire();
    await pool.acquire();
    await pool.acquire();
    const err = await pool.acquire({ maxWait: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProxyRateLimitedError);
    expect(err).toMatchObject({ code: 'MOCRA_ERR_PROXY_RATE_LIMITED', retryable: true, retryAfterMs: 1_000 });
  } finally {
    await pool.close();
  }
});

test('a sticky session waits for its own proxy rather than switching exits', async () => {
  const clock = new ManualClock();
  const pool = createProxyPool(
    { proxies: [{ url: A, rateLimit: { limit: 1, interval: '10s' } }, B] },
    { clock },
  );
  try {
    const first = await pool.acquire({ session: 'acct-7' });
    expect(first.proxy?.url).toBe(A);
    expect((await pool.acquire()).proxy?.url).toBe(B); // B is free
    let second: string | undefined;
    const pending = pool.acquire({ session: 'acct-7' }).then((s) => {
      second = s.proxy?.url;
    });
    await clock.advance(9_000);
    expect(second).toBeUndefined();
    await clock.advance(1_000);
    await pending;
    expect(second).toBe(A);
  } finally {
    await pool.close();
  }
});

test('retired static proxies come back on probation after the cooldown', async () => {
  const clock = new ManualClock();
  const pool = createProxyPool({ proxies: [A, B], maxErrors: 1, retiredCooldown: '10m' }, { clock });
  try {
    const a = (await pool.acquire()).proxy!;
    expect(a).toBeInstanceOf(ProxyInfo);
    pool.reportFailure(a, 'connect'); // a ProxyInfo works as a report target too
    expect(pool.size).toBe(1);
    await clock.advance(9 * 60_000);
    expect(pool.size).toBe(1);
    await clock.advance(60_000);
    expect(pool.size).toBe(2);
    const revived = pool.stats().proxies.find((p) => p.id === a.id)!;
    expect(revived).toMatchObject({ state: 'active', consecutiveFailures: 0, failures: 1 });
    // On probation it scores below a proxy with a clean record.
    expect(revived.score).toBeLessThan(pool.stats().proxies.find((p) => p.id !== a.id)!.score);
  } finally {
    await pool.close();
  }
});

test('reports validate their input and never leak credentials into JSON', async () => {
  const pool = createProxyPool({ proxies: ['http://user:hunter2@127.0.0.1:3003'] });
  try {
    const s = await pool.acquire();
    expect(() => pool.reportSuccess(s, { latencyMs: -5 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_PROXY_INVALID_ARGUMENT' }),
    );
    expect(() => pool.reportFailure(s, 'nope' as 'error')).toThrow(/reason must be one of/);
    expect(s.proxy!.url).toBe('http://user:hunter2@127.0.0.1:3003');
    expect(JSON.stringify({ s, stats: pool.stats() })).not.toContain('hunter2');
    expect(String(s.proxy)).toBe('http://user:***@127.0.0.1:3003');
    await expect(pool.acquire({ url: 'not a url' })).rejects.toMatchObject({
      code: 'MOCRA_ERR_PROXY_INVALID_ARGUMENT',
    });
  } finally {
    await pool.close();
  }
});

test('close() stops timers, rejects waiters, closes agents, and is idempotent', async () => {
  const clock = new ManualClock();
  const pool = createProxyPool(
    { proxies: [A], rateLimit: 1, healthCheck: { url: 'http://127.0.0.1:9/health', interval: '1m' } },
    { clock },
  );
  expect(clock.pending).toBe(2); // the maintenance sweep and the health-check round
  const first = await pool.acquire();
  const dispatcher = pool.dispatcher(first);
  expect(dispatcher).toBeDefined();
  const waiter = pool.acquire().catch((e: unknown) => e);
  await settle();
  expect(clock.pending).toBe(3);
  const aborted = new AbortController();
  const abortable = pool.acquire({ signal: aborted.signal }).catch((e: unknown) => e);
  await settle();
  aborted.abort(new Error('caller gave up'));
  expect(await abortable).toMatchObject({ message: 'caller gave up' });

  await Promise.all([pool.close(), pool.close()]);
  expect(await waiter).toBeInstanceOf(ProxyClosedError);
  expect(clock.pending).toBe(0);
  expect(pool.closed).toBe(true);
  await expect(pool.acquire()).rejects.toMatchObject({ code: 'MOCRA_ERR_PROXY_CLOSED' });
  expect(() => pool.dispatcher(first)).toThrow(ProxyClosedError);
  // Outcomes of requests still in flight at shutdown are dropped quietly.
  expect(() => pool.reportSuccess(first)).not.toThrow();
});

test('with the system clock, a pool that is never closed does not keep the process alive', async () => {
  // Timers (maintenance sweep, health-check round) are unref'd: the child must exit on its own.
  const entry = fileURLToPath(new URL('../src/index.ts', import.meta.url));
  const script = [
    `import { createProxyPool } from ${JSON.stringify(entry)};`,
    "const pool = createProxyPool({ proxies: ['http://127.0.0.1:9'], healthCheck: { url: 'http://127.0.0.1:9/', interval: '1m' } });",
    "const s = await pool.acquire({ session: 'x' });",
    "console.log('acquired', s.proxy.displayUrl);",
  ].join('\n');
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '--eval', script],
    { timeout: 20_000 },
  );
  expect(stdout.trim()).toBe('acquired http://127.0.0.1:9');
});
