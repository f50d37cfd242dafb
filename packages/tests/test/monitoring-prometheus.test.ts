// A real Prometheus (Debian's prometheus binary) on loopback scrapes a running engine's /metrics
// while it crawls the fixture site, and a PromQL query over Prometheus's HTTP API returns the
// crawl's throughput. Ephemeral ports, a temporary data directory, a generated config with a
// one-second scrape interval; skipped where prometheus is not installed.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, expect, test } from 'vitest';

const hasPrometheus = spawnSync('prometheus', ['--version']).status === 0;

let site: FixtureSite;
let prometheus: ChildProcess | undefined;
let dataDir: string | undefined;
let prometheusLog = '';

beforeAll(async () => {
  site = await startFixtureSite();
  site.setLatency(20, 20);
});

afterAll(async () => {
  if (prometheus !== undefined && prometheus.exitCode === null) {
    const exited = new Promise((resolve) => prometheus?.once('exit', resolve));
    prometheus.kill('SIGTERM');
    await Promise.race([exited, sleep(10_000)]);
    if (prometheus.exitCode === null) prometheus.kill('SIGKILL');
  }
  if (dataDir !== undefined) fs.rmSync(dataDir, { recursive: true, force: true });
  await site.close();
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface QueryResult {
  status: string;
  data: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
}

async function query(base: string, promql: string): Promise<QueryResult['data']['result']> {
  const res = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await res.json()) as QueryResult;
  expect(body.status).toBe('success');
  return body.data.result;
}

async function until<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  tries = 120,
  everyMs = 250,
): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}\n${prometheusLog.slice(-2000)}`);
}

test.skipIf(!hasPrometheus)(
  'Prometheus scrapes a crawling engine and PromQL returns its throughput',
  async () => {
    const stop = new AbortController();
    let apiUrl = '';
    const spider = defineSpider<{ url: string }>({
      name: 'graph',
      startUrls: [site.graphUrl({ pages: 20_000, fanout: 3, bytes: 256 })],
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
      .concurrency(4)
      .handleSignals(false)
      .signal(stop.signal)
      .dashboard({
        port: 0,
        node: 'prom-e2e',
        keepAlive: true,
        onListen: (u) => {
          apiUrl = u;
        },
      })
      .run();

    try {
      await until(async () => (apiUrl === '' ? undefined : apiUrl), 'the engine API');
      const target = new URL(apiUrl).host;
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-prometheus-'));
      const config = path.join(dataDir, 'prometheus.yml');
      fs.writeFileSync(
        config,
        [
          'global:',
          '  scrape_interval: 1s',
          '  scrape_timeout: 900ms',
          'scrape_configs:',
          '  - job_name: mocra',
          '    static_configs:',
          `      - targets: ['${target}']`,
          '',
        ].join('\n'),
      );
      expect(spawnSync('promtool', ['check', 'config', config], { encoding: 'utf8' }).status).toBe(0);
      prometheus = spawn(
        'prometheus',
        [
          `--config.file=${config}`,
          `--storage.tsdb.path=${path.join(dataDir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--log.level=warn',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      prometheus.stdout?.on('data', (d: Buffer) => {
        prometheusLog += d;
      });
      prometheus.stderr?.on('data', (d: Buffer) => {
        prometheusLog += d;
      });
      await until(
        async () => ((await fetch(`${base}/-/ready`)).ok ? true : undefined),
        'Prometheus to be ready',
      );

      // The target is up and scraped without errors.
      const health = await until(async () => {
        const res = (await (await fetch(`${base}/api/v1/targets`)).json()) as {
          data: { activeTargets: { health: string; lastError: string }[] };
        };
        const t = res.data.activeTargets[0];
        return t?.health === 'up' ? t : undefined;
      }, 'the engine target to be up');
      expect(health.lastError).toBe('');

      // The crawl's throughput as PromQL sees it: pages per second over the last 10 s.
      const rate = await until(async () => {
        const result = await query(
          base,
          'sum by (node) (rate(mocra_throughput_total{job="mocra",stage="download",result="success"}[10s]))',
        );
        const value = Number(result[0]?.value[1]);
        return value > 0 ? { node: result[0]?.metric.node, value } : undefined;
      }, 'a non-zero throughput');
      expect(rate.node).toBe('prom-e2e');
      expect(rate.value).toBeGreaterThan(0);

      // Other families of the same scrape: the node is up and items match pages one to one.
      const up = await query(base, 'mocra_node_up{job="mocra"}');
      expect(up[0]?.value[1]).toBe('1');
      const items = await query(base, 'sum(mocra_items_total{job="mocra"})');
      expect(Number(items[0]?.value[1])).toBeGreaterThan(0);
      const p95 = await query(
        base,
        'histogram_quantile(0.95, sum by (le) (rate(mocra_latency_seconds_bucket{job="mocra",stage="download"}[10s])))',
      );
      expect(Number(p95[0]?.value[1])).toBeGreaterThan(0);
    } finally {
      stop.abort();
      await run;
    }
  },
  90_000,
);
