import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { crawl, type Fetched, get, texts } from '../__fixtures__/http.js';
import { expectedCounts } from '../expected.js';
import { type FixtureSite, startFixtureSite } from '../site/start.js';
import { quoteAuthors, quoteList, quoteTags } from './data.js';
import type { ApiQuotesPage } from './routes.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

/** `name=value` pairs of every Set-Cookie header. */
function setCookies(f: Fetched): Map<string, string> {
  const raw = f.headers['set-cookie'];
  const list = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  return new Map(list.map((c) => c.split(';')[0]!.split('=') as [string, string]));
}

async function loginForm(): Promise<{ token: string; csrfCookie: string }> {
  const f = await get(`${site.url}/quotes/login`);
  expect(f.status).toBe(200);
  const token = f.text.match(/name="csrf_token" value="([^"]+)"/)?.[1];
  const csrfCookie = setCookies(f).get('fixture_csrf');
  expect(token).toBeDefined();
  expect(csrfCookie).toBe(token);
  return { token: token!, csrfCookie: csrfCookie! };
}

async function postLogin(fields: Record<string, string>, cookie?: string): Promise<Fetched> {
  return get(`${site.url}/quotes/login`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(cookie === undefined ? {} : { cookie }),
    },
    body: new URLSearchParams(fields).toString(),
  });
}

async function login(username = 'user', password = 'password'): Promise<string> {
  const { token, csrfCookie } = await loginForm();
  const f = await postLogin({ username, password, csrf_token: token }, `fixture_csrf=${csrfCookie}`);
  expect(f.status).toBe(302);
  expect(f.headers.location).toBe('/quotes/account');
  const session = setCookies(f).get('fixture_session');
  expect(session).toBeTruthy();
  return `fixture_session=${session}`;
}

