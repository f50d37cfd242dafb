// Failure handling end to end, against the fixture site's failure endpoints: retries and
// backoff, Retry-After in both forms, permanent failures, parse and store errors, steering
// errors thrown by user code, thresholds, circuit breakers and the watchdog. Delays are made
// small with policy overrides so the suite stays fast; the exact delay arithmetic is unit-tested
// on a fake clock in packages/core/test/policy-*.test.ts.
import diagnostics_channel from 'node:diagnostics_channel';
import {
  type BreakerTransition,
  createMemoryQueueBackend,
  POLICY_CHANNEL_NAMES,
  type QueueBackend,
  type StallReport,
} from '@mocra/core';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import {
  CriticalError,
  type Ctx,
  defineSpider,
  type ErrorEvent,
  Mocra,
  type MocraBuilder,
  NonRetryableError,
  type PolicyDecision,
  type Response,
  RetryLaterError,
  SessionExpiredError,
} from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

let site: FixtureSite;

beforeAll(async () => {
  site = await startFixtureSite({ hosts: 2, hugeBodyBytes: 4 * 1024 * 1024 });
});

afterAll(async () => {
  await site?.close();
});

interface Item {
  path: string;
  status: number;
}

interface Failure {
  event: ErrorEvent;
  decision: PolicyDecision;
}

/** Requests the server saw for this path-and-query (on any host). */
function hits(pathAndQuery: string): number {
  return site.stats({ log: true }).log.filter((e) => e.url === pathAndQuery).length;
}

function pathOf(url: string): string {
  const u = new URL(url);
  return u.pathname + u.search;
}

/** A spider over `paths` (on host 0 unless absolute) whose parse emits `{ path, status }`. */
function crawl(
  name: string,
  paths: readonly string[],
  options: {
    parse?: (res: Response, cx: Ctx<Item>) => void | Promise<void>;
    sink?: (item: Item) => void | Promise<void>;
    configure?: (b: MocraBuilder) => MocraBuilder;
  } = {},
) {
  const items: Item[] = [];
  const failures: Failure[] = [];
  const spider = defineSpider<Item>({
    name,
    start(seeds) {
      for (const p of paths) seeds.get(p.startsWith('http') ? p : `${site.url}${p}`);
    },
    async parse(res, cx) {
      if (options.parse) await options.parse(res, cx);
      cx.emit({ path: pathOf(res.request.url), status: res.status });
    },
  });
  let builder = Mocra.builder()
    .spider(spider, async (item) => {
      await options.sink?.(item);
      items.push(item);
    })
    .handleSignals(false)
    .onError((event, decision) => failures.push({ event, decision }));
  if (options.configure) builder = options.configure(builder);
  const engine = builder.build();
  return { engine, items, failures };
}

function failuresOf(failures: Failure[], path: string): Failure[] {
  return failures.filter((f) => f.event.url !== undefined && pathOf(f.event.url) === path);
}

describe('defaults', () => {
  test('a crawl of a flaky site finishes with no configuration and loses nothing', async () => {
    const paths: string[] = [];
    for (let i = 0; i < 18; i++) paths.push(`/flaky/zero-config-${i}/${i % 3}?retry-after=0`);
    for (let i = 0; i < 6; i++) paths.push(`/flaky/zero-config-500-${i}/1?status=500`);
    const { engine, items, failures } = crawl('zero-config', paths);
    const summary = await engine.run();
    expect(summary.reason).toBe('idle');
    expect(items.map((i) => i.path).sort()).toEqual([...paths].sort());
    expect(items.every((i) => i.status === 200)).toBe(true);
    expect(await engine.deadLetters.size()).toBe(0);
    for (let i = 0; i < 18; i++) expect(hits(paths[i]!)).toBe((i % 3) + 1);
    // Every failure was retried; none was given up.
    expect(failures.every((f) => f.decision.action === 'retry')).toBe(true);
    expect(failures).toHaveLength(18 / 3 + (18 / 3) * 2 + 6);
  }, 30_000);
});

