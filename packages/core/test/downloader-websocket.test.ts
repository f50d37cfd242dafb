// The WebSocket connection manager against the fixture site's real WebSocket endpoints
// (`/ws/stream`, `/ws/echo`), plus a raw TCP server that never answers a handshake; then the
// WebSocket downloader built on it.
import diagnostics_channel from 'node:diagnostics_channel';
import http from 'node:http';
import net from 'node:net';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import {
  backoffDelay,
  createWebSocketDownloader,
  createWebSocketManager,
  resolveBackoff,
  WEBSOCKET_CHANNEL_NAMES,
  type WebSocketManager,
  type WebSocketMessage,
  type WebSocketReconnectMessage,
  websocketRequest,
} from '../src/downloader/websocket/index.js';
import { isMocraError } from '../src/errors.js';
import { Request } from '../src/model/request.js';

let site: FixtureSite;
let ws: string;
const managers: WebSocketManager[] = [];

beforeAll(async () => {
  site = await startFixtureSite();
  ws = site.url.replace('http:', 'ws:');
});
afterAll(() => site.close());
afterEach(async () => {
  await Promise.all(managers.splice(0).map((m) => m.close()));
});

function manager(options: Parameters<typeof createWebSocketManager>[0] = {}): WebSocketManager {
  const m = createWebSocketManager(options);
  managers.push(m);
  return m;
}

/** Fast, deterministic reconnects for tests: 5 ms, 10 ms, 20 ms… no jitter. */
const FAST = { initialDelayMs: 5, maxDelayMs: 20, jitter: 0, stableAfterMs: 60_000 } as const;

async function drain(
  connection: { next: () => Promise<WebSocketMessage | undefined> },
  max = 10_000,
): Promise<{ messages: WebSocketMessage[]; error: unknown }> {
  const messages: WebSocketMessage[] = [];
  try {
    for (let i = 0; i < max; i++) {
      const m = await connection.next();
      if (m === undefined) return { messages, error: undefined };
      messages.push(m);
    }
    throw new Error('drain: too many messages');
  } catch (error) {
    return { messages, error };
  }
}

function upgrades(): number {
  return site.stats().log.filter((e) => e.url.startsWith('/ws/') && e.status === 101).length;
}

async function settled(): Promise<void> {
  for (let i = 0; i < 100 && site.stats().inFlight > 0; i++) await new Promise((r) => setTimeout(r, 10));
}

describe('backoff', () => {
  test('grows by the multiplier up to the cap; jitter takes up to its share off', () => {
    const b = resolveBackoff({ initialDelayMs: 100, maxDelayMs: 1000, multiplier: 2, jitter: 0.5 });
    expect([1, 2, 3, 4, 5, 9].map((n) => backoffDelay(n, b, () => 0))).toEqual([
      100, 200, 400, 800, 1000, 1000,
    ]);
    expect([1, 2, 3].map((n) => backoffDelay(n, b, () => 0.999999))).toEqual([50, 100, 200]);
    expect(() => resolveBackoff({ jitter: 2 })).toThrow(/jitter/);
    expect(() => resolveBackoff({ initialDelayMs: 10, maxDelayMs: 5 })).toThrow(/maxDelayMs/);
  });
});

