/**
 * Crawl throughput and memory: mocra against Crawlee 3.18.1's CheerioCrawler and a minimal raw
 * undici + htmlparser2 loop (the ceiling), on the same fixture-site workloads, in one session.
 *
 *   pnpm build   # the tools run on the built packages
 *   node --import tsx bench/crawl-benchmark.ts [--concurrency 16] [--rounds 1]
 *        [--only a,b,memory] [--tools raw,mocra,mocra-cli,crawlee] [--small 50000] [--large 5000]
 *        [--bin-before <other checkout>/packages/mocra/dist/cli.js --tools raw,mocra-bin-before,mocra-bin]
 *
 * Workloads (the fixture site's link graph, in its own process through the testkit's
 * `mocra-fixture-site` bin):
 *   (a) small pages: /graph/50000/10/2048 from page 0 — 50,000 pages of 2 KB, 10 links each
 *   (b) large pages: /graph/5000/10/51200 from page 0 — 5,000 pages of 50 KB
 *   (memory) /graph/1000000/1000/0 from page 0, stopped after 1,001 pages: by then ~1,000,000
 *       URLs are discovered and queued; peak RSS with that frontier (mocra, Crawlee)
 *   (fast-a) 20,000 pages of ~740 bytes on nginx (fast-server/nginx-site.ts), fan-out 10
 *   (fast-b) 5,000 pages of 50 KB on nginx (the page count of (b))
 *       The Node fixture site spends more CPU per page than a crawler, which hides the crawler's
 *       own per-page cost; a static nginx does not. Skipped, with the reason printed, when nginx
 *       is missing and cannot be installed.
 *
 * Every tool runs in its own child process (crawl-tools.ts) with the same concurrency; each
 * reports pages, wall time and CPU time of the crawl itself and its peak RSS (ru_maxrss).
 * `mocra-bin` is the real `mocra crawl` command as a user runs it (built bin, records written to a
 * JSON Lines file, --no-robots, per-host concurrency = concurrency), timed by /usr/bin/time: its
 * wall and CPU time include the process's start-up, which the in-process tools leave out.
 * crawl-tools.ts is transpiled to plain JavaScript (bench/.tools/) and run by plain `node`: a
 * TypeScript loader in the tool's process (tsx) would be part of its RSS — ~90 MB more for
 * mocra, ~60 MB for Crawlee, ~20 MB for the raw loop — and of no tool.
 * A full crawl must fetch exactly the graph's page count — checked on the tool's own count and
 * on the fixture server's request counter (reset before every run); a mismatch fails the run.
 * Rounds alternate the tools; the best round of each tool is reported (the machine is shared).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ensureNginx, startNginxSite } from './fast-server/nginx-site.js';

const { values } = parseArgs({
  options: {
    concurrency: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '1' },
    only: { type: 'string', default: 'a,b,memory,fast-a,fast-b' },
    tools: { type: 'string', default: 'raw,mocra,mocra-cli,mocra-bin,crawlee' },
    small: { type: 'string', default: '50000' },
    large: { type: 'string', default: '5000' },
    'fast-small': { type: 'string', default: '20000' },
    // The page count of workload (b). At 2,000 pages the raw loop is done in under a second, and
    // the bin's start-up and exit (a fixed ~0.25 s, reported below) would be a quarter of its time.
    'fast-large': { type: 'string', default: '5000' },
    'memory-pages': { type: 'string', default: '1000000' },
    'timeout-min': { type: 'string', default: '30' },
    /** Another build's `packages/mocra/dist/cli.js`, run as the tool `mocra-bin-before` (an A/B in one run). */
    'bin-before': { type: 'string' },
  },
});
const concurrency = Number(values.concurrency);
const rounds = Math.min(Math.max(Number(values.rounds), 1), 10);
const only = new Set(values.only.split(','));
const tools = values.tools.split(',');
const timeoutMs = Number(values['timeout-min']) * 60_000;
const root = path.resolve(import.meta.dirname, '..');

interface Run {
  tool: string;
  pages: number;
  queued: number;
  wallMs: number;
  cpuMs: number;
  maxRssMB: number;
  serverRequests?: number;
  error?: string;
}

