/** Small request/reply helpers shared by every route family. */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { HTML_TYPE, htmlPage } from '../content/html.js';

/** A strict positive integer parse for path segments: `7` → 7; `07`, `7a`, `0`, `-1` → -1. */
export function positiveInt(text: string | undefined): number {
  return text !== undefined && /^[1-9]\d{0,14}$/.test(text) ? Number(text) : -1;
}

/** Like {@link positiveInt} but also accepts `0`. */
export function nonNegativeInt(text: string | undefined): number {
  return text === '0' ? 0 : positiveInt(text);
}

/** A query value as a non-negative integer within `[0, max]`, `fallback` when absent, -1 when bad. */
export function queryInt(value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'string') return -1;
  const n = nonNegativeInt(value);
  return n > max ? -1 : n;
}

const NOT_FOUND = htmlPage(
  'Not found',
  '<main class="error"><h1>404 Not found</h1><p>No fixture page lives at this address.</p></main>',
);

export function notFound(reply: FastifyReply): FastifyReply {
  return reply.code(404).type(HTML_TYPE).send(NOT_FOUND);
}

export function badRequest(reply: FastifyReply, message: string): FastifyReply {
  return reply.code(400).type('text/plain; charset=utf-8').send(`400 Bad request: ${message}\n`);
}

/** `http://<host header>`, the origin the client used (each fixture host sees its own). */
export function originOf(req: IncomingMessage): string {
  const host = req.headers.host;
  if (host !== undefined && host !== '') return `http://${host}`;
  const { localAddress, localPort } = req.socket;
  return `http://${localAddress ?? '127.0.0.1'}:${localPort ?? 80}`;
}

/** 0-based index of the fixture host a request arrived on (127.0.0.1 → 0, 127.0.0.2 → 1, …). */
export function hostIndexOf(req: IncomingMessage): number {
  const address = req.socket.localAddress ?? '';
  const m = /(?:^|:)127\.0\.0\.(\d{1,3})$/.exec(address);
  return m === null ? 0 : Math.max(0, Number(m[1]) - 1);
}

/**
 * Makes a scope take any request body as raw bytes (up to `limit`), whatever its content type,
 * so endpoints that accept every method never answer 415.
 */
export function acceptAnyBody(scope: FastifyInstance, limit = 1 << 20): void {
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limit }, (_req, body, done) =>
    done(null, body),
  );
}
