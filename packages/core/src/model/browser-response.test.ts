// A browser-rendered response keeps its screenshot and `rendered` flag across a serializing
// queue (Redis, NATS and Kafka encode payloads with the queue codec; the parse stage rebuilds
// them with Response.from).
import { describe, expect, test } from 'vitest';
import { createQueueCodec } from '../queue/codec.js';
import { Request } from './request.js';
import { BrowserResponse, Response } from './response.js';

const PNG_SIGNATURE = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 255]);

function rendered(screenshot: Uint8Array | undefined): BrowserResponse {
  return new BrowserResponse({
    url: 'http://127.0.0.1:1/app',
    status: 200,
    headers: { 'content-type': 'text/html; charset=utf-8' },
    body: new TextEncoder().encode('<p>rendered</p>'),
    request: new Request('http://127.0.0.1:1/app', { meta: { browser: { screenshot: true } } }),
    screenshot,
    rendered: true,
  });
}

describe.each(['msgpack', 'json'] as const)('BrowserResponse through the %s codec', (format) => {
  const codec = createQueueCodec({ format });

  test('comes back as a BrowserResponse with the same screenshot bytes', async () => {
    const bytes = await codec.encode(rendered(PNG_SIGNATURE), 'response');
    const back = Response.from((await codec.decode(bytes, 'response')) as Response);
    expect(back).toBeInstanceOf(BrowserResponse);
    const browser = back as BrowserResponse;
    expect(browser.rendered).toBe(true);
    expect(Array.from(browser.screenshot ?? [])).toEqual(Array.from(PNG_SIGNATURE));
    expect(browser.text()).toBe('<p>rendered</p>');
    expect(browser.request.meta).toEqual({ browser: { screenshot: true } });
  });

  test('without a screenshot it stays a BrowserResponse with none', async () => {
    const back = Response.from(
      (await codec.decode(await codec.encode(rendered(undefined), 'r'), 'r')) as Response,
    );
    expect(back).toBeInstanceOf(BrowserResponse);
    expect((back as BrowserResponse).screenshot).toBeUndefined();
  });

  test('a plain response stays a plain Response', async () => {
    const plain = new Response({
      url: 'http://127.0.0.1:1/',
      status: 404,
      headers: {},
      body: new Uint8Array([1, 2, 3]),
      request: new Request('http://127.0.0.1:1/'),
    });
    const back = Response.from((await codec.decode(await codec.encode(plain, 'r'), 'r')) as Response);
    expect(back).not.toBeInstanceOf(BrowserResponse);
    expect(back.status).toBe(404);
    expect(Array.from(back.body)).toEqual([1, 2, 3]);
  });
});