describe('retries, backoff and Retry-After', () => {
  test('Retry-After as delta-seconds and as an HTTP-date is read, honoured and capped', async () => {
    const seconds = '/flaky/ra-seconds/2?status=429&retry-after=1';
    const date = '/flaky/ra-date/1?status=503&retry-after-date=2';
    const uncapped = '/flaky/ra-uncapped/1?status=429&retry-after=1';
    const { engine, items, failures } = crawl('retry-after', [seconds, date, uncapped], {
      configure: (b) =>
        b.recovery({
          overrides: [
            { kind: ['http-429', 'http-503'], module: 'retry-after', retry_after_cap_ms: 40 },
            // The third URL is on host 1, with the default cap (120 s).
          ],
        }),
    });
    await engine.run();
    expect(items.map((i) => i.path).sort()).toEqual([date, seconds, uncapped].sort());
    const s = failuresOf(failures, seconds);
    expect(s.map((f) => [f.event.code, f.event.status, f.event.retryAfterMs])).toEqual([
      ['MOCRA_ERR_HTTP_STATUS', 429, 1000],
      ['MOCRA_ERR_HTTP_STATUS', 429, 1000],
    ]);
    expect(s.map((f) => f.decision)).toEqual([
      expect.objectContaining({ action: 'retry', delayMs: 40 }),
      expect.objectContaining({ action: 'retry', delayMs: 40 }),
    ]);
    const d = failuresOf(failures, date);
    expect(d).toHaveLength(1);
    // An HTTP-date has whole seconds: "2 s from now" is 1–3 s away when read.
    expect(d[0]?.event.retryAfterMs).toBeGreaterThan(900);
    expect(d[0]?.event.retryAfterMs).toBeLessThanOrEqual(3000);
    expect(d[0]?.decision).toMatchObject({ action: 'retry', delayMs: 40 });
    expect(hits(seconds)).toBe(3);
    expect(hits(date)).toBe(2);
  }, 30_000);

  test('an uncapped Retry-After is waited out in full', async () => {
    const path = '/flaky/ra-wait/1?status=429&retry-after=1';
    const { engine, failures } = crawl('retry-after-wait', [path]);
    await engine.run();
    expect(failuresOf(failures, path).map((f) => f.decision)).toEqual([
      expect.objectContaining({ action: 'retry', delayMs: 1000 }),
    ]);
    const log = site.stats({ log: true }).log.filter((e) => e.url === path);
    expect(log).toHaveLength(2);
    // The retry did not come before the server said it may.
    expect(log[1]!.start - log[0]!.end).toBeGreaterThanOrEqual(990);
  }, 30_000);

  test('network, truncation and timeout failures: backoff curves from overrides, then the DLQ', async () => {
    const drop = '/drop/before-headers?e2e=backoff';
    const truncated = '/truncated?declared=4096&sent=100';
    const slow = '/delay/3000?e2e=backoff';
    const { engine, failures } = crawl('backoff', [drop, truncated, slow], {
      configure: (b) =>
        b.download({ headersTimeoutMs: 150 }).recovery({
          overrides: [
            { kind: 'network', max_retries: 3, backoff: 'linear', backoff_ms: 20, jitter: 0 },
            {
              kind: 'timeout',
              max_retries: 2,
              backoff: 'exponential',
              backoff_ms: 10,
              backoff_factor: 3,
              jitter: 0,
            },
          ],
          breakers: false,
        }),
    });
    const summary = await engine.run();
    expect(summary.reason).toBe('idle');
    for (const [path, code, delays] of [
      [drop, 'MOCRA_ERR_CONNECTION', [20, 40, 60]],
      [truncated, 'MOCRA_ERR_MALFORMED_RESPONSE', [20, 40, 60]],
      [slow, 'MOCRA_ERR_TIMEOUT', [10, 30]],
    ] as const) {
      const f = failuresOf(failures, path);
      expect(f.every((x) => x.event.code === code)).toBe(true);
      expect(f.slice(0, -1).map((x) => x.decision)).toEqual(
        delays.map((delayMs) => expect.objectContaining({ action: 'retry', delayMs })),
      );
      expect(f.at(-1)?.decision.action).toBe('dead-letter');
      expect(hits(path)).toBe(delays.length + 1);
    }
    const letters = await engine.deadLetters.list({ stage: 'download' });
    expect(letters.map((l) => [pathOf(l.url ?? ''), l.error.code, l.attempts, l.source]).sort()).toEqual(
      [
        [drop, 'MOCRA_ERR_CONNECTION', 4, 'policy'],
        [slow, 'MOCRA_ERR_TIMEOUT', 3, 'policy'],
        [truncated, 'MOCRA_ERR_MALFORMED_RESPONSE', 4, 'policy'],
      ].sort(),
    );
    expect(letters.every((l) => l.failedAt > 0 && l.topic === 'request')).toBe(true);
  }, 30_000);

  test('what waiting cannot fix is dead-lettered at once: a body over the cap', async () => {
    const huge = '/huge?bytes=300000&e2e=1';
    const { engine, failures } = crawl('permanent', [huge, '/status/200?e2e=ok'], {
      configure: (b) => b.download({ maxBodyBytes: 100_000 }),
    });
    await engine.run();
    expect(failuresOf(failures, huge).map((f) => [f.event.code, f.event.kind, f.decision.action])).toEqual([
      ['MOCRA_ERR_BODY_TOO_LARGE', 'body-too-large', 'dead-letter'],
    ]);
    expect(hits(huge)).toBe(1);
    expect(await engine.deadLetters.list({ kind: 'body-too-large' })).toHaveLength(1);
  });
});

