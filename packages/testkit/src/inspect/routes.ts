/**
 * Endpoints that show a client what it sent: `/echo` (method, headers, body) and `/cookies`.
 * Used to check that a crawler keeps method, headers, body and cookies across follow-ups.
 */
import fastifyCookie from '@fastify/cookie';
import { JSON_TYPE } from '../content/html.js';
import type { RouteRegistrar } from '../site/context.js';
import { acceptAnyBody } from '../site/http.js';

export const ECHO_BODY_LIMIT = 1 << 20;

/** The JSON body of `/echo`. */
export interface EchoResponse {
  method: string;
  /** Path and query as received. */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** The request body decoded as UTF-8 ('' when there was none). */
  body: string;
  /** Length of the request body in bytes. */
  bodyBytes: number;
}

export const registerInspectRoutes: RouteRegistrar = (app) => {
  app.register(async (scope) => {
    acceptAnyBody(scope, ECHO_BODY_LIMIT);
    scope.route({
      method: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
      url: '/echo',
      handler: (req, reply) => {
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const echo: EchoResponse = {
          method: req.method,
          url: req.url,
          headers: req.headers,
          body: raw.toString('utf8'),
          bodyBytes: raw.length,
        };
        return reply.type(JSON_TYPE).send(JSON.stringify(echo));
      },
    });
  });

  app.register(async (scope) => {
    await scope.register(fastifyCookie);
    scope.get('/cookies', (req, reply) =>
      reply.type(JSON_TYPE).send(JSON.stringify({ cookies: req.cookies })),
    );
    scope.get<{ Querystring: Record<string, string | string[]> }>('/cookies/set', (req, reply) => {
      for (const [name, value] of Object.entries(req.query)) {
        if (/^[\w.-]{1,64}$/.test(name))
          reply.setCookie(name, Array.isArray(value) ? String(value[0]) : value, { path: '/' });
      }
      return reply.redirect('/cookies', 302);
    });
    scope.get<{ Querystring: Record<string, string | string[]> }>('/cookies/delete', (req, reply) => {
      for (const name of Object.keys(req.query)) reply.clearCookie(name, { path: '/' });
      return reply.redirect('/cookies', 302);
    });
  });
};
