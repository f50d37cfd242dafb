import http from 'node:http';
import net from 'node:net';
import zlib from 'node:zlib';
import { startHostileSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { isMocraError, type MocraError } from '../errors.js';
import { Request } from '../model/request.js';
import { createHttpDownloader, type HttpDownloader } from './http-downloader.js';
import { DEFAULT_USER_AGENT } from './version.js';

// A small real HTTP server per concern; raw TCP for responses http.Server refuses to produce.
const HTML_UTF8 = '<html><head><title>Grüße</title></head><body>ok</body></html>';

function handler(req: http.IncomingMessage, res: http.ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://x');
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString();
    switch (url.pathname) {
      case '/echo':
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ method: req.method, headers: req.headers, body, url: req.url }));
        return;
      case '/status':
        res.statusCode = Number(url.searchParams.get('code'));
        res.end(`status ${res.statusCode}`);
        return;
      case '/gzip':
        res.setHeader('content-encoding', 'gzip');
        res.end(zlib.gzipSync(HTML_UTF8));
        return;
      case '/deflate':
        res.setHeader('content-encoding', 'deflate');
        res.end(zlib.deflateSync(HTML_UTF8));
        return;
      case '/deflate-raw':
        res.setHeader('content-encoding', 'deflate');
        res.end(zlib.deflateRawSync(HTML_UTF8));
        return;
      case '/br':
        res.setHeader('content-encoding', 'br');
        res.end(zlib.brotliCompressSync(HTML_UTF8));
        return;
      case '/gzip-br':
        res.setHeader('content-encoding', 'gzip, br');
        res.end(zlib.brotliCompressSync(zlib.gzipSync(HTML_UTF8)));
        return;
      case '/fake-gzip':
        res.setHeader('content-encoding', 'gzip');
        res.end('this is not gzip at all');
        return;
      case '/zstd':
        res.setHeader('content-encoding', 'zstd');
        res.end('whatever');
        return;
      case '/big': {
        // 2 MiB, no Content-Length (chunked): the cap must be enforced while streaming.
        res.setHeader('content-type', 'text/plain');
        const piece = Buffer.alloc(64 * 1024, 97);
        for (let i = 0; i < 32; i++) res.write(piece);
        res.end();
        return;
      }
      case '/big-declared':
        res.setHeader('content-length', String(4 * 1024 * 1024));
        res.write('x');
        // Never finished: the declared length alone must fail the download.
        return;
      case '/bomb':
        res.setHeader('content-encoding', 'gzip');
        res.end(zlib.gzipSync(Buffer.alloc(20 * 1024 * 1024)));
        return;
      case '/redirect': {
        const n = Number(url.searchParams.get('n'));
        res.statusCode = 302;
        res.setHeader('location', n <= 1 ? '/echo?final=1' : `/redirect?n=${n - 1}`);
        res.end();
        return;
      }
      case '/loop-a':
        res.statusCode = 301;
        res.setHeader('location', '/loop-b');
        res.end();
        return;
      case '/loop-b':
        res.statusCode = 301;
        res.setHeader('location', `http://${req.headers.host}/loop-a`);
        res.end();
        return;
      case '/see-other':
        res.statusCode = 303;
        res.setHeader('location', '/echo');
        res.end();
        return;
      case '/temporary':
        res.statusCode = 307;
        res.setHeader('location', '/echo');
        res.end();
        return;
      case '/bad-location':
        res.statusCode = 302;
        res.setHeader('location', 'ftp://example.com/file');
        res.end();
        return;
      case '/slow-headers':
        setTimeout(() => res.end('late'), 2_000).unref();
        return;
      case '/slow-body':
        res.write('first part');
        setTimeout(() => res.end('late'), 2_000).unref();
        return;
      default:
        res.setHeader('content-type', 'text/html; charset=utf-8');
        res.end(HTML_UTF8);
    }
  });
}

let server: http.Server;
let raw: net.Server;
let base: string;
let rawBase: string;
let dl: HttpDownloader;
const never = new AbortController().signal;

const RAW: Record<string, string> = {
  '/truncated': 'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly a little',
  '/bad-chunk': 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\nxx\r\n',
  '/empty-gzip': 'HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 0\r\n\r\n',
  '/drop': '',
};

