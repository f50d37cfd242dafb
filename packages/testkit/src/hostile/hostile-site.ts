/**
 * `startHostileSite()`: a small server beside the fixture site that answers like an attacker or a
 * broken peer would. Each input lives at its own route; none of them is reachable from the
 * fixture site's pages, so crawling the fixture site never meets them by accident.
 *
 *   GET /robots.txt                 allow-all listing a sitemap that never answers, or itself never answered (`silentRobots`)
 *   GET /silent/:name               headers never sent (a sitemap or page that never answers)
 *   GET /stacked-encoding/:n        a page gzipped n times, `Content-Encoding: gzip` × n
 *   GET /empty-location             302 with an empty `Location`
 *   GET /huge-title/:bytes          a page whose <title> is `bytes` long
 *   GET /slow-body/:bytes           a body of `bytes` sent one byte per `intervalMs` (default 100)
 *   GET /endless/:i                 200, a body that never ends (10 KiB every 10 ms)
 *   GET /bomb/:i                    a 1 GiB gzip bomb of zeros (~1 MB on the wire)
 *   GET /failing/:kind/:n           links to n distinct /:kind/<i> pages (`bomb` or `endless`)
 *   GET /credentials                links carrying `user:secret@` credentials back to this server
 *   GET /redirect-away              302 to the same server under its other name (127.0.0.1 ⇄ localhost)
 *   GET /links?to=/a&to=/b          a page linking to each `to` (paths or URLs), in order
 *   GET /linked/:n                  a page linking to /linked/0 … /linked/n-1 on the host it was asked for
 *   CONNECT (as a proxy)            502 Bad Gateway: a proxy that refuses every tunnel
 *
 * Every request is counted by path (`stats()`), CONNECT requests as `CONNECT <authority>`.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { HTML_TYPE, htmlPage } from '../content/html.js';
import { FixtureListenError, FixtureOptionError } from '../errors.js';
import { bomb } from '../failures/bomb.js';

/** Credentials the /credentials page puts in its links. */
export const HOSTILE_CREDENTIALS = { username: 'hostile-user', password: 'hostile-secret-0451' } as const;
/** Most stacked codings /stacked-encoding/:n serves. */
export const MAX_STACKED_ENCODINGS = 5000;
/** Largest <title> /huge-title/:bytes serves. */
export const MAX_HUGE_TITLE_BYTES = 64 * 1024 * 1024;
/** Most links /failing/:kind/:n and /linked/:n list. */
export const MAX_HOSTILE_LINKS = 100_000;
/** Bytes /bomb/:i inflates to. */
export const HOSTILE_BOMB_BYTES = 1 << 30;

export interface HostileSiteOptions {
  /** Port on 127.0.0.1. @default 0 (any free port) */
  port?: number;
  /** `/robots.txt` accepts the connection and never answers. @default false */
  silentRobots?: boolean;
}

export interface HostileSite {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** The same server under its other name, `http://localhost:<port>`. */
  readonly otherNameUrl: string;
  readonly port: number;
  /** Requests by path (query left out); CONNECT attempts under `CONNECT <host:port>`. */
  stats(): Record<string, number>;
  resetStats(): void;
  /** Ends every connection (hanging ones included) and stops listening. Idempotent. */
  close(): Promise<void>;
}