describe('parse and store errors, DLQ replay and purge', () => {
  let backend: QueueBackend;
  afterAll(async () => {
    await backend?.close();
  });

  test('a parser bug and a failing store end in the DLQ; after the fix, replay re-parses without fetching again', async () => {
    backend = createMemoryQueueBackend({ namespace: `replay-${Date.now()}` });
    const broken = '/book/11';
    const badStore = '/book/12';
    const fine = '/book/13';
    let parserFixed = false;
    let storeFixed = false;
    const build = (seed: boolean) =>
      crawl('replay', [broken, badStore, fine], {
        parse(res) {
          if (!parserFixed && pathOf(res.request.url) === broken)
            throw new Error('selector .price not found');
        },
        sink(item) {
          if (!storeFixed && item.path === badStore) throw new Error('connection to the store refused');
        },
        configure: (b) =>
          b
            .queueBackend(backend)
            .engineOptions({ autoSeed: seed })
            .recovery({ overrides: [{ kind: 'store', max_retries: 2, backoff: 'fixed', backoff_ms: 5 }] }),
      });

    const first = build(true);
    await first.engine.run();
    expect(first.items.map((i) => i.path)).toEqual([fine]);
    const letters = await first.engine.deadLetters.list();
    expect(
      letters.map((l) => [pathOf(l.url ?? ''), l.stage, l.error.code, l.error.kind, l.attempts]).sort(),
    ).toEqual(
      [
        [badStore, 'parse', 'MOCRA_ERR_SINK_FAILED', 'store', 3],
        [broken, 'parse', 'MOCRA_ERR_PARSE_FAILED', 'parse', 1],
      ].sort(),
    );
    const parseLetter = letters.find((l) => l.error.code === 'MOCRA_ERR_PARSE_FAILED');
    expect(parseLetter?.error.message).toContain('selector .price not found');
    expect(parseLetter?.topic).toBe('response'); // the page is kept: a replay re-parses it
    expect(await first.engine.deadLetters.get(parseLetter?.id ?? '')).toEqual(parseLetter);
    const fetched = { broken: hits(broken), badStore: hits(badStore) };
    expect(fetched).toEqual({ broken: 1, badStore: 1 });

    // The fix is deployed; a new engine on the same queue backend replays everything.
    parserFixed = true;
    storeFixed = true;
    const second = build(false);
    expect(await second.engine.deadLetters.replay({ code: 'MOCRA_ERR_PARSE_FAILED' })).toBe(1);
    expect(await second.engine.deadLetters.replay()).toBe(1);
    expect(await second.engine.deadLetters.size()).toBe(0);
    // Its only work is what was replayed (no seeding).
    const secondRun = await second.engine.run();
    expect(secondRun.reason).toBe('idle');
    expect(second.items.map((i) => i.path).sort()).toEqual([badStore, broken].sort());
    // Replayed from the stored response: not fetched again.
    expect({ broken: hits(broken), badStore: hits(badStore) }).toEqual(fetched);
  }, 30_000);

  test('purge removes entries by id, by query and all', async () => {
    const paths = [
      '/drop/before-headers?purge=1',
      '/drop/before-headers?purge=2',
      '/huge?bytes=300000&purge=3',
    ];
    const { engine } = crawl('purge', paths, {
      configure: (b) =>
        b.download({ maxBodyBytes: 100_000 }).recovery({ overrides: [{ kind: 'network', max_retries: 0 }] }),
    });
    await engine.run();
    const all = await engine.deadLetters.list();
    expect(all).toHaveLength(3);
    expect(await engine.deadLetters.purge(all[0]?.id)).toBe(1);
    expect(await engine.deadLetters.purge({ code: 'MOCRA_ERR_BODY_TOO_LARGE' })).toBe(1);
    expect(await engine.deadLetters.purge()).toBe(1);
    expect(await engine.deadLetters.size()).toBe(0);
  });
});

