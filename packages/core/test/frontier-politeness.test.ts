// The host scheduler: every rule on a fake clock (no real waiting), then per-host concurrency
// against the fixture site, checked by the server's own counters.
import { maxConcurrency, startFixtureSite } from '@mocra/testkit';
import { request as undiciRequest } from 'undici';
import { describe, expect, test } from 'vitest';
import type { GateDecision } from '../src/frontier/gate.js';
import { LocalHostBudget } from '../src/frontier/politeness/host-budget.js';
import {
  type BackoffMessage,
  backoffChannel,
  HostScheduler,
  type HostSchedulerOptions,
  type RobotsVerdict,
} from '../src/frontier/politeness/host-scheduler.js';
import { Request } from '../src/model/request.js';
import { ManualClock } from '../src/schedule/clock.js';

const req = (url: string) => new Request(url);

/** A scheduler on a manual clock, and a helper that tracks a pending enter(). */
function setup(options: HostSchedulerOptions = {}) {
  const clock = new ManualClock();
  const scheduler = new HostScheduler({ jitter: 0, clock, random: () => 0.5, ...options });
  const track = (url: string, signal?: AbortSignal) => {
    const r = req(url);
    const d = scheduler.enter(r, signal);
    const t: { request: Request; settled: boolean; decision: GateDecision; promise: Promise<GateDecision> } =
      {
        request: r,
        settled: !(d instanceof Promise),
        decision: d instanceof Promise ? undefined : d,
        promise: Promise.resolve(d),
      };
    if (d instanceof Promise)
      t.promise = d.then((x) => {
        t.settled = true;
        t.decision = x;
        return x;
      });
    return t;
  };
  return { clock, scheduler, track };
}