describe('quotes site', () => {
  test('100 quotes over 10 pages of 10, by 20 authors of 5 quotes each, with 12 tags', async () => {
    const quotes = quoteList();
    expect(quotes).toHaveLength(100);
    const authors = quoteAuthors();
    expect(authors).toHaveLength(20);
    expect(new Set(authors.map((a) => a.slug)).size).toBe(20);
    expect(authors.every((a) => a.quotes === 5)).toBe(true);
    const tags = quoteTags();
    expect(tags).toHaveLength(12);
    expect(tags.reduce((n, t) => n + t.quotes, 0)).toBe(quotes.reduce((n, q) => n + q.tags.length, 0));
    const seen: number[] = [];
    for (let p = 1; p <= 10; p++) {
      const f = await get(`${site.url}/quotes/page/${p}`);
      expect(f.status).toBe(200);
      const ids = [...f.text.matchAll(/<div class="quote" data-id="(\d+)">/g)].map((m) => Number(m[1]));
      seen.push(...ids);
      const texts_ = texts(f.text, 'span', 'text');
      expect(texts_).toEqual(quotes.slice((p - 1) * 10, p * 10).map((q) => `“${q.text}”`));
      expect(texts(f.text, 'small', 'author')).toEqual(
        quotes.slice((p - 1) * 10, p * 10).map((q) => q.author),
      );
      expect(f.text.includes('<li class="next">')).toBe(p < 10);
    }
    expect(seen).toEqual(quotes.map((q) => q.id));
    expect((await get(`${site.url}/quotes/page/11`)).status).toBe(404);
  });

  test('tag pages list exactly the quotes with that tag; author pages show the author', async () => {
    for (const tag of quoteTags().slice(0, 3)) {
      const ids: number[] = [];
      for (let p = 1; p <= tag.pages; p++) {
        const f = await get(`${site.url}${tag.url.replace('/page/1', `/page/${p}`)}`);
        expect(f.status).toBe(200);
        ids.push(...[...f.text.matchAll(/<div class="quote" data-id="(\d+)">/g)].map((m) => Number(m[1])));
      }
      expect(ids).toEqual(
        quoteList()
          .filter((q) => q.tags.includes(tag.name))
          .map((q) => q.id),
      );
      expect((await get(`${site.url}/quotes/tag/${tag.name}/page/${tag.pages + 1}`)).status).toBe(404);
    }
    const author = quoteAuthors()[4]!;
    const f = await get(`${site.url}${author.url}`);
    expect(texts(f.text, 'h1', 'author-title')).toEqual([author.name]);
    expect(texts(f.text, 'span', 'author-born-date')).toEqual([author.born]);
    expect(texts(f.text, 'span', 'author-born-location')).toEqual([author.bornIn]);
    expect((await get(`${site.url}/quotes/author/nobody-here`)).status).toBe(404);
    expect((await get(`${site.url}/quotes/tag/not-a-tag/page/1`)).status).toBe(404);
  });

  test('a crawl from /quotes/page/1 fetches exactly expectedCounts().quotes.pages pages', async () => {
    const pages = await crawl(site.url, '/quotes/page/1', 1000);
    expect(pages.size).toBe(expectedCounts().quotes.pages);
    expect(pages.has('/quotes/login')).toBe(true);
  });

  test('infinite-scroll API: pages of 10 until has_next is false, then empty pages', async () => {
    const all: number[] = [];
    let page = 1;
    for (;;) {
      const f = await get(`${site.url}/api/quotes?page=${page}`);
      expect(f.headers['content-type']).toBe('application/json; charset=utf-8');
      const body = JSON.parse(f.text) as ApiQuotesPage;
      expect(body.page).toBe(page);
      expect(body.per_page).toBe(10);
      all.push(...body.quotes.map((q) => q.id));
      if (!body.has_next) break;
      page += 1;
      expect(page).toBeLessThan(20);
    }
    expect(page).toBe(expectedCounts().quotes.apiPages);
    expect(all).toEqual(quoteList().map((q) => q.id));
    const past = JSON.parse((await get(`${site.url}/api/quotes?page=11`)).text) as ApiQuotesPage;
    expect(past).toMatchObject({ page: 11, has_next: false, quotes: [] });
    expect((await get(`${site.url}/api/quotes?page=0`)).status).toBe(400);
    expect((await get(`${site.url}/api/quotes?page=x`)).status).toBe(400);
    const tag = quoteTags()[0]!;
    const tagged = JSON.parse((await get(`${site.url}/api/quotes?tag=${tag.name}`)).text) as ApiQuotesPage;
    expect(tagged.total).toBe(tag.quotes);
    expect(tagged.quotes.every((q) => q.tags.includes(tag.name))).toBe(true);
  });

  test('JavaScript pages carry no quote markup until their script runs', async () => {
    const js = await get(`${site.url}/quotes/js/page/2?delay=500`);
    expect(js.status).toBe(200);
    expect(js.text).not.toMatch(/<div class="quote"/);
    const data = JSON.parse(js.text.match(/var data = (\{.*\});\n/)![1]!) as ApiQuotesPage;
    expect(data.quotes.map((q) => q.id)).toEqual(
      quoteList()
        .slice(10, 20)
        .map((q) => q.id),
    );
    expect(js.text).toContain('delayMs = 500');
    const scroll = await get(`${site.url}/quotes/scroll`);
    expect(scroll.text).toContain("fetch('/api/quotes?page=' + next)");
    expect(scroll.text).not.toMatch(/<div class="quote"/);
  });
});

