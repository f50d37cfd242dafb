import { CSRF_COOKIE, type FixtureSite, SESSION_COOKIE, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { createHttpDownloader, type HttpDownloader } from '../downloader/http-downloader.js';
import { AbortedError, LoginFailedError, NonRetryableError, SessionExpiredError } from '../errors.js';
import { Request } from '../model/request.js';
import type { Response } from '../model/response.js';
import { downloadWithSession } from './fetch.js';
import { checkSession, ensureLoggedIn, isSessionGone, type LoginHook } from './login.js';
import { createSessionStore, Session } from './session.js';

let site: FixtureSite;
let downloader: HttpDownloader;
const signal = new AbortController().signal;
const download = (request: Request, s: AbortSignal) => downloader.download(request, s);

beforeAll(async () => {
  site = await startFixtureSite({ login: { users: { alice: 'secret', bob: 'hunter2' } } });
  downloader = createHttpDownloader();
});
afterAll(async () => {
  await downloader.close();
  await site.close();
});
beforeEach(() => site.resetStats());

const get = (session: Session, path: string) =>
  downloadWithSession(download, session, new Request(`${site.url}${path}`), signal);

/** Logs in through the CSRF-protected form the way a user would write it. */
function formLogin(username: string, password: string): LoginHook {
  return async (ctx) => {
    const form = await ctx.fetch(`${site.url}/quotes/login`);
    const token = form.$('input[name=csrf_token]').attr('value');
    if (token === undefined) throw new Error('no CSRF token on the login page');
    const body = new URLSearchParams({ csrf_token: token, username, password, next: '/api/me' }).toString();
    const res = await ctx.fetch(`${site.url}/quotes/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    if (res.status !== 200) throw new Error(`login answered ${res.status}`);
    return { data: { user: res.json<{ username: string }>().username } };
  };
}

describe('Session cookies and headers', () => {
  test('cookies from responses are kept, scoped by path, and sent back', async () => {
    const session = new Session('a', 'p');
    const page = await get(session, '/quotes/login');
    expect(page.status).toBe(200);
    // fixture_csrf is set with Path=/quotes: sent under /quotes, not elsewhere
    expect(await session.cookieHeader(`${site.url}/quotes/login`)).toMatch(new RegExp(`^${CSRF_COOKIE}=`));
    expect(await session.cookieHeader(`${site.url}/cookies`)).toBe('');
    await get(session, '/cookies/set?flavour=oat');
    const cookies = (await get(session, '/cookies')).json<{ cookies: Record<string, string> }>();
    expect(cookies.cookies).toEqual({ flavour: 'oat' });
  });

  test('a cookie set on a redirect hop is kept (the downloader would drop it) and every hop is listed', async () => {
    const session = new Session('a', 'p');
    const res = await get(session, '/cookies/set?k=v');
    expect(res.url).toBe(`${site.url}/cookies`);
    expect(res.redirects).toEqual([
      { url: `${site.url}/cookies/set?k=v`, status: 302, location: `${site.url}/cookies` },
    ]);
    expect(res.json<{ cookies: Record<string, string> }>().cookies).toEqual({ k: 'v' });
    expect(res.request.url).toBe(`${site.url}/cookies/set?k=v`);
    expect(res.request.headers.cookie).toBeUndefined();
  });

  test('expiry is honoured: a deleting Set-Cookie removes the cookie, and Max-Age counts from when it was set', async () => {
    const session = new Session('a', 'p');
    await get(session, '/cookies/set?x=1&y=2');
    await get(session, '/cookies/delete?x');
    expect(await session.cookieHeader(`${site.url}/cookies`)).toBe('y=2');

    // A clock 10 s behind: a Max-Age=5 cookie set "then" is already expired now.
    const lagging = new Session('a', 'p', () => Date.now() - 10_000);
    const request = new Request(`${site.url}/echo`);
    const fake = async (r: Request): Promise<Response> => {
      const res = await downloader.download(r, signal);
      return Object.assign(Object.create(Object.getPrototypeOf(res) as object) as Response, res, {
        headers: {
          ...res.headers,
          'set-cookie': ['short=1; Max-Age=5; Path=/', 'long=1; Max-Age=60; Path=/'],
        },
      });
    };
    await downloadWithSession(fake, lagging, request, signal);
    expect(await lagging.cookieHeader(`${site.url}/echo`)).toBe('long=1');
  });

  test("a request's own Cookie header wins for the names it sets; sticky headers fill in, never override", async () => {
    const session = new Session('a', 'p');
    await get(session, '/cookies/set?a=jar&b=jar');
    session.setHeader('X-Sticky', 'session');
    session.setHeader('accept-language', 'de');
    const request = new Request(`${site.url}/echo`, {
      headers: { Cookie: 'a=mine', 'Accept-Language': 'fr' },
    });
    const echo = (await downloadWithSession(download, session, request, signal)).json<{
      headers: Record<string, string>;
    }>();
    expect(echo.headers.cookie).toBe('a=mine; b=jar');
    expect(echo.headers['x-sticky']).toBe('session');
    expect(echo.headers['accept-language']).toBe('fr');
  });

  test('sticky response headers are written back and sent with later requests', async () => {
    const session = new Session('a', 'p');
    await downloadWithSession(download, session, new Request(`${site.url}/flaky/sticky/0`), signal, {
      stickyHeaders: ['X-Fixture-Attempt'],
    });
    expect(session.headers).toEqual({ 'x-fixture-attempt': '1' });
    const echo = (await get(session, '/echo')).json<{ headers: Record<string, string> }>();
    expect(echo.headers['x-fixture-attempt']).toBe('1');
  });

  test('redirect limits and loops are errors, as in the downloader', async () => {
    const session = new Session('a', 'p');
    const limited = new Request(`${site.url}/cookies/set?k=v`, { maxRedirects: 0 });
    expect((await downloadWithSession(download, session, limited, signal)).status).toBe(302);
    const loop = new Request(`${site.url}/redirect-loop/3/0`);
    await expect(downloadWithSession(download, session, loop, signal)).rejects.toMatchObject({
      code: 'MOCRA_ERR_REDIRECT_LOOP',
    });
    const long = new Request(`${site.url}/redirect/5`);
    await expect(
      downloadWithSession(download, session, long, signal, { maxRedirects: 2 }),
    ).rejects.toMatchObject({
      code: 'MOCRA_ERR_TOO_MANY_REDIRECTS',
    });
    expect((await downloadWithSession(download, session, long, signal)).redirects).toHaveLength(5);
  });

  test('SessionStore: one session per account × platform', () => {
    const store = createSessionStore();
    expect(store.get('alice', 'shop')).toBe(store.get('alice', 'shop'));
    expect(store.get('alice', 'shop')).not.toBe(store.get('alice', 'blog'));
    expect(store.size).toBe(2);
    expect(() => store.get('', 'shop')).toThrowError(/non-empty account and platform/);
  });
});

describe('login', () => {
  test('login with a CSRF token, then the protected API answers', async () => {
    const session = new Session('alice', 'quotes');
    await ensureLoggedIn(session, { module: 'm', login: formLogin('alice', 'secret'), download, signal });
    expect(session.loggedIn).toBe(true);
    expect(session.data).toEqual({ user: 'alice' });
    expect(await session.cookieHeader(`${site.url}/api/me`)).toMatch(new RegExp(`${SESSION_COOKIE}=`));
    expect((await get(session, '/api/me')).json()).toEqual({ username: 'alice' });
    expect(site.stats({ log: false }).auth).toMatchObject({ logins: 1, csrfFailures: 0 });
  });

  test('concurrent callers share one login (single flight)', async () => {
    const session = new Session('alice', 'quotes');
    const login = formLogin('alice', 'secret');
    await Promise.all(
      Array.from({ length: 8 }, () => ensureLoggedIn(session, { module: 'm', login, download, signal })),
    );
    expect(site.stats({ log: false }).auth.logins).toBe(1);
  });

  test('after the site invalidates sessions: 401 → invalidate once → one re-login → works again', async () => {
    const session = new Session('alice', 'quotes');
    const login = formLogin('alice', 'secret');
    await ensureLoggedIn(session, { module: 'm', login, download, signal });
    site.invalidateSessions();
    const generation = session.generation;
    const [r1, r2] = await Promise.all([get(session, '/api/me'), get(session, '/api/me')]);
    expect([r1.status, r2.status]).toEqual([401, 401]);
    const e1 = checkSession(session, r1, generation, { statuses: [401] });
    const e2 = checkSession(session, r2, generation, { statuses: [401] });
    expect(e1).toBeInstanceOf(SessionExpiredError);
    expect(e2).toBeInstanceOf(SessionExpiredError);
    expect(session.generation).toBe(generation + 1); // the second 401 did not invalidate again
    expect(session.loggedIn).toBe(false);
    await Promise.all([
      ensureLoggedIn(session, { module: 'm', login, download, signal }),
      ensureLoggedIn(session, { module: 'm', login, download, signal }),
    ]);
    expect((await get(session, '/api/me')).status).toBe(200);
    expect(site.stats({ log: false }).auth.logins).toBe(2);
    expect(checkSession(session, r1, generation)).toBeInstanceOf(SessionExpiredError);
    expect(session.loggedIn).toBe(true); // a stale response does not end the new login
  });

  test('session gone by predicate: a protected page redirecting to the login form', async () => {
    const session = new Session('bob', 'quotes');
    const res = await get(session, '/quotes/account');
    const toLogin = (r: Response) => new URL(r.url).pathname === '/quotes/login';
    expect(isSessionGone(res, { statuses: [401], predicate: toLogin })).toBe(true);
    expect(isSessionGone(res)).toBe(false);
  });

  test('a login that keeps failing stops after maxAttempts and stays failed until invalidated', async () => {
    const session = new Session('alice', 'quotes');
    const options = {
      module: 'm',
      login: formLogin('alice', 'wrong'),
      download,
      signal,
      maxAttempts: 3,
      retryDelayMs: 0,
    };
    const error = await ensureLoggedIn(session, options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LoginFailedError);
    expect(error).toMatchObject({
      code: 'MOCRA_ERR_LOGIN_FAILED',
      account: 'alice',
      platform: 'quotes',
      attempts: 3,
    });
    expect((error as Error).message).toContain('login answered 401');
    await expect(ensureLoggedIn(session, options)).rejects.toBe(error);
    expect(site.stats({ log: false }).auth.credentialFailures).toBe(3);
    session.invalidate();
    await expect(
      ensureLoggedIn(session, { ...options, login: formLogin('alice', 'secret') }),
    ).resolves.toBeUndefined();
  });

  test('a login that throws NonRetryableError is not tried again', async () => {
    const session = new Session('alice', 'quotes');
    let calls = 0;
    const error = await ensureLoggedIn(session, {
      module: 'm',
      download,
      signal,
      retryDelayMs: 0,
      login: () => {
        calls++;
        throw new NonRetryableError('account locked');
      },
    }).catch((e: unknown) => e);
    expect(calls).toBe(1);
    expect(error).toMatchObject({ code: 'MOCRA_ERR_LOGIN_FAILED', attempts: 1 });
  });

  test('a login expires after expiresInMs (on the session clock)', async () => {
    let now = 1_000_000;
    const session = new Session('alice', 'quotes', () => now);
    let logins = 0;
    const login: LoginHook = () => {
      logins++;
      return { expiresInMs: 60_000, headers: { authorization: 'Bearer t' } };
    };
    await ensureLoggedIn(session, { module: 'm', login, download, signal });
    expect(session.login).toMatchObject({
      loggedInAt: 1_000_000,
      expiresAt: 1_060_000,
      headers: { authorization: 'Bearer t' },
    });
    now += 59_999;
    await ensureLoggedIn(session, { module: 'm', login, download, signal });
    expect(logins).toBe(1);
    now += 1;
    expect(session.loggedIn).toBe(false);
    await ensureLoggedIn(session, { module: 'm', login, download, signal });
    expect(logins).toBe(2);
  });

  test('an aborted signal ends waiting for a login', async () => {
    const session = new Session('alice', 'quotes');
    let release!: () => void;
    const slow: LoginHook = () => new Promise<void>((resolve) => (release = resolve));
    const first = ensureLoggedIn(session, { module: 'm', login: slow, download, signal });
    const controller = new AbortController();
    const waiting = ensureLoggedIn(session, {
      module: 'm',
      login: slow,
      download,
      signal: controller.signal,
    });
    controller.abort();
    await expect(waiting).rejects.toBeInstanceOf(AbortedError);
    release();
    await first;
    expect(session.loggedIn).toBe(true);
  });
});
