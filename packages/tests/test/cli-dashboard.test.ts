// `mocra crawl --dashboard` as a person uses it: the built bin as a child process, the page in
// real Chromium (Debian's, driven by playwright-core). The key given with --api-key pauses and
// resumes the crawl from the page, a reload keeps the chart (the server keeps its history), the
// tiles fit a 1400 px window, and --dashboard-linger keeps the final state readable after the
// crawl ended. Screenshots go to test-output/.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { hasChromium, killAll, launchChromium, startBin } from './cli-bin.js';

// The predicates passed to page.waitForFunction / evaluate run in the page; this package has no DOM lib.
declare const document: {
  querySelector(
    selector: string,
  ): { textContent: string | null; getAttribute(name: string): string | null } | null;
  querySelectorAll(selector: string): ArrayLike<PageElement>;
};
declare function getComputedStyle(el: PageElement): { overflowX: string; display: string };
interface PageElement {
  id: string;
  textContent: string | null;
  scrollWidth: number;
  clientWidth: number;
  children: { length: number };
}

const root = path.resolve(import.meta.dirname, '../../..');
const KEY = 'cli-dashboard-key-1234';
const MAX_PAGES = 1500;

let site: FixtureSite;
let browser: Browser | undefined;

beforeAll(async () => {
  site = await startFixtureSite();
  // About 60 pages/s at -c 2: the crawl lasts long enough to pause, resume and reload.
  site.setLatency(30, 10);
  if (hasChromium) browser = await launchChromium();
});

afterAll(async () => {
  killAll();
  await browser?.close();
  await site.close();
});

interface EngineView {
  state: string;
  paused: boolean;
  inflight: number;
  totals: { pages: number };
}

async function engineView(url: string): Promise<EngineView> {
  return (await (await fetch(`${url}/observability/engine`)).json()) as EngineView;
}

async function until(check: () => Promise<boolean>, what: string, tries = 200, everyMs = 100): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const number = (text: string | null) => Number((text ?? '').replace(/[^0-9.]/g, ''));

async function newPage(): Promise<{ page: Page; errors: string[] }> {
  const context = await browser!.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(String(err)));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(msg.text());
  });
  return { page, errors };
}

/** Text cut off in its box (overflow hidden or ellipsis): what a person could not read. */
function cutText(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    for (const el of Array.from(document.querySelectorAll('main *'))) {
      if (el.children.length > 0 || getComputedStyle(el).display === 'none') continue;
      if (getComputedStyle(el).overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1) {
        out.push(`${el.id || '?'}: "${el.textContent ?? ''}" (${el.scrollWidth} > ${el.clientWidth} px)`);
      }
    }
    return out;
  });
}

test.skipIf(!hasChromium)(
  'the CLI dashboard: the key pauses and resumes, counters move, a reload keeps the chart, it lingers after the end',
  async () => {
    const run = startBin([
      'crawl',
      site.graphUrl({ pages: 100_000, fanout: 4, bytes: 512 }),
      '--no-robots',
      '-c',
      '2',
      '--max-pages',
      String(MAX_PAGES),
      '--dashboard',
      '0',
      '--api-key',
      KEY,
      '--dashboard-linger',
      '15s',
      '--no-progress',
    ]);
    // The start tells how to use the key (never the key itself).
    const [listening, url] = await run.line(/mocra: dashboard at (http:\/\/127\.0\.0\.1:\d+) \(([^)]*)\)/);
    expect(listening).toContain('click "API key" on the page and paste the key of --api-key');
    expect(run.stderr()).not.toContain(KEY);
    await until(async () => (await engineView(url!)).totals.pages > 20, 'the crawl to start');

    const { page, errors } = await newPage();
    await page.goto(`${url}/?interval=1000`);
    await page.waitForFunction(
      () => Number(document.querySelector('[data-testid=pages-rate]')?.textContent ?? '0') > 0,
      undefined,
      { timeout: 15_000 },
    );
    await expect.poll(() => page.textContent('[data-testid=engine-state]')).toContain('running');
    // At 1400 px every tile shows its whole text.
    expect(await cutText(page)).toEqual([]);
    fs.mkdirSync(path.join(root, 'test-output'), { recursive: true });
    await page.screenshot({ path: path.join(root, 'test-output/cli-dashboard-running.png'), fullPage: true });

    // Pause from the page: it asks for the key, the crawl stops taking work.
    await page.click('[data-testid=pause]');
    await page.fill('[data-testid=key-input]', KEY);
    await page.click('[data-testid=key-ok]');
    await expect
      .poll(() => page.textContent('[data-testid=engine-state]'), { timeout: 10_000 })
      .toContain('paused');
    await until(async () => {
      const v = await engineView(url!);
      return v.paused && v.inflight === 0;
    }, 'work in flight to finish after the pause');
    const pausedAt = (await engineView(url!)).totals.pages;
    await page.waitForFunction(
      () => document.querySelector('[data-testid=pages-rate]')?.textContent === '0.00',
      undefined,
      { timeout: 10_000 },
    );
    await sleep(1_500);
    expect((await engineView(url!)).totals.pages).toBe(pausedAt);
    expect(number(await page.textContent('[data-testid=pages-total]'))).toBe(pausedAt);

    // Resume (the key is remembered in this tab): the counters move again.
    await page.click('[data-testid=resume]');
    await expect
      .poll(() => page.textContent('[data-testid=engine-state]'), { timeout: 10_000 })
      .toContain('running');
    await page.waitForFunction(
      (before) =>
        Number(
          (document.querySelector('[data-testid=pages-total]')?.textContent ?? '').replace(/[^0-9.]/g, ''),
        ) > before,
      pausedAt,
      { timeout: 15_000 },
    );

    // A reload draws the last minutes from the server at once — with polling this slow the
    // page could not have sampled two points of its own yet.
    await page.goto(`${url}/?interval=10000`);
    await page.waitForFunction(
      () =>
        Number(
          document.querySelector('[data-testid=throughput-chart]')?.getAttribute('data-points') ?? '0',
        ) >= 3,
      undefined,
      { timeout: 5_000 },
    );

    // The crawl ends at --max-pages; the dashboard stays up with the final state.
    await run.line(/mocra: the dashboard stays up at http:\/\/127\.0\.0\.1:\d+ until \d\d:\d\d:\d\d/, 60_000);
    expect(run.stderr()).toMatch(new RegExp(`pages +${MAX_PAGES} `));
    await page.goto(`${url}/?interval=1000`);
    await expect
      .poll(() => page.textContent('[data-testid=engine-state]'), { timeout: 10_000 })
      .toContain('stopped');
    expect(number(await page.textContent('[data-testid=pages-total]'))).toBe(MAX_PAGES);
    expect(await page.isDisabled('[data-testid=pause]')).toBe(true);
    await page.waitForFunction(
      () =>
        Number(
          document.querySelector('[data-testid=throughput-chart]')?.getAttribute('data-points') ?? '0',
        ) >= 3,
      undefined,
      { timeout: 5_000 },
    );
    await page.screenshot({ path: path.join(root, 'test-output/cli-dashboard-ended.png'), fullPage: true });
    expect(errors).toEqual([]);
    // Then it goes: the process exits with the crawl's own code.
    expect(await run.exited).toBe(0);
    await expect(fetch(`${url}/health`)).rejects.toThrow();
  },
  150_000,
);
