// The download router: downloader selection, the proxy choice of a request or module, and the
// outcome it reports to the pool — against the fixture site, with a real (direct-tier) pool.
// Crawls through real proxies are in packages/tests (e2e-proxy-*.test.ts).
import { createProxyPool } from '@mocra/proxy';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createBlockedDetector, DEFAULT_BLOCK_PATTERNS } from '../src/downloader/blocked.js';
import { createDownloadRouter } from '../src/downloader/download-router.js';
import { createHttpDownloader } from '../src/downloader/http-downloader.js';
import type { Downloader } from '../src/downloader/types.js';
import { Request } from '../src/model/request.js';
import { Response } from '../src/model/response.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

const never = new AbortController().signal;

function html(status: number, body: string, type = 'text/html; charset=utf-8'): Response {
  return new Response({
    url: 'https://x.example/',
    status,
    headers: { 'content-type': type },
    body: Buffer.from(body),
    request: new Request('https://x.example/'),
  });
}

describe('blocked detection', () => {
  test('403/429 and captcha titles by default; pages that only embed a captcha are not blocks', () => {
    const blocked = createBlockedDetector();
    expect(blocked(html(403, 'no'))).toBe(true);
    expect(blocked(html(429, 'slow down'))).toBe(true);
    expect(blocked(html(200, '<title>Just a moment...</title>'))).toBe(true);
    expect(blocked(html(200, '<html><head><title>Attention Required! | X</title>'))).toBe(true);
    expect(blocked(html(200, '<title>Login</title><div class="g-recaptcha"></div>'))).toBe(false);
    expect(blocked(html(200, '<title>captcha</title>', 'application/json'))).toBe(false);
    expect(blocked(html(404, 'gone'))).toBe(false);
    expect(DEFAULT_BLOCK_PATTERNS).toHaveLength(1);
  });

  test('statuses, patterns and your own judgement are configurable; off is off', () => {
    const custom = createBlockedDetector({ statuses: [401], patterns: ['unusual traffic', /rate.?limit/g] });
    expect(custom(html(403, 'x'))).toBe(false);
    expect(custom(html(401, 'x'))).toBe(true);
    expect(custom(html(200, 'We have detected UNUSUAL TRAFFIC'))).toBe(true);
    // A /g pattern keeps state between calls; the detector resets it.
    expect(custom(html(200, 'rate limit'))).toBe(true);
    expect(custom(html(200, 'rate limit'))).toBe(true);
    const own = createBlockedDetector({
      detect: (r) => (r.status === 418 ? true : r.status === 403 ? false : undefined),
    });
    expect(own(html(418, ''))).toBe(true);
    expect(own(html(403, ''))).toBe(false);
    expect(own(html(429, ''))).toBe(true);
    expect(createBlockedDetector(false)(html(403, ''))).toBe(false);
    expect(() => createBlockedDetector({ statuses: [42] })).toThrow(/not an HTTP status/);
    expect(() => createBlockedDetector({ patterns: [''] })).toThrow(/non-empty/);
  });
});

