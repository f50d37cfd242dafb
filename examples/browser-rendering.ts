// Pages whose content exists only after JavaScript runs, rendered in Chromium. The offline
// quotes site (from mocra's test kit) serves each page as an empty list plus a script that
// fills it in; a plain HTTP download sees no quotes at all.
//
// Needs playwright-core (`pnpm add playwright-core`) and a system Chromium (Debian/Ubuntu:
// `apt-get install chromium`; elsewhere set MOCRA_CHROMIUM_PATH or `executablePath`).
//
//   node --import tsx --conditions=@mocra/source examples/browser-rendering.ts
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startFixtureSite } from '@mocra/testkit';
import { BrowserResponse, createBrowserDownloader, defineSpider, isMocraError, Mocra } from 'mocra';

interface Quote {
  text: string;
  author: string;
}

const site = await startFixtureSite();

const browser = createBrowserDownloader({
  maxPages: 2, // pages rendering at once
  // Done when the page's script has filled the list in (it sets this attribute).
  render: { waitForSelector: 'body[data-rendered=true]', blockResources: ['image', 'font', 'media'] },
});

const quotes = defineSpider<Quote>({
  name: 'js-quotes',
  downloader: 'browser',
  start(seeds) {
    // The first page also asks for a screenshot (per-request render options live in meta.browser).
    seeds.get(`${site.url}/quotes/js/page/1`, { meta: { browser: { screenshot: { fullPage: true } } } });
  },
  async parse(res, cx) {
    if (res instanceof BrowserResponse && res.screenshot) {
      const file = path.join(os.tmpdir(), 'mocra-quotes-page-1.png');
      await writeFile(file, res.screenshot);
      console.log(`screenshot of page 1: ${file} (${res.screenshot.length} bytes)`);
    }
    for (const el of res.$('div.quote').toArray()) {
      const q = res.$(el);
      cx.emit({ text: q.find('span.text').text(), author: q.find('small.author').text() });
    }
    const next = res.$('li.next a').attr('href');
    if (next) cx.follow(next);
  },
});

const items: Quote[] = [];
try {
  // Launches Chromium now: a missing browser fails here with a message that says what to install,
  // instead of every request failing later.
  await browser.healthCheck();
  const summary = await Mocra.builder()
    .spider(quotes, (q) => void items.push(q))
    .downloader(browser)
    .handleSignals(false)
    .run();
  const authors = new Set(items.map((q) => q.author));
  console.log(`${summary.pages} pages rendered, ${items.length} quotes by ${authors.size} authors`);
  console.log(`first: ${items[0]?.text} — ${items[0]?.author}`);
  if (summary.errors > 0) process.exitCode = 1;
} catch (err) {
  // MOCRA_ERR_BROWSER_LAUNCH (no Chromium) or MOCRA_ERR_MISSING_DEPENDENCY (no playwright-core).
  console.error(isMocraError(err) ? `${err.code}: ${err.message}` : err);
  process.exitCode = 1;
  await browser.close();
} finally {
  await site.close();
}
