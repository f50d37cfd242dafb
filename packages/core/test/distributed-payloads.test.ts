// Every payload that crosses a stage boundary round-trips through the real Redis and NATS
// backends (codec bytes on a real server, both codec formats) and is rebuilt the way the engine
// rebuilds it (Request.from / Response.from): requests with binary bodies, responses with binary
// bodies, task events, follow-ups carrying requests, and error events carrying a typed error.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, test } from 'vitest';
import { HttpStatusError } from '../src/errors.js';
import type { ErrorEvent, FollowUpTask, TaskEvent } from '../src/model/events.js';
import { Request, type RequestData } from '../src/model/request.js';
import { Response, type ResponseData } from '../src/model/response.js';
import { createNatsQueueBackend } from '../src/queue/nats-queue.js';
import { createRedisQueueBackend } from '../src/queue/redis-queue.js';
import type { QueueBackend } from '../src/queue/types.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const NATS_URL = process.env.MOCRA_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

const backends: {
  name: string;
  open(format: 'json' | 'msgpack', extra?: { maxPayloadBytes?: number }): Promise<QueueBackend>;
}[] = [
  {
    name: 'redis',
    open: (format, extra = {}) =>
      createRedisQueueBackend({
        url: REDIS_URL,
        namespace: `pl${randomBytes(4).toString('hex')}`,
        keyPrefix: 'mocra-test:q:',
        codec: { format },
        ...extra,
      }),
  },
  {
    name: 'nats',
    open: (format, extra = {}) =>
      createNatsQueueBackend({
        servers: NATS_URL,
        namespace: `pl${randomBytes(4).toString('hex')}`,
        storage: 'memory',
        codec: { format },
        ...extra,
      }),
  },
];

const opened: { backend: QueueBackend; topics: string[] }[] = [];
afterAll(async () => {
  for (const { backend, topics } of opened) {
    // Drain what is left so nothing stays on the servers, then close.
    for (const t of topics) {
      for (const d of await backend.topic(t).consume({ max: 100, waitMs: 0 })) await d.ack();
    }
    if (backend.kind === 'nats') {
      const jsm = (backend as unknown as { jsm: { streams: { delete(n: string): Promise<boolean> } } }).jsm;
      const names = (backend as unknown as { namesOf(t: string): { stream: string; dlqStream: string } })
        .namesOf;
      for (const t of topics) {
        const n = names.call(backend, t);
        await jsm.streams.delete(n.stream).catch(() => false);
        await jsm.streams.delete(n.dlqStream).catch(() => false);
      }
    } else {
      const client = (backend as unknown as { client: { unlink(...k: string[]): Promise<number> } }).client;
      const keysOf = (backend as unknown as { keysOf(t: string): Record<string, string> }).keysOf;
      for (const t of topics) await client.unlink(...Object.values(keysOf.call(backend, t)));
    }
    await backend.close();
  }
});

async function roundTrip<T>(backend: QueueBackend, topicName: string, payload: unknown): Promise<T> {
  const entry = opened.find((o) => o.backend === backend);
  if (entry && !entry.topics.includes(topicName)) entry.topics.push(topicName);
  const topic = backend.topic<unknown>(topicName);
  await topic.publish([{ payload }]);
  const [d] = await topic.consume({ max: 1, waitMs: 5_000 });
  expect(d).toBeDefined();
  await d!.ack();
  return d!.payload as T;
}

function sampleRequest(): Request {
  const r = new Request('https://shop.example/search?q=ü&x=1', {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'x-trace': 'abc' },
    body: new Uint8Array([0, 255, 1, 254, 0x80, 0x9f]),
    meta: { page: 3, tags: ['a', 'b'], nested: { ok: true } },
    priority: 2,
    depth: 4,
    timeoutMs: 5_000,
    account: 'alice',
  });
  r.module = 'catalog';
  r.node = 'detail';
  r.runId = 'run-1';
  r.fingerprint = 'abcdefghijklmnopqrstuvwxyz0';
  return r;
}

