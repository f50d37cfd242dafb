/**
 * Failure endpoints about how bytes arrive: dropped connections, truncated bodies, broken chunked
 * encoding, trickling bodies, huge bodies, compressed bodies and bombs, wrong content types and
 * legacy charsets. Endpoints that must send what Node's HTTP server never would (a bad chunk
 * size, a missing last chunk) write straight to the socket after `reply.hijack()`.
 */
import type { ServerResponse } from 'node:http';
import { brotliCompressSync, constants, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { HTML_TYPE, JSON_TYPE } from '../content/html.js';
import type { RouteRegistrar } from '../site/context.js';
import { badRequest, notFound, queryInt } from '../site/http.js';
import { markRawStatus } from '../stats/tracker.js';
import { hugeHtmlStream, paddedHtml, smallPng } from './bodies.js';
import { bomb } from './bomb.js';
import { CHARSET_PAGES, type CharsetPageName, charsetPageBytes } from './charsets.js';

export const MAX_PADDED_BYTES = 10_000_000;
export const COMPRESSIONS = ['gzip', 'deflate', 'deflate-raw', 'br', 'identity'] as const;
export type Compression = (typeof COMPRESSIONS)[number];

/** Writes bytes the HTTP server would never produce, then half-closes the connection. */
function rawSend(res: ServerResponse, status: number, bytes: string): void {
  markRawStatus(res, status);
  const socket = res.socket;
  if (socket === null) return;
  socket.write(bytes, () => socket.end());
}

function compress(encoding: Compression, body: Buffer): Buffer {
  switch (encoding) {
    case 'gzip':
      return gzipSync(body);
    case 'deflate':
      return deflateSync(body);
    case 'deflate-raw':
      return deflateRawSync(body);
    case 'br':
      return brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } });
    case 'identity':
      return body;
  }
}

