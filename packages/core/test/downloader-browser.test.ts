// The browser downloader and its page pool in a real Chromium (the system's /usr/bin/chromium)
// against the fixture site's JavaScript-only pages, plus a small local server for what the
// fixture has no page for (sub-resources to block).
import http from 'node:http';
import net from 'node:net';
import { type FixtureSite, quoteList, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  BrowserResponse,
  createBrowserDownloader,
  createBrowserPagePool,
  DEFAULT_CHROMIUM_FLAGS,
} from '../src/downloader/browser/index.js';
import { createHttpDownloader } from '../src/downloader/http-downloader.js';
import { Request } from '../src/model/request.js';

let site: FixtureSite;
let assets: { url: string; hits: string[]; close: () => Promise<void> };
const downloader = createBrowserDownloader({ maxPages: 2 });

beforeAll(async () => {
  site = await startFixtureSite();
  assets = await startAssetServer();
});
afterAll(async () => {
  await downloader.close();
  await assets.close();
  await site.close();
});

const never = new AbortController().signal;

function quoteTexts(res: { $: BrowserResponse['$'] }): string[] {
  return res
    .$('div.quote span.text')
    .map((_, el) => res.$(el).text())
    .get();
}

describe('browser downloader', () => {
  test('renders a page whose quotes exist only after JavaScript runs', async () => {
    const url = `${site.url}/quotes/js/page/2`;
    const plain = await createHttpDownloader().download(new Request(url), never);
    expect(plain.$('div.quote')).toHaveLength(0); // without a browser there is nothing to scrape

    const req = new Request(url, { meta: { browser: { waitForSelector: 'body[data-rendered=true]' } } });
    const res = await downloader.download(req, never);
    expect(res).toBeInstanceOf(BrowserResponse);
    expect(res.status).toBe(200);
    expect(res.rendered).toBe(true);
    expect(res.request).toBe(req);
    expect(res.header('content-type')).toBe('text/html; charset=utf-8');
    const expected = quoteList().slice(10, 20);
    expect(quoteTexts(res)).toEqual(expected.map((q) => `“${q.text}”`));
    expect(res.$('li.next a').attr('href')).toBe('/quotes/js/page/3');
    expect(res.screenshot).toBeUndefined();
  });

  test('wait conditions decide what is captured: a function, or only domcontentloaded', async () => {
    const slow = `${site.url}/quotes/js/page/1?delay=150`;
    const waited = await downloader.download(
      new Request(slow, {
        meta: { browser: { waitForFunction: "document.body.dataset.rendered === 'true'" } },
      }),
      never,
    );
    expect(quoteTexts(waited)).toEqual(
      quoteList()
        .slice(0, 10)
        .map((q) => `“${q.text}”`),
    );

    // The script renders 5 s after it runs; DOMContentLoaded comes long before.
    const early = await downloader.download(
      new Request(`${site.url}/quotes/js/page/1?delay=5000`, {
        meta: { browser: { waitUntil: 'domcontentloaded' } },
      }),
      never,
    );
    expect(early.status).toBe(200);
    expect(early.$('div.quote')).toHaveLength(0);
    expect(early.$('#quotes')).toHaveLength(1);
  });

  test('scrolls an infinite-scroll page until it is complete', async () => {
    const res = await downloader.download(
      new Request(`${site.url}/quotes/scroll`, {
        meta: { browser: { scroll: { until: 'body[data-complete=true]', maxScrolls: 40 } } },
      }),
      never,
    );
    expect(res.$('body').attr('data-complete')).toBe('true');
    expect(quoteTexts(res)).toEqual(quoteList().map((q) => `“${q.text}”`));
  });

  test('blocks images, fonts and media by default; stylesheets on request', async () => {
    assets.hits.length = 0;
    const res = await downloader.download(new Request(`${assets.url}/page`), never);
    expect(res.$('h1').text()).toBe('assets');
    expect(assets.hits.sort()).toEqual(['/page', '/script.js', '/style.css']);
    expect(res.$('#from-script').text()).toBe('script ran');

    assets.hits.length = 0;
    await downloader.download(
      new Request(`${assets.url}/page`, { meta: { browser: { blockResources: ['stylesheet', 'script'] } } }),
      never,
    );
    expect(assets.hits.sort()).toEqual(['/image.png', '/page']);
  });

  test('takes screenshots on demand (PNG and JPEG)', async () => {
    const png = await downloader.download(
      new Request(`${site.url}/quotes/js/page/1`, { meta: { browser: { screenshot: true } } }),
      never,
    );
    expect([...(png.screenshot ?? []).slice(0, 4)]).toEqual([0x89, 0x50, 0x4e, 0x47]);
    const jpeg = await downloader.download(
      new Request(`${site.url}/quotes/js/page/1`, {
        meta: { browser: { screenshot: { type: 'jpeg', quality: 50, fullPage: true } } },
      }),
      never,
    );
    expect([...(jpeg.screenshot ?? []).slice(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
  });

  test('POST bodies, redirects and non-HTML documents', async () => {
    const posted = await downloader.download(
      new Request(`${site.url}/echo`, {
        method: 'POST',
        body: 'a=1&b=2',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-test': 'yes' },
      }),
      never,
    );
    expect(posted.rendered).toBe(false); // JSON: the raw body, not Chromium's JSON viewer markup
    expect(posted.json()).toMatchObject({ method: 'POST', body: 'a=1&b=2', headers: { 'x-test': 'yes' } });

    const redirected = await downloader.download(new Request(`${site.url}/redirect/2`), never);
    expect(redirected.status).toBe(200);
    expect(redirected.url).toBe(`${site.url}/redirect/0`);
    expect(redirected.redirects).toEqual([
      { url: `${site.url}/redirect/2`, status: 302, location: `${site.url}/redirect/1` },
      { url: `${site.url}/redirect/1`, status: 302, location: `${site.url}/redirect/0` },
    ]);

    const missing = await downloader.download(new Request(`${site.url}/status/404`), never);
    expect(missing.status).toBe(404); // a status is a response, not an error
  });

  test('timeouts, refused connections and bad meta are typed errors; the pool survives them', async () => {
    const slow = await downloader
      .download(new Request(`${site.url}/delay/10000`, { meta: { browser: { timeoutMs: 300 } } }), never)
      .catch((e: unknown) => e);
    expect(slow).toMatchObject({ code: 'MOCRA_ERR_TIMEOUT', phase: 'headers', retryable: true });

    const neverThere = await downloader
      .download(
        new Request(`${site.url}/quotes/page/1`, {
          meta: { browser: { waitForSelector: '#nope', timeoutMs: 400 } },
        }),
        never,
      )
      .catch((e: unknown) => e);
    expect(neverThere).toMatchObject({ code: 'MOCRA_ERR_TIMEOUT', phase: 'body' });

    const refused = await downloader
      .download(new Request(`http://127.0.0.1:${await freePort()}/`), never)
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'MOCRA_ERR_CONNECTION', retryable: true });

    const badMeta = await downloader
      .download(new Request(`${site.url}/`, { meta: { browser: { waitUntil: 'never' } } }), never)
      .catch((e: unknown) => e);
    expect(badMeta).toMatchObject({ code: 'MOCRA_ERR_INVALID_ARGUMENT', retryable: false });
    expect(String((badMeta as Error).message)).toContain('meta.browser.waitUntil');

    const ok = await downloader.download(new Request(`${site.url}/quotes/page/1`), never);
    expect(ok.$('div.quote')).toHaveLength(10);
  });

  test('an abort signal stops a render at once', async () => {
    const controller = new AbortController();
    const pending = downloader.download(new Request(`${site.url}/delay/10000`), controller.signal);
    setTimeout(() => controller.abort(), 100);
    await expect(pending).rejects.toMatchObject({ code: 'MOCRA_ERR_ABORTED' });
  });
});

describe('browser page pool', () => {
  test('bounds the pages open at once, reuses them, and recycles after maxPageUses', async () => {
    const pool = createBrowserPagePool({ maxPages: 2, maxPageUses: 3 });
    try {
      site.resetStats();
      const urls = Array.from({ length: 6 }, (_, i) => `${site.url}/delay/150?n=${i}`);
      const results = await Promise.all(urls.map((u) => pool.render(u)));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
      const stats = pool.stats();
      expect(stats.launches).toBe(1);
      expect(stats.renders).toBe(6);
      // 6 renders, 3 uses per page, 2 pages at a time: each page is used 3 times, then replaced.
      expect(stats.pagesCreated).toBe(2);
      expect(stats.pagesRecycled).toBe(2);
      expect(stats.pages).toBe(0);
      expect(site.stats().maxInFlight).toBeLessThanOrEqual(2);
      await pool.render(`${site.url}/quotes/page/1`);
      expect(pool.stats()).toMatchObject({ pagesCreated: 3, pages: 1, idle: 1 });
      expect(await pool.version()).toMatch(/^\d+\./);
    } finally {
      await pool.close();
    }
    await expect(pool.render(`${site.url}/`)).rejects.toMatchObject({ code: 'MOCRA_ERR_DOWNLOADER_CLOSED' });
  });

  test('pages are kept per proxy: a page opened for one proxy never serves another', async () => {
    const a = await startForwardProxy();
    const b = await startForwardProxy();
    const pool = createBrowserPagePool({ maxPages: 1 });
    try {
      const via = async (proxy: string | undefined, n: number) =>
        (await pool.render({ url: `${site.url}/quotes/page/${n}`, ...(proxy ? { proxy } : {}) })).status;
      expect(await via(a.url, 1)).toBe(200);
      expect(await via(a.url, 2)).toBe(200); // same proxy: the page is reused
      expect(await via(b.url, 3)).toBe(200); // another proxy: the page is replaced
      expect(await via(undefined, 4)).toBe(200); // direct: replaced again
      expect(a.paths).toEqual(['/quotes/page/1', '/quotes/page/2']);
      expect(b.paths).toEqual(['/quotes/page/3']);
      expect(pool.stats()).toMatchObject({ pagesCreated: 3, pagesRecycled: 2, pages: 1 });
    } finally {
      await pool.close();
      await a.close();
      await b.close();
    }
  });

  test('launches Chromium with the crawler flags', () => {
    expect(DEFAULT_CHROMIUM_FLAGS).toEqual([
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ]);
  });

  test('a missing Chromium or Playwright package is a clear, typed error', async () => {
    const noChromium = createBrowserDownloader({ executablePath: '/nonexistent/chromium' });
    const err = await noChromium.download(new Request(`${site.url}/`), never).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'MOCRA_ERR_BROWSER_LAUNCH', executablePath: '/nonexistent/chromium' });
    expect(String((err as Error).message)).toMatch(/apt-get install chromium/);
    await expect(noChromium.healthCheck()).rejects.toMatchObject({ code: 'MOCRA_ERR_BROWSER_LAUNCH' });
    await noChromium.close();

    const notRunnable = createBrowserPagePool({ executablePath: '/etc/hostname' });
    await expect(notRunnable.warmUp()).rejects.toMatchObject({ code: 'MOCRA_ERR_BROWSER_LAUNCH' });
    await notRunnable.close();

    // The full `playwright` package is an accepted alternative; it is not installed here.
    const noPackage = createBrowserPagePool({ playwrightPackage: 'playwright' });
    await expect(noPackage.warmUp()).rejects.toMatchObject({
      code: 'MOCRA_ERR_MISSING_DEPENDENCY',
      packageName: 'playwright',
    });
    await noPackage.close();
  });

  test('bad options are typed errors', () => {
    expect(() => createBrowserPagePool({ maxPages: 0 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => createBrowserPagePool({ render: { timeoutMs: -5 } })).toThrow(/timeoutMs/);
  });
});

/** A page with an image, a stylesheet and a script; the server records every path requested. */
async function startAssetServer(): Promise<{ url: string; hits: string[]; close: () => Promise<void> }> {
  const hits: string[] = [];
  const png = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
    'base64',
  );
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (path !== '/favicon.ico') hits.push(path);
    if (path === '/page') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(
        '<!doctype html><html><head><link rel="stylesheet" href="/style.css"><script src="/script.js"></script></head>' +
          '<body><h1>assets</h1><img src="/image.png"><p id="from-script"></p></body></html>',
      );
    } else if (path === '/style.css')
      res.writeHead(200, { 'content-type': 'text/css' }).end('h1 { color: red }');
    else if (path === '/script.js')
      res
        .writeHead(200, { 'content-type': 'text/javascript' })
        .end(
          "addEventListener('DOMContentLoaded', () => { document.getElementById('from-script').textContent = 'script ran'; });",
        );
    else if (path === '/image.png') res.writeHead(200, { 'content-type': 'image/png' }).end(png);
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * A minimal forwarding HTTP proxy (absolute-URI GETs, which is how Chromium sends plain-http
 * requests to a proxy), recording the paths it forwarded.
 */
async function startForwardProxy(): Promise<{ url: string; paths: string[]; close: () => Promise<void> }> {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    const target = new URL(req.url ?? '/');
    if (!target.pathname.startsWith('/favicon')) paths.push(target.pathname);
    const upstream = http.request(
      target,
      { method: req.method, headers: { ...req.headers, host: target.host } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    paths,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
