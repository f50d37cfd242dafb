// The control API over real HTTP: a fastify server on an ephemeral loopback port, real fetch
// requests, and a ControlPlane backed by a real in-memory queue backend (api-test-control-plane).
import http from 'node:http';
import net from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { z } from 'zod';
import { API_ROUTES, type ApiServer, createApiServer } from '../src/api/index.js';
import {
  dlqPageSchema,
  engineViewSchema,
  errorBodySchema,
  healthViewSchema,
  historyViewSchema,
  hostsViewSchema,
  logsViewSchema,
  nodesViewSchema,
  queuesViewSchema,
  systemViewSchema,
} from '../src/api/schemas.js';
import { BackendUnavailableError, createLogBuffer, createMetrics, type LogBuffer } from '../src/index.js';
import { TestControlPlane } from './api-test-control-plane.js';

const KEY = 'test-key-0123456789';

interface Res {
  status: number;
  headers: Headers;
  json: unknown;
  text: string;
}

async function call(
  base: string,
  path: string,
  init: RequestInit & { key?: string | 'x' } = {},
): Promise<Res> {
  const headers = new Headers(init.headers);
  if (init.key !== undefined) headers.set('authorization', `Bearer ${init.key}`);
  const res = await fetch(base + path, { ...init, headers });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

function parsed<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw new Error(`response does not match the schema: ${result.error.message}`);
  return result.data;
}

function errorOf(res: Res): z.output<typeof errorBodySchema>['error'] {
  return parsed(errorBodySchema, res.json).error;
}

const servers: ApiServer[] = [];
const planes: TestControlPlane[] = [];

async function start(options: Partial<Parameters<typeof createApiServer>[0]> = {}) {
  const plane = new TestControlPlane();
  planes.push(plane);
  const server = createApiServer({ controlPlane: plane, port: 0, ...options });
  servers.push(server);
  const address = await server.listen();
  return { plane, server, base: address.url };
}

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await Promise.all(planes.map((p) => p.close()));
});