export const registerTransportRoutes: RouteRegistrar = (app, ctx) => {
  const { seed } = ctx.cfg;

  app.get('/drop/before-headers', (req, reply) => {
    reply.hijack();
    req.raw.socket.destroy();
    return reply;
  });

  app.get('/drop/mid-body', (_req, reply) => {
    reply.hijack();
    const res = reply.raw;
    const body = paddedHtml(seed, 8192);
    res.writeHead(200, { 'content-type': HTML_TYPE, 'content-length': String(body.length) });
    res.write(body.slice(0, 4096), () => res.destroy());
    return reply;
  });

  app.get<{ Querystring: { declared?: string; sent?: string } }>('/truncated', (req, reply) => {
    const declared = queryInt(req.query.declared, 8192, MAX_PADDED_BYTES);
    const sent = queryInt(req.query.sent, 4096, MAX_PADDED_BYTES);
    if (declared < 1 || sent < 0 || sent >= declared) return badRequest(reply, 'need 0 <= sent < declared');
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': HTML_TYPE,
      'content-length': String(declared),
      connection: 'close',
    });
    // Fewer bytes than promised, then a clean FIN: the client sees the body end early.
    res.write(paddedHtml(seed, declared).slice(0, sent), () => res.socket?.end());
    return reply;
  });

  app.get<{ Querystring: { chunks?: string; intervalMs?: string } }>('/chunked/ok', (req, reply) => {
    const chunks = queryInt(req.query.chunks, 5, 10_000);
    const interval = queryInt(req.query.intervalMs, 0, 60_000);
    if (chunks < 1 || interval < 0) return badRequest(reply, 'chunks 1…10000, intervalMs 0…60000');
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': HTML_TYPE });
    res.write(
      '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Chunked</title>\n</head>\n<body>\n',
    );
    let k = 0;
    const step = (): void => {
      if (res.destroyed) return;
      res.write(`<p class="chunk">Chunk ${++k} of ${chunks}</p>\n`);
      if (k < chunks) setTimeout(step, interval);
      else res.end('</body>\n</html>\n');
    };
    step();
    return reply;
  });

  app.get('/chunked/invalid-size', (_req, reply) => {
    reply.hijack();
    rawSend(
      reply.raw,
      200,
      'HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
        '1a\r\n<p>first chunk is fine</p>\r\n' +
        'zz\r\nthis chunk size is not hexadecimal\r\n0\r\n\r\n',
    );
    return reply;
  });

  app.get('/chunked/unterminated', (_req, reply) => {
    reply.hijack();
    rawSend(
      reply.raw,
      200,
      'HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
        '1a\r\n<p>first chunk is fine</p>\r\n' +
        '40\r\n<p>this chunk promises 64 bytes but the connection ends',
    );
    return reply;
  });

  app.get<{ Querystring: { bytes?: string; chunk?: string; intervalMs?: string } }>(
    '/trickle',
    (req, reply) => {
      const bytes = queryInt(req.query.bytes, 1024, MAX_PADDED_BYTES);
      const chunk = queryInt(req.query.chunk, 64, MAX_PADDED_BYTES);
      const interval = queryInt(req.query.intervalMs, 100, 60_000);
      if (bytes < 1 || chunk < 1 || interval < 0)
        return badRequest(reply, 'bytes >= 1, chunk >= 1, intervalMs 0…60000');
      reply.hijack();
      const res = reply.raw;
      const body = paddedHtml(seed, bytes);
      res.writeHead(200, { 'content-type': HTML_TYPE, 'content-length': String(body.length) });
      let offset = 0;
      let timer: NodeJS.Timeout | undefined;
      const step = (): void => {
        if (res.destroyed) return;
        const next = Math.min(body.length, offset + chunk);
        const piece = body.slice(offset, next);
        offset = next;
        if (offset >= body.length) res.end(piece);
        else {
          res.write(piece);
          timer = setTimeout(step, interval);
        }
      };
      res.once('close', () => clearTimeout(timer));
      step();
      return reply;
    },
  );

  app.get<{ Querystring: { bytes?: string; chunked?: string } }>('/huge', (req, reply) => {
    const bytes = queryInt(req.query.bytes, ctx.cfg.hugeBodyBytes, Number.MAX_SAFE_INTEGER);
    if (bytes < 0) return badRequest(reply, 'bytes must be a non-negative integer');
    if (req.query.chunked !== '1') reply.header('content-length', String(bytes));
    return reply.type(HTML_TYPE).send(hugeHtmlStream(seed, bytes));
  });

  // Bodies up to 1 MiB on the wire are cached per (encoding, size), at most 16 of them, so
  // repeated fetches in a benchmark cost no compression and the cache stays under 16 MiB.
  const compressed = new Map<string, Buffer>();
  app.get<{ Params: { encoding: string }; Querystring: { bytes?: string } }>(
    '/compressed/:encoding',
    (req, reply) => {
      const encoding = req.params.encoding as Compression;
      if (!COMPRESSIONS.includes(encoding)) return notFound(reply);
      const bytes = queryInt(req.query.bytes, 16_384, MAX_PADDED_BYTES);
      if (bytes < 0) return badRequest(reply, `bytes must be 0…${MAX_PADDED_BYTES}`);
      const key = `${encoding}:${bytes}`;
      let body = compressed.get(key);
      if (body === undefined) {
        body = compress(encoding, Buffer.from(paddedHtml(seed, bytes)));
        if (body.length <= 1 << 20) {
          if (compressed.size >= 16) compressed.delete(compressed.keys().next().value as string);
          compressed.set(key, body);
        }
      }
      if (encoding !== 'identity')
        reply.header('content-encoding', encoding === 'deflate-raw' ? 'deflate' : encoding);
      return reply.header('vary', 'Accept-Encoding').type(HTML_TYPE).send(body);
    },
  );

  app.get<{ Params: { format: string }; Querystring: { size?: string } }>('/bomb/:format', (req, reply) => {
    const format = req.params.format;
    if (format !== 'gzip' && format !== 'deflate') return notFound(reply);
    const size = queryInt(req.query.size, ctx.cfg.bombBytes, 2 ** 40);
    if (size < 0) return badRequest(reply, 'size must be 0…2^40');
    const b = bomb(format, size);
    return reply
      .header('content-encoding', format)
      .header('content-length', String(b.wireBytes))
      .header('x-inflated-bytes', String(b.inflatedBytes))
      .type(HTML_TYPE)
      .send(b.stream());
  });

  app.get<{ Params: { kind: string } }>('/wrong-type/:kind', (req, reply) => {
    switch (req.params.kind) {
      case 'html-as-png':
        return reply.type('image/png').send(paddedHtml(seed, 2048));
      case 'json-as-html':
        return reply
          .type(HTML_TYPE)
          .send(JSON.stringify({ kind: 'json', served_as: 'text/html', items: [1, 2, 3] }));
      case 'png-as-html':
        return reply.type(HTML_TYPE).send(smallPng());
      case 'html-as-json':
        return reply.type(JSON_TYPE).send(paddedHtml(seed, 2048));
      case 'missing': {
        reply.hijack();
        const body = paddedHtml(seed, 2048);
        reply.raw.writeHead(200, { 'content-length': String(body.length) });
        reply.raw.end(body);
        return reply;
      }
      default:
        return notFound(reply);
    }
  });

  const charsetBodies = new Map<string, Buffer>();
  app.get<{ Params: { name: string } }>('/charset/:name', (req, reply) => {
    const name = req.params.name as CharsetPageName;
    if (!Object.hasOwn(CHARSET_PAGES, name)) return notFound(reply);
    let body = charsetBodies.get(name);
    if (body === undefined) {
      body = charsetPageBytes(name);
      charsetBodies.set(name, body);
    }
    return reply.type(CHARSET_PAGES[name].contentType).send(body);
  });
};