function positive(text: string | undefined, max: number): number {
  return text !== undefined && /^\d{1,9}$/.test(text) && Number(text) <= max ? Number(text) : -1;
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
  res.writeHead(status, { 'content-type': type, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

function notFound(res: ServerResponse): void {
  send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
}

function linkList(title: string, hrefs: Iterable<string>): string {
  let items = '';
  for (const href of hrefs) items += `<li><a href="${href}">${href}</a></li>\n`;
  return htmlPage(title, `<main><h1>${title}</h1><ul>\n${items}</ul></main>`);
}

function escapeHref(href: string): string {
  return href.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

function* range(n: number, make: (i: number) => string): Generator<string> {
  for (let i = 0; i < n; i++) yield make(i);
}

/** Sends `n` layers of gzip on a small page; built once per n and kept (the route is hit often). */
const stackedCache = new Map<number, Buffer>();
function stackedGzip(n: number): Buffer {
  let body = stackedCache.get(n);
  if (body === undefined) {
    body = Buffer.from(htmlPage('Stacked codings', `<main><p>gzip × ${n}</p></main>`));
    for (let i = 0; i < n; i++) body = gzipSync(body, { level: 1 });
    if (stackedCache.size >= 16) stackedCache.clear();
    stackedCache.set(n, body);
  }
  return body;
}

export async function startHostileSite(options: HostileSiteOptions = {}): Promise<HostileSite> {
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new FixtureOptionError('port', `must be an integer 0…65535, got ${String(port)}`);
  }
  const counts: Record<string, number> = {};
  const count = (key: string): void => {
    counts[key] = (counts[key] ?? 0) + 1;
  };
  const sockets = new Set<Duplex>();
  const timers = new Set<NodeJS.Timeout>();
  let listenPort = 0;

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://hostile.invalid');
    const path = url.pathname;
    count(path);
    const parts = path.split('/').slice(1);
    const host = req.headers.host ?? `127.0.0.1:${listenPort}`;
    switch (parts[0]) {
      case 'robots.txt':
        if (options.silentRobots === true) return; // never answered
        send(
          res,
          200,
          'text/plain; charset=utf-8',
          `User-agent: *\nAllow: /\nSitemap: http://${host}/silent/sitemap.xml\n`,
        );
        return;
      case 'silent':
        return; // the request is read, the answer never comes
      case 'stacked-encoding': {
        const n = positive(parts[1], MAX_STACKED_ENCODINGS);
        if (n < 1) {
          notFound(res);
          return;
        }
        const body = stackedGzip(n);
        res.writeHead(200, {
          'content-type': HTML_TYPE,
          'content-encoding': Array.from({ length: n }, () => 'gzip').join(', '),
          'content-length': String(body.length),
        });
        res.end(body);
        return;
      }
      case 'empty-location':
        res.writeHead(302, { location: '', 'content-length': '0' });
        res.end();
        return;
      case 'huge-title': {
        const bytes = positive(parts[1], MAX_HUGE_TITLE_BYTES);
        if (bytes < 1) {
          notFound(res);
          return;
        }
        send(res, 200, HTML_TYPE, htmlPage('t'.repeat(bytes), '<main><p>A long title.</p></main>'));
        return;
      }
      case 'slow-body': {
        const bytes = positive(parts[1], 1_000_000);
        const interval = positive(url.searchParams.get('intervalMs') ?? '100', 60_000);
        if (bytes < 1 || interval < 0) {
          notFound(res);
          return;
        }
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(bytes) });
        let sent = 0;
        const timer = setInterval(() => {
          if (res.destroyed || sent >= bytes) {
            clearInterval(timer);
            timers.delete(timer);
            if (!res.destroyed) res.end();
            return;
          }
          res.write('x');
          sent++;
        }, interval);
        timers.add(timer);
        return;
      }
      case 'endless': {
        res.writeHead(200, { 'content-type': HTML_TYPE });
        const chunk = Buffer.alloc(10 * 1024, 0x61);
        const timer = setInterval(() => {
          if (res.destroyed) {
            clearInterval(timer);
            timers.delete(timer);
            return;
          }
          res.write(chunk);
        }, 10);
        timers.add(timer);
        return;
      }
      case 'bomb': {
        const b = bomb('gzip', HOSTILE_BOMB_BYTES);
        res.writeHead(200, {
          'content-type': HTML_TYPE,
          'content-encoding': 'gzip',
          'content-length': String(b.wireBytes),
        });
        const stream = b.stream();
        stream.on('error', () => res.destroy());
        res.on('close', () => stream.destroy());
        stream.pipe(res);
        return;
      }
      case 'failing': {
        const kind = parts[1];
        const n = positive(parts[2], MAX_HOSTILE_LINKS);
        if ((kind !== 'bomb' && kind !== 'endless') || n < 0) {
          notFound(res);
          return;
        }
        send(
          res,
          200,
          HTML_TYPE,
          linkList(
            `${n} failing pages`,
            range(n, (i) => `/${kind}/${i}`),
          ),
        );
        return;
      }
      case 'credentials': {
        const { username, password } = HOSTILE_CREDENTIALS;
        const base = `http://${username}:${password}@${host}`;
        send(
          res,
          200,
          HTML_TYPE,
          linkList('Links with credentials', [
            `${base}/linked/0`,
            `${base}/linked/1`,
            `${base}/empty-location`,
          ]),
        );
        return;
      }
      case 'redirect-away': {
        const other = host.startsWith('localhost') ? `127.0.0.1:${listenPort}` : `localhost:${listenPort}`;
        res.writeHead(302, { location: `http://${other}/linked/5`, 'content-length': '0' });
        res.end();
        return;
      }
      case 'links': {
        const to = url.searchParams.getAll('to').slice(0, MAX_HOSTILE_LINKS);
        send(res, 200, HTML_TYPE, linkList('Hostile inputs', to.map(escapeHref)));
        return;
      }
      case 'linked': {
        const n = positive(parts[1], MAX_HOSTILE_LINKS);
        if (n < 0) {
          notFound(res);
          return;
        }
        send(
          res,
          200,
          HTML_TYPE,
          linkList(
            `Linked ${n}`,
            range(n, (i) => `/linked/${i}`),
          ),
        );
        return;
      }
      default: {
        notFound(res);
        return;
      }
    }
  };

  const server = http.createServer(handle);
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // Used as a proxy, it refuses every tunnel the way a broken or hostile proxy does.
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    count(`CONNECT ${req.url ?? ''}`);
    socket.on('error', () => {});
    socket.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  });
  server.on('clientError', (_err, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new FixtureListenError('127.0.0.1', port, err)));
    server.listen({ host: '127.0.0.1', port }, () => resolve());
  });
  listenPort = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${listenPort}`,
    otherNameUrl: `http://localhost:${listenPort}`,
    port: listenPort,
    stats: () => ({ ...counts }),
    resetStats() {
      for (const key of Object.keys(counts)) delete counts[key];
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const t of timers) clearInterval(t);
        timers.clear();
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      return closed;
    },
  };
}
