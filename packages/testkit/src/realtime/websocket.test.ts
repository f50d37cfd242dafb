import { WebSocket } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { get, settled } from '../__fixtures__/http.js';
import { type FixtureSite, startFixtureSite } from '../site/start.js';
import type { StreamMessage } from './websocket.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ hosts: 2 });
});
afterAll(() => site.close());

interface Session {
  messages: Array<string | Buffer>;
  close: { code: number; reason: string };
}

/** Opens a socket, optionally sends messages once open, and collects everything until it closes. */
function session(url: string, send: Array<string | Uint8Array> = [], closeAfter?: number): Promise<Session> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    const messages: Array<string | Buffer> = [];
    ws.addEventListener('open', () => {
      for (const m of send) ws.send(m);
    });
    ws.addEventListener('message', (ev) => {
      messages.push(typeof ev.data === 'string' ? ev.data : Buffer.from(ev.data as ArrayBuffer));
      if (closeAfter !== undefined && messages.length === closeAfter) ws.close(1000, 'enough');
    });
    ws.addEventListener('error', () => undefined);
    ws.addEventListener('close', (ev) => resolve({ messages, close: { code: ev.code, reason: ev.reason } }));
    setTimeout(() => reject(new Error('websocket session did not end within 10 s')), 10_000).unref();
  });
}

describe('WebSocket endpoints', () => {
  test('/ws/stream sends count numbered messages at an interval, then closes with 1000', async () => {
    const ws = site.url.replace('http:', 'ws:');
    const s = await session(`${ws}/ws/stream?count=5&intervalMs=5&size=3`);
    const parsed = s.messages.map((m) => JSON.parse(String(m)) as StreamMessage);
    expect(parsed).toEqual([1, 2, 3, 4, 5].map((seq) => ({ seq, count: 5, data: 'xxx' })));
    expect(s.close).toEqual({ code: 1000, reason: 'done' });
  });

  test('a burst (intervalMs=0) arrives in order; end=drop closes abnormally; end=open stays open', async () => {
    const ws = site.url.replace('http:', 'ws:');
    const burst = await session(`${ws}/ws/stream?count=200&intervalMs=0`);
    expect(burst.messages.map((m) => (JSON.parse(String(m)) as StreamMessage).seq)).toEqual(
      Array.from({ length: 200 }, (_, i) => i + 1),
    );
    const dropped = await session(`${ws}/ws/stream?count=2&intervalMs=1&end=drop`);
    expect(dropped.messages).toHaveLength(2);
    expect(dropped.close.code).toBe(1006);
    const open = await session(`${ws}/ws/stream?count=3&intervalMs=1&end=open`, [], 3);
    // The client closed it after the third message: the server had kept it open.
    expect(open.close).toEqual({ code: 1000, reason: 'enough' });
    const bad = await session(`${ws}/ws/stream?count=-1`);
    expect(bad.close.code).toBe(1008);
  });

  test('/ws/echo returns text as text and binary as binary, on every host', async () => {
    for (const origin of site.urls) {
      const s = await session(
        `${origin.replace('http:', 'ws:')}/ws/echo`,
        ['hello', new Uint8Array([1, 2, 3]), 'bye'],
        3,
      );
      expect(s.messages).toEqual(['hello', Buffer.from([1, 2, 3]), 'bye']);
    }
  });

  test('upgrades are counted and logged with status 101 per host', async () => {
    site.resetStats();
    await session(`${site.hostUrl(1).replace('http:', 'ws:')}/ws/stream?count=1&intervalMs=0`);
    await settled(site);
    const log = site.stats().log.filter((e) => e.url.startsWith('/ws/'));
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ hostIndex: 1, status: 101, url: '/ws/stream?count=1&intervalMs=0' });
    expect(site.hostStats(1).requests).toBe(1);
    // A plain GET of a WebSocket route is a 404, not a hang.
    expect((await get(`${site.url}/ws/echo`)).status).toBe(404);
  });

  test('an upgrade to a path with no WebSocket route is refused and does not hold close()', async () => {
    const own = await startFixtureSite();
    const s = await session(`${own.url.replace('http:', 'ws:')}/no-such-socket`);
    // The handshake never completes: undici reports an abnormal closure.
    expect(s.close.code).toBe(1006);
    expect(s.messages).toEqual([]);
    const closed = await Promise.race([
      own.close().then(() => 'closed'),
      new Promise((resolve) => setTimeout(resolve, 5_000, 'still open').unref()),
    ]);
    expect(closed).toBe('closed');
  });
});
