/**
 * `/__fixture/…`: the site's counters and controls over HTTP, for a fixture site running in
 * another process (the `mocra-fixture-site` CLI). Requests to these paths are never counted.
 */
import { JSON_TYPE } from '../content/html.js';
import type { RouteRegistrar } from '../site/context.js';
import { resetSiteStats, siteStats } from '../site/site-stats.js';

export const CONTROL_PREFIX = '/__fixture/';

export const registerControlRoutes: RouteRegistrar = (app, ctx) => {
  app.get<{ Querystring: { log?: string } }>('/__fixture/stats', (req, reply) =>
    reply
      .type(JSON_TYPE)
      .header('cache-control', 'no-store')
      .send(JSON.stringify(siteStats(ctx, req.query.log !== '0'))),
  );
  app.post('/__fixture/reset', (_req, reply) => {
    resetSiteStats(ctx);
    return reply.code(204).send();
  });
  app.post<{ Querystring: { user?: string } }>('/__fixture/invalidate-sessions', (req, reply) => {
    ctx.sessions.invalidate(req.query.user);
    return reply.code(204).send();
  });
};