for (const b of backends) {
  for (const format of ['msgpack', 'json'] as const) {
    describe(`${b.name} / ${format}`, () => {
      test('Request, Response, TaskEvent, FollowUpTask and ErrorEvent survive the trip', async () => {
        const backend = await b.open(format);
        opened.push({ backend, topics: [] });

        const request = sampleRequest();
        const r2 = Request.from(await roundTrip<RequestData>(backend, 'request', request));
        expect(r2.toJSON()).toEqual(request.toJSON());
        expect(new Uint8Array(r2.body as Uint8Array)).toEqual(request.body);

        const body = new Uint8Array(randomBytes(40_000)); // binary, above the compression threshold
        const response = new Response({
          url: 'https://shop.example/final',
          status: 203,
          headers: { 'content-type': 'application/octet-stream', 'set-cookie': ['a=1', 'b=2'] },
          body,
          request,
          redirects: [
            { url: 'https://shop.example/search', status: 302, location: 'https://shop.example/final' },
          ],
          durationMs: 12.5,
        });
        const res2 = Response.from(await roundTrip<ResponseData>(backend, 'response', response));
        expect(res2.url).toBe(response.url);
        expect(res2.status).toBe(203);
        expect(res2.headers).toEqual(response.headers);
        expect(Buffer.from(res2.body).equals(Buffer.from(body))).toBe(true);
        expect(res2.request.toJSON()).toEqual(request.toJSON());
        expect(res2.redirects).toEqual(response.redirects);

        const task: TaskEvent = {
          module: 'catalog',
          runId: 'run-1',
          account: 'alice',
          params: { since: '2026-01-01', n: 3 },
        };
        expect(await roundTrip(backend, 'task', task)).toEqual(task);

        const followUp: FollowUpTask = {
          module: 'catalog',
          node: 'detail',
          runId: 'run-1',
          requests: [request, new Request('https://shop.example/b')],
          meta: { from: 'list' },
          depth: 5,
          parent: 'abcdefghijklmnopqrstuvwxyz0',
        };
        const f2 = await roundTrip<FollowUpTask>(backend, 'parser_task', followUp);
        expect(f2.requests.map((r) => Request.from(r).toJSON())).toEqual(
          followUp.requests.map((r) => Request.from(r).toJSON()),
        );
        expect({ ...f2, requests: [] }).toEqual({ ...followUp, requests: [] });

        const error = new HttpStatusError('https://shop.example/x', 503, 2_000);
        const event: ErrorEvent = {
          stage: 'download',
          topic: 'request',
          payload: request,
          error,
          code: error.code,
          message: error.message,
          retryable: true,
          attempt: 2,
          retryAfterMs: 2_000,
          url: request.url,
          module: 'catalog',
          at: 1_700_000_000_000,
          priority: 2,
          key: 'alice',
        };
        const e2 = await roundTrip<ErrorEvent>(backend, 'error', event);
        expect(e2.code).toBe('MOCRA_ERR_HTTP_STATUS');
        expect(e2.retryable).toBe(true);
        expect(e2.retryAfterMs).toBe(2_000);
        expect(e2.error).toMatchObject({
          code: 'MOCRA_ERR_HTTP_STATUS',
          message: error.message,
          retryable: true,
        });
        expect(Request.from(e2.payload as RequestData).toJSON()).toEqual(request.toJSON());
      });
    });
  }
}

test('a response too large for the broker is refused with a clear error; a compressible one fits', async () => {
  const backend = await backends[1]!.open('msgpack', { maxPayloadBytes: 256 * 1024 });
  opened.push({ backend, topics: ['response'] });
  const request = new Request('https://shop.example/big');
  const big = new Response({
    url: request.url,
    status: 200,
    headers: {},
    body: new Uint8Array(randomBytes(512 * 1024)),
    request,
  });
  await expect(backend.topic('response').publish([{ payload: big }])).rejects.toMatchObject({
    code: 'MOCRA_ERR_PAYLOAD_TOO_LARGE',
  });
  // 2 MiB of HTML compresses far below the limit (gzip above 16 KiB): it goes through.
  const html = Buffer.from('<li><a href="/book/1">A book</a></li>\n'.repeat(55_000));
  const page = new Response({
    url: request.url,
    status: 200,
    headers: {},
    body: new Uint8Array(html),
    request,
  });
  const back = Response.from(await roundTrip<ResponseData>(backend, 'response', page));
  expect(back.body.length).toBe(html.length);
});