describe('WebSocket manager', () => {
  test('surfaces every message of a stream in order, then ends cleanly on the server close', async () => {
    const m = manager();
    const c = await m.connect('mod', `${ws}/ws/stream?count=300&intervalMs=0&size=4`);
    expect(c.state).toBe('open');
    const { messages, error } = await drain(c);
    expect(error).toBeUndefined();
    expect(messages.map((x) => (JSON.parse(x.data as string) as { seq: number }).seq)).toEqual(
      Array.from({ length: 300 }, (_, i) => i + 1),
    );
    expect(messages.map((x) => x.seq)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    expect(messages.every((x) => x.key === 'mod' && !x.binary && x.generation === 1)).toBe(true);
    expect(await c.closed).toEqual({ code: 1000, reason: 'done', wasClean: true, by: 'server' });
    // A connection that ended leaves the manager; the next connect opens a fresh one.
    expect(m.size).toBe(0);
    expect(await c.next()).toBeUndefined();
  });

  test('reuses one connection per key; echoes text and binary; a new URL replaces it', async () => {
    site.resetStats();
    const m = manager();
    const a = await m.connect('mod', `${ws}/ws/echo`);
    const b = await m.connect('mod', `${ws}/ws/echo`);
    expect(b).toBe(a);
    await a.send('hello');
    await b.send(new Uint8Array([1, 2, 3]));
    const first = await a.next();
    const second = await a.next();
    expect(first).toMatchObject({ data: 'hello', binary: false, seq: 1 });
    expect(second?.binary).toBe(true);
    expect([...((second?.data ?? '') as Uint8Array)]).toEqual([1, 2, 3]);
    expect(a.stats()).toMatchObject({ opens: 1, reconnects: 0, messagesIn: 2, messagesOut: 2, buffered: 0 });

    const other = await m.connect('other', `${ws}/ws/echo`);
    expect(other).not.toBe(a);
    expect(m.keys().sort()).toEqual(['mod', 'other']);

    const replaced = await m.connect('mod', `${ws}/ws/stream?count=1&intervalMs=0&end=open`);
    expect(replaced).not.toBe(a);
    expect(await a.closed).toMatchObject({ code: 1000, reason: 'replaced', by: 'client' });
    expect((await replaced.next())?.data).toContain('"seq":1');
    await m.close();
    await settled();
    expect(upgrades()).toBe(3);
  });

  test('messages that arrive while nobody reads are kept for the next reader; an aborted read loses none', async () => {
    const m = manager();
    const c = await m.connect('mod', `${ws}/ws/echo`);
    const controller = new AbortController();
    const pending = c.next(controller.signal);
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: 'MOCRA_ERR_ABORTED' });
    await c.send('one');
    await c.send('two');
    for (let i = 0; i < 200 && c.buffered < 2; i++) await new Promise((r) => setTimeout(r, 5));
    expect(c.buffered).toBe(2);
    expect((await c.next())?.data).toBe('one');
    expect((await c.next())?.data).toBe('two');
  });

  test('closes an idle connection (no message either way for idleTimeoutMs)', async () => {
    const m = manager({ idleTimeoutMs: 150 });
    const c = await m.connect('mod', `${ws}/ws/stream?count=2&intervalMs=1&end=open`);
    const { messages, error } = await drain(c);
    expect(error).toBeUndefined();
    expect(messages).toHaveLength(2);
    expect(await c.closed).toMatchObject({ code: 1000, reason: 'idle timeout', by: 'idle' });
    expect(m.get('mod')).toBeUndefined();
  });

  test('reconnects a dropped socket with backoff, a bounded number of times, then fails', async () => {
    site.resetStats();
    const reconnects: WebSocketReconnectMessage[] = [];
    const onReconnect = (msg: unknown): void => {
      if ((msg as WebSocketReconnectMessage).key === 'dropper')
        reconnects.push(msg as WebSocketReconnectMessage);
    };
    diagnostics_channel.subscribe(WEBSOCKET_CHANNEL_NAMES.reconnect, onReconnect);
    const opens: boolean[] = [];
    try {
      const m = manager({ reconnect: { ...FAST, maxAttempts: 2 } });
      const c = await m.connect('dropper', `${ws}/ws/stream?count=2&intervalMs=1&end=drop`, {
        onOpen: (_c, info) => opens.push(info.reconnect),
      });
      const { messages, error } = await drain(c);
      // Three sockets (the first + 2 reconnects), two messages each, numbered across sockets.
      expect(messages.map((x) => [x.seq, x.generation])).toEqual([
        [1, 1],
        [2, 1],
        [3, 2],
        [4, 2],
        [5, 3],
        [6, 3],
      ]);
      expect(isMocraError(error) && error.code).toBe('MOCRA_ERR_WEBSOCKET_CLOSED');
      expect(error).toMatchObject({ closeCode: 1006, retryable: true });
      expect(opens).toEqual([false, true, true]);
      expect(reconnects.map((r) => [r.attempt, r.delayMs, r.code])).toEqual([
        [1, 5, 1006],
        [2, 10, 1006],
      ]);
      expect(c.stats()).toMatchObject({ opens: 3, reconnects: 2 });
      await settled();
      expect(upgrades()).toBe(3);
    } finally {
      diagnostics_channel.unsubscribe(WEBSOCKET_CHANNEL_NAMES.reconnect, onReconnect);
    }
  });

  test('does not reconnect after a close code that retrying cannot fix (1008)', async () => {
    site.resetStats();
    const m = manager({ reconnect: { ...FAST, maxAttempts: 3 } });
    const c = await m.connect('bad', `${ws}/ws/stream?count=-1`);
    const { messages, error } = await drain(c);
    expect(messages).toEqual([]);
    expect(error).toMatchObject({ code: 'MOCRA_ERR_WEBSOCKET_CLOSED', closeCode: 1008, retryable: false });
    expect(c.stats().reconnects).toBe(0);
  });

  test('a refused connection fails with WebSocketConnectError after its attempts; a handshake 404 too', async () => {
    const port = await freePort();
    const m = manager({ reconnect: { ...FAST, maxAttempts: 2 } });
    const refused = await m.connect('x', `ws://127.0.0.1:${port}/`).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'MOCRA_ERR_WEBSOCKET_CONNECT', attempts: 3, retryable: true });
    expect(m.size).toBe(0);

    // A plain HTTP server answers the handshake with 404. (Not the fixture site: an upgrade to a
    // path it has no WebSocket route for stays in flight there and blocks its close().)
    const plain = http.createServer((_req, res) => res.writeHead(404).end('no socket here'));
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
    try {
      const once = manager({ reconnect: false });
      const { port: plainPort } = plain.address() as net.AddressInfo;
      const notFound = await once.connect('y', `ws://127.0.0.1:${plainPort}/ws`).catch((e: unknown) => e);
      expect(notFound).toMatchObject({ code: 'MOCRA_ERR_WEBSOCKET_CONNECT', attempts: 1 });
    } finally {
      await new Promise((r) => plain.close(r));
    }
  });

  test('a handshake that never completes times out after connectTimeoutMs', async () => {
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((s) => sockets.add(s)); // accepts, never answers
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as net.AddressInfo;
    try {
      const m = manager({ connectTimeoutMs: 100, reconnect: false });
      const err = await m.connect('slow', `ws://127.0.0.1:${port}/`).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'MOCRA_ERR_WEBSOCKET_CONNECT', attempts: 1 });
      expect(String((err as Error).message)).toMatch(/handshake took longer than 100 ms/);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
  });

  test('a consumer slower than the server overflows the bounded buffer: typed error, no silent loss', async () => {
    const m = manager({ maxBufferedMessages: 10, reconnect: false });
    const c = await m.connect('flood', `${ws}/ws/stream?count=50&intervalMs=0`);
    await c.closed;
    const { messages, error } = await drain(c);
    expect(messages.map((x) => x.seq)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    expect(error).toMatchObject({ code: 'MOCRA_ERR_WEBSOCKET_OVERFLOW', limit: 10 });
    expect(c.closeInfo?.by).toBe('error');
  });

  test('close() is clean and final; a closed manager refuses new connections', async () => {
    const m = manager();
    const c = await m.connect('mod', `${ws}/ws/echo`);
    const waiting = c.next();
    expect(await c.close()).toMatchObject({ code: 1000, by: 'client' });
    expect(await waiting).toBeUndefined();
    await expect(c.send('late')).rejects.toMatchObject({ code: 'MOCRA_ERR_DOWNLOADER_CLOSED' });
    expect(await c.close()).toMatchObject({ code: 1000, by: 'client' });
    await m.connect('mod2', `${ws}/ws/echo`);
    await m.close();
    expect(m.size).toBe(0);
    await expect(m.connect('mod', `${ws}/ws/echo`)).rejects.toMatchObject({
      code: 'MOCRA_ERR_DOWNLOADER_CLOSED',
    });
  });

  test('bad options and URLs are typed errors', async () => {
    expect(() => createWebSocketManager({ idleTimeoutMs: -1 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => createWebSocketManager({ reconnect: { maxAttempts: 1.5 } })).toThrow(/maxAttempts/);
    const m = manager();
    await expect(m.connect('k', 'ftp://127.0.0.1/')).rejects.toMatchObject({ code: 'MOCRA_ERR_INVALID_URL' });
    await expect(m.connect('k', 'not a url')).rejects.toMatchObject({ code: 'MOCRA_ERR_INVALID_URL' });
  });
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

describe('WebSocket downloader', () => {
  const never = new AbortController().signal;

  test('websocketRequest turns ws(s) URLs into the http(s) URLs the frontier admits', () => {
    const r = websocketRequest('wss://feed.example/prices?x=1', { body: 'sub' });
    expect(r).toMatchObject({ url: 'https://feed.example/prices?x=1', downloader: 'websocket', body: 'sub' });
    expect(websocketRequest('ws://h/p', {}, 'feed')).toMatchObject({ url: 'http://h/p', downloader: 'feed' });
  });

  test('each message is a 200 response of a copy of the request with its own fingerprint', async () => {
    const d = createWebSocketDownloader();
    try {
      const request = new Request(`${site.url}/ws/stream?count=3&intervalMs=1&size=2`);
      request.module = 'm';
      request.node = 'n';
      request.fingerprint = 'abc';
      const responses = [];
      for await (const r of d.stream(request, never)) responses.push(r);
      expect(responses.map((r) => r.json<{ seq: number }>().seq)).toEqual([1, 2, 3]);
      expect(responses.map((r) => r.request.fingerprint)).toEqual(['abc~1', 'abc~2', 'abc~3']);
      expect(responses.every((r) => r.status === 200 && r.url === request.url)).toBe(true);
      expect(responses.every((r) => r.request.module === 'm' && r.request.node === 'n')).toBe(true);
      expect(responses[0]!.header('content-type')).toBe('text/plain; charset=utf-8');
      expect(responses[2]!.header('x-mocra-websocket-seq')).toBe('3');
      // download() is the first message only.
      const first = await d.download(new Request(`${site.url}/ws/stream?count=5&intervalMs=1`), never);
      expect(first.json<{ seq: number }>().seq).toBe(1);
    } finally {
      await d.close();
    }
  });

  test('a newer request on the connection takes the stream over; the older one ends normally', async () => {
    const d = createWebSocketDownloader();
    try {
      const make = (body: string) => {
        const r = new Request(`${site.url}/ws/echo`, { body });
        r.module = 'chat';
        return r;
      };
      const a = d.stream(make('a1'), never)[Symbol.asyncIterator]();
      expect((await a.next()).value?.text()).toBe('a1');
      const b = d.stream(make('b1'), never)[Symbol.asyncIterator]();
      const bFirst = b.next();
      expect(await a.next()).toMatchObject({ done: true }); // taken over
      expect((await bFirst).value?.text()).toBe('b1');
      expect(d.manager.size).toBe(1); // one connection for both
      await b.return?.(undefined);
    } finally {
      await d.close();
    }
  });

  test('bad meta.websocket is a typed error', async () => {
    const d = createWebSocketDownloader();
    const bad = new Request(`${site.url}/ws/echo`, { meta: { websocket: { maxMessages: 0 } } });
    await expect(d.download(bad, never)).rejects.toMatchObject({ code: 'MOCRA_ERR_INVALID_ARGUMENT' });
    const unknown = new Request(`${site.url}/ws/echo`, { meta: { websocket: { colour: 'red' } } });
    await expect(d.download(unknown, never)).rejects.toThrow(/meta.websocket.colour: unknown key/);
    await d.close();
  });
});