beforeAll(async () => {
  server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  raw = net.createServer((sock) => {
    sock.once('data', (d) => {
      const path = d.toString().split(' ')[1] ?? '/';
      const answer = RAW[path];
      if (answer === '' || answer === undefined) sock.destroy();
      else sock.end(answer);
    });
  });
  await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
  rawBase = `http://127.0.0.1:${(raw.address() as net.AddressInfo).port}`;
  dl = createHttpDownloader({ maxBodyBytes: 1024 * 1024 });
});

afterAll(async () => {
  await dl.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await new Promise((r) => raw.close(r));
});

async function failure(promise: Promise<unknown>): Promise<MocraError> {
  try {
    await promise;
  } catch (err) {
    if (isMocraError(err)) return err;
    throw err;
  }
  throw new Error('expected the download to fail');
}

describe('HttpDownloader', () => {
  test('sends method, headers and body; default User-Agent and Accept-Encoding; request headers win', async () => {
    const req = new Request(`${base}/echo?q=1#frag`, {
      method: 'post',
      headers: { 'X-Token': 'abc', 'User-Agent': 'custom/1' },
      body: 'a=1&b=2',
    });
    const res = await dl.download(req, never);
    const echo = res.json<{ method: string; headers: Record<string, string>; body: string; url: string }>();
    expect(echo.method).toBe('POST');
    expect(echo.body).toBe('a=1&b=2');
    expect(echo.url).toBe('/echo?q=1');
    expect(echo.headers['x-token']).toBe('abc');
    expect(echo.headers['user-agent']).toBe('custom/1');
    expect(echo.headers['accept-encoding']).toBe('gzip, deflate, br');
    expect(res.request).toBe(req);
    expect(res.redirects).toEqual([]);

    const plain = (await dl.download(new Request(`${base}/echo`), never)).json<{
      headers: Record<string, string>;
    }>();
    expect(plain.headers['user-agent']).toBe(DEFAULT_USER_AGENT);
    expect(DEFAULT_USER_AGENT).toMatch(/^mocra\/\d+\.\d+\.\d+/);
  });

  test('non-2xx statuses are responses, not errors', async () => {
    for (const code of [404, 500, 503]) {
      const res = await dl.download(new Request(`${base}/status?code=${code}`), never);
      expect(res.status).toBe(code);
      expect(res.ok).toBe(false);
      expect(res.text()).toBe(`status ${code}`);
    }
  });

  test.each(['gzip', 'deflate', 'deflate-raw', 'br', 'gzip-br'])('decodes %s bodies', async (path) => {
    const res = await dl.download(new Request(`${base}/${path}`), never);
    expect(res.text()).toBe(HTML_UTF8);
  });

  test('a body that claims an encoding it does not have fails with MOCRA_ERR_CONTENT_DECODING', async () => {
    const err = await failure(dl.download(new Request(`${base}/fake-gzip`), never));
    expect(err.code).toBe('MOCRA_ERR_CONTENT_DECODING');
    expect(err.retryable).toBe(false);
    const unsupported = await failure(dl.download(new Request(`${base}/zstd`), never));
    expect(unsupported.code).toBe('MOCRA_ERR_CONTENT_DECODING');
    expect(unsupported.message).toContain('zstd');
  });

  test('stacked codings: up to maxContentCodings are decoded, more fail before any decode', async () => {
    const hostile = await startHostileSite();
    const small = createHttpDownloader({ maxContentCodings: 3 });
    try {
      expect(
        (await small.download(new Request(`${hostile.url}/stacked-encoding/3`), never)).text(),
      ).toContain('gzip × 3');
      const err = await failure(small.download(new Request(`${hostile.url}/stacked-encoding/4`), never));
      expect(err).toMatchObject({
        code: 'MOCRA_ERR_TOO_MANY_ENCODINGS',
        limit: 3,
        count: 4,
        retryable: false,
      });
      const many = await failure(dl.download(new Request(`${hostile.url}/stacked-encoding/2500`), never));
      expect(many).toMatchObject({ code: 'MOCRA_ERR_TOO_MANY_ENCODINGS', limit: 4, count: 2500 });
      expect(() => createHttpDownloader({ maxContentCodings: 0 })).toThrow(/maxContentCodings/);
      // An empty Location is a broken answer, not a redirect loop.
      const empty = await failure(dl.download(new Request(`${hostile.url}/empty-location`), never));
      expect(empty).toMatchObject({ code: 'MOCRA_ERR_INVALID_URL', retryable: false });
      expect(empty.message).toMatch(/empty Location/);
    } finally {
      await small.close();
      await hostile.close();
    }
  });

  test('a body that trickles in is ended by the request deadline; the caller aborting stays an abort', async () => {
    const hostile = await startHostileSite();
    const quick = createHttpDownloader({ requestTimeoutMs: 600, bodyTimeoutMs: 30_000 });
    try {
      const slow = new Request(`${hostile.url}/slow-body/1000?intervalMs=50`);
      const err = await failure(quick.download(slow, never));
      expect(err).toMatchObject({
        code: 'MOCRA_ERR_TIMEOUT',
        phase: 'request',
        timeoutMs: 600,
        retryable: true,
      });
      // A request allowed a longer idle wait is not cut by the shorter deadline.
      const own = new Request(`${hostile.url}/slow-body/20?intervalMs=50`, { timeoutMs: 5000 });
      expect((await quick.download(own, never)).body.length).toBe(20);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const aborted = await failure(
        quick.download(new Request(`${hostile.url}/endless/0`), controller.signal),
      );
      expect(aborted.code).toBe('MOCRA_ERR_ABORTED');
      expect(() => createHttpDownloader({ requestTimeoutMs: 0 })).toThrow(/requestTimeoutMs/);
    } finally {
      await quick.close();
      await hostile.close();
    }
  });

  test('an empty body with a Content-Encoding is an empty body', async () => {
    const res = await dl.download(new Request(`${rawBase}/empty-gzip`), never);
    expect(res.body.length).toBe(0);
  });

  test('the size cap stops a streamed body, a declared one, and a compression bomb', async () => {
    const streamed = await failure(dl.download(new Request(`${base}/big`), never));
    expect(streamed.code).toBe('MOCRA_ERR_BODY_TOO_LARGE');
    expect(streamed).toMatchObject({ limit: 1024 * 1024, decoded: false });

    const declared = await failure(dl.download(new Request(`${base}/big-declared`), never));
    expect(declared).toMatchObject({ code: 'MOCRA_ERR_BODY_TOO_LARGE', received: 4 * 1024 * 1024 });

    const bomb = await failure(dl.download(new Request(`${base}/bomb`), never));
    expect(bomb).toMatchObject({ code: 'MOCRA_ERR_BODY_TOO_LARGE', decoded: true });
    // Stopped near the cap, not after inflating 20 MiB.
    expect((bomb as unknown as { received: number }).received).toBeLessThan(2 * 1024 * 1024);

    // The downloader is still usable afterwards.
    expect((await dl.download(new Request(`${base}/`), never)).status).toBe(200);
  });

  test('follows redirects: final URL and the chain on the response', async () => {
    const res = await dl.download(new Request(`${base}/redirect?n=3`), never);
    expect(res.status).toBe(200);
    expect(res.url).toBe(`${base}/echo?final=1`);
    expect(res.redirects).toEqual([
      { url: `${base}/redirect?n=3`, status: 302, location: `${base}/redirect?n=2` },
      { url: `${base}/redirect?n=2`, status: 302, location: `${base}/redirect?n=1` },
      { url: `${base}/redirect?n=1`, status: 302, location: `${base}/echo?final=1` },
    ]);
  });

  test('303 turns a POST into a GET without body; 307 keeps method and body', async () => {
    const seeOther = await dl.download(
      new Request(`${base}/see-other`, { method: 'POST', body: 'x=1' }),
      never,
    );
    expect(seeOther.json()).toMatchObject({ method: 'GET', body: '' });
    const temporary = await dl.download(
      new Request(`${base}/temporary`, { method: 'POST', body: 'x=1' }),
      never,
    );
    expect(temporary.json()).toMatchObject({ method: 'POST', body: 'x=1' });
  });

  test('redirect loops, too many redirects and bad targets fail with their codes', async () => {
    const loop = await failure(dl.download(new Request(`${base}/loop-a`), never));
    expect(loop.code).toBe('MOCRA_ERR_REDIRECT_LOOP');
    const tooMany = await failure(
      dl.download(new Request(`${base}/redirect?n=5`, { maxRedirects: 3 }), never),
    );
    expect(tooMany).toMatchObject({ code: 'MOCRA_ERR_TOO_MANY_REDIRECTS', limit: 3 });
    const bad = await failure(dl.download(new Request(`${base}/bad-location`), never));
    expect(bad.code).toBe('MOCRA_ERR_INVALID_URL');
  });

  test('maxRedirects 0 returns the redirect response itself', async () => {
    const res = await dl.download(new Request(`${base}/redirect?n=1`, { maxRedirects: 0 }), never);
    expect(res.status).toBe(302);
    expect(res.header('location')).toBe('/echo?final=1');
  });

  test('timeouts say which phase', async () => {
    const fast = createHttpDownloader({ headersTimeoutMs: 200, bodyTimeoutMs: 200 });
    try {
      const headers = await failure(fast.download(new Request(`${base}/slow-headers`), never));
      expect(headers).toMatchObject({ code: 'MOCRA_ERR_TIMEOUT', phase: 'headers', retryable: true });
      const body = await failure(fast.download(new Request(`${base}/slow-body`), never));
      expect(body).toMatchObject({ code: 'MOCRA_ERR_TIMEOUT', phase: 'body' });
      // A per-request timeout overrides the downloader's.
      const perRequest = await failure(
        dl.download(new Request(`${base}/slow-headers`, { timeoutMs: 150 }), never),
      );
      expect(perRequest).toMatchObject({ code: 'MOCRA_ERR_TIMEOUT', phase: 'headers', timeoutMs: 150 });
    } finally {
      await fast.close();
    }
  });

  test('broken framing and dropped connections', async () => {
    const truncated = await failure(dl.download(new Request(`${rawBase}/truncated`), never));
    expect(truncated).toMatchObject({ code: 'MOCRA_ERR_MALFORMED_RESPONSE', retryable: true });
    const badChunk = await failure(dl.download(new Request(`${rawBase}/bad-chunk`), never));
    expect(badChunk.code).toBe('MOCRA_ERR_MALFORMED_RESPONSE');
    const dropped = await failure(dl.download(new Request(`${rawBase}/drop`), never));
    expect(dropped).toMatchObject({ code: 'MOCRA_ERR_CONNECTION', retryable: true });
    const refused = await failure(dl.download(new Request('http://127.0.0.1:1/'), never));
    expect(refused).toMatchObject({ code: 'MOCRA_ERR_CONNECTION', phase: 'connect' });
  });

  test('invalid URLs fail before any connection', async () => {
    for (const url of ['not a url', 'ftp://example.com/x', '/relative']) {
      const err = await failure(dl.download(new Request(url), never));
      expect(err.code).toBe('MOCRA_ERR_INVALID_URL');
    }
  });

  test('an aborted signal ends the download with MOCRA_ERR_ABORTED', async () => {
    const controller = new AbortController();
    const pending = dl.download(new Request(`${base}/slow-headers`), controller.signal);
    setTimeout(() => controller.abort(), 50);
    const err = await failure(pending);
    expect(err.code).toBe('MOCRA_ERR_ABORTED');
  });

  test('keeps connections alive across requests', async () => {
    const ports = new Set<number>();
    const counting = http.createServer((req, res) => {
      ports.add(req.socket.remotePort ?? 0);
      res.end('ok');
    });
    await new Promise<void>((r) => counting.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(counting.address() as net.AddressInfo).port}/`;
    const one = createHttpDownloader({ connections: 1 });
    try {
      for (let i = 0; i < 10; i++) await one.download(new Request(url), never);
      expect(ports.size).toBe(1);
    } finally {
      await one.close();
      counting.closeAllConnections();
      await new Promise((r) => counting.close(r));
    }
  });
});