describe('read-only endpoints', () => {
  let base: string;
  let plane: TestControlPlane;
  let logs: LogBuffer;

  beforeAll(async () => {
    logs = createLogBuffer({ disabled: false });
    const metrics = createMetrics({ node: 'api-test' });
    metrics.observeOperation({ stage: 'download', operation: 'fetch', result: 'success', seconds: 0.05 });
    ({ base, plane } = await start({ apiKey: KEY, logs, metrics }));
    const log = pino({ level: 'debug' }, pino.multistream([{ stream: logs.destination, level: 'debug' }]));
    log.info({ module: 'engine', runId: 'r1' }, 'run started');
    log.debug({ module: 'frontier' }, 'admitted 3');
    log.warn({ module: 'downloader', url: 'http://a.test/' }, 'slow host');
  });

  test('GET / serves the dashboard page with a content security policy that keeps it on its origin', async () => {
    const res = await call(base, '/');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self';");
    expect(csp).not.toContain('*');
    expect(res.text).toContain('<canvas id="chart"');
    expect(res.text).not.toMatch(/<script[^>]+src=/); // no external scripts, no CDN
  });

  test('observability views match their schemas; no CORS headers unless origins are configured', async () => {
    plane.history_ = [{ t: 1_000, pages: 2.5, items: 2.5, errors: 0, bytes: 1024 }];
    for (const [path, schema] of [
      ['/observability/engine', engineViewSchema],
      ['/observability/queues', queuesViewSchema],
      ['/observability/hosts', hostsViewSchema],
      ['/observability/system', systemViewSchema],
      ['/observability/history', historyViewSchema],
      ['/health', healthViewSchema],
    ] as const) {
      const res = await call(base, path, { headers: { origin: 'http://elsewhere.test' } });
      expect(res.status, path).toBe(200);
      expect(res.headers.get('access-control-allow-origin'), path).toBeNull();
      parsed(schema, res.json);
    }
    expect((await call(base, '/observability/history')).json).toMatchObject({
      intervalMs: 2000,
      samples: [{ t: 1_000, pages: 2.5 }],
    });
    const engine = parsed(engineViewSchema, (await call(base, '/observability/engine')).json);
    expect(engine.node).toBe('test-node');
    const system = parsed(systemViewSchema, (await call(base, '/observability/system')).json);
    expect(system.memoryTotalBytes).toBeGreaterThan(0);
    expect(system.process.pid).toBe(process.pid);
  });

  test('cluster view is null in single-node mode and the provider view otherwise', async () => {
    expect((await call(base, '/observability/cluster')).json).toBeNull();
    plane.cluster_ = {
      kind: 'redis',
      nodeId: 'a',
      leader: 'a',
      isLeader: true,
      members: [{ id: 'a', addr: null, lastSeen: 1, leader: true, self: true, meta: {} }],
      details: { term: 3 },
      sampledAt: 1,
    };
    expect((await call(base, '/observability/cluster')).json).toMatchObject({ kind: 'redis', leader: 'a' });
    plane.cluster_ = null;
  });

  test('logs: newest first, with level, module and limit filters; bad filters are 400', async () => {
    const all = parsed(logsViewSchema, (await call(base, '/observability/logs')).json);
    expect(all.records.map((r) => r.message)).toEqual(['slow host', 'admitted 3', 'run started']);
    expect(all.disabled).toBe(false);
    const warn = parsed(logsViewSchema, (await call(base, '/observability/logs?level=WARN')).json);
    expect(warn.records.map((r) => r.message)).toEqual(['slow host']);
    const engine = parsed(logsViewSchema, (await call(base, '/observability/logs?module=eng&limit=5')).json);
    expect(engine.records.map((r) => r.module)).toEqual(['engine']);
    const one = parsed(logsViewSchema, (await call(base, '/observability/logs?limit=1')).json);
    expect(one.records).toHaveLength(1);

    const bad = await call(base, '/observability/logs?limit=5000&level=loud');
    expect(bad.status).toBe(400);
    const issues = errorOf(bad)
      .issues?.map((i) => i.path)
      .sort();
    expect(issues).toEqual(['query.level', 'query.limit']);
  });

  test('/metrics renders the registry as Prometheus text', async () => {
    const res = await call(base, '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toContain(
      'mocra_throughput_total{pipeline="crawl",stage="download",operation="fetch",result="success",node="api-test"} 1',
    );
    expect(res.text).toContain('# TYPE mocra_process_cpu_seconds_total counter');
  });

  test('health answers 503 with its view when the plane is down', async () => {
    plane.health_ = 'down';
    const res = await call(base, '/health');
    expect(res.status).toBe(503);
    expect(parsed(healthViewSchema, res.json).status).toBe('down');
    plane.health_ = 'up';
  });

  test('an unknown path is a JSON 404 with a stable code', async () => {
    const res = await call(base, '/nope?x=1');
    expect(res.status).toBe(404);
    expect(errorOf(res)).toMatchObject({ code: 'MOCRA_ERR_API_NOT_FOUND', status: 404 });
    expect(errorOf(res).message).toContain('GET /nope');
  });

  test('configured origins (cors_origins) may read and call the API; others get no CORS headers', async () => {
    const { base: cors } = await start({ corsOrigins: ['https://dash.example'] });
    const allowed = await call(cors, '/observability/engine', {
      headers: { origin: 'https://dash.example' },
    });
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://dash.example');
    const other = await call(cors, '/observability/engine', { headers: { origin: 'http://elsewhere.test' } });
    expect(other.status).toBe(200);
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    const preflight = await fetch(`${cors}/control/pause`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://dash.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,x-api-key,content-type',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://dash.example');
    expect(preflight.headers.get('access-control-allow-headers')).toContain('x-api-key');
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    const any = await start({ corsOrigins: ['*'] });
    const star = await call(any.base, '/metrics', { headers: { origin: 'http://elsewhere.test' } });
    expect(star.headers.get('access-control-allow-origin')).toBe('*');
  });

  test('a request for a host name the API does not serve is 421 (DNS rebinding); addresses and localhost are served', async () => {
    const port = Number(new URL(base).port);
    const get = (host: string | undefined, path = '/observability/logs') =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const headers: Record<string, string> = host === undefined ? {} : { host };
        const req = http.request(
          { host: '127.0.0.1', port, path, headers, setHost: host === undefined },
          (res) => {
            let body = '';
            res.on('data', (b: Buffer) => {
              body += b.toString();
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    for (const path of ['/observability/logs', '/metrics', '/observability/hosts', '/', '/nope']) {
      const refused = await get(`rebound.evil.example:${port}`, path);
      expect(refused.status, path).toBe(421);
      expect(JSON.parse(refused.body)).toMatchObject({
        error: { code: 'MOCRA_ERR_API_HOST_NOT_ALLOWED', status: 421 },
      });
    }
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `[::1]:${port}`,
      `10.1.2.3:${port}`,
      'app.localhost',
    ]) {
      expect((await get(host)).status, host).toBe(200);
    }
    const docker = await start({ allowedHosts: ['host.docker.internal'] });
    const dockerPort = Number(new URL(docker.base).port);
    const viaDocker = await new Promise<number>((resolve, reject) => {
      http
        .get(
          {
            host: '127.0.0.1',
            port: dockerPort,
            path: '/health',
            headers: { host: 'Host.Docker.Internal:1' },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        )
        .on('error', reject);
    });
    expect(viaDocker).toBe(200);
  });
});

describe('authentication', () => {
  test('no key configured: authenticated endpoints answer 403, reads still work', async () => {
    const { base } = await start();
    for (const [method, path] of [
      ['POST', '/control/pause'],
      ['GET', '/nodes'],
      ['GET', '/dlq'],
    ] as const) {
      const res = await call(base, path, { method, key: 'anything' });
      expect(res.status, path).toBe(403);
      expect(errorOf(res).code).toBe('MOCRA_ERR_API_KEY_NOT_CONFIGURED');
    }
    expect((await call(base, '/observability/engine')).status).toBe(200);
  });

  test('missing or wrong key is 401; the right key works as Bearer and as x-api-key', async () => {
    const { base, plane } = await start({ apiKey: ['other-key', KEY] });
    const missing = await call(base, '/control/pause', { method: 'POST' });
    expect(missing.status).toBe(401);
    expect(errorOf(missing).code).toBe('MOCRA_ERR_API_UNAUTHORIZED');
    const wrong = await call(base, '/control/pause', { method: 'POST', key: 'guess' });
    expect(wrong.status).toBe(401);
    expect(errorOf(wrong).message).toContain('wrong');
    expect(plane.paused).toBe(false);

    const bearer = await call(base, '/control/pause', { method: 'POST', key: KEY });
    expect(bearer.status).toBe(200);
    expect(bearer.json).toEqual({ paused: true, scope: 'local' });
    expect(plane.paused).toBe(true);
    const header = await call(base, '/control/resume', { method: 'POST', headers: { 'x-api-key': KEY } });
    expect(header.status).toBe(200);
    expect(plane.paused).toBe(false);
    expect(
      parsed(nodesViewSchema, (await call(base, '/nodes', { key: 'other-key' })).json).nodes[0]?.self,
    ).toBe(true);
  });
});

describe('POST /start_work', () => {
  let base: string;
  let plane: TestControlPlane;
  beforeAll(async () => {
    ({ base, plane } = await start({ apiKey: KEY, bodyLimit: 2048 }));
  });
  const post = (body: string | undefined, contentType = 'application/json') =>
    call(base, '/start_work', {
      method: 'POST',
      key: KEY,
      ...(body === undefined ? {} : { body }),
      headers: { 'content-type': contentType },
    });

  test('a valid task is accepted (202) and lands on the real task topic', async () => {
    const res = await post(
      JSON.stringify({ module: 'catalog', account: 'alice', params: { page: 2 }, priority: 5 }),
    );
    expect(res.status).toBe(202);
    expect(res.json).toEqual({ accepted: true, module: 'catalog', runId: 'run-1' });
    expect((await plane.backend.topic('task').stats()).ready).toBe(1);
    expect(plane.started).toEqual([
      { module: 'catalog', account: 'alice', params: { page: 2 }, priority: 5 },
    ]);
  });

  test('invalid bodies get 400 with every issue and its path', async () => {
    const res = await post(JSON.stringify({ module: '  ', priority: 1.5, colour: 'red' }));
    expect(res.status).toBe(400);
    const error = errorOf(res);
    expect(error.code).toBe('MOCRA_ERR_API_VALIDATION');
    expect(error.issues).toEqual(
      expect.arrayContaining([
        { path: 'body.module', message: 'module must not be empty' },
        { path: 'body.priority', message: 'priority must be an integer' },
        { path: 'body', message: 'unknown field: colour' },
      ]),
    );
    expect((await post(JSON.stringify([1, 2]))).status).toBe(400);
    expect(errorOf(await post(JSON.stringify({}))).issues?.[0]?.path).toBe('body.module');
  });

  test('the TaskEvent body of Rust mocra: module list, named priority, run_id', async () => {
    plane.started.length = 0;
    const res = await post(
      JSON.stringify({
        account: 'alice',
        platform: 'shop',
        module: ['catalog'],
        priority: 'High',
        run_id: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
      }),
    );
    expect(res.status).toBe(202);
    expect(res.json).toEqual({
      accepted: true,
      modules: ['catalog'],
      runId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
    });
    // module null (or absent): every module; priority Low/Normal/High map to -5/0/5.
    const all = await post(
      JSON.stringify({ account: 'bob', platform: 'shop', module: null, priority: 'low' }),
    );
    expect(all.status).toBe(202);
    expect(all.json).toEqual({ accepted: true, runId: 'run-1' });
    expect(plane.started).toEqual([
      {
        account: 'alice',
        platform: 'shop',
        modules: ['catalog'],
        priority: 5,
        runId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
      },
      { account: 'bob', platform: 'shop', priority: -5 },
    ]);
    const bad = await post(
      JSON.stringify({ account: 'alice', platform: 'shop', module: ['catalog'], priority: 'Urgent' }),
    );
    expect(bad.status).toBe(400);
    expect(errorOf(bad).issues).toEqual([
      { path: 'body.priority', message: "priority must be 'Low', 'Normal' or 'High'" },
    ]);
    const unknown = await post(JSON.stringify({ account: 'a', platform: 'p', module: ['nope'] }));
    expect(unknown.status).toBe(422);
    expect(errorOf(unknown).code).toBe('MOCRA_ERR_UNKNOWN_MODULE');
  });

  test('malformed JSON is 400, a non-JSON body 415, an oversize body 413', async () => {
    const bad = await post('{"module": ');
    expect(bad.status).toBe(400);
    expect(errorOf(bad).code).toBe('MOCRA_ERR_API_VALIDATION');
    const text = await post('module=catalog', 'text/plain');
    expect(text.status).toBe(415);
    expect(errorOf(text).code).toBe('MOCRA_ERR_API_UNSUPPORTED_MEDIA_TYPE');
    const big = await post(JSON.stringify({ module: 'catalog', params: { blob: 'x'.repeat(4096) } }));
    expect(big.status).toBe(413);
    expect(errorOf(big).code).toBe('MOCRA_ERR_API_BODY_TOO_LARGE');
  });

  test('an unknown module is 422 with the engine error code', async () => {
    const res = await post(JSON.stringify({ module: 'nope' }));
    expect(res.status).toBe(422);
    expect(errorOf(res).code).toBe('MOCRA_ERR_UNKNOWN_MODULE');
  });
});

describe('dead-letter queues', () => {
  let base: string;
  let plane: TestControlPlane;
  beforeAll(async () => {
    ({ base, plane } = await start({ apiKey: KEY }));
    await plane.deadLetter('request', 3, 'HTTP 500 after 5 attempts');
    await plane.deadLetter('error', 2, 'poison');
  });

  test('GET /dlq lists entries of every topic with counts, and filters by topic', async () => {
    const page = parsed(dlqPageSchema, (await call(base, '/dlq', { key: KEY })).json);
    expect(page.total).toBe(5);
    expect(page.counts).toMatchObject({ request: 3, error: 2, task: 0 });
    expect(page.entries[0]).toMatchObject({
      topic: 'request',
      reason: 'HTTP 500 after 5 attempts',
      attempts: 1,
    });
    expect(page.entries[0]?.summary).toContain('https://example.test/request/0');

    const errors = parsed(dlqPageSchema, (await call(base, '/dlq?topic=error&limit=1', { key: KEY })).json);
    expect(errors.entries).toHaveLength(1);
    expect(errors.total).toBe(2);
    const unknown = await call(base, '/dlq?topic=bogus', { key: KEY });
    expect(unknown.status).toBe(400);
    expect(errorOf(unknown).issues?.[0]?.path).toBe('query.topic');
  });

  test('replay by id puts the message back on its topic; an empty selection is refused', async () => {
    const page = parsed(dlqPageSchema, (await call(base, '/dlq?topic=request', { key: KEY })).json);
    const id = page.entries[0]!.id;
    const empty = await call(base, '/dlq/replay', {
      method: 'POST',
      key: KEY,
      body: '{}',
      headers: { 'content-type': 'application/json' },
    });
    expect(empty.status).toBe(400);
    expect(errorOf(empty).message).toContain('all: true');

    const res = await call(base, '/dlq/replay', {
      method: 'POST',
      key: KEY,
      body: JSON.stringify({ topic: 'request', ids: [id] }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ count: 1 });
    expect(await plane.backend.topic('request').stats()).toMatchObject({ ready: 1, deadLettered: 2 });
  });

  test('DELETE /dlq purges the selection given in the query string', async () => {
    expect((await call(base, '/dlq', { method: 'DELETE', key: KEY })).status).toBe(400);
    const res = await call(base, '/dlq?topic=error', { method: 'DELETE', key: KEY });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ count: 2 });
    const all = await call(base, '/dlq?all=true', { method: 'DELETE', key: KEY });
    expect(all.json).toMatchObject({ count: 2 });
    expect(parsed(dlqPageSchema, (await call(base, '/dlq', { key: KEY })).json).total).toBe(0);
  });
});

describe('rate limit', () => {
  test('mutating requests are limited per key; reads and the dashboard polls never are', async () => {
    const { base } = await start({ apiKey: KEY, rateLimit: 1, rateLimitBurst: 2 });
    const codes: number[] = [];
    for (let i = 0; i < 3; i++)
      codes.push((await call(base, '/control/pause', { method: 'POST', key: KEY })).status);
    expect(codes).toEqual([200, 200, 429]);
    const limited = await call(base, '/control/resume', { method: 'POST', key: KEY });
    expect(limited.status).toBe(429);
    expect(errorOf(limited).code).toBe('MOCRA_ERR_API_RATE_LIMITED');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    // What a dashboard does each tick, many times over, while the key's bucket is empty.
    const polls = [
      '/observability/engine',
      '/observability/queues',
      '/observability/hosts',
      '/observability/system',
      '/health',
    ];
    const statuses = await Promise.all(
      Array.from({ length: 10 }, () => [
        ...polls.map((p) => call(base, p).then((r) => r.status)),
        call(base, '/dlq', { key: KEY }).then((r) => r.status),
        call(base, '/nodes', { key: KEY }).then((r) => r.status),
      ]).flat(),
    );
    expect(new Set(statuses)).toEqual(new Set([200]));
  });

  test('guessing keys is limited per client address', async () => {
    const { base } = await start({ apiKey: KEY, rateLimit: 0 });
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await call(base, '/nodes', { key: `guess-${i}` })).status);
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual([429, 429]);
  });
});

describe('failures of the control plane', () => {
  test('a slow call answers 503 instead of hanging, a failing one 503 with its code', async () => {
    const { base, plane } = await start({ callTimeoutMs: 50 });
    plane.engineDelayMs = 1000;
    const slow = await call(base, '/observability/engine');
    expect(slow.status).toBe(503);
    expect(errorOf(slow)).toMatchObject({ code: 'MOCRA_ERR_API_UNAVAILABLE' });
    expect(errorOf(slow).message).toContain('did not answer within 50 ms');

    plane.hostsError = new BackendUnavailableError('redis', 'connection refused');
    const down = await call(base, '/observability/hosts');
    expect(down.status).toBe(503);
    expect(errorOf(down).code).toBe('MOCRA_ERR_BACKEND_UNAVAILABLE');
    plane.hostsError = new TypeError('cannot read x of undefined');
    const crashed = await call(base, '/observability/hosts');
    expect(crashed.status).toBe(503);
    expect(errorOf(crashed).message).toContain('cannot read x');
  });

  test('/metrics and /observability/logs without a source are 503 with a clear message', async () => {
    const { base } = await start();
    for (const path of ['/metrics', '/observability/logs']) {
      const res = await call(base, path);
      expect(res.status, path).toBe(503);
      expect(errorOf(res).message).toMatch(/no (metrics registry|log buffer) is attached/);
    }
  });
});

describe('binding', () => {
  let blocker: net.Server;
  let port: number;
  beforeAll(async () => {
    blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    port = (blocker.address() as net.AddressInfo).port;
  });
  afterEach(() => {});
  afterAll(async () => {
    await new Promise<void>((resolve) => blocker.close(() => resolve()));
  });

  test('a port in use rejects listen() with ApiBindError and leaves nothing listening', async () => {
    const plane = new TestControlPlane();
    planes.push(plane);
    const server = createApiServer({ controlPlane: plane, port });
    const err = await server.listen().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ name: 'ApiBindError', code: 'MOCRA_ERR_API_BIND', port, host: '127.0.0.1' });
    expect((err as Error).message).toContain('already in use');
    expect(server.address).toBeUndefined();
    // The failed server is closed for good: asking again fails the same way, nothing is bound.
    await expect(server.listen()).rejects.toMatchObject({ code: 'MOCRA_ERR_API_BIND' });
    await server.close();
  });

  test('a bad port is refused up front', () => {
    const plane = new TestControlPlane();
    planes.push(plane);
    expect(() => createApiServer({ controlPlane: plane, port: 70000 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});

describe('OpenAPI', () => {
  test('/openapi.json describes every route, and every described route exists', async () => {
    const { base } = await start({ apiKey: KEY });
    const doc = (await call(base, '/openapi.json')).json as {
      openapi: string;
      paths: Record<string, Record<string, { security?: unknown; responses: Record<string, unknown> }>>;
      components: { schemas: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining(['EngineView', 'DlqPage', 'StartWorkBody', 'Error']),
    );
    for (const route of API_ROUTES) {
      const op = doc.paths[route.url]?.[route.method.toLowerCase()];
      expect(op, `${route.method} ${route.url}`).toBeDefined();
      expect(op?.security !== undefined, `${route.url} security`).toBe(route.auth);
      expect(Object.keys(op?.responses ?? {})).toContain(String(route.status));
    }
    const described = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => [m.toUpperCase(), path] as const),
    );
    expect(described).toHaveLength(API_ROUTES.length);
    for (const [method, path] of described) {
      const res = await call(base, path, { method, key: KEY });
      expect(res.status, `${method} ${path}`).not.toBe(404);
    }
  });
});
