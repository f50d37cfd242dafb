/**
 * Metrics soak: a long, paced, real-request run against the offline fixture site with the
 * control API up, so Prometheus (docker-compose.monitoring.yml, or any scraper) has a live
 * engine to scrape, with no internet.
 *
 *   node --import tsx --conditions=@mocra/source bench/metrics-soak.ts \
 *     [--requests 1000] [--interval-ms 50] [--concurrency 4] [--port 8905] [--host 127.0.0.1] \
 *     [--latency-ms 20] [--error-every 0] [--hold-ms 0]
 *
 * - `--requests` distinct pages are fetched, one every `--interval-ms` at most (a pacing
 *   download gate: the engine's own defer path, not a sleep in the spider), through
 *   `--concurrency` downloads; the fixture answers each after `--latency-ms`.
 * - `--error-every N` makes every Nth request a 503 (retried once, then parsed as the 503 page
 *   it is), so the error, retry and policy families move too.
 * - `--hold-ms` keeps the engine and its API up that long after the last request (service
 *   mode), for a final scrape; Ctrl-C stops early.
 *
 * Prints the API URL, a progress line every 5 s (from the engine's own /metrics), and a summary:
 * requests, wall time, achieved rate against the target rate. Bounded: at most 1,000,000
 * requests; the run ends on its own.
 */
import { parseArgs } from 'node:util';
import type { DownloadGate } from '@mocra/core';
import { startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '1000' },
    'interval-ms': { type: 'string', default: '50' },
    concurrency: { type: 'string', default: '4' },
    port: { type: 'string', default: '8905' },
    host: { type: 'string', default: '127.0.0.1' },
    'latency-ms': { type: 'string', default: '20' },
    'error-every': { type: 'string', default: '0' },
    'hold-ms': { type: 'string', default: '0' },
  },
});
const clamp = (v: string | undefined, min: number, max: number) =>
  Math.min(Math.max(Number(v) || 0, min), max);
const requests = clamp(values.requests, 1, 1_000_000);
const intervalMs = clamp(values['interval-ms'], 0, 60_000);
const concurrency = clamp(values.concurrency, 1, 512);
const port = clamp(values.port, 0, 65_535);
const latencyMs = clamp(values['latency-ms'], 0, 10_000);
const errorEvery = clamp(values['error-every'], 0, 1_000_000);
const holdMs = clamp(values['hold-ms'], 0, 3_600_000);

const site = await startFixtureSite();
site.setLatency(latencyMs, 0);

/**
 * Lets one request through every `intervalMs`. A request that comes too early gets the next
 * free slot reserved (by URL) and is deferred to it, so deferred requests do not push each
 * other's slots back.
 */
function pacingGate(every: number): DownloadGate {
  let next = 0;
  const reserved = new Map<string, number>();
  return {
    enter(request) {
      const now = performance.now();
      const slot = reserved.get(request.url);
      if (slot !== undefined) {
        if (now + 1 >= slot) {
          reserved.delete(request.url);
          return undefined;
        }
        return { deferMs: Math.ceil(slot - now) };
      }
      if (now >= next) {
        next = now + every;
        return undefined;
      }
      const at = next;
      next += every;
      reserved.set(request.url, at);
      return { deferMs: Math.ceil(at - now) };
    },
    leave() {},
  };
}

const urls = Array.from({ length: requests }, (_, i) =>
  errorEvery > 0 && (i + 1) % errorEvery === 0
    ? `${site.url}/status/503?n=${i}`
    : site.graphUrl({ pages: requests, fanout: 1, bytes: 1024 }, i),
);
const spider = defineSpider<{ url: string }>({
  name: 'soak',
  startUrls: urls,
  parse(res, cx) {
    cx.emit({ url: res.url });
  },
});

const stop = new AbortController();
process.once('SIGINT', () => stop.abort());
let apiUrl = '';
let progress: NodeJS.Timeout | undefined;
const started = performance.now();

async function scrape(): Promise<{ ok: number; failed: number; items: number }> {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  const sum = (re: RegExp) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
  return {
    ok: sum(/^mocra_throughput_total\{[^}]*stage="download"[^}]*result="success"[^}]*\} (\d+)/gm),
    failed: sum(/^mocra_throughput_total\{[^}]*stage="download"[^}]*result="failure"[^}]*\} (\d+)/gm),
    items: sum(/^mocra_items_total\{[^}]*\} (\d+)/gm),
  };
}

const builder = Mocra.builder()
  .spider(spider, () => {})
  .concurrency(concurrency)
  .frontier({ gate: pacingGate(intervalMs) })
  .retry({ maxRetries: 1, baseDelayMs: 50, maxDelayMs: 200 })
  .handleSignals(false)
  .signal(stop.signal)
  .logging({ level: 'error' })
  .dashboard({
    port,
    host: values.host ?? '127.0.0.1',
    node: 'metrics-soak',
    keepAlive: holdMs > 0,
    onListen(url) {
      apiUrl = url;
      console.log(`metrics: ${url}/metrics   dashboard: ${url}/`);
      console.log(
        `${requests} requests, one every ${intervalMs} ms at most, ${concurrency} at once, ${latencyMs} ms server latency`,
      );
      progress = setInterval(() => {
        scrape()
          .then((s) => {
            const secs = (performance.now() - started) / 1000;
            console.log(`  ${secs.toFixed(0)} s: ${s.ok} ok, ${s.failed} failed, ${s.items} items`);
            if (holdMs > 0 && s.ok + s.failed >= requests && !stop.signal.aborted) {
              console.log(`  all requests done; holding the API up for ${holdMs} ms`);
              setTimeout(() => stop.abort(), holdMs).unref();
              if (progress !== undefined) clearInterval(progress);
            }
          })
          .catch(() => {});
      }, 5_000);
    },
  });

const summary = await builder.run();
if (progress !== undefined) clearInterval(progress);
const wallMs = performance.now() - started;
const target = intervalMs > 0 ? 1000 / intervalMs : Number.POSITIVE_INFINITY;
console.log(
  `done (${summary.reason}): ${summary.pages} pages, ${summary.errors} failures, ${summary.retries} retries, ` +
    `${summary.deadLettered} dead-lettered, ${summary.items} items in ${(wallMs / 1000).toFixed(1)} s — ` +
    `${(summary.pages / (summary.durationMs / 1000)).toFixed(1)} pages/s (target ${Number.isFinite(target) ? target.toFixed(1) : 'unpaced'})`,
);
await site.close();