describe('login, CSRF and sessions', () => {
  test('the protected page redirects to the login, and /api/me answers 401, without a session', async () => {
    const f = await get(`${site.url}/quotes/account`);
    expect(f.status).toBe(302);
    expect(f.headers.location).toBe('/quotes/login?next=%2Fquotes%2Faccount');
    expect((await get(`${site.url}/api/me`)).status).toBe(401);
  });

  test('login with the right CSRF token and credentials opens the protected page', async () => {
    const before = site.stats({ log: false }).auth.logins;
    const cookie = await login();
    const account = await get(`${site.url}/quotes/account`, { headers: { cookie } });
    expect(account.status).toBe(200);
    expect(texts(account.text, 'span', 'account-username')).toEqual(['user']);
    expect(account.text.match(/<div class="quote"/g)).toHaveLength(5);
    expect(JSON.parse((await get(`${site.url}/api/me`, { headers: { cookie } })).text)).toEqual({
      username: 'user',
    });
    // Listing pages show who is logged in.
    expect(
      texts((await get(`${site.url}/quotes/page/1`, { headers: { cookie } })).text, 'span', 'username'),
    ).toEqual(['user']);
    expect(site.stats({ log: false }).auth.logins).toBe(before + 1);
  });

  test('a wrong, forged, missing or cookie-less CSRF token gets 403 and the form again with an error', async () => {
    const { token, csrfCookie } = await loginForm();
    const before = site.stats({ log: false }).auth.csrfFailures;
    const cases: Array<[Record<string, string>, string | undefined]> = [
      [{ username: 'user', password: 'password', csrf_token: 'forged.token' }, `fixture_csrf=forged.token`],
      [{ username: 'user', password: 'password', csrf_token: token }, undefined],
      [{ username: 'user', password: 'password' }, `fixture_csrf=${csrfCookie}`],
      [{ username: 'user', password: 'password', csrf_token: `${token}x` }, `fixture_csrf=${csrfCookie}`],
    ];
    for (const [fields, cookie] of cases) {
      const f = await postLogin(fields, cookie);
      expect(f.status).toBe(403);
      expect(texts(f.text, 'p', 'error')).toEqual(['Invalid or missing CSRF token.']);
      expect(f.text).toMatch(/name="csrf_token" value="[^"]+"/);
      expect(setCookies(f).has('fixture_session')).toBe(false);
    }
    expect(site.stats({ log: false }).auth.csrfFailures).toBe(before + 4);
  });

  test('the login also takes a JSON body', async () => {
    const { token, csrfCookie } = await loginForm();
    const f = await get(`${site.url}/quotes/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: `fixture_csrf=${csrfCookie}` },
      body: JSON.stringify({
        username: 'user',
        password: 'password',
        csrf_token: token,
        next: '/quotes/page/2',
      }),
    });
    expect(f.status).toBe(302);
    expect(f.headers.location).toBe('/quotes/page/2');
    expect(setCookies(f).get('fixture_session')).toBeTruthy();
  });

  test('wrong credentials with a valid token get 401 and an error', async () => {
    const { token, csrfCookie } = await loginForm();
    const f = await postLogin(
      { username: 'user', password: 'nope', csrf_token: token },
      `fixture_csrf=${csrfCookie}`,
    );
    expect(f.status).toBe(401);
    expect(texts(f.text, 'p', 'error')).toEqual(['Invalid username or password.']);
    expect(setCookies(f).has('fixture_session')).toBe(false);
  });

  test('invalidateSessions() ends existing sessions; logging in again works', async () => {
    const cookie = await login();
    expect((await get(`${site.url}/quotes/account`, { headers: { cookie } })).status).toBe(200);
    site.invalidateSessions();
    const after = await get(`${site.url}/quotes/account`, { headers: { cookie } });
    expect(after.status).toBe(302);
    expect(after.headers.location).toMatch(/^\/quotes\/login/);
    const again = await login();
    expect((await get(`${site.url}/quotes/account`, { headers: { cookie: again } })).status).toBe(200);
  });

  test('per-user invalidation, a safe next= redirect, logout, and session expiry', async () => {
    const s = await startFixtureSite({ login: { users: { ann: 'a1', bob: 'b2' }, sessionTtlMs: 1500 } });
    try {
      const loginAs = async (u: string, p: string, next?: string) => {
        const form = await get(
          `${s.url}/quotes/login${next === undefined ? '' : `?next=${encodeURIComponent(next)}`}`,
        );
        const token = form.text.match(/name="csrf_token" value="([^"]+)"/)![1]!;
        const nextField = form.text.match(/name="next" value="([^"]+)"/)![1]!;
        const f = await get(`${s.url}/quotes/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `fixture_csrf=${token}` },
          body: new URLSearchParams({
            username: u,
            password: p,
            csrf_token: token,
            next: nextField,
          }).toString(),
        });
        return { f, cookie: `fixture_session=${setCookies(f).get('fixture_session')}` };
      };
      const ann = await loginAs('ann', 'a1', '/quotes/page/3');
      expect(ann.f.headers.location).toBe('/quotes/page/3');
      expect(String(ann.f.headers['set-cookie'])).toContain('Max-Age=2');
      const evil = await loginAs('bob', 'b2', '//elsewhere.example/');
      expect(evil.f.headers.location).toBe('/quotes/account');
      s.invalidateSessions('ann');
      expect((await get(`${s.url}/api/me`, { headers: { cookie: ann.cookie } })).status).toBe(401);
      expect((await get(`${s.url}/api/me`, { headers: { cookie: evil.cookie } })).status).toBe(200);
      const out = await get(`${s.url}/quotes/logout`, { headers: { cookie: evil.cookie } });
      expect(out.status).toBe(302);
      expect(String(out.headers['set-cookie'])).toMatch(/fixture_session=;/);
      // Sessions live 1.5 s here.
      const fresh = await loginAs('ann', 'a1');
      expect((await get(`${s.url}/api/me`, { headers: { cookie: fresh.cookie } })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1600));
      expect((await get(`${s.url}/api/me`, { headers: { cookie: fresh.cookie } })).status).toBe(401);
      expect(s.stats({ log: false }).auth).toMatchObject({ logins: 3, invalidations: 1 });
    } finally {
      await s.close();
    }
  });
});
