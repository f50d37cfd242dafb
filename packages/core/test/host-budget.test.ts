// The cluster-wide host budget on the real local Redis, under the per-process HostScheduler.
// Each "worker" has its own budget, connection and scheduler, as separate processes would;
// downloads are simulated by holding the gate between enter and leave.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, expect, test } from 'vitest';
import { createRedisHostBudget, type RedisHostBudget } from '../src/distributed/host-budget.js';
import { createHostScheduler, type HostScheduler } from '../src/frontier/politeness/host-scheduler.js';
import { Request } from '../src/model/request.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const opened: RedisHostBudget[] = [];
const schedulers: HostScheduler[] = [];

afterAll(async () => {
  for (const s of schedulers) s.close();
  for (const b of opened) await b.close();
});

async function budget(namespace: string, leaseTtlMs = 60_000): Promise<RedisHostBudget> {
  const b = await createRedisHostBudget({
    url: REDIS_URL,
    namespace,
    keyPrefix: 'mocra-test:budget:',
    leaseTtlMs,
    pollMs: 10,
  });
  opened.push(b);
  return b;
}

async function worker(
  namespace: string,
  options: { maxConcurrency?: number; delayMs?: number; leaseTtlMs?: number },
) {
  const b = await budget(namespace, options.leaseTtlMs);
  const scheduler = createHostScheduler({
    budget: b,
    maxConcurrency: options.maxConcurrency ?? 2,
    delayMs: options.delayMs ?? 0,
    jitter: 0,
    maxWaitMs: 60_000,
  });
  schedulers.push(scheduler);
  return { budget: b, scheduler };
}

const ns = () => `b${randomBytes(5).toString('hex')}`;
const HOST = 'shop.example';
const url = (i: number) => `http://${HOST}/item/${i}`;

async function download(gate: HostScheduler, i: number, holdMs: number, track: { now: number; max: number }) {
  const request = new Request(url(i));
  expect(await gate.enter(request, new AbortController().signal)).toBeUndefined();
  track.now++;
  track.max = Math.max(track.max, track.now);
  await sleep(holdMs);
  track.now--;
  gate.leave(request, { status: 200 });
}

test('three workers together never hold more slots than maxConcurrency', async () => {
  const n = ns();
  const workers = await Promise.all([1, 2, 3].map(() => worker(n, { maxConcurrency: 2 })));
  const track = { now: 0, max: 0 };
  await Promise.all(
    Array.from({ length: 45 }, (_, i) => download(workers[i % 3]!.scheduler, i, 3 + (i % 5) * 2, track)),
  );
  expect(track.max).toBe(2);
  await sleep(20);
  for (const w of workers) expect(w.budget.held).toBe(0);
  expect(await workers[0]!.budget.state(HOST)).toMatchObject({ active: 0 });
});

test('the gap holds across workers: N starts take at least N − 1 gaps', async () => {
  const n = ns();
  const workers = await Promise.all([1, 2, 3].map(() => worker(n, { maxConcurrency: 10, delayMs: 20 })));
  const track = { now: 0, max: 0 };
  const started = performance.now();
  await Promise.all(Array.from({ length: 30 }, (_, i) => download(workers[i % 3]!.scheduler, i, 0, track)));
  // A lower bound only (the budget must have spaced the starts): never flaky from slowness.
  expect(performance.now() - started).toBeGreaterThanOrEqual(29 * 20 - 5);
});

test("a dead worker's slots come back after the lease TTL; live ones are renewed", async () => {
  const n = ns();
  const policy = { maxConcurrency: 1, gapMs: 0 };
  const a = await budget(n, 400);
  expect(await a.tryAcquire(HOST, policy, Date.now())).toEqual({ ok: true });
  await a.close(); // "dies" holding the slot: never releases, never renews
  const b = await worker(n, { maxConcurrency: 1, leaseTtlMs: 400 });
  expect(await b.budget.tryAcquire(HOST, policy, 1000)).toEqual({ ok: false, retryAt: 1010 });
  // The scheduler polls until the lapsed slot is free again, then downloads.
  const track = { now: 0, max: 0 };
  await download(b.scheduler, 1, 0, track);

  // A live worker holding its slot far longer than the TTL keeps it.
  const held = new Request(url(2));
  expect(await b.scheduler.enter(held, new AbortController().signal)).toBeUndefined();
  const c = await worker(n, { maxConcurrency: 1, leaseTtlMs: 400 });
  await sleep(1_000);
  expect((await c.budget.tryAcquire(HOST, policy, Date.now())).ok).toBe(false);
  b.scheduler.leave(held, { status: 200 });
  await download(c.scheduler, 3, 0, track);
});

test('a 429 backoff seen by one worker holds every worker off the host', async () => {
  const n = ns();
  const [a, b] = await Promise.all([budget(n), budget(n)]);
  await a.blockUntil(HOST, Date.now() + 5_000);
  const res = await b.tryAcquire(HOST, { maxConcurrency: 5, gapMs: 0 }, 1_000);
  expect(res.ok).toBe(false);
  expect((res as { retryAt: number }).retryAt).toBeGreaterThan(1_000 + 3_000);
  const state = await b.state(HOST);
  expect(state!.blockedUntil).toBeGreaterThan(Date.now() + 3_000);
  // Another host is not affected.
  expect(await b.tryAcquire('other.example', { maxConcurrency: 5, gapMs: 0 }, 1_000)).toEqual({ ok: true });
  await b.release('other.example');
});

test('bad options are typed errors', async () => {
  const b = await budget(ns());
  await expect(b.tryAcquire(HOST, { maxConcurrency: 0, gapMs: 0 }, 0)).rejects.toMatchObject({
    code: 'MOCRA_ERR_INVALID_ARGUMENT',
  });
  await expect(createRedisHostBudget({ leaseTtlMs: 5 })).rejects.toMatchObject({
    code: 'MOCRA_ERR_INVALID_ARGUMENT',
  });
  await expect(createRedisHostBudget({ url: 'redis://127.0.0.1:1' })).rejects.toMatchObject({
    code: 'MOCRA_ERR_BACKEND_UNAVAILABLE',
  });
});
