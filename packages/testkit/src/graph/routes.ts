/** The link-graph route: `/graph/<pages>/<fanout>/<bytes>/<i>`. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HTML_TYPE } from '../content/html.js';
import type { RouteRegistrar } from '../site/context.js';
import { nonNegativeInt, notFound, positiveInt } from '../site/http.js';
import { isValidGraphSpec, renderGraphPage } from './graph.js';

export const registerGraphRoutes: RouteRegistrar = (app, ctx) => {
  const seed = ctx.cfg.seed;
  app.get<{ Params: { n: string; f: string; b: string; i: string } }>('/graph/:n/:f/:b/:i', (req, reply) => {
    const { n, f, b, i } = req.params;
    const spec = { pages: positiveInt(n), fanout: positiveInt(f), bytes: nonNegativeInt(b) };
    const index = nonNegativeInt(i);
    if (!isValidGraphSpec(spec) || index < 0 || index >= spec.pages) return notFound(reply);
    return reply.type(HTML_TYPE).send(renderGraphPage(seed, spec, index));
  });
};

/**
 * The same route without fastify, called first by the server for every `/graph/` URL: the link
 * graph is what crawl benchmarks hammer, and skipping the framework's per-request work leaves
 * more of the machine to the crawler under test. Returns false (and writes nothing) for anything
 * it does not serve, so fastify answers it (404, HEAD, other methods).
 */
export function serveGraphFast(seed: number, req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== 'GET') return false;
  const url = req.url!;
  if (url.indexOf('?') >= 0) return false;
  const parts = url.split('/');
  // ['', 'graph', n, f, b, i]
  if (parts.length !== 6) return false;
  const spec = {
    pages: positiveInt(parts[2]),
    fanout: positiveInt(parts[3]),
    bytes: nonNegativeInt(parts[4]),
  };
  const index = nonNegativeInt(parts[5]);
  if (!isValidGraphSpec(spec) || index < 0 || index >= spec.pages) return false;
  // No writeHead: ending with the whole body lets Node send Content-Length instead of chunks.
  res.setHeader('content-type', HTML_TYPE);
  res.end(renderGraphPage(seed, spec, index));
  return true;
}
