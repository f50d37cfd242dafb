/**
 * `/robots.txt`, the sitemap index, the XML, gzip and text sitemaps, the two private pages, and
 * the `/standards/` pages (standards.ts).
 */
import { gzipSync } from 'node:zlib';
import { HTML_TYPE, htmlPage } from '../content/html.js';
import type { RouteRegistrar } from '../site/context.js';
import { hostIndexOf, notFound, originOf } from '../site/http.js';
import { robotsResponse } from './robots.js';
import {
  bookSitemapCount,
  bookSitemapPaths,
  catalogPagePaths,
  indexEntries,
  indexXml,
  quoteSitemapPaths,
  urlsetXml,
} from './sitemaps.js';
import { registerStandardsRoutes } from './standards.js';

const XML_TYPE = 'application/xml; charset=utf-8';

export const registerCrawlRuleRoutes: RouteRegistrar = (app, ctx) => {
  const cfg = ctx.cfg;

  app.get('/robots.txt', (req, reply) => {
    const robots = ctx.robotsOverrides.get(hostIndexOf(req.raw)) ?? cfg.robots;
    const { status, body } = robotsResponse(robots, originOf(req.raw));
    return reply.code(status).type('text/plain; charset=utf-8').send(body);
  });

  app.get('/sitemap.xml', (req, reply) =>
    reply.type(XML_TYPE).send(indexXml(originOf(req.raw), indexEntries(cfg))),
  );

  app.get('/sitemap.txt', (req, reply) => {
    const origin = originOf(req.raw);
    const lines = quoteSitemapPaths(cfg).map((p) => `${origin}${p}\n`);
    return reply.type('text/plain; charset=utf-8').send(lines.join(''));
  });

  app.get<{ Params: { file: string } }>('/sitemaps/:file', (req, reply) => {
    const origin = originOf(req.raw);
    const file = req.params.file;
    if (file === 'catalog-pages.xml.gz') {
      // A gzip *file*: served as application/gzip without Content-Encoding, the way static
      // servers do, so the client gets the compressed bytes and must gunzip them itself.
      const body = gzipSync(urlsetXml(origin, catalogPagePaths(cfg), cfg.seed));
      return reply.type('application/gzip').send(body);
    }
    const m = /^books-([1-9]\d{0,9})\.xml$/.exec(file);
    const k = m === null ? -1 : Number(m[1]);
    if (k < 1 || k > bookSitemapCount(cfg)) return notFound(reply);
    return reply.type(XML_TYPE).send(urlsetXml(origin, bookSitemapPaths(cfg, k), cfg.seed));
  });

  // Targets of the default robots rules: Disallow /private/, Allow /private/public/.
  const secret = htmlPage(
    'Private page',
    '<main class="private"><h1>Private page</h1><p class="note">The default robots.txt disallows this page.</p><p><a href="/">Home</a></p></main>',
  );
  const open = htmlPage(
    'Public notice',
    '<main class="private-public"><h1>Public notice</h1><p class="note">Under /private/, but allowed by an Allow rule.</p><p><a href="/">Home</a></p></main>',
  );
  app.get('/private/secret', (_req, reply) => reply.type(HTML_TYPE).send(secret));
  app.get('/private/public/notice', (_req, reply) => reply.type(HTML_TYPE).send(open));

  registerStandardsRoutes(app, ctx);
};