function runChild(
  cmd: string,
  args: string[],
  timeout: number,
): Promise<{
  stdout: string;
  stderr: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
}> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: root });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
    });
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString();
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeout);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code, signal, timedOut });
    });
  });
}

// ── the tools' worker as plain JavaScript (see the module comment) ─────────────
const toolsScript = path.join(root, 'bench/.tools/crawl-tools.mjs');
{
  const ts = (await import('typescript')).default;
  const source = readFileSync(path.join(root, 'bench/crawl-tools.ts'), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  mkdirSync(path.dirname(toolsScript), { recursive: true });
  writeFileSync(toolsScript, outputText);
}

// ── the fixture site, in its own process ───────────────────────────────────────
const server = spawn(
  process.execPath,
  [path.join(root, 'packages/testkit/dist/cli.js'), '--port', '0', '--json'],
  {
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
const base = await new Promise<string>((resolve, reject) => {
  server.stdout.once('data', (d: Buffer) => resolve((JSON.parse(d.toString()) as { url: string }).url));
  server.once('exit', (code) => reject(new Error(`fixture site exited with ${code}`)));
});
const serverStats = async () =>
  (await (await fetch(`${base}/__fixture/stats?log=0`)).json()) as { requests: number };
const resetServer = async () => {
  await fetch(`${base}/__fixture/reset`, { method: 'POST' });
};

interface Site {
  base: string;
  requests(): Promise<number>;
  reset(): Promise<void>;
}
const fixtureSite: Site = {
  base,
  requests: async () => (await serverStats()).requests,
  reset: resetServer,
};

async function runTool(
  tool: string,
  site: Site,
  start: string,
  stopAfter?: number,
  nodeFlags: string[] = [],
): Promise<Run> {
  await site.reset();
  if (tool === 'mocra-bin') return runBin(site, start, stopAfter);
  if (tool === 'mocra-bin-before') {
    if (values['bin-before'] === undefined) throw new Error('mocra-bin-before needs --bin-before <cli.js>');
    return runBin(site, start, stopAfter, path.resolve(values['bin-before']), tool);
  }
  const args = [...nodeFlags, toolsScript, tool, start, String(concurrency)];
  if (stopAfter !== undefined) args.push(String(stopAfter));
  const child = await runChild(process.execPath, args, timeoutMs);
  const line = child.stdout.trim().split('\n').pop() ?? '';
  if (!line.startsWith('{')) return failed(tool, child);
  const run = JSON.parse(line) as Run;
  run.serverRequests = await site.requests();
  return run;
}

function failed(tool: string, child: Awaited<ReturnType<typeof runChild>>): Run {
  const why = child.timedOut
    ? `killed after ${values['timeout-min']} min`
    : child.code === null
      ? `crashed (${child.signal})`
      : `exit ${child.code}`;
  return {
    tool,
    pages: 0,
    queued: 0,
    wallMs: 0,
    cpuMs: 0,
    maxRssMB: 0,
    error: `${why}: ${child.stderr.trim().split('\n').slice(-2).join(' ').slice(0, 300)}`,
  };
}

/** The real `mocra crawl` process, as a user runs it, timed by /usr/bin/time. */
async function runBin(
  site: Site,
  start: string,
  stopAfter?: number,
  cli = path.join(root, 'packages/mocra/dist/cli.js'),
  tool = 'mocra-bin',
): Promise<Run> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mocra-bench-bin-'));
  const out = path.join(dir, 'records.jsonl');
  const timing = path.join(dir, 'time.txt');
  const c = String(concurrency);
  const args = ['-f', '%e %U %S %M', '-o', timing, process.execPath, cli];
  args.push(
    'crawl',
    start,
    '-c',
    c,
    '--per-host-concurrency',
    c,
    '--no-robots',
    '--no-progress',
    '--retries',
    '0',
  );
  args.push('--out', out);
  if (stopAfter !== undefined) args.push('--max-pages', String(stopAfter));
  try {
    const child = await runChild('/usr/bin/time', args, timeoutMs);
    if (child.code !== 0) return failed(tool, child);
    const [elapsed = 0, user = 0, sys = 0, maxKb = 0] = readFileSync(timing, 'utf8')
      .trim()
      .split('\n')
      .pop()!
      .split(' ')
      .map(Number);
    const pages = readFileSync(out, 'utf8').split('\n').filter(Boolean).length;
    return {
      tool,
      pages,
      queued: 0,
      wallMs: elapsed * 1000,
      cpuMs: (user + sys) * 1000,
      maxRssMB: Math.round(maxKb / 1024),
      serverRequests: await site.requests(),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const results: Record<string, { expected?: number; runs: Run[]; fixed?: Run[] }> = {};

async function throughput(name: string, site: Site, start: string, pages: number): Promise<void> {
  results[name] = { expected: pages, runs: [] };
  for (let round = 0; round < rounds; round++) {
    if (tools.includes('mocra-bin') && name.startsWith('fast-')) {
      // What the bin spends whatever the crawl's size: node's start-up, loading the modules, the
      // first request, shutting down. A one-page crawl of the same site, in the same round.
      const fixed = await runTool('mocra-bin', site, start, 1);
      results[name]!.fixed = [...(results[name]!.fixed ?? []), fixed];
      console.error(`${name} round ${round + 1}: one-page crawl ${JSON.stringify(fixed)}`);
    }
    for (const tool of tools) {
      const run = await runTool(tool, site, start);
      if (!run.error && (run.pages !== pages || run.serverRequests !== pages)) {
        run.error = `MISMATCH: ${run.pages} pages counted, ${run.serverRequests} served, expected ${pages}`;
      }
      results[name]!.runs.push(run);
      console.error(`${name} round ${round + 1}: ${JSON.stringify(run)}`);
    }
  }
}

async function memory(pages: number): Promise<void> {
  const start = `${base}/graph/${pages}/1000/0/0`;
  results.memory = { runs: [] };
  for (const tool of tools.filter((t) => t !== 'raw' && !t.startsWith('mocra-bin'))) {
    const run = await runTool(tool, fixtureSite, start, 1001);
    results.memory.runs.push(run);
    console.error(`memory: ${JSON.stringify(run)}`);
  }
}

const skipped: Record<string, string> = {};
const load0 = os.loadavg();
try {
  const graph = (pages: number, bytes: number) => `${base}/graph/${pages}/10/${bytes}/0`;
  if (only.has('a'))
    await throughput('a', fixtureSite, graph(Number(values.small), 2048), Number(values.small));
  if (only.has('b'))
    await throughput('b', fixtureSite, graph(Number(values.large), 51_200), Number(values.large));
  if (only.has('memory')) await memory(Number(values['memory-pages']));
  for (const [name, pages, bytes] of [
    ['fast-a', Number(values['fast-small']), 600],
    ['fast-b', Number(values['fast-large']), 51_200],
  ] as const) {
    if (!only.has(name)) continue;
    const nginx = ensureNginx();
    if (!nginx.ok) {
      skipped[name] = nginx.reason;
      console.error(`${name} skipped: ${nginx.reason}`);
      continue;
    }
    const site = await startNginxSite(pages, 10, bytes);
    try {
      const counted: Site = {
        base: site.base,
        requests: async () => site.requests(),
        reset: async () => site.reset(),
      };
      await throughput(name, counted, `${site.base}/p/0.html`, pages);
    } finally {
      site.close();
    }
  }
} finally {
  server.kill('SIGTERM');
}
const load1 = os.loadavg();

// ── report ──────────────────────────────────────────────────────────────────
const best = (runs: Run[], tool: string): Run | undefined =>
  runs.filter((r) => r.tool === tool && !r.error).sort((x, y) => x.wallMs - y.wallMs)[0];
const rate = (r: Run | undefined) => (r ? (r.pages * 1000) / r.wallMs : Number.NaN);
const out: string[] = [];
out.push(
  `Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GB; Node ${process.version}; ` +
    `load average ${load0.map((l) => l.toFixed(1)).join(' ')} before, ${load1.map((l) => l.toFixed(1)).join(' ')} after; ` +
    `concurrency ${concurrency}; ${rounds} round(s), best shown.`,
);
const titles: Record<string, (n?: number) => string> = {
  a: (n) => `(a) ${n} pages of 2 KB (fan-out 10), fixture site`,
  b: (n) => `(b) ${n} pages of 50 KB (fan-out 10), fixture site`,
  'fast-a': (n) => `(fast-a) ${n} pages of ~740 bytes (fan-out 10), nginx`,
  'fast-b': (n) => `(fast-b) ${n} pages of 50 KB (fan-out 10), nginx`,
};
for (const [name, why] of Object.entries(skipped)) out.push('', `(${name}) skipped: ${why}`);
for (const name of ['a', 'b', 'fast-a', 'fast-b']) {
  const r = results[name];
  if (!r) continue;
  out.push('');
  out.push(titles[name]!(r.expected));
  out.push(
    '| tool | pages/s | wall s | CPU s | CPU ms/page | peak RSS MB | vs raw | CPU/page vs raw | vs Crawlee |',
  );
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  const raw = best(r.runs, 'raw');
  const crawlee = best(r.runs, 'crawlee');
  for (const tool of tools) {
    const b = best(r.runs, tool);
    if (!b) {
      const failed = r.runs.find((x) => x.tool === tool);
      out.push(`| ${tool} | failed: ${failed?.error ?? 'not run'} | | | | | | | |`);
      continue;
    }
    out.push(
      `| ${tool} | ${rate(b).toFixed(0)} | ${(b.wallMs / 1000).toFixed(1)} | ${(b.cpuMs / 1000).toFixed(1)} | ${(b.cpuMs / b.pages).toFixed(2)} | ${b.maxRssMB} | ${raw ? `${((rate(b) / rate(raw)) * 100).toFixed(0)} %` : '—'} | ${raw ? `${(b.cpuMs / b.pages / (raw.cpuMs / raw.pages)).toFixed(2)}×` : '—'} | ${crawlee ? `${(rate(b) / rate(crawlee)).toFixed(1)}×` : '—'} |`,
    );
  }
  // The in-process tools are timed from the crawl's start; the bin from its process's start.
  const fixed = (r.fixed ?? []).filter((x) => !x.error).sort((x, y) => x.wallMs - y.wallMs)[0];
  const bin = best(r.runs, 'mocra-bin');
  if (fixed && bin && raw) {
    const wall = bin.wallMs - fixed.wallMs;
    const cpu = bin.cpuMs - fixed.cpuMs;
    const crawlRate = ((bin.pages - 1) * 1000) / wall;
    out.push(
      `mocra-bin start-up and exit (a one-page crawl, best round): ${(fixed.wallMs / 1000).toFixed(2)} s wall, ` +
        `${(fixed.cpuMs / 1000).toFixed(2)} s CPU. Without them (derived): ${crawlRate.toFixed(0)} pages/s, ` +
        `${((crawlRate / rate(raw)) * 100).toFixed(0)} % of raw, CPU/page ${(cpu / (bin.pages - 1) / (raw.cpuMs / raw.pages)).toFixed(2)}× raw.`,
    );
  }
}
if (results.memory) {
  out.push('');
  out.push(`(memory) /graph/${values['memory-pages']}/1000/0, stopped after 1,001 pages`);
  out.push('| tool | pages | still queued | wall s | peak RSS MB |');
  out.push('| --- | --- | --- | --- | --- |');
  for (const r of results.memory.runs) {
    out.push(
      r.error
        ? `| ${r.tool} | failed: ${r.error} | | | |`
        : `| ${r.tool} | ${r.pages} | ${r.queued} | ${(r.wallMs / 1000).toFixed(1)} | ${r.maxRssMB} |`,
    );
  }
}
console.log(out.join('\n'));
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
writeFileSync(
  path.join(root, `bench/results/crawl-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
  JSON.stringify({ concurrency, rounds, load: [load0, load1], node: process.version, results }, null, 2),
);
process.exit(0);