describe('HostScheduler on a fake clock', () => {
  test('per-host concurrency: the third request waits for a slot; other hosts are not affected', async () => {
    const { clock, scheduler, track } = setup({ maxConcurrency: 2 });
    const a = track('http://a.test/1');
    const b = track('http://a.test/2');
    const c = track('http://a.test/3');
    const other = track('http://b.test/1');
    expect([a.settled, b.settled, c.settled, other.settled]).toEqual([true, true, false, true]);
    expect(a.decision).toBeUndefined();
    expect(scheduler.host('a.test')).toMatchObject({ active: 2, waiting: 1 });
    await clock.advance(10_000);
    expect(c.settled).toBe(false); // time alone frees nothing: a slot does
    scheduler.leave(a.request, { status: 200, durationMs: 40 });
    await clock.advance(0);
    expect(c.settled).toBe(true);
    expect(c.decision).toBeUndefined();
    expect(scheduler.host('a.test')).toMatchObject({ active: 2, waiting: 0 });
  });

  test('minimum delay between starts, jitter only ever adds', async () => {
    const { clock, track, scheduler } = setup({
      maxConcurrency: 4,
      delayMs: 1000,
      jitter: 0.5,
      random: () => 0.5,
    });
    const first = track('http://a.test/1');
    const second = track('http://a.test/2');
    expect(first.settled).toBe(true);
    expect(second.settled).toBe(false);
    await clock.advance(1249); // gap = 1000 + 1000 × 0.5 × 0.5
    expect(second.settled).toBe(false);
    await clock.advance(1);
    expect(second.settled).toBe(true);
    scheduler.leave(first.request, { status: 200 });
    scheduler.leave(second.request, { status: 200 });
  });

  test('a wait longer than maxWaitMs is deferred to the queue, and a backlog is spread out', async () => {
    const { track } = setup({ maxConcurrency: 1, delayMs: 2000, maxWaitMs: 3000 });
    const first = track('http://a.test/1');
    const waits = track('http://a.test/2'); // ~2 s: waits in process
    const d1 = track('http://a.test/3'); // ~4 s: deferred
    const d2 = track('http://a.test/4');
    const d3 = track('http://a.test/5');
    expect(first.settled).toBe(true);
    expect(waits.settled).toBe(false);
    for (const d of [d1, d2, d3]) expect(d.settled).toBe(true);
    const defers = [d1, d2, d3].map((d) => (d.decision as { deferMs: number }).deferMs);
    expect(defers[0]).toBeGreaterThanOrEqual(3000);
    expect(defers[1]!).toBeGreaterThanOrEqual(defers[0]! + 2000);
    expect(defers[2]!).toBeGreaterThanOrEqual(defers[1]! + 2000);
  });

  test('429 with Retry-After in seconds blocks that host only, for that long', async () => {
    const { clock, scheduler, track } = setup({ maxConcurrency: 2 });
    const events: BackoffMessage[] = [];
    const onBackoff = (m: unknown) => events.push(m as BackoffMessage);
    backoffChannel.subscribe(onBackoff);
    try {
      const a = track('http://a.test/1');
      scheduler.leave(a.request, { status: 429, headers: { 'retry-after': '3' } });
      expect(events).toEqual([{ host: 'a.test', status: 429, until: clock.now() + 3000, retryAfter: true }]);
      const blocked = track('http://a.test/2');
      const free = track('http://b.test/1');
      expect(free.settled).toBe(true);
      expect(blocked.settled).toBe(false);
      await clock.advance(2999);
      expect(blocked.settled).toBe(false);
      await clock.advance(1);
      expect(blocked.settled).toBe(true);
      expect(blocked.decision).toBeUndefined();
    } finally {
      backoffChannel.unsubscribe(onBackoff);
    }
  });

  test('503 with Retry-After as an HTTP-date; without Retry-After an exponential backoff that resets', async () => {
    const { clock, scheduler, track } = setup({ maxConcurrency: 1, backoff: { baseMs: 1000 } });
    const date = new Date(clock.now() + 5000).toUTCString();
    const a = track('http://a.test/1');
    scheduler.leave(a.request, { status: 503, headers: { 'retry-after': date } });
    expect(scheduler.host('a.test')!.blockedUntil).toBe(clock.now() + 5000);
    await clock.advance(5000);
    const expectBlock = async (status: number, ms: number) => {
      const r = track('http://a.test/x');
      await r.promise;
      const start = clock.now();
      scheduler.leave(r.request, { status });
      expect(scheduler.host('a.test')!.blockedUntil - start).toBe(ms);
      await clock.advance(ms);
    };
    await expectBlock(429, 2000); // second in a row
    await expectBlock(429, 4000);
    const ok = track('http://a.test/ok');
    await ok.promise;
    scheduler.leave(ok.request, { status: 200 });
    // Next to a good answer, a 503 is that URL's own: the host is not blocked.
    const own = track('http://a.test/own-503');
    await own.promise;
    scheduler.leave(own.request, { status: 503 });
    expect(scheduler.host('a.test')!.blockedUntil).toBeLessThanOrEqual(clock.now());
    await clock.advance(5000);
    await expectBlock(503, 1000); // nothing good for 5 s: a backoff, reset by the success
    const r = track('http://a.test/500');
    await r.promise;
    scheduler.leave(r.request, { status: 500 });
    expect(scheduler.host('a.test')!.consecutiveBackoffs).toBe(0); // 500 is not a backoff status
  });

  test('responses to requests sent before a backoff began neither lengthen nor escalate it', async () => {
    const { clock, scheduler, track } = setup({ maxConcurrency: 4, backoff: { baseMs: 1000 } });
    const inFlight = ['1', '2', '3', '4'].map((p) => track(`http://a.test/${p}`));
    await clock.advance(100);
    scheduler.leave(inFlight[0]!.request, { status: 429, durationMs: 100 });
    const until = scheduler.host('a.test')!.blockedUntil;
    expect(until).toBe(clock.now() + 1000);
    await clock.advance(50);
    for (const t of inFlight.slice(1)) scheduler.leave(t.request, { status: 429, durationMs: 150 });
    expect(scheduler.host('a.test')).toMatchObject({ blockedUntil: until, consecutiveBackoffs: 1 });
    // A request sent after the backoff that meets a 429 again escalates it.
    await clock.advance(1000);
    const next = track('http://a.test/5');
    await next.promise;
    scheduler.leave(next.request, { status: 429, durationMs: 0 });
    expect(scheduler.host('a.test')).toMatchObject({
      blockedUntil: clock.now() + 2000,
      consecutiveBackoffs: 2,
    });
  });

  test('Retry-After is capped by backoff.maxMs', () => {
    const { clock, scheduler, track } = setup({ backoff: { maxMs: 60_000 } });
    const a = track('http://a.test/1');
    scheduler.leave(a.request, { status: 429, retryAfterMs: 3_600_000 });
    expect(scheduler.host('a.test')!.blockedUntil).toBe(clock.now() + 60_000);
  });

  test('robots: disallowed URLs are dropped, Crawl-delay becomes the gap (capped)', async () => {
    const verdicts: Record<string, RobotsVerdict> = {
      'a.test': { allowed: true, crawlDelayMs: 2000 },
      'b.test': { allowed: true, crawlDelayMs: 3_600_000 },
    };
    const robots = {
      check: (url: URL) =>
        url.pathname.startsWith('/private')
          ? { allowed: false, crawlDelayMs: undefined }
          : verdicts[url.hostname]!,
    };
    const { clock, track, scheduler } = setup({ maxConcurrency: 4, robots, maxCrawlDelayMs: 10_000 });
    expect(track('http://a.test/private/x').decision).toEqual({
      drop: 'disallowed by robots.txt: /private/x',
    });
    track('http://a.test/1');
    const second = track('http://a.test/2');
    expect(second.settled).toBe(false);
    await clock.advance(1999);
    expect(second.settled).toBe(false);
    await clock.advance(1);
    expect(second.settled).toBe(true);
    track('http://b.test/1');
    expect(scheduler.host('b.test')!.crawlDelayMs).toBe(10_000);
  });

  test('asynchronous robots answers (a first fetch) are awaited', async () => {
    const robots = { check: async () => ({ allowed: false, crawlDelayMs: undefined }) };
    const { track } = setup({ robots });
    const t = track('http://a.test/x');
    expect(await t.promise).toEqual({ drop: 'disallowed by robots.txt: /x' });
  });

  test('autothrottle follows latency up, and error pages do not talk it down', () => {
    const { scheduler, track } = setup({ autoThrottle: { startDelayMs: 100, targetConcurrency: 1 } });
    for (let i = 0; i < 12; i++) {
      const r = track(`http://a.test/${i}`);
      scheduler.leave(r.request, { status: 200, durationMs: 800 });
    }
    const up = scheduler.host('a.test')!.delayMs;
    expect(up).toBeGreaterThan(780);
    expect(up).toBeLessThanOrEqual(800);
    for (let i = 0; i < 5; i++) {
      const r = track(`http://a.test/e${i}`);
      scheduler.leave(r.request, { status: 404, durationMs: 5 });
    }
    expect(scheduler.host('a.test')!.delayMs).toBe(up);
    const fast = track('http://a.test/fast');
    scheduler.leave(fast.request, { status: 200, durationMs: 10 });
    expect(scheduler.host('a.test')!.delayMs).toBeLessThan(up);
  });

  test('an aborted wait is handed back as a deferral; close() does the same for every waiter', async () => {
    const { scheduler, track } = setup({ maxConcurrency: 1 });
    track('http://a.test/1');
    const controller = new AbortController();
    const waiting = track('http://a.test/2', controller.signal);
    const other = track('http://a.test/3');
    controller.abort();
    expect(await waiting.promise).toEqual({ deferMs: 0 });
    scheduler.close();
    expect(await other.promise).toEqual({ deferMs: 0 });
  });

  test('memory is bounded: idle hosts are forgotten past maxHosts', async () => {
    const { scheduler, track } = setup({ maxHosts: 10 });
    for (let i = 0; i < 200; i++) {
      const r = track(`http://h${i}.test/`);
      scheduler.leave(r.request, { status: 200, durationMs: 1 });
    }
    expect(scheduler.hosts().length).toBeLessThanOrEqual(10);
    const budget = new LocalHostBudget({ maxHosts: 5 });
    for (let i = 0; i < 50; i++) {
      budget.tryAcquire(`h${i}`, { maxConcurrency: 1, gapMs: 0 }, 0);
      budget.release(`h${i}`);
    }
    expect(budget.size).toBeLessThanOrEqual(5);
  });

  test('bad options are typed errors', () => {
    expect(() => new HostScheduler({ maxConcurrency: 0 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => new HostScheduler({ delayMs: -1 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});

describe('HostScheduler against the fixture site', () => {
  test('per-host concurrency is never exceeded, by the server’s own counters', async () => {
    const site = await startFixtureSite({ hosts: 3, latencyMs: 15, latencyJitterMs: 10 });
    try {
      const scheduler = new HostScheduler({ maxConcurrency: 2, maxWaitMs: 50, minDeferMs: 5 });
      const work: { url: string; notBefore: number }[] = [];
      for (let i = 0; i < 30; i++)
        for (const origin of site.urls) work.push({ url: `${origin}/book/${i + 1}`, notBefore: 0 });
      let done = 0;
      const total = work.length;
      // 12 workers for 3 hosts × 2 slots: plenty of pressure on every host.
      const worker = async () => {
        while (done < total) {
          const next = work.shift();
          if (!next) {
            await new Promise((r) => setTimeout(r, 5));
            continue;
          }
          if (next.notBefore > Date.now()) {
            work.push(next);
            await new Promise((r) => setTimeout(r, 2));
            continue;
          }
          const r = new Request(next.url);
          const decision = await scheduler.enter(r);
          if (decision && 'deferMs' in decision) {
            work.push({ url: next.url, notBefore: Date.now() + decision.deferMs });
            continue;
          }
          expect(decision).toBeUndefined();
          const started = Date.now();
          const res = await undiciRequest(next.url);
          await res.body.dump();
          scheduler.leave(r, { status: res.statusCode, durationMs: Date.now() - started });
          done++;
        }
      };
      await Promise.all(Array.from({ length: 12 }, worker));
      const stats = site.stats();
      expect(stats.requests).toBe(total);
      for (let i = 0; i < 3; i++) {
        expect(site.hostStats(i).requests).toBe(30);
        expect(site.hostStats(i).maxInFlight).toBeLessThanOrEqual(2);
        expect(maxConcurrency(stats.log, { hostIndex: i })).toBeLessThanOrEqual(2);
      }
      // Three hosts were served at once (the limit is per host, not global).
      expect(stats.maxInFlight).toBeGreaterThan(2);
    } finally {
      await site.close();
    }
  }, 60_000);
});
