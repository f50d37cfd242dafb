/**
 * The engine's per-page overhead against the ceiling: the same link graph crawled by
 *   - raw:    a minimal loop (undici Agent + htmlparser2 SAX link extraction + a Set for dedup),
 *   - mocra (sax):      a spider extracting links with the same SAX parser,
 *   - mocra (cheerio):  a spider using `res.$('a[href]')` (what most spiders do).
 * Same concurrency for all; every run must fetch exactly the graph's page count.
 *
 *   node --import tsx bench/engine/engine-vs-raw.ts [pages] [fanout] [bytes] [concurrency] [rounds]
 *
 * (uses the built packages; add --conditions=@mocra/source to run from sources)
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Parser } from 'htmlparser2';
import { defineSpider, Mocra, type Spider } from 'mocra';
import { Agent } from 'undici';

const [pages = 5000, fanout = 10, bytes = 2000, concurrency = 32, rounds = 3] = process.argv
  .slice(2)
  .map(Number);
const spec = `/graph/${pages}/${fanout}/${bytes}`;

function links(html: string): string[] {
  const out: string[] = [];
  const parser = new Parser({
    onopentag(name, attrs) {
      if (name === 'a' && attrs.href) out.push(attrs.href);
    },
  });
  parser.write(html);
  parser.end();
  return out;
}

async function raw(base: string): Promise<number> {
  const agent = new Agent({ connections: concurrency, pipelining: 1 });
  const seen = new Set<string>();
  const queue: string[] = [];
  let fetched = 0;
  const add = (url: string) => {
    if (!seen.has(url)) {
      seen.add(url);
      queue.push(url);
    }
  };
  add(`${base}${spec}/0`);
  let active = 0;
  await new Promise<void>((done) => {
    const pump = () => {
      while (active < concurrency && queue.length > 0) {
        const url = new URL(queue.shift()!);
        active++;
        agent
          .request({ origin: url.origin, path: url.pathname, method: 'GET' })
          .then((res) => res.body.text())
          .then((html) => {
            fetched++;
            for (const href of links(html)) add(new URL(href, url).href);
          })
          .finally(() => {
            active--;
            if (active === 0 && queue.length === 0) done();
            else pump();
          });
      }
    };
    pump();
  });
  await agent.close();
  return fetched;
}

async function mocra(base: string, mode: 'sax' | 'cheerio'): Promise<number> {
  const spider: Spider<string> = defineSpider<string>({
    name: `graph-${mode}`,
    startUrls: [`${base}${spec}/0`],
    parse(res, cx) {
      if (mode === 'sax') {
        for (const href of links(res.text())) cx.follow(href);
      } else {
        const $ = res.$;
        for (const a of $('a[href]').toArray()) cx.follow(a.attribs.href!);
      }
    },
  });
  const summary = await Mocra.builder()
    .spider(spider, () => {})
    .concurrency(concurrency)
    .logging({ level: 'warn' })
    .handleSignals(false)
    .run();
  if (summary.errors > 0) console.error(summary.errorsByCode);
  return summary.pages;
}

const results = new Map<string, { pagesPerSec: number[]; cpu: number[] }>();

async function measure(name: string, fn: () => Promise<number>): Promise<void> {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const fetched = await fn();
  const secs = (performance.now() - t0) / 1000;
  const used = process.cpuUsage(cpu);
  const cpuSecs = (used.user + used.system) / 1e6;
  const ok = fetched === pages ? '' : `  (MISMATCH: expected ${pages})`;
  console.log(
    `${name.padEnd(16)} ${fetched} pages in ${secs.toFixed(2)} s = ${(fetched / secs).toFixed(0).padStart(6)} pages/s, cpu ${cpuSecs.toFixed(2)} s${ok}`,
  );
  const r = results.get(name) ?? { pagesPerSec: [], cpu: [] };
  r.pagesPerSec.push(fetched / secs);
  r.cpu.push(cpuSecs);
  results.set(name, r);
}

const server = spawn(
  process.execPath,
  ['--import', 'tsx', '--conditions=@mocra/source', path.join(import.meta.dirname, 'fixture-server.ts')],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const base = await new Promise<string>((resolve) => {
  server.stdout.once('data', (d: Buffer) => resolve(d.toString().trim()));
});
console.log(`graph: ${pages} pages, fan-out ${fanout}, ${bytes} bytes/page, concurrency ${concurrency}`);
try {
  // Warm up both paths once (JIT, connections), then measure alternately.
  await raw(base);
  await mocra(base, 'sax');
  for (let round = 0; round < rounds; round++) {
    await measure('raw undici', () => raw(base));
    await measure('mocra (sax)', () => mocra(base, 'sax'));
    await measure('mocra (cheerio)', () => mocra(base, 'cheerio'));
  }
  // Best of the rounds (the machine is shared: the best round is the least disturbed one).
  const best = (name: string) => Math.max(...results.get(name)!.pagesPerSec);
  const leastCpu = (name: string) => Math.min(...results.get(name)!.cpu);
  console.log('best of rounds:');
  for (const name of results.keys()) {
    console.log(
      `  ${name.padEnd(16)} ${best(name).toFixed(0).padStart(6)} pages/s (${((best(name) / best('raw undici')) * 100).toFixed(0)} % of raw), ` +
        `cpu ${leastCpu(name).toFixed(2)} s (${((leastCpu('raw undici') / leastCpu(name)) * 100).toFixed(0)} % of raw's efficiency)`,
    );
  }
} finally {
  server.kill('SIGTERM');
}