describe('steering errors from user code', () => {
  test('NonRetryableError, RetryLaterError and SessionExpiredError thrown in parse', async () => {
    const permanent = '/status/200?steer=permanent';
    const later = '/status/200?steer=later';
    const session = '/status/200?steer=session';
    const attempts = new Map<string, number>();
    const { engine, items, failures } = crawl('steering', [permanent, later, session], {
      parse(res) {
        const path = pathOf(res.request.url);
        const n = (attempts.get(path) ?? 0) + 1;
        attempts.set(path, n);
        if (path === permanent) throw new NonRetryableError('not a product page');
        if (path === later && n === 1) throw new RetryLaterError('the shop is closed for a moment', 30);
        if (path === session && n === 1) throw new SessionExpiredError('the page says: please log in');
      },
      configure: (b) => b.recovery({ overrides: [{ kind: 'session-expired', backoff_ms: 5 }] }),
    });
    await engine.run();
    expect(items.map((i) => i.path).sort()).toEqual([later, session].sort());
    expect(failuresOf(failures, permanent).map((f) => [f.event.code, f.decision.action])).toEqual([
      ['MOCRA_ERR_NON_RETRYABLE', 'dead-letter'],
    ]);
    expect(failuresOf(failures, later).map((f) => f.decision)).toEqual([
      expect.objectContaining({ action: 'retry', delayMs: 30 }),
    ]);
    expect(failuresOf(failures, session).map((f) => [f.event.kind, f.decision.action])).toEqual([
      ['session-expired', 'retry'],
    ]);
    // A retry-later re-parses the stored page; an expired session fetches it again (after re-login).
    expect(hits(later)).toBe(1);
    expect(hits(session)).toBe(2);
  });

  test('CriticalError stops the engine cleanly; the rest stays queued', async () => {
    const paths = Array.from({ length: 30 }, (_, i) => `/status/200?critical=${i}`);
    const { engine, failures } = crawl('critical', paths, {
      parse(res) {
        if (pathOf(res.request.url) === paths[0]) throw new CriticalError('the site changed its layout');
      },
      configure: (b) => b.concurrency(1).stages({ parse: 1 }),
    });
    const summary = await engine.run();
    expect(summary.reason).toBe('critical');
    expect(failures.map((f) => [f.event.code, f.decision.action])).toEqual([['MOCRA_ERR_CRITICAL', 'stop']]);
    expect(await engine.deadLetters.list({ code: 'MOCRA_ERR_CRITICAL' })).toHaveLength(1);
  });
});

describe('session expiry found by parse', () => {
  test('SessionExpiredError from parse ends the login; the page is downloaded again after a re-login', async () => {
    const loginSite = await startFixtureSite({ login: { users: { alice: 'secret' } } });
    try {
      const pages = Array.from({ length: 5 }, (_, i) => `${loginSite.url}/quotes/account?i=${i}`);
      const failures: Failure[] = [];
      const users: { i: string; user: string }[] = [];
      const spider = defineSpider<{ i: string; user: string }>({
        name: 'account-pages',
        start(seeds) {
          for (const p of pages) seeds.get(p);
        },
        shouldLogin: true,
        async login(ctx) {
          const form = await ctx.fetch(`${loginSite.url}/quotes/login`);
          const token = form.$('input[name=csrf_token]').attr('value') ?? '';
          const res = await ctx.fetch(`${loginSite.url}/quotes/login`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({
              csrf_token: token,
              username: 'alice',
              password: 'secret',
            }).toString(),
          });
          if (res.status !== 200) throw new Error(`login answered ${res.status}`);
        },
        parse(res, cx) {
          const i = new URL(res.request.url).searchParams.get('i') ?? '';
          // The site answers a stale session with its login form (200, no status to go by):
          // only the page's content says the session is gone.
          if (res.$('input[name=csrf_token]').length > 0)
            throw new SessionExpiredError('the page shows the login form');
          cx.emit({ i, user: res.$('.account-username').text() });
          if (i === '1') loginSite.invalidateSessions();
        },
      });
      const summary = await Mocra.builder()
        .spider(spider, (item) => void users.push(item))
        .concurrency(1)
        .stages({ parse: 1 })
        .recovery({
          overrides: [{ kind: 'session-expired', backoff_ms: 5, max_retries: 5 }],
          breakers: false,
        })
        .onError((event, decision) => failures.push({ event, decision }))
        .handleSignals(false)
        .run();
      expect(summary.deadLettered).toBe(0);
      expect(users.map((u) => u.i).sort()).toEqual(['0', '1', '2', '3', '4']);
      expect(users.every((u) => u.user === 'alice')).toBe(true);
      expect(failures.length).toBeGreaterThan(0);
      expect(failures.every((f) => f.event.kind === 'session-expired' && f.decision.action === 'retry')).toBe(
        true,
      );
      // A re-login happened (more than one when a stale page was parsed after the re-login).
      const auth = loginSite.stats({ log: false }).auth;
      expect(auth.invalidations).toBe(1);
      expect(auth.logins).toBeGreaterThanOrEqual(2);
      expect(auth.logins).toBeLessThanOrEqual(1 + failures.length);
    } finally {
      await loginSite.close();
    }
  }, 30_000);
});

