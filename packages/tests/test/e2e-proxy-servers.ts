// Real proxies on loopback for the engine's proxy tests: the `proxy` npm package (one per exit
// address, with its own counters) and Debian's tinyproxy (its own log file), plus an origin that
// blocks direct traffic the way a site blocks a datacenter IP.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createProxy } from 'proxy';

export interface CountingProxy {
  readonly url: string;
  /** Loopback address its outbound connections come from. */
  readonly exit: string;
  /** CONNECT tunnels opened and plain requests forwarded, as the proxy itself saw them. */
  readonly counts: { connects: number; requests: number };
  close(): Promise<void>;
}

async function listen(server: net.Server, host = '127.0.0.1'): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return (server.address() as net.AddressInfo).port;
}

function closeHard(server: net.Server, sockets: Set<net.Socket>): Promise<void> {
  for (const s of sockets) s.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** An HTTP proxy (npm `proxy`) whose outbound traffic leaves from `exit` (127.0.0.x). */
export async function startCountingProxy(exit: string): Promise<CountingProxy> {
  const server = createProxy(http.createServer());
  server.localAddress = exit;
  const counts = { connects: 0, requests: 0 };
  server.on('connect', () => counts.connects++);
  server.on('request', () => counts.requests++);
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const port = await listen(server);
  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    exit,
    counts,
    close: () => {
      closed ??= closeHard(server, sockets);
      return closed;
    },
  };
}

/** A proxy URL where nothing listens (a port that was bound and released). */
export async function deadProxyUrl(): Promise<string> {
  const server = net.createServer();
  const port = await listen(server);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

export interface Tinyproxy {
  readonly url: string;
  /** The `Request (file descriptor n): <line>` entries of its log: what it was asked to fetch. */
  requestLines(): string[];
  close(): Promise<void>;
}

/**
 * Debian's tinyproxy from a generated config on an ephemeral port, logging every request line
 * (LogLevel Connect). No ConnectPort line: CONNECT is allowed to any port (the fixture's).
 */
export async function startTinyproxy(): Promise<Tinyproxy> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-tinyproxy-'));
  const logFile = path.join(dir, 'tinyproxy.log');
  let port = 0;
  let child: ChildProcess | undefined;
  // The port is picked by binding and releasing it; another process could take it in between,
  // so a failed start is tried again on a new port (at most 5 times).
  for (let attempt = 0; attempt < 5 && child === undefined; attempt++) {
    port = Number(new URL(await deadProxyUrl()).port);
    fs.writeFileSync(
      path.join(dir, 'tinyproxy.conf'),
      [
        `Port ${port}`,
        'Listen 127.0.0.1',
        'Timeout 60',
        `LogFile "${logFile}"`,
        'LogLevel Connect',
        'MaxClients 100',
        'Allow 127.0.0.1',
        'DisableViaHeader Yes',
        '',
      ].join('\n'),
    );
    const proc = spawn('/usr/bin/tinyproxy', ['-d', '-c', path.join(dir, 'tinyproxy.conf')], {
      stdio: 'ignore',
    });
    if (await waitForPort(port, proc)) child = proc;
    else proc.kill('SIGKILL');
  }
  if (child === undefined) throw new Error('tinyproxy did not start');
  const running = child;
  return {
    url: `http://127.0.0.1:${port}`,
    requestLines: () =>
      fs.existsSync(logFile)
        ? fs
            .readFileSync(logFile, 'utf8')
            .split('\n')
            .map((line) => /Request \(file descriptor \d+\): (.*)$/.exec(line)?.[1])
            .filter((line): line is string => line !== undefined)
        : [],
    close: async () => {
      if (running.exitCode === null) {
        const exited = new Promise((r) => running.once('exit', r));
        running.kill('SIGTERM');
        await exited;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Polls until something accepts on `port` (at most ~5 s) or the process exits. */
async function waitForPort(port: number, proc: ChildProcess): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    if (proc.exitCode !== null) return false;
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

export interface GatedOrigin {
  readonly url: string;
  /** Requests answered, by the loopback address they came from. */
  readonly byExit: Map<string, number>;
  close(): Promise<void>;
}

/**
 * A small site that blocks "datacenter" traffic: requests from 127.0.0.1 (direct) get 403 on
 * `/blocked/*` and a 200 captcha interstitial on `/captcha/*`; requests from any other loopback
 * address (a proxy's exit) get the page. `/page/<n>` links to nothing and names itself.
 */
export async function startGatedOrigin(): Promise<GatedOrigin> {
  const byExit = new Map<string, number>();
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    const from = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    byExit.set(from, (byExit.get(from) ?? 0) + 1);
    const direct = from === '127.0.0.1';
    const url = req.url ?? '/';
    res.setHeader('content-type', 'text/html; charset=utf-8');
    if (direct && url.startsWith('/blocked/')) {
      res.writeHead(403).end('<html><head><title>Forbidden</title></head><body>go away</body></html>');
    } else if (direct && url.startsWith('/captcha/')) {
      res
        .writeHead(200)
        .end('<html><head><title>Attention Required! | Shield</title></head><body>prove it</body></html>');
    } else {
      res.writeHead(200).end(`<html><head><title>ok</title></head><body><h1>${url}</h1></body></html>`);
    }
  });
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, byExit, close: () => closeHard(server, sockets) };
}
