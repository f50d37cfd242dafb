// The control API in front of a real engine crawling the real fixture site (@mocra/testkit):
// views and metrics come from the running engine, /dlq acts on the stage topics' real
// dead-letter queues, and pause is cluster-wide over real Redis coordination.
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createRedisCoordination } from '../src/entries/redis.js';
import {
  type Coordination,
  createEngine,
  createLogBuffer,
  type DataSink,
  type Engine,
  type EngineApi,
  type Module,
  NonRetryableError,
  Request,
  startEngineApi,
} from '../src/index.js';

const KEY = 'engine-api-test-key';
const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ catalog: { books: 30, categories: 2, perPage: 10 } });
});
afterAll(async () => {
  await site.close();
});

async function get<T>(api: EngineApi, path: string, key?: string): Promise<T> {
  const res = await fetch(
    api.url + path,
    key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } },
  );
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function send(
  api: EngineApi,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown }> {
  const res = await fetch(api.url + path, {
    method,
    headers: {
      authorization: `Bearer ${KEY}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: await res.json() };
}

/** Poll until `check` holds (bounded: at most `tries` × `everyMs`). */
async function until(
  check: () => Promise<boolean> | boolean,
  what: string,
  tries = 200,
  everyMs = 50,
): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const noopSink: DataSink<unknown> = { write() {} };

/** Follows every link of the link graph (a bounded crawl that keeps the engine busy a while). */
function graphModule(name: string, pages: number): Module<{ url: string }> {
  return {
    name,
    nodes: [
      {
        id: 'page',
        generate: () => [new Request(site.graphUrl({ pages, fanout: 3, bytes: 256 }))],
        parse(res, cx) {
          cx.emit({ url: res.url });
          for (const a of res.$('a').toArray()) {
            const href = res.$(a).attr('href');
            if (href !== undefined) cx.follow(href);
          }
        },
      },
    ],
  };
}

interface EngineView {
  state: string;
  paused: boolean;
  pauseScope: string;
  totals: { pages: number; items: number; deadLettered: number };
  throughput: Record<string, { success: number }>;
  latency: Record<string, { count: number; p50Ms: number | null }>;
}

describe('the control API of a running engine', () => {
  let engine: Engine;
  let api: EngineApi;
  let run: Promise<unknown>;
  const logs = createLogBuffer({ disabled: false });

  beforeAll(async () => {
    site.setLatency(5, 5);
    const logger = pino({ level: 'debug' }, pino.multistream([{ stream: logs.destination, level: 'debug' }]));
    engine = createEngine({
      concurrency: 4,
      endWhenIdle: false,
      logger,
      namespace: `api-engine-${process.pid}`,
    });
    engine.register(graphModule('graph', 60), noopSink);
    api = await startEngineApi(engine, { port: 0, apiKey: KEY, node: 'api-engine-test', logs });
    run = engine.run();
    await until(
      async () => (await get<EngineView>(api, '/observability/engine')).totals.pages >= 60,
      '60 pages',
    );
  });
  afterAll(async () => {
    site.setLatency(0, 0);
    await engine.stop();
    await run;
    await api.close();
  });

  test('engine, hosts, queues and logs views come from the crawl', async () => {
    const view = await get<EngineView>(api, '/observability/engine');
    expect(view.state).toBe('running');
    expect(view.totals.items).toBe(60);
    expect(view.throughput.download?.success).toBe(60);
    expect(view.throughput.parse?.success).toBe(60);
    expect(view.throughput.store?.success).toBe(60);
    expect(view.latency.download?.count).toBeGreaterThan(0);
    expect(view.latency.download?.p50Ms).toBeGreaterThan(0);

    const hosts = await get<{
      hosts: { host: string; requests: number; inFlight: number; lastStatus: number }[];
    }>(api, '/observability/hosts');
    const host = new URL(site.url).host;
    expect(hosts.hosts).toEqual([
      expect.objectContaining({ host, requests: 60, inFlight: 0, lastStatus: 200 }),
    ]);

    const queues = await get<{ backend: string; queues: { topic: string; capacity: number | null }[] }>(
      api,
      '/observability/queues',
    );
    expect(queues.backend).toBe('memory');
    expect(queues.queues.map((q) => q.topic)).toEqual([
      'task',
      'request',
      'response',
      'parser_task',
      'error',
    ]);
    expect(queues.queues.find((q) => q.topic === 'request')?.capacity).toBeNull();

    const recent = await get<{ records: { module: string; message: string }[] }>(
      api,
      '/observability/logs?level=debug',
    );
    expect(recent.records.some((r) => r.message === 'run started')).toBe(true);
    expect(recent.records.filter((r) => r.message === 'downloaded').length).toBeGreaterThan(0);
  });

  test('/metrics carries the crawl: throughput, latency, backlog, state, hosts — and passes promtool', async () => {
    const text = await (await fetch(`${api.url}/metrics`)).text();
    const node = 'node="api-engine-test"';
    expect(text).toContain(
      `mocra_throughput_total{pipeline="crawl",stage="download",operation="fetch",result="success",${node}} 60`,
    );
    expect(text).toContain(`mocra_items_total{module="graph",${node}} 60`);
    expect(text).toMatch(/mocra_latency_seconds_count\{[^}]*stage="parse"[^}]*\} 60/);
    expect(text).toContain(`mocra_backlog_depth{pipeline="crawl",queue="request",${node}} 0`);
    expect(text).toContain(`mocra_engine_state{state="running",${node}} 1`);
    expect(text).toContain(`mocra_node_up{${node}} 1`);
    expect(text).toContain(
      `mocra_host_requests_total{host="${new URL(site.url).host}",result="2xx",${node}} 60`,
    );
    expect(text).toContain(`mocra_dedup_total{result="miss",${node}} 60`);
    expect(text).toMatch(/mocra_dedup_total\{result="hit",[^}]*\} [1-9]/);
    expect(text).toContain(`mocra_component_health{component="api",${node}} 1`);
    if (spawnSync('promtool', ['--version']).status === 0) {
      const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
      expect(`${lint.stdout}${lint.stderr}`).toBe('');
      expect(lint.status).toBe(0);
    }
  });

  test('/start_work runs a registered module and refuses an unknown one', async () => {
    expect((await send(api, 'POST', '/start_work', { module: 'nope' })).status).toBe(422);
    const accepted = await send(api, 'POST', '/start_work', { module: 'graph', params: { again: true } });
    expect(accepted.status).toBe(202);
    expect(accepted.json).toMatchObject({ accepted: true, module: 'graph', runId: engine.runId });
    // The seed page is a duplicate now: the task ran (task stage done twice), nothing new was fetched.
    await until(async () => (await engine.stats()).stages.task.done === 2, 'the second task');
  });

  test('pause and resume act on the engine (local scope without coordination)', async () => {
    expect((await send(api, 'POST', '/control/pause')).json).toEqual({ paused: true, scope: 'local' });
    expect(engine.paused).toBe(true);
    expect((await get<EngineView>(api, '/observability/engine')).paused).toBe(true);
    expect((await send(api, 'POST', '/control/resume')).json).toEqual({ paused: false, scope: 'local' });
    expect(engine.paused).toBe(false);
  });
});

describe('stopping a service engine through the API', () => {
  test('/control/stop answers at once, the run ends with reason stopped, and a second stop is 409', async () => {
    const engine = createEngine({
      endWhenIdle: false,
      logLevel: 'silent',
      namespace: `api-stop-${process.pid}`,
    });
    engine.register(graphModule('graph', 5), noopSink);
    const api = await startEngineApi(engine, { port: 0, apiKey: KEY, node: 'api-stop-test' });
    try {
      const run = engine.run();
      await until(
        async () => (await get<EngineView>(api, '/observability/engine')).totals.pages >= 5,
        '5 pages',
      );
      await sleep(200);
      expect(engine.state).toBe('running'); // idle, and kept up
      const stop = await send(api, 'POST', '/control/stop');
      expect(stop).toEqual({ status: 202, json: { stopping: true, node: 'api-stop-test' } });
      expect((await run).reason).toBe('stopped');
      const again = await send(api, 'POST', '/control/stop');
      expect(again.status).toBe(409);
      expect(again.json).toMatchObject({ error: { code: 'MOCRA_ERR_ENGINE_STATE' } });
    } finally {
      await api.close();
    }
  });
});

describe('dead letters of a running engine', () => {
  test('a failure the policy gave up on is listed, and replay re-runs the work it failed on', async () => {
    let accept = false;
    const items: string[] = [];
    const module: Module<string> = {
      name: 'fragile',
      nodes: [
        {
          id: 'book',
          generate: () => [1, 2, 3].map((id) => new Request(`${site.url}/book/${id}`)),
          parse(res, cx) {
            if (!accept) throw new NonRetryableError('not ready for this page yet');
            cx.emit(res.url);
          },
        },
      ],
    };
    const engine = createEngine({ concurrency: 2, endWhenIdle: false, namespace: `api-dlq-${process.pid}` });
    engine.register(module, { write: (item: string) => void items.push(item) });
    const api = await startEngineApi(engine, { port: 0, apiKey: KEY, metrics: false });
    const run = engine.run();
    try {
      type Page = {
        total: number;
        counts: Record<string, number>;
        entries: {
          id: string;
          topic: string;
          summary: string;
          reason: string;
          payload: { code?: string; message?: string };
        }[];
      };
      await until(async () => (await get<Page>(api, '/dlq', KEY)).total === 3, 'three dead letters');
      const page = await get<Page>(api, '/dlq?topic=error', KEY);
      expect(page.counts).toEqual({ error: 3 });
      expect(page.entries.map((e) => e.summary).sort()).toEqual(
        [1, 2, 3].map((id) => `parse NON_RETRYABLE: response 200 ${site.url}/book/${id}`),
      );
      expect(page.entries[0]?.payload.code).toBe('MOCRA_ERR_NON_RETRYABLE');
      expect(page.entries[0]?.reason).toContain('NON_RETRYABLE');
      expect(page.entries[0]?.payload.message).toBe('not ready for this page yet');

      // Purge one, replay the rest: the responses go back to parse, which now accepts them.
      const purged = await send(api, 'DELETE', `/dlq?ids=${page.entries[0]!.id}`);
      expect(purged.json).toEqual({ count: 1 });
      accept = true;
      const replayed = await send(api, 'POST', '/dlq/replay', { topic: 'error', all: true });
      expect(replayed.json).toEqual({ count: 2 });
      await until(() => items.length === 2, 'the replayed pages to be parsed');
      expect((await get<Page>(api, '/dlq', KEY)).total).toBe(0);
      expect(items.sort()).toEqual([2, 3].map((id) => `${site.url}/book/${id}`));
    } finally {
      await engine.stop();
      await run;
      await api.close();
    }
    // Once the engine stopped, replay is refused with a clear state error (409 over HTTP).
    expect(engine.state).toBe('stopped');
    await expect(api.controlPlane.replayDeadLetters({ all: true })).rejects.toMatchObject({
      code: 'MOCRA_ERR_ENGINE_STATE',
    });
  });
});

describe('cluster-wide pause over Redis coordination', () => {
  test('pausing through one node pauses the other, resuming through the other resumes both', async () => {
    const scope = `api-pause-${process.pid}-${Date.now()}`;
    const coordinations: Coordination[] = [];
    const nodes: { engine: Engine; api: EngineApi; run: Promise<unknown> }[] = [];
    try {
      for (const id of ['a', 'b']) {
        const coordination = await createRedisCoordination({
          url: REDIS_URL,
          namespace: scope,
          keyPrefix: 'mocra-test:api:',
          nodeId: `node-${id}`,
        });
        coordinations.push(coordination);
        await coordination.join({ meta: { hostname: 'test', version: '0.0.0' } });
        const engine = createEngine({ endWhenIdle: false, autoSeed: false, namespace: scope });
        engine.register(graphModule('idle', 1), noopSink);
        const api = await startEngineApi(engine, {
          port: 0,
          apiKey: KEY,
          coordination,
          node: `node-${id}`,
          pausePollMs: 50,
          ...(id === 'a' ? {} : { metrics: false as const }),
        });
        nodes.push({ engine, api, run: engine.run() });
      }
      const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];

      expect((await send(a.api, 'POST', '/control/pause')).json).toEqual({ paused: true, scope: 'cluster' });
      expect(a.engine.paused).toBe(true);
      await until(() => b.engine.paused, 'node b to pause');
      const view = await get<EngineView & { mode: { clustered: boolean } }>(b.api, '/observability/engine');
      expect(view).toMatchObject({ paused: true, pauseScope: 'cluster', mode: { clustered: true } });

      const members = await get<{ nodes: { id: string; self: boolean }[] }>(a.api, '/nodes', KEY);
      expect(members.nodes.map((n) => n.id).sort()).toEqual(['node-a', 'node-b']);
      const cluster = await get<{ kind: string; members: unknown[]; details: Record<string, unknown> }>(
        a.api,
        '/observability/cluster',
      );
      expect(cluster).toMatchObject({ kind: 'redis', details: { 'cluster paused': true } });
      expect(cluster.members).toHaveLength(2);
      const text = await (await fetch(`${a.api.url}/metrics`)).text();
      expect(text).toContain('mocra_cluster_members{node="node-a"} 2');
      expect(text).toContain('mocra_component_health{component="coordination",node="node-a"} 1');
      expect(text).toContain('mocra_engine_paused{scope="cluster",node="node-a"} 1');

      expect((await send(b.api, 'POST', '/control/resume')).json).toEqual({
        paused: false,
        scope: 'cluster',
      });
      await until(() => !a.engine.paused, 'node a to resume');
      expect(b.engine.paused).toBe(false);
    } finally {
      for (const n of nodes) {
        await n.engine.stop();
        await n.run;
        await n.api.close();
      }
      for (const c of coordinations) {
        await c.delete(`${scope}:engine:pause`).catch(() => false);
        await c.close();
      }
    }
  });
});

describe('backpressure', () => {
  test('downloads waiting for room on a full response topic are counted', async () => {
    const engine = createEngine({
      concurrency: 4,
      stages: { parse: 1 },
      topics: { response: { capacity: 1 } },
      namespace: `api-backpressure-${process.pid}`,
    });
    // A slow sink holds the one parse handler, so the response topic fills and downloads wait.
    engine.register(graphModule('slow', 12), { write: () => sleep(15) });
    const api = await startEngineApi(engine, { port: 0, node: 'bp' });
    try {
      const summary = await engine.run();
      expect(summary.pages).toBe(12);
      const text = await (await fetch(`${api.url}/metrics`)).text();
      const waits = Number(
        /^mocra_download_response_backpressure_total\{queue="response",reason="capacity",node="bp"\} (\d+)$/m.exec(
          text,
        )?.[1],
      );
      expect(waits).toBeGreaterThan(0);
    } finally {
      await api.close();
    }
  });
});