describe('thresholds', () => {
  test('a module that keeps failing is terminated: its remaining work is dead-lettered unfetched', async () => {
    const paths = Array.from({ length: 40 }, (_, i) => `/drop/before-headers?threshold=${i}`);
    const { engine, items } = crawl('doomed', paths, {
      configure: (b) =>
        b.concurrency(2).recovery({
          overrides: [{ kind: 'network', max_retries: 1, backoff: 'fixed', backoff_ms: 1 }],
          thresholds: { maxModuleErrors: 8, maxTaskErrors: 0, retryLaterRatio: 0 },
          breakers: false,
        }),
    });
    const summary = await engine.run();
    expect(summary.reason).toBe('idle');
    expect(items).toEqual([]);
    const fetched = paths.reduce((n, p) => n + hits(p), 0);
    expect(fetched).toBeLessThan(20); // 40 requests × 2 attempts without the limit
    const stats = engine.policyStats();
    expect(stats.terminatedModules).toEqual(['doomed']);
    expect(stats.decisions['terminate-module']).toBeGreaterThanOrEqual(1);
    expect(stats.decisions.continue).toBe(7);
    const terminated = await engine.deadLetters.list({ code: 'MOCRA_ERR_MODULE_TERMINATED', limit: 100 });
    expect(terminated.length).toBeGreaterThan(20);
    expect(await engine.deadLetters.size()).toBe(40);
  });

  test('a request that fails too often is skipped', async () => {
    const path = '/drop/before-headers?skip=1';
    const { engine, failures } = crawl('skipper', [path], {
      configure: (b) =>
        b.recovery({
          overrides: [{ kind: 'network', max_retries: 20, backoff: 'fixed', backoff_ms: 1 }],
          thresholds: { maxRequestErrors: 3 },
          breakers: false,
        }),
    });
    await engine.run();
    expect(failures.map((f) => f.decision.action)).toEqual(['retry', 'retry', 'dead-letter']);
    expect(failures.at(-1)?.decision).toMatchObject({
      reason: expect.stringMatching(/^MOCRA_ERR_REQUEST_SKIPPED/),
    });
    expect(hits(path)).toBe(3);
    expect(engine.policyStats().decisions.skip).toBe(1);
  });
});