describe('download router', () => {
  test('reports every outcome on the direct tier: success, blocked, connection failure; never an abort', async () => {
    const pool = createProxyPool({ direct: true });
    const router = createDownloadRouter({ defaultDownloader: createHttpDownloader(), proxies: pool });
    try {
      const http = router.select(new Request(`${site.url}/`));
      await router.download(http, new Request(`${site.url}/quotes/page/1`), undefined, never);
      await router.download(http, new Request(`${site.url}/status/403`), undefined, never);
      await router.download(http, new Request(`${site.url}/status/429`), undefined, never);
      const refused = await router
        .download(http, new Request('http://127.0.0.1:1/'), undefined, never)
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: 'MOCRA_ERR_CONNECTION' });
      const controller = new AbortController();
      const aborted = router.download(
        http,
        new Request(`${site.url}/delay/5000`),
        undefined,
        controller.signal,
      );
      setTimeout(() => controller.abort(), 50);
      await expect(aborted).rejects.toMatchObject({ code: 'MOCRA_ERR_ABORTED' });
      // 5 acquired; 1 success, 3 failures (403, 429 blocked; refused), the abort left unreported.
      expect(pool.stats().direct).toEqual({ requests: 5, successes: 1, failures: 3 });
      // A pool passed in belongs to the caller.
      await router.close();
      expect(pool.closed).toBe(false);
    } finally {
      await pool.close();
    }
  });

  test('a failure that is the target’s fault (a body over the cap) does not count against the exit', async () => {
    const pool = createProxyPool({ direct: true });
    const router = createDownloadRouter({
      defaultDownloader: createHttpDownloader({ maxBodyBytes: 1000 }),
      proxies: pool,
    });
    const err = await router
      .download(router.registry.default, new Request(`${site.url}/quotes/page/1`), undefined, never)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'MOCRA_ERR_BODY_TOO_LARGE' });
    expect(pool.stats().direct).toEqual({ requests: 1, successes: 1, failures: 0 });
    await router.close();
    await pool.close();
  });

  test('proxy: false on the request or module skips the pool; downloaders that use no proxy skip it too', async () => {
    const router = createDownloadRouter({
      defaultDownloader: createHttpDownloader(),
      proxies: { direct: true }, // built from config: the router owns it
    });
    const pool = router.proxies!;
    const http = router.registry.default;
    await router.download(http, new Request(`${site.url}/`, { proxy: false }), undefined, never);
    await router.download(http, new Request(`${site.url}/`), { name: 'm', proxy: false }, never);
    await router.download(
      http,
      new Request(`${site.url}/`, { proxy: true }),
      { name: 'm', proxy: false },
      never,
    );
    const plain: Downloader = {
      name: 'plain',
      download: async (request) => makeOk(request),
      close: async () => {},
    };
    await router.download(plain, new Request(`${site.url}/`), undefined, never);
    expect(pool.stats().direct?.requests).toBe(1); // only the request that said proxy: true
    await router.close();
    expect(pool.closed).toBe(true);
  });

  test('bad proxy choices are typed errors; a pin needs a pool', async () => {
    const router = createDownloadRouter({
      defaultDownloader: createHttpDownloader(),
      proxies: { direct: true },
    });
    const http = router.registry.default;
    const bad = (proxy: unknown) =>
      router
        .download(http, Object.assign(new Request(`${site.url}/`), { proxy }), undefined, never)
        .catch((e: unknown) => e);
    expect(await bad('yes')).toMatchObject({ code: 'MOCRA_ERR_INVALID_ARGUMENT' });
    expect(await bad({ tier: -1 })).toMatchObject({ message: expect.stringMatching(/proxy.tier/) });
    expect(await bad({ provider: 'x', colour: 1 })).toMatchObject({
      message: expect.stringMatching(/unknown key 'colour'/),
    });
    expect(await bad({ provider: 'nope' })).toMatchObject({ code: 'MOCRA_ERR_PROXY_INVALID_ARGUMENT' });
    await router.close();

    const noPool = createDownloadRouter({ defaultDownloader: createHttpDownloader() });
    expect(() => noPool.validateModule({ name: 'm', proxy: { provider: 'dc' } })).toThrow(
      /no proxy pool is configured/,
    );
    expect(() => noPool.validateModule({ name: 'm', proxy: true })).not.toThrow();
    expect(() => noPool.validateModule({ name: 'm', downloader: 'ghost' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_UNKNOWN_DOWNLOADER' }),
    );
    await noPool.close();
  });

  test('blocked.retry turns a blocked response into a retryable BlockedResponseError', async () => {
    const router = createDownloadRouter({
      defaultDownloader: createHttpDownloader(),
      proxies: { direct: true },
      blocked: { retry: true },
    });
    const err = await router
      .download(router.registry.default, new Request(`${site.url}/status/403`), undefined, never)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'MOCRA_ERR_BLOCKED', status: 403, retryable: true, proxy: undefined });
    const ok = await router.download(router.registry.default, new Request(`${site.url}/`), undefined, never);
    expect(ok.status).toBe(200);
    expect(router.stats().proxies?.direct).toEqual({ requests: 2, successes: 1, failures: 1 });
    await router.close();
  });

  test('a bad [proxy] config fails when the router is built', () => {
    expect(() =>
      createDownloadRouter({ defaultDownloader: createHttpDownloader(), proxies: { proxies: ['nope://x'] } }),
    ).toThrow(expect.objectContaining({ code: 'MOCRA_ERR_PROXY_CONFIG' }));
  });
});

function makeOk(request: Request): Response {
  return new Response({ url: request.url, status: 200, headers: {}, body: new Uint8Array(), request });
}
