import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { createServer as createSocksServer } from '@pondwader/socks5-server';
import { createProxy } from 'proxy';

/**
 * Real servers on loopback for the pool tests. Each HTTP proxy sends its outbound traffic from
 * its own loopback address (127.0.0.2, 127.0.0.3, …), so the origin can tell from
 * `socket.remoteAddress` which exit a request really came through — the way a real site sees
 * a proxy's IP — whether the request was tunnelled (CONNECT) or forwarded.
 */

async function listen(server: net.Server, host = '127.0.0.1'): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return (server.address() as net.AddressInfo).port;
}

function trackSockets(server: net.Server): Set<net.Socket> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  return sockets;
}

async function closeHard(server: net.Server, sockets: Set<net.Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

export interface Origin {
  readonly url: string;
  /** Exit address (the connecting socket's remote address) of every request, in order. */
  readonly exits: string[];
  /** Requests per path. */
  readonly hits: Map<string, number>;
  /** Exit addresses answered with 403, as a site that blocked those IPs would. */
  readonly blocked: Set<string>;
  /** Body of `/list.txt`; `listStatus` other than 200 makes it fail. */
  list: string;
  listStatus: number;
  close(): Promise<void>;
}

export async function startOrigin(): Promise<Origin> {
  const exits: string[] = [];
  const hits = new Map<string, number>();
  const blocked = new Set<string>();
  const origin: Origin = {
    url: '',
    exits,
    hits,
    blocked,
    list: '',
    listStatus: 200,
    close: async () => {},
  };
  const server = http.createServer((req, res) => {
    const exit = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    hits.set(path, (hits.get(path) ?? 0) + 1);
    if (path === '/list.txt') {
      res.writeHead(origin.listStatus, { 'content-type': 'text/plain' }).end(origin.list);
      return;
    }
    exits.push(exit);
    if (blocked.has(exit)) {
      res.writeHead(403).end('blocked');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`ok ${exit}`);
  });
  const sockets = trackSockets(server);
  const port = await listen(server);
  Object.assign(origin, { url: `http://127.0.0.1:${port}`, close: () => closeHard(server, sockets) });
  return origin;
}

export interface HttpProxy {
  readonly url: string;
  readonly port: number;
  /** Loopback address its outbound connections come from. */
  readonly exit: string;
  /** CONNECT tunnels and forwarded requests it handled. */
  readonly counts: { connects: number; requests: number };
  close(): Promise<void>;
}

/**
 * An HTTP proxy (the `proxy` npm package). With `auth`, it demands `Proxy-Authorization`
 * Basic credentials and answers 407 otherwise.
 */
export async function startHttpProxy(
  exit: string,
  auth?: { username: string; password: string },
): Promise<HttpProxy> {
  const server = createProxy(http.createServer());
  server.localAddress = exit;
  const counts = { connects: 0, requests: 0 };
  server.on('connect', () => counts.connects++);
  server.on('request', () => counts.requests++);
  if (auth) {
    const expected = `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
    server.authenticate = (req) => req.headers['proxy-authorization'] === expected;
  }
  const sockets = trackSockets(server);
  const port = await listen(server);
  let closed = false;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    exit,
    counts,
    close: async () => {
      if (closed) return;
      closed = true;
      await closeHard(server, sockets);
    },
  };
}

/** Self-signed certificate of the https proxy (test fixture); trust it with `proxyTls: { ca }`. */
export const proxyTlsCert = fs.readFileSync(new URL('../fixtures/proxy-tls.crt', import.meta.url));

/** An HTTP proxy behind TLS (`https://` proxy URL), with a self-signed certificate. */
export async function startHttpsProxy(exit: string): Promise<HttpProxy> {
  const server = createProxy(
    https.createServer({
      key: fs.readFileSync(new URL('../fixtures/proxy-tls.key', import.meta.url)),
      cert: proxyTlsCert,
    }) as unknown as http.Server,
  );
  server.localAddress = exit;
  const counts = { connects: 0, requests: 0 };
  server.on('connect', () => counts.connects++);
  server.on('request', () => counts.requests++);
  const sockets = trackSockets(server);
  server.on('secureConnection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const port = await listen(server);
  return { url: `https://127.0.0.1:${port}`, port, exit, counts, close: () => closeHard(server, sockets) };
}

/** A URL where nothing listens: a port that was bound and released. */
export async function deadProxyUrl(): Promise<string> {
  const server = http.createServer();
  const port = await listen(server);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

export interface SocksProxy {
  readonly port: number;
  readonly counts: { connects: number };
  close(): Promise<void>;
}

/** A SOCKS5 proxy (the `@pondwader/socks5-server` package) demanding user/password auth. */
export async function startSocksProxy(username: string, password: string): Promise<SocksProxy> {
  const server = createSocksServer({ auth: { username, password } });
  const counts = { connects: 0 };
  server.setRulesetValidator(() => {
    counts.connects++;
    return true;
  });
  const port = await new Promise<number>((resolve) => {
    server.listen(0, '127.0.0.1', function (this: net.Server) {
      resolve((this.address() as net.AddressInfo).port);
    });
  });
  return {
    port,
    counts,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