describe('circuit breakers', () => {
  test('a dead host is cut off and given up — every URL after a try of its own; a healthy host finishes', async () => {
    const dead = Array.from({ length: 20 }, (_, i) => `${site.hostUrl(1)}/drop/before-headers?breaker=${i}`);
    const healthy = Array.from({ length: 20 }, (_, i) => `/status/200?breaker=${i}`);
    const transitions: BreakerTransition[] = [];
    const listener = (m: unknown) => transitions.push(m as BreakerTransition);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.breaker, listener);
    try {
      const { engine, items } = crawl('breakers', [...dead, ...healthy], {
        configure: (b) =>
          b.concurrency(2).recovery({
            overrides: [{ kind: 'network', max_retries: 20, backoff: 'fixed', backoff_ms: 5, jitter: 0 }],
            thresholds: false,
            breakers: { failureThreshold: 3, openMs: 50, maxOpens: 2 },
          }),
      });
      await engine.run();
      expect(items.map((i) => i.path).sort()).toEqual(healthy.sort());
      const deadHost = new URL(site.hostUrl(1)).host;
      // Each dead URL had its own try — none was given up unseen — but far fewer than 20 × 21.
      for (const url of dead) expect(hits(pathOf(url)), url).toBeGreaterThanOrEqual(1);
      expect(site.hostStats(1).requests).toBeLessThan(20 * 4);
      const open = engine.breakers({ scope: 'host' });
      expect(open).toEqual([expect.objectContaining({ key: deadHost, state: 'open', successes: 0 })]);
      expect(open[0]?.openCount).toBeGreaterThanOrEqual(2);
      const given = await engine.deadLetters.list({ limit: 100 });
      expect(given.map((g) => g.url).sort()).toEqual([...dead].sort());
      expect(given.some((g) => g.error.code === 'MOCRA_ERR_CIRCUIT_OPEN')).toBe(true);
      const hostPath = transitions
        .filter((t) => t.scope === 'host' && t.key === deadHost)
        .map((t) => `${t.from}>${t.to}`);
      expect(hostPath.slice(0, 3)).toEqual(['closed>open', 'open>half-open', 'half-open>open']);
    } finally {
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.breaker, listener);
    }
  }, 30_000);

  test("a host's breaker opened by failing URLs is probed with a healthy one: no healthy URL waits for good or is given up", async () => {
    // Nothing succeeded yet when twelve URLs of the host fail in a row: that looks like the
    // host, and the breaker opens. Its probes then go to URLs that were not failing.
    const failing = Array.from({ length: 12 }, (_, i) => `/drop/before-headers?opened=${i}`);
    const healthy = Array.from({ length: 20 }, (_, i) => `/status/200?opened=${i}`);
    const transitions: BreakerTransition[] = [];
    const listener = (m: unknown) => transitions.push(m as BreakerTransition);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.breaker, listener);
    try {
      const { engine, items } = crawl('opened', [...failing, ...healthy], {
        configure: (b) =>
          b
            .concurrency(1)
            .politeness({ maxConcurrency: 1 })
            .recovery({
              overrides: [{ kind: 'network', max_retries: 3, backoff: 'fixed', backoff_ms: 20, jitter: 0 }],
              thresholds: false,
              breakers: { openMs: 200, probeWaitMs: 100 },
            }),
      });
      await engine.run();
      expect(items.map((i) => i.path).sort()).toEqual([...healthy].sort());
      const host = new URL(site.url).host;
      const path = transitions
        .filter((t) => t.scope === 'host' && t.key === host)
        .map((t) => `${t.from}>${t.to}`);
      expect(path[0]).toBe('closed>open');
      expect(path).toContain('half-open>closed');
      const given = await engine.deadLetters.list({ limit: 100 });
      expect(given.map((g) => pathOf(g.url ?? '')).sort()).toEqual([...failing].sort());
      expect(given.every((g) => g.error.code === 'MOCRA_ERR_CONNECTION')).toBe(true);
    } finally {
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.breaker, listener);
    }
  }, 30_000);

  test('a healthy crawl next to 60 failing URLs of its host finishes; none of them opens the breaker', async () => {
    // One graph seed, then 60 URLs of the same host that fail on their own: a 503, a dropped
    // connection, a redirect loop — each URL's own trouble, with good pages all around.
    const failing: string[] = [];
    for (let i = 0; i < 20; i++) {
      failing.push(`/status/503?own=${i}`, `/drop/before-headers?own=${i}`, `/redirect-loop/2/0?own=${i}`);
    }
    const graph = { pages: 300, fanout: 4, bytes: 512 };
    const transitions: BreakerTransition[] = [];
    const backoffs: unknown[] = [];
    const onBreaker = (m: unknown) => transitions.push(m as BreakerTransition);
    const onBackoff = (m: unknown) => backoffs.push(m);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.breaker, onBreaker);
    diagnostics_channel.subscribe('mocra:frontier:backoff', onBackoff);
    try {
      const { engine, items } = crawl('healthy-next-to-failing', [site.graphUrl(graph), ...failing], {
        parse(res, cx) {
          if (!res.request.url.includes('/graph/')) return;
          for (const a of res.$('a').toArray()) {
            const href = res.$(a).attr('href');
            if (href !== undefined) cx.follow(href);
          }
        },
        configure: (b) =>
          b
            .concurrency(8)
            .politeness({ maxConcurrency: 8 })
            .recovery({
              overrides: [
                {
                  kind: ['network', 'http-503'],
                  max_retries: 3,
                  backoff: 'fixed',
                  backoff_ms: 100,
                  jitter: 0,
                },
              ],
            }),
      });
      const summary = await engine.run();
      expect(summary.reason).toBe('idle');
      const pages = items.filter((i) => i.path.startsWith('/graph/'));
      expect(new Set(pages.map((p) => p.path)).size).toBe(graph.pages);
      const host = new URL(site.url).host;
      expect(transitions.filter((t) => t.key === host)).toEqual([]);
      expect(backoffs).toEqual([]);
      // The failing URLs were each given up on their own terms (the 503s reached parse after their retries).
      const given = await engine.deadLetters.list({ limit: 100 });
      expect(given.map((g) => g.error.code).sort()).toEqual([
        ...Array<string>(20).fill('MOCRA_ERR_CONNECTION'),
        ...Array<string>(20).fill('MOCRA_ERR_REDIRECT_LOOP'),
      ]);
    } finally {
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.breaker, onBreaker);
      diagnostics_channel.unsubscribe('mocra:frontier:backoff', onBackoff);
    }
  }, 60_000);

  test('a host that recovers: a failed probe reopens, a successful one closes the breaker', async () => {
    const paths = Array.from({ length: 10 }, (_, i) => `/flaky/breaker-recovers/4?q=${i}&status=500`);
    const transitions: BreakerTransition[] = [];
    const listener = (m: unknown) => transitions.push(m as BreakerTransition);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.breaker, listener);
    try {
      const { engine, items } = crawl('recovers', paths, {
        configure: (b) =>
          b.concurrency(1).recovery({
            overrides: [{ kind: 'http-5xx', max_retries: 10, backoff: 'fixed', backoff_ms: 5, jitter: 0 }],
            breakers: { failureThreshold: 3, openMs: 30 },
          }),
      });
      await engine.run();
      expect(items).toHaveLength(10);
      const host = new URL(site.url).host;
      const path = transitions
        .filter((t) => t.scope === 'host' && t.key === host)
        .map((t) => `${t.from}>${t.to}`);
      // 3 failures open it; the first probe is the 4th failure (reopen), the second probe succeeds.
      expect(path).toEqual([
        'closed>open',
        'open>half-open',
        'half-open>open',
        'open>half-open',
        'half-open>closed',
      ]);
      expect(engine.breakers({ scope: 'host' })).toEqual([
        expect.objectContaining({ key: host, state: 'closed' }),
      ]);
    } finally {
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.breaker, listener);
    }
  }, 30_000);
});

