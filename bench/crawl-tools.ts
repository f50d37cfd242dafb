/**
 * One crawler, one crawl, in this process: the worker that `crawl-benchmark.ts` starts once per
 * tool and workload, so that every figure (CPU time, peak RSS) belongs to one tool alone.
 *
 *   node --import tsx bench/crawl-tools.ts <tool> <startUrl> <concurrency> [stopAfter]
 *
 * Tools:
 *   raw         undici Agent + htmlparser2 Parser (onopentag a[href]) + URL + Set + array queue:
 *               the least a Node crawler can do, the ceiling
 *   mocra       a spider whose parse is `cx.enqueueLinks()` (same-host scope), default engine
 *   mocra-cli   the `mocra crawl` command's spider and sink, in process (records to /dev/null,
 *               politeness gate and robots.txt off as with --no-robots)
 *   crawlee     Crawlee 3.18.1 CheerioCrawler whose requestHandler is `enqueueLinks()`
 *               (same-hostname strategy), storage in memory, autoscaling pinned (see below)
 *
 * Every tool follows the same links: every `<a href>` of the page, resolved against the page
 * URL, kept when on the same host, deduplicated. With `stopAfter`, the crawl stops once that
 * many pages were processed (the memory benchmark: what is still queued stays queued).
 *
 * Prints one JSON line: { tool, pages, queued, wallMs, cpuMs, maxRssMB }. Wall and CPU time
 * start right before the crawl (module loading is excluded); peak RSS is the kernel's
 * `ru_maxrss` of the whole process.
 */
import fs from 'node:fs';
import { Parser } from 'htmlparser2';
import { Agent } from 'undici';

const [tool = '', startUrl = '', concurrencyArg = '16', stopAfterArg] = process.argv.slice(2);
const concurrency = Number(concurrencyArg);
const stopAfter = stopAfterArg === undefined ? Number.POSITIVE_INFINITY : Number(stopAfterArg);

interface Result {
  pages: number;
  queued: number;
}

async function raw(): Promise<Result> {
  const agent = new Agent({ connections: concurrency, pipelining: 1 });
  const seen = new Set<string>();
  const queue: string[] = [];
  const origin = new URL(startUrl);
  let pages = 0;
  let active = 0;
  let stopped = false;
  const add = (href: string, base: URL) => {
    let url: URL;
    try {
      url = new URL(href, base);
    } catch {
      return;
    }
    if (url.hostname !== origin.hostname) return;
    url.hash = '';
    const key = url.href;
    if (!seen.has(key)) {
      seen.add(key);
      queue.push(key);
    }
  };
  add(startUrl, origin);
  await new Promise<void>((done) => {
    const pump = () => {
      while (!stopped && active < concurrency && queue.length > 0) {
        const url = new URL(queue.shift()!);
        active++;
        agent
          .request({ origin: url.origin, path: url.pathname + url.search, method: 'GET' })
          .then((res) => res.body.text())
          .then((html) => {
            pages++;
            if (pages >= stopAfter) stopped = true;
            const hrefs: string[] = [];
            const parser = new Parser({
              onopentag(name, attrs) {
                if (name === 'a' && attrs.href !== undefined) hrefs.push(attrs.href);
              },
            });
            parser.write(html);
            parser.end();
            for (const href of hrefs) add(href, url);
          })
          .catch((err: unknown) => console.error(String(err)))
          .finally(() => {
            active--;
            if (active === 0 && (queue.length === 0 || stopped)) done();
            else pump();
          });
      }
    };
    pump();
  });
  await agent.close();
  return { pages, queued: queue.length };
}

// Libraries are loaded before the clock starts: module loading is not crawling.
const mocraLib = tool.startsWith('mocra') ? await import('mocra') : undefined;
const crawleeLib = tool === 'crawlee' ? await import('crawlee') : undefined;

async function mocra(cli: boolean): Promise<Result> {
  const { defineSpider, Mocra } = mocraLib!;
  let pages = 0;
  let stop: (() => void) | undefined;
  const spider = defineSpider<Record<string, unknown>>({
    name: 'bench',
    startUrls: [startUrl],
    parse(res, cx) {
      const found = cx.enqueueLinks();
      pages++;
      if (pages === stopAfter) stop?.();
      if (cli) {
        cx.emit({
          url: res.request.url,
          finalUrl: res.url,
          status: res.status,
          contentType: res.contentType ?? null,
          bytes: res.body.length,
          depth: cx.depth,
          title: found.title ?? null,
          links: found.found,
          fetchMs: Math.round(res.durationMs),
          error: null,
        });
      }
    },
  });
  const devNull = fs.openSync('/dev/null', 'w');
  const builder = Mocra.builder()
    .concurrency(concurrency)
    .logging({ level: 'error' })
    .handleSignals(false)
    .onStart((engine) => {
      stop = () => void engine.stop();
    })
    .spider(spider, (record) => {
      // What the CLI's record writer does per page: one JSON line, written synchronously.
      if (cli) fs.writeSync(devNull, `${JSON.stringify(record)}\n`);
    });
  if (cli) {
    builder.politeness({ maxConcurrency: concurrency, jitter: 0 });
  }
  const summary = await builder.run();
  if (summary.errors > 0) console.error(JSON.stringify(summary.errorsByCode));
  return { pages, queued: summary.pending };
}

async function crawlee(): Promise<Result> {
  const { CheerioCrawler, Configuration, log } = crawleeLib!;
  log.setLevel(log.LEVELS.OFF);
  // Storage in memory only (no JSON files per request), nothing left from a previous run.
  const config = new Configuration({
    persistStorage: false,
    purgeOnStart: true,
    systemInfoIntervalMillis: 60_000,
  });
  let pages = 0;
  const crawler = new CheerioCrawler(
    {
      // Concurrency pinned: the autoscaled pool may not scale down (2 shared cores look
      // "overloaded" to it) nor ramp up slowly from 1.
      minConcurrency: concurrency,
      maxConcurrency: concurrency,
      autoscaledPoolOptions: { desiredConcurrency: concurrency },
      // No session rotation or cookie jar per session: one client like the other tools.
      useSessionPool: false,
      persistCookiesPerSession: false,
      maxRequestRetries: 0,
      statusMessageLoggingInterval: 3600,
      async requestHandler({ enqueueLinks }) {
        pages++;
        if (pages === stopAfter) crawler.stop();
        if (pages <= stopAfter) await enqueueLinks({ strategy: 'same-hostname' });
      },
    },
    config,
  );
  await crawler.run([startUrl]);
  const queue = await crawler.getRequestQueue();
  const info = await queue.getInfo();
  const queued = info ? info.pendingRequestCount : 0;
  return { pages, queued };
}

const t0 = performance.now();
const cpu0 = process.cpuUsage();
let result: Result;
switch (tool) {
  case 'raw':
    result = await raw();
    break;
  case 'mocra':
    result = await mocra(false);
    break;
  case 'mocra-cli':
    result = await mocra(true);
    break;
  case 'crawlee':
    result = await crawlee();
    break;
  default:
    throw new Error(`unknown tool '${tool}'`);
}
const wallMs = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
process.stdout.write(
  `${JSON.stringify({
    tool,
    pages: result.pages,
    queued: result.queued,
    wallMs: Math.round(wallMs),
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    maxRssMB: Math.round(process.resourceUsage().maxRSS / 1024),
  })}\n`,
);
process.exit(0);
