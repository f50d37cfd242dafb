/**
 * A tiny real HTTP site for engine tests (the full fixture site lives in @mocra/testkit and
 * is used by the e2e tests in packages/tests):
 *
 *   /t/<path>        a tree: depth = number of '-' parts − 1; each page below `depth` links to
 *                    3 children, to the root (a duplicate) and to itself with a fragment
 *   /flaky/<id>?n=k  503 with Retry-After: 0 for the first k requests of <id>, then 200
 *   /status/<code>   that status
 *   /echo            JSON of method, headers, body and path
 *   /slow?ms=N       answers after N ms
 */
import http from 'node:http';
import type net from 'node:net';

export interface TestSite {
  url: string;
  /** Requests served per path (without query). */
  hits: Map<string, number>;
  close(): Promise<void>;
}

export const TREE_DEPTH = 3;
export const TREE_FANOUT = 3;
/** 1 + 3 + 9 + 27 */
export const TREE_PAGES = 40;

export function treeChildren(path: string): string[] {
  const depth = path.split('-').length - 1;
  if (depth >= TREE_DEPTH) return [];
  return Array.from({ length: TREE_FANOUT }, (_, i) => `${path}-${i}`);
}

export async function startTestSite(): Promise<TestSite> {
  const hits = new Map<string, number>();
  const flaky = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    hits.set(url.pathname, (hits.get(url.pathname) ?? 0) + 1);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const parts = url.pathname.split('/').filter(Boolean);
      if (parts[0] === 't' && parts[1]) {
        const path = parts[1];
        const links = [...treeChildren(path).map((c) => `/t/${c}`), '/t/0', `/t/${path}#self`];
        res.setHeader('content-type', 'text/html; charset=utf-8');
        res.end(
          `<html><head><title>page ${path}</title></head><body><h1>${path}</h1>${links
            .map((l) => `<a href="${l}">${l}</a>`)
            .join(' ')}</body></html>`,
        );
        return;
      }
      if (parts[0] === 'flaky' && parts[1]) {
        const n = Number(url.searchParams.get('n') ?? '2');
        const count = (flaky.get(parts[1]) ?? 0) + 1;
        flaky.set(parts[1], count);
        if (count <= n) {
          res.statusCode = 503;
          res.setHeader('retry-after', '0');
          res.end('try later');
        } else {
          res.end(`ok after ${count - 1} failures`);
        }
        return;
      }
      if (parts[0] === 'status' && parts[1]) {
        res.statusCode = Number(parts[1]);
        res.end(`status ${parts[1]}`);
        return;
      }
      if (parts[0] === 'echo') {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            method: req.method,
            headers: req.headers,
            body: Buffer.concat(chunks).toString(),
            path: req.url,
          }),
        );
        return;
      }
      if (parts[0] === 'slow') {
        setTimeout(() => res.end('slow'), Number(url.searchParams.get('ms') ?? '100')).unref();
        return;
      }
      res.statusCode = 404;
      res.end('not found');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    url,
    hits,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