describe('watchdog', () => {
  test('a parse that never returns is aborted at its deadline and retried; a stall is reported meanwhile', async () => {
    const stuck = '/status/200?watchdog=stuck';
    const reports: StallReport[] = [];
    const listener = (m: unknown) => reports.push(m as StallReport);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.stall, listener);
    let calls = 0;
    let aborted: unknown;
    try {
      const { engine, items, failures } = crawl('watchdog', [stuck], {
        async parse(_res, cx) {
          if (++calls === 1) {
            // Hangs, and ignores nothing: it sees the abort but never settles.
            cx.signal.addEventListener('abort', () => {
              aborted = cx.signal.reason;
            });
            await new Promise<never>(() => {});
          }
        },
        configure: (b) => b.watchdog({ parse: 600 }).engineOptions({ stallMs: 200 }),
      });
      const summary = await engine.run();
      expect(summary.reason).toBe('idle');
      expect(items.map((i) => i.path)).toEqual([stuck]);
      expect(failures.map((f) => [f.event.code, f.event.kind, f.decision.action])).toEqual([
        ['MOCRA_ERR_HANDLER_TIMEOUT', 'timeout', 'retry'],
      ]);
      expect((aborted as { code?: string } | undefined)?.code).toBe('MOCRA_ERR_HANDLER_TIMEOUT');
      expect(engine.policyStats().watchdogTimeouts).toEqual({ parse: 1 });
      expect(engine.policyStats().stalls).toBeGreaterThanOrEqual(1);
      expect(hits(stuck)).toBe(1);
    } finally {
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.stall, listener);
    }
    expect(reports.length).toBeGreaterThanOrEqual(1);
    expect(reports[0]).toMatchObject({ pending: 1 });
  }, 30_000);
});
