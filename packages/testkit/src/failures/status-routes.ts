/**
 * Failure endpoints about what the server answers: delays, any status, Retry-After in both forms,
 * endpoints that fail a set number of times, redirect chains and loops.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HTML_TYPE, htmlPage } from '../content/html.js';
import type { RouteRegistrar } from '../site/context.js';
import {
  acceptAnyBody,
  badRequest,
  nonNegativeInt,
  notFound,
  originOf,
  positiveInt,
  queryInt,
} from '../site/http.js';

export const MAX_DELAY_MS = 600_000;
export const MAX_REDIRECTS = 1000;
/** Keys remembered by `/flaky/<key>/<n>`; past this the oldest key is forgotten. */
export const MAX_FLAKY_KEYS = 10_000;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

interface RetryQuery {
  'retry-after'?: string;
  'retry-after-date'?: string;
  location?: string;
  status?: string;
}

/** Adds `Retry-After` from `?retry-after=<s>` (delay-seconds form) or `?retry-after-date=<s>` (HTTP-date form). */
function retryAfter(
  req: FastifyRequest<{ Querystring: RetryQuery }>,
  reply: FastifyReply,
): string | undefined {
  const seconds = queryInt(req.query['retry-after'], -2, 86_400 * 365);
  const dateSeconds = queryInt(req.query['retry-after-date'], -2, 86_400 * 365);
  if (seconds === -1 || dateSeconds === -1) return 'retry-after and retry-after-date take whole seconds';
  if (seconds >= 0) reply.header('retry-after', String(seconds));
  else if (dateSeconds >= 0) {
    // IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT". Rounded up to a whole second so the
    // date is never earlier than now + N seconds.
    const at = Math.ceil((Date.now() + dateSeconds * 1000) / 1000) * 1000;
    reply.header('retry-after', new Date(at).toUTCString());
  }
  return undefined;
}

/** True for a same-site path or an http(s)/ws URL on a loopback host: the fixture never redirects off the machine. */
export function isLoopbackTarget(url: string): boolean {
  if (url.startsWith('/')) return !url.startsWith('//') && !url.startsWith('/\\');
  try {
    const u = new URL(url);
    return (
      ['http:', 'https:', 'ws:', 'wss:'].includes(u.protocol) &&
      (u.hostname === 'localhost' ||
        u.hostname === '[::1]' ||
        /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(u.hostname))
    );
  } catch {
    return false;
  }
}

function redirectStatus(value: string | undefined): number {
  const status = queryInt(value, 302, 999);
  return REDIRECT_STATUSES.has(status) ? status : -1;
}

export const registerStatusRoutes: RouteRegistrar = (app, ctx) => {
  app.get<{ Params: { ms: string } }>('/delay/:ms', (req, reply) => {
    const ms = nonNegativeInt(req.params.ms);
    if (ms < 0 || ms > MAX_DELAY_MS) return notFound(reply);
    const timer = setTimeout(() => {
      if (!reply.raw.destroyed) {
        reply
          .type(HTML_TYPE)
          .send(
            htmlPage(
              'Delayed',
              `<main class="delayed"><h1>Delayed</h1><p class="waited">Waited ${ms} ms.</p></main>`,
            ),
          );
      }
    }, ms);
    // A client that gives up should not leave a timer behind.
    reply.raw.once('close', () => clearTimeout(timer));
    return reply;
  });

  // Any method, any body: a crawler's POST or PUT gets the status it asked for, never a 415.
  app.register(async (scope) => {
    acceptAnyBody(scope);
    scope.all<{ Params: { code: string }; Querystring: RetryQuery }>('/status/:code', (req, reply) => {
      const code = positiveInt(req.params.code);
      if (code < 200 || code > 599) return notFound(reply);
      const problem = retryAfter(req, reply);
      if (problem !== undefined) return badRequest(reply, problem);
      const location = req.query.location;
      if (location !== undefined) {
        if (!isLoopbackTarget(location))
          return badRequest(reply, 'location must be a path or a loopback URL');
        reply.header('location', location);
      }
      reply.code(code);
      if (code === 204 || code === 304) return reply.send();
      return reply.type('text/plain; charset=utf-8').send(`Status ${code}\n`);
    });

    scope.all<{ Params: { key: string; n: string }; Querystring: RetryQuery }>(
      '/flaky/:key/:n',
      (req, reply) => {
        const failures = nonNegativeInt(req.params.n);
        const status = queryInt(req.query.status, 503, 599);
        if (failures < 0 || status < 400) return notFound(reply);
        const { key } = req.params;
        const seen = ctx.flakyCounts.get(key) ?? 0;
        if (seen === 0 && ctx.flakyCounts.size >= MAX_FLAKY_KEYS) {
          ctx.flakyCounts.delete(ctx.flakyCounts.keys().next().value as string);
        }
        ctx.flakyCounts.set(key, seen + 1);
        reply.header('x-fixture-attempt', String(seen + 1));
        if (seen < failures) {
          const problem = retryAfter(req, reply);
          if (problem !== undefined) return badRequest(reply, problem);
          return reply
            .code(status)
            .type('text/plain; charset=utf-8')
            .send(`Attempt ${seen + 1}: status ${status}\n`);
        }
        return reply
          .type(HTML_TYPE)
          .send(
            htmlPage(
              'Recovered',
              `<main class="flaky"><h1>Recovered</h1><p class="attempt">Succeeded on attempt ${seen + 1}.</p></main>`,
            ),
          );
      },
    );
  });

  app.get<{ Params: { n: string }; Querystring: { status?: string; absolute?: string } }>(
    '/redirect/:n',
    (req, reply) => {
      const n = nonNegativeInt(req.params.n);
      const status = redirectStatus(req.query.status);
      if (n < 0 || n > MAX_REDIRECTS) return notFound(reply);
      if (status < 0) return badRequest(reply, 'status must be 301, 302, 303, 307 or 308');
      if (n === 0) {
        return reply
          .type(HTML_TYPE)
          .send(
            htmlPage(
              'Redirect target',
              '<main class="final"><h1>Final page</h1><p>The redirect chain ended here.</p></main>',
            ),
          );
      }
      const q = req.raw.url?.includes('?') ? req.raw.url.slice(req.raw.url.indexOf('?')) : '';
      const path = `/redirect/${n - 1}${q}`;
      return reply.redirect(req.query.absolute === '1' ? `${originOf(req.raw)}${path}` : path, status);
    },
  );

  app.get<{ Params: { len: string; i: string } }>('/redirect-loop/:len/:i', (req, reply) => {
    const len = positiveInt(req.params.len);
    const i = nonNegativeInt(req.params.i);
    if (len < 1 || len > MAX_REDIRECTS || i < 0 || i >= len) return notFound(reply);
    return reply.redirect(`/redirect-loop/${len}/${(i + 1) % len}`, 302);
  });

  app.get<{ Querystring: { url?: string; status?: string } }>('/redirect-to', (req, reply) => {
    const { url } = req.query;
    const status = redirectStatus(req.query.status);
    if (url === undefined || !isLoopbackTarget(url))
      return badRequest(reply, 'url must be a path or a loopback URL');
    if (status < 0) return badRequest(reply, 'status must be 301, 302, 303, 307 or 308');
    return reply.redirect(url, status);
  });
};
