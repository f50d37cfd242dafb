/**
 * `/standards/…`: pages for the edge cases of the public standards a crawler follows — robots.txt
 * matching (RFC 9309), encoding sniffing (the HTML Standard), URL forms (WHATWG URL) and sitemap
 * locations (sitemaps.org). Serve `STANDARDS_ROBOTS` as the site's robots.txt (`setRobots`) to
 * crawl them:
 *
 *   /standards/                 links to every page below, twice to /standards/x (as `x` and `x?`)
 *   /standards/legacy           windows-1252, no charset header, a decoy `<meta charset>` in a comment
 *   /standards/late-meta        Shift_JIS, its `<meta charset>` after 1 KB of inline style in the head
 *   /standards/x                one page, however it is linked
 *   /standards/%7Ejoe/page      disallowed by `Disallow: /standards/~joe/` (percent-encoding normalised)
 *   /standards/foo/bar/%62%61%7A  disallowed by `Disallow: /standards/foo/bar/baz`
 *   /standards/from-sitemap     listed only by the sitemap
 *   /standards/sitemap.xml      lists from-sitemap, and a page of another host (never to be fetched)
 *   /standards/zeros.xml.gz     about 1 MB of gzip that inflates to 1 GiB of zeros
 */
import { gzipSync } from 'node:zlib';
import { HTML_TYPE, htmlPage } from '../content/html.js';
import { encodeLegacy } from '../failures/charsets.js';
import type { RouteRegistrar } from '../site/context.js';
import { notFound, originOf } from '../site/http.js';

/**
 * A robots.txt with the cases RFC 9309 settles: the `*` group shuts everything, mocra's group —
 * with `Sitemap:` lines between its user-agent line and its rules, which must not split it —
 * allows all but two pages written with percent-encoding the rules do not use.
 */
export const STANDARDS_ROBOTS = `User-agent: *
Disallow: /

User-agent: mocra
Sitemap: {origin}/standards/sitemap.xml
Sitemap: {origin}/standards/zeros.xml.gz
Disallow: /standards/~joe/
Disallow: /standards/foo/bar/baz
`;

/** A robots.txt whose group for mocra has no rules: mocra may fetch everything (RFC 9309 §2.1). */
export const EMPTY_GROUP_ROBOTS = 'User-agent: *\nDisallow: /\n\nUser-agent: mocra\n';

export const STANDARDS_PATHS = {
  index: '/standards/',
  legacy: '/standards/legacy',
  lateMeta: '/standards/late-meta',
  query: '/standards/x',
  joe: '/standards/%7Ejoe/page',
  baz: '/standards/foo/bar/%62%61%7A',
  fromSitemap: '/standards/from-sitemap',
  sitemap: '/standards/sitemap.xml',
  zeros: '/standards/zeros.xml.gz',
} as const;

/** The titles of the legacy-encoded pages, as a correct decoder reads them. */
export const LEGACY_TITLE = '“Smart quotes” — €5 à la carte';
export const LATE_META_TITLE = '日本語のページ';

/** The page of another host that `/standards/sitemap.xml` lists (on `localhost`, the same server). */
export const FOREIGN_SITEMAP_PATH = '/standards/foreign';

let zeros: Buffer | undefined;

/** 16 gzip members of 64 MiB of zeros each: ~1 MB on the wire, 1 GiB inflated. Built once. */
function zerosGzip(): Buffer {
  zeros ??= Buffer.concat(Array.from({ length: 16 }, () => gzipSync(Buffer.alloc(64 * 1024 * 1024))));
  return zeros;
}

const page = (title: string, text: string) =>
  htmlPage(title, `<main class="standards"><h1>${title}</h1><p class="sample">${text}</p></main>`);

export const registerStandardsRoutes: RouteRegistrar = (app) => {
  const index = htmlPage(
    'Standards',
    `<main class="standards"><h1>Standards edge cases</h1><ul>
<li><a href="legacy">windows-1252</a></li>
<li><a href="late-meta">Shift_JIS, late meta</a></li>
<li><a href="x">x</a> and <a href="x?">x?</a></li>
<li><a href="%7Ejoe/page">~joe</a></li>
<li><a href="foo/bar/%62%61%7A">baz</a></li>
</ul></main>`,
  );
  // Bytes in windows-1252: “ ” — € à are 0x93 0x94 0x97 0x80 0xE0. The comment's iso-8859-2
  // would turn them into controls and ŕ.
  const legacy = encodeLegacy(
    `<!DOCTYPE html>\n<html><head>\n<!--<meta charset="iso-8859-2">-->\n<meta charset="windows-1252">\n<title>${LEGACY_TITLE}</title>\n</head><body><p class="sample">${LEGACY_TITLE}</p></body></html>\n`,
    'windows-1252',
  );
  const style = `<style>${'.standards p { margin: 0 0 1em 0; }\n'.repeat(40)}</style>\n`;
  const lateMeta = encodeLegacy(
    `<!DOCTYPE html>\n<html><head>\n${style}<meta charset="shift_jis">\n<title>${LATE_META_TITLE}</title>\n</head><body><p class="sample">${LATE_META_TITLE}</p></body></html>\n`,
    'shift_jis',
  );

  app.get('/standards/*', (req, reply) => {
    const raw = req.raw.url ?? '/';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    const origin = originOf(req.raw);
    switch (path) {
      case STANDARDS_PATHS.index:
        return reply.type(HTML_TYPE).send(index);
      case STANDARDS_PATHS.legacy:
        return reply.type('text/html').send(legacy);
      case STANDARDS_PATHS.lateMeta:
        return reply.type('text/html').send(lateMeta);
      case STANDARDS_PATHS.query:
        return reply.type(HTML_TYPE).send(page('X', 'One page, linked as x and as x?.'));
      case STANDARDS_PATHS.joe:
      case STANDARDS_PATHS.baz:
        return reply.type(HTML_TYPE).send(page('Disallowed', 'robots.txt disallows this page.'));
      case STANDARDS_PATHS.fromSitemap:
        return reply.type(HTML_TYPE).send(page('From the sitemap', 'Only the sitemap lists this page.'));
      case FOREIGN_SITEMAP_PATH:
        return reply.type(HTML_TYPE).send(page('Foreign', 'A sitemap of another host listed this page.'));
      case STANDARDS_PATHS.sitemap: {
        const other = origin.replace('127.0.0.1', 'localhost');
        return reply
          .type('application/xml; charset=utf-8')
          .send(
            `<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n` +
              `<url><loc>${origin}${STANDARDS_PATHS.fromSitemap}</loc></url>\n` +
              `<url><loc>${other}${FOREIGN_SITEMAP_PATH}</loc></url>\n</urlset>\n`,
          );
      }
      case STANDARDS_PATHS.zeros:
        return reply.type('application/gzip').send(zerosGzip());
      default:
        return notFound(reply);
    }
  });
};
