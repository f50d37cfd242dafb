// The WebSocket downloader end to end through spiders, against the fixture site's WebSocket
// endpoints: every inbound message becomes a response through the normal parse path.

import type { ItemMeta } from '@mocra/core';
import { createWebSocketDownloader, websocketRequest } from '@mocra/core/websocket';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

let site: FixtureSite;
let ws: string;
beforeAll(async () => {
  site = await startFixtureSite();
  ws = site.url.replace('http:', 'ws:');
});
afterAll(() => site.close());

interface StreamItem {
  seq: number;
  count: number;
}

function upgrades(): number {
  return site.stats().log.filter((e) => e.url.startsWith('/ws/') && e.status === 101).length;
}

async function settled(): Promise<void> {
  for (let i = 0; i < 100 && site.stats().inFlight > 0; i++) await new Promise((r) => setTimeout(r, 10));
}

describe('WebSocket downloader', () => {
  test('one request, a stream of messages: each is parsed as its own response, with its own item id', async () => {
    site.resetStats();
    const items: StreamItem[] = [];
    const metas: ItemMeta[] = [];
    const spider = defineSpider<StreamItem>({
      name: 'ticker',
      downloader: 'websocket',
      start(seeds) {
        seeds.add(websocketRequest(`${ws}/ws/stream?count=25&intervalMs=1&size=3`));
      },
      parse(res, cx) {
        expect(res.request.module).toBe('ticker');
        cx.emit(res.json<StreamItem>());
      },
    });
    const summary = await Mocra.builder()
      .spider(spider, (item, meta) => {
        items.push(item);
        metas.push(meta);
      })
      .downloader(createWebSocketDownloader())
      .handleSignals(false)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: 25, items: 25 });
    expect(items.map((i) => i.seq).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 25 }, (_, i) => i + 1),
    );
    // One request, 25 responses: each response's request has its own fingerprint (`<fp>~<n>`).
    expect(new Set(metas.map((m) => m.itemId)).size).toBe(25);
    expect(metas.every((m) => /~\d+:0$/.test(m.itemId))).toBe(true);
    await settled();
    expect(upgrades()).toBe(1);
  });

  test('requests of one module share a connection: each sends its body and gets the replies', async () => {
    site.resetStats();
    const replies: string[] = [];
    const spider = defineSpider<string>({
      name: 'chat',
      downloader: 'websocket',
      start(seeds) {
        seeds.add(
          websocketRequest(`${ws}/ws/echo`, { body: 'hello 1', meta: { websocket: { maxMessages: 1 } } }),
        );
      },
      parse(res, cx) {
        const text = res.text();
        cx.emit(text);
        const n = Number(text.split(' ')[1]);
        // The follow-up keeps the downloader (a copy of the request) and goes out on the same socket.
        if (n < 5) cx.follow(res.request.clone({ body: `hello ${n + 1}` }));
      },
    });
    const summary = await Mocra.builder()
      .spider(spider, (r) => void replies.push(r))
      .downloader(createWebSocketDownloader())
      .handleSignals(false)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: 5 });
    expect(replies).toEqual(['hello 1', 'hello 2', 'hello 3', 'hello 4', 'hello 5']);
    await settled();
    expect(upgrades()).toBe(1); // five requests, one connection
  });

  test('a connection lost for good is a typed, retryable error on the retry path', async () => {
    const items: StreamItem[] = [];
    const spider = defineSpider<StreamItem>({
      name: 'flaky-feed',
      downloader: 'feed',
      start(seeds) {
        seeds.add(websocketRequest(`${ws}/ws/stream?count=3&intervalMs=1&end=drop`, {}, 'feed'));
      },
      parse: (res, cx) => cx.emit(res.json<StreamItem>()),
    });
    const summary = await Mocra.builder()
      .spider(spider, (i) => void items.push(i))
      .downloader(
        createWebSocketDownloader({
          name: 'feed',
          reconnect: { maxAttempts: 1, initialDelayMs: 5, jitter: 0, stableAfterMs: 60_000 },
        }),
      )
      .retry({ maxRetries: 0 })
      .handleSignals(false)
      .run();
    // The first socket and one reconnect delivered 3 messages each before the connection gave up.
    expect(items.map((i) => i.seq).sort()).toEqual([1, 1, 2, 2, 3, 3]);
    expect(summary).toMatchObject({ reason: 'idle', deadLettered: 1 });
    expect(summary.errorsByCode).toEqual({ MOCRA_ERR_WEBSOCKET_CLOSED: 1 });
  });

  test('a request-level idle timeout ends the stream while the connection stays for reuse', async () => {
    site.resetStats();
    const items: StreamItem[] = [];
    const spider = defineSpider<StreamItem>({
      name: 'quiet',
      downloader: 'websocket',
      start(seeds) {
        seeds.add(
          websocketRequest(`${ws}/ws/stream?count=4&intervalMs=1&end=open`, {
            meta: { websocket: { idleMs: 150 } },
          }),
        );
      },
      parse: (res, cx) => cx.emit(res.json<StreamItem>()),
    });
    const summary = await Mocra.builder()
      .spider(spider, (i) => void items.push(i))
      .downloader(createWebSocketDownloader({ idleTimeoutMs: 60_000 }))
      .handleSignals(false)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', errors: 0, pages: 4 });
    expect(items).toHaveLength(4);
  });
});
