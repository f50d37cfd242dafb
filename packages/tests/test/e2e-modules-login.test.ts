// Sessions and login end to end on the fixture quotes site: a module (and a spider) with
// shouldLogin logs in through the CSRF-protected form before its first generate, its requests
// carry the session cookie, and after the site invalidates every session a 401 makes it log in
// again — once, however many requests saw the 401. A login that cannot succeed stops after its
// bounded number of attempts.
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import {
  defineModule,
  defineSpider,
  type ErrorEvent,
  type LoginHook,
  Mocra,
  type ModuleNode,
  Request,
} from 'mocra';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ login: { users: { alice: 'secret', bob: 'hunter2' } } });
});
afterAll(async () => {
  await site?.close();
});
beforeEach(() => site.resetStats());

/** The login a user writes for the quotes site: GET the form, read the CSRF token, POST it. */
function formLogin(username: string, password: string): LoginHook {
  return async (ctx) => {
    const form = await ctx.fetch(`${site.url}/quotes/login`);
    const token = form.$('input[name=csrf_token]').attr('value');
    if (!token) throw new Error('no CSRF token');
    const res = await ctx.fetch(`${site.url}/quotes/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf_token: token, username, password, next: '/api/me' }).toString(),
    });
    if (res.status !== 200) throw new Error(`login answered ${res.status}`);
    return { data: { user: res.json<{ username: string }>().username } };
  };
}

describe('login', () => {
  test('logs in before the first generate; re-logs in once after the site invalidates the sessions', async () => {
    const items: { n: number; user: string }[] = [];
    const generatedWith: unknown[] = [];
    const errors: ErrorEvent[] = [];
    const me: ModuleNode<{ n: number; user: string }> = {
      id: 'me',
      generate(ctx) {
        generatedWith.push(ctx.login?.data);
        return Array.from(
          { length: 8 },
          (_, i) => new Request(`${site.url}/api/me?n=${i + 1}`, { meta: { n: i + 1 } }),
        );
      },
      parse(res, cx) {
        const n = res.request.meta.n as number;
        cx.emit({ n, user: res.json<{ username: string }>().username });
        // Halfway through, the site ends every session: the rest answer 401 until a new login.
        if (n === 3) site.invalidateSessions();
      },
    };
    const summary = await Mocra.builder()
      .module(
        defineModule({
          name: 'account',
          nodes: [me],
          shouldLogin: true,
          login: formLogin('alice', 'secret'),
        }),
        (item) => void items.push(item),
      )
      .concurrency(1)
      .stages({ parse: 1 })
      .retry({ baseDelayMs: 1, maxDelayMs: 5, jitter: false })
      .onError((event) => void errors.push(event))
      .handleSignals(false)
      .run();
    expect(generatedWith).toEqual([{ user: 'alice' }]);
    expect(items.map((i) => i.n).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(items.every((i) => i.user === 'alice')).toBe(true);
    const auth = site.stats({ log: false }).auth;
    expect(auth.logins).toBe(2);
    expect(auth.csrfFailures).toBe(0);
    expect(auth.invalidations).toBe(1);
    // Every 401 was a SessionExpiredError taking the retry path; nothing was given up on.
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.every((e) => e.code === 'MOCRA_ERR_SESSION_EXPIRED' && e.retryable)).toBe(true);
    expect(summary.deadLettered).toBe(0);
  });

  test('a spider is the one-node case: shouldLogin and login work the same', async () => {
    const users: string[] = [];
    const spider = defineSpider<string>({
      name: 'me-spider',
      startUrls: [`${site.url}/api/me`],
      shouldLogin: true,
      login: formLogin('bob', 'hunter2'),
      parse(res, cx) {
        cx.emit(res.json<{ username: string }>().username);
      },
    });
    await Mocra.builder()
      .spider(spider, (u) => void users.push(u))
      .handleSignals(false)
      .run();
    expect(users).toEqual(['bob']);
    expect(site.stats({ log: false }).auth.logins).toBe(1);
  });

  test('a session-gone predicate: a protected page that redirects to the login form', async () => {
    const pages: string[] = [];
    const spider = defineSpider<string>({
      name: 'account-page',
      start(seeds) {
        for (let i = 0; i < 3; i++) seeds.get(`${site.url}/quotes/account?i=${i}`);
      },
      shouldLogin: true,
      login: formLogin('alice', 'secret'),
      sessionGone: (res) => new URL(res.url).pathname === '/quotes/login',
      config: { login_statuses: [] },
      parse(res, cx) {
        cx.emit(res.$('h1').first().text());
        if (res.url.endsWith('i=0')) site.invalidateSessions('alice');
      },
    });
    await Mocra.builder()
      .spider(spider, (p) => void pages.push(p))
      .concurrency(1)
      .stages({ parse: 1 })
      .retry({ baseDelayMs: 1, maxDelayMs: 5, jitter: false })
      .handleSignals(false)
      .run();
    expect(pages).toHaveLength(3);
    expect(pages.every((p) => !/login/i.test(p))).toBe(true);
    expect(site.stats({ log: false }).auth.logins).toBe(2);
  });

  test('a login that cannot succeed stops after login_max_attempts; the work is dead-lettered, reported', async () => {
    const errors: ErrorEvent[] = [];
    const summary = await Mocra.builder()
      .module(
        defineModule({
          name: 'wrong-password',
          nodes: [{ id: 'n', generate: () => [new Request(`${site.url}/api/me`)], parse() {} }],
          shouldLogin: true,
          login: formLogin('alice', 'wrong'),
          config: { login_max_attempts: 2 },
        }),
        () => {},
      )
      .onError((event) => void errors.push(event))
      .handleSignals(false)
      .run();
    const auth = site.stats({ log: false }).auth;
    expect(auth.credentialFailures).toBe(2); // bounded, and not repeated for later work
    expect(auth.logins).toBe(0);
    expect(errors.map((e) => e.code)).toContain('MOCRA_ERR_LOGIN_FAILED');
    expect(errors.find((e) => e.code === 'MOCRA_ERR_LOGIN_FAILED')!.message).toBe(
      'login of default@default failed after 2 attempts: login answered 401',
    );
    expect(summary.deadLettered).toBe(1);
    expect(summary.items).toBe(0);
  });

  test('sessions are per account × platform: two accounts, two logins, each sees its own user', async () => {
    const items: string[] = [];
    const mod = defineModule<string>({
      name: 'multi',
      nodes: [
        {
          id: 'n',
          generate: (ctx) => [new Request(`${site.url}/api/me?as=${ctx.account}`)],
          parse: (res, cx) => cx.emit(`${cx.account}:${res.json<{ username: string }>().username}`),
        },
      ],
      shouldLogin: true,
      login: (ctx) => formLogin(ctx.account, ctx.account === 'alice' ? 'secret' : 'hunter2')(ctx),
    });
    const engine = Mocra.builder()
      .module(mod, (i) => void items.push(i))
      .engineOptions({ autoSeed: false })
      .handleSignals(false)
      .build();
    const run = engine.run();
    await engine.submit({ module: 'multi', account: 'alice', platform: 'quotes' });
    await engine.submit({ module: 'multi', account: 'bob', platform: 'quotes' });
    await run;
    expect(items.sort()).toEqual(['alice:alice', 'bob:bob']);
    expect(site.stats({ log: false }).auth.logins).toBe(2);
    expect(engine.sessions.size).toBe(2);
  });
});
