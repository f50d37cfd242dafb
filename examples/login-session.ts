// A spider that logs in (CSRF-protected form) before its first request, keeps the session
// cookie for every request, and logs in again by itself when the site ends the session half-way
// through. Runs offline against mocra's fixture site:
//
//   node --import tsx --conditions=@mocra/source examples/login-session.ts
import { startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';

const site = await startFixtureSite({ login: { users: { alice: 'secret' } } });

const account = defineSpider<{ page: number; user: string }>({
  name: 'account',
  shouldLogin: true,
  // Runs before the first request, and again whenever a response says the session is gone
  // (401 by default: the `login_statuses` config key). Throw when the login did not work.
  async login(ctx) {
    const form = await ctx.fetch(`${site.url}/quotes/login`);
    const token = form.$('input[name=csrf_token]').attr('value');
    if (!token) throw new Error('the login page has no CSRF token');
    const res = await ctx.fetch(`${site.url}/quotes/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        csrf_token: token,
        username: 'alice',
        password: 'secret',
        next: '/api/me',
      }).toString(),
    });
    if (res.status !== 200) throw new Error(`login failed with HTTP ${res.status}`);
    console.log(`logged in as ${res.json<{ username: string }>().username} (attempt ${ctx.attempt})`);
  },
  start(seeds) {
    for (let page = 1; page <= 6; page++) seeds.get(`${site.url}/api/me?page=${page}`, { meta: { page } });
  },
  parse(res, cx) {
    const page = res.request.meta.page as number;
    cx.emit({ page, user: res.json<{ username: string }>().username });
    // The site ends every session after page 3: the next request gets a 401, the spider logs
    // in again (once) and the request is retried.
    if (page === 3) site.invalidateSessions();
  },
});

const summary = await Mocra.builder()
  .spider(account, (item) => console.log(`page ${item.page}: ${item.user}`))
  .concurrency(1)
  .stages({ parse: 1 })
  .retry({ baseDelayMs: 50 })
  .logging({ level: 'error' })
  .onError((event) =>
    console.log(`${event.code}: ${event.message} → ${event.retryable ? 'retried' : 'given up'}`),
  )
  .run();

const { logins } = site.stats({ log: false }).auth;
console.log(`${summary.items} pages, ${logins} logins, ${summary.deadLettered} given up`);
await site.close();
