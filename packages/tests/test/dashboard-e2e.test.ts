// The dashboard in real Chromium (Debian's, driven by playwright-core) against a real crawl of
// the fixture site: the page shows a non-zero, changing throughput, its logs panel fills, and
// its Pause button stops the crawl (server-side counters stand still) until Resume restarts it.
// A full-page screenshot is saved to test-output/dashboard.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';

// The predicates passed to page.waitForFunction run in the page; this package has no DOM lib.
declare const document: {
  querySelector(selector: string): { textContent: string | null } | null;
  querySelectorAll(selector: string): { length: number };
};

const CHROMIUM = process.env.MOCRA_CHROMIUM ?? '/usr/bin/chromium';
const hasChromium = fs.existsSync(CHROMIUM);
const root = path.resolve(import.meta.dirname, '../../..');
const KEY = 'dashboard-e2e-key';
const CONCURRENCY = 4;

let site: FixtureSite;
let context: BrowserContext | undefined;
let userDataDir: string | undefined;

beforeAll(async () => {
  site = await startFixtureSite();
  // 40–70 ms per request at 4 downloads at once: the crawl lasts well beyond the test.
  site.setLatency(40, 30);
});

afterAll(async () => {
  await context?.close();
  if (userDataDir !== undefined) fs.rmSync(userDataDir, { recursive: true, force: true });
  await site.close();
});

interface EngineView {
  paused: boolean;
  inflight: number;
  totals: { pages: number };
}

async function engineView(url: string): Promise<EngineView> {
  return (await (await fetch(`${url}/observability/engine`)).json()) as EngineView;
}

/** Poll (bounded) until `check` holds. */
async function until(check: () => Promise<boolean>, what: string, tries = 150, everyMs = 100): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const number = (text: string | null) => Number((text ?? '').replace(/[^0-9.]/g, ''));

test.skipIf(!hasChromium)(
  'the dashboard shows a live crawl, its logs, and pause/resume steer it',
  async () => {
    const stop = new AbortController();
    let url = '';
    const spider = defineSpider<{ url: string }>({
      name: 'graph',
      startUrls: [site.graphUrl({ pages: 5000, fanout: 4, bytes: 512 })],
      parse(res, cx) {
        cx.emit({ url: res.url });
        for (const a of res.$('a').toArray()) {
          const href = res.$(a).attr('href');
          if (href !== undefined) cx.follow(href);
        }
      },
    });
    const run = Mocra.builder()
      .spider(spider, () => {})
      .concurrency(CONCURRENCY)
      .handleSignals(false)
      .signal(stop.signal)
      .dashboard({
        port: 0,
        apiKey: KEY,
        keepAlive: true,
        onListen: (u) => {
          url = u;
        },
      })
      .run();

    try {
      await until(async () => url !== '' && (await engineView(url)).totals.pages > 0, 'the crawl to start');

      userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-chromium-'));
      context = await chromium.launchPersistentContext(userDataDir, {
        executablePath: CHROMIUM,
        headless: true,
        viewport: { width: 1440, height: 1000 },
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
      });
      const page: Page = context.pages()[0] ?? (await context.newPage());
      const pageErrors: string[] = [];
      page.on('pageerror', (err) => pageErrors.push(String(err)));
      page.on('console', (msg) => {
        if (msg.type() === 'error') pageErrors.push(msg.text());
      });
      await page.goto(`${url}/?interval=1000`);

      // Throughput: non-zero, and the total keeps changing from one poll to the next.
      await page.waitForFunction(
        () => Number(document.querySelector('[data-testid=pages-rate]')?.textContent ?? '0') > 0,
        undefined,
        { timeout: 15_000 },
      );
      const total1 = await page.textContent('[data-testid=pages-total]');
      await page.waitForFunction(
        (before) => document.querySelector('[data-testid=pages-total]')?.textContent !== before,
        total1,
        { timeout: 15_000 },
      );
      expect(number(await page.textContent('[data-testid=pages-rate]'))).toBeGreaterThan(0);
      await expect.poll(() => page.textContent('[data-testid=engine-state]')).toContain('running');

      // The logs panel fills (the engine logs every download at debug; the panel records debug).
      await page.waitForFunction(
        () => document.querySelectorAll('[data-testid=log-row]').length >= 10,
        undefined,
        {
          timeout: 15_000,
        },
      );
      expect(await page.locator('[data-testid=log-row]').first().textContent()).toMatch(
        /downloaded|run started/,
      );

      // Pause from the page: it asks for the key, the engine stops taking work.
      await page.click('[data-testid=pause]');
      await page.fill('[data-testid=key-input]', KEY);
      await page.click('[data-testid=key-ok]');
      await expect
        .poll(() => page.textContent('[data-testid=engine-state]'), { timeout: 10_000 })
        .toContain('paused');
      await until(async () => {
        const v = await engineView(url);
        return v.paused && v.inflight === 0;
      }, 'work in flight to finish after the pause');
      const pausedAt = (await engineView(url)).totals.pages;
      // Three dashboard polls later nothing has moved, and the page shows a zero rate.
      await page.waitForFunction(
        () => document.querySelector('[data-testid=pages-rate]')?.textContent === '0.00',
        undefined,
        { timeout: 10_000 },
      );
      await sleep(2_000);
      expect((await engineView(url)).totals.pages).toBe(pausedAt);
      expect(await page.textContent('[data-testid=pages-total]')).toContain(String(pausedAt));

      // Resume from the page (the key is remembered for this tab): progress restarts.
      await page.click('[data-testid=resume]');
      await expect
        .poll(() => page.textContent('[data-testid=engine-state]'), { timeout: 10_000 })
        .toContain('running');
      await until(async () => (await engineView(url)).totals.pages > pausedAt, 'the crawl to move again');
      await page.waitForFunction(
        () => Number(document.querySelector('[data-testid=pages-rate]')?.textContent ?? '0') > 0,
        undefined,
        { timeout: 15_000 },
      );

      fs.mkdirSync(path.join(root, 'test-output'), { recursive: true });
      await page.screenshot({ path: path.join(root, 'test-output/dashboard.png'), fullPage: true });
      expect(pageErrors).toEqual([]);
    } finally {
      stop.abort();
      const summary = await run;
      expect(summary.reason).toBe('aborted');
    }
  },
  90_000,
);
