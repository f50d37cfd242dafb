import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ClusterConfigError,
  ClusterUnauthorizedError,
  InvalidClusterMessageError,
  NodeRemovedError,
  NodeStartingError,
} from '../errors.js';
import type { PeerHandler } from '../node/ports.js';
import { FROM_ADDR_HEADER, parseNodeRequest, parseRaftMessages, SECRET_HEADER } from './wire.js';

export interface HttpPeerServerOptions {
  /** Shared secret every request must carry in `x-mocra-cluster-secret`. @default undefined (none) */
  readonly secret?: string;
  /** Largest accepted body (a snapshot travels in one). @default 67108864 (64 MiB) */
  readonly maxBodyBytes?: number;
  /** Serves `GET /raft/status`. */
  readonly status?: () => unknown;
}

/**
 * The server side of node-to-node HTTP (node:http):
 *
 *   POST /raft/messages   a JSON array of Raft messages          → 204 at once (handled async)
 *   POST /raft/request    a node request (propose, join, …)      → 200 { ok, result | error }
 *   GET  /raft/status     this node's status                     → 200
 *
 * Bad bodies get 400 with a typed error; a missing or wrong secret gets 401.
 */
export class HttpPeerServer {
  readonly #server: Server;
  readonly #secretDigest: Buffer | undefined;
  readonly #maxBody: number;
  readonly #status: (() => unknown) | undefined;
  #handler: PeerHandler | undefined;

  private constructor(options: HttpPeerServerOptions) {
    this.#secretDigest = options.secret === undefined ? undefined : digest(options.secret);
    this.#maxBody = options.maxBodyBytes ?? 64 * 1024 * 1024;
    this.#status = options.status;
    this.#server = createServer((req, res) => {
      this.#route(req, res).catch((err: unknown) => {
        if (!res.headersSent) reply(res, 500, { ok: false, error: { message: String(err) } });
        else res.destroy();
      });
    });
    this.#server.keepAliveTimeout = 30_000;
  }

  /** Listen on `addr` (`host:port`; port 0 picks a free one). */
  static async listen(addr: string, options: HttpPeerServerOptions = {}): Promise<HttpPeerServer> {
    const m = /^(.*):(\d+)$/.exec(addr);
    if (!m) throw new ClusterConfigError(`address ${JSON.stringify(addr)} is not host:port`);
    const host = m[1]!.replace(/^\[|\]$/g, '');
    const port = Number(m[2]);
    const server = new HttpPeerServer(options);
    await new Promise<void>((resolve, reject) => {
      const onError = (err: Error): void =>
        reject(new ClusterConfigError(`cannot listen on ${addr}`, { cause: err }));
      server.#server.once('error', onError);
      server.#server.listen(port, host, () => {
        server.#server.off('error', onError);
        resolve();
      });
    });
    return server;
  }

  /** The address actually bound (useful with port 0). */
  get address(): string {
    const a = this.#server.address() as AddressInfo;
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `${host}:${a.port}`;
  }

  /** Route to `handler` from now on (requests before this get 503). */
  attach(handler: PeerHandler): void {
    this.#handler = handler;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    if (this.#secretDigest !== undefined) {
      const given = req.headers[SECRET_HEADER];
      if (typeof given !== 'string' || !timingSafeEqual(digest(given), this.#secretDigest)) {
        req.resume();
        reply(res, 401, { ok: false, error: new ClusterUnauthorizedError().toJSON() });
        return;
      }
    }
    if (req.method === 'GET' && url === '/raft/status') {
      reply(res, this.#status ? 200 : 404, this.#status ? this.#status() : { ok: false });
      return;
    }
    if (req.method !== 'POST' || (url !== '/raft/messages' && url !== '/raft/request')) {
      req.resume();
      reply(res, 404, {
        ok: false,
        error: new InvalidClusterMessageError(`no route ${req.method} ${url}`).toJSON(),
      });
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req, this.#maxBody));
    } catch (err) {
      const e =
        err instanceof InvalidClusterMessageError ? err : new InvalidClusterMessageError('body is not JSON');
      reply(res, 400, { ok: false, error: e.toJSON() });
      return;
    }
    const handler = this.#handler;
    if (!handler) {
      reply(res, 503, { ok: false, error: new NodeStartingError().toJSON() });
      return;
    }
    try {
      if (url === '/raft/messages') {
        const messages = parseRaftMessages(body);
        const from = messages[0]?.from;
        if (from !== undefined && handler.isRetired(from)) {
          // Tell a removed node that missed its own removal, so it stops (etcd does the same).
          reply(res, 410, { ok: false, error: new NodeRemovedError(from).toJSON() });
          return;
        }
        const fromAddr = req.headers[FROM_ADDR_HEADER];
        res.writeHead(204).end();
        handler.handleMessages(
          messages,
          typeof fromAddr === 'string' && fromAddr.length <= 300 ? fromAddr : undefined,
        );
        return;
      }
      const request = parseNodeRequest(body);
      reply(res, 200, await handler.handleRequest(request));
    } catch (err) {
      if (err instanceof InvalidClusterMessageError) {
        if (!res.headersSent) reply(res, 400, { ok: false, error: err.toJSON() });
        return;
      }
      throw err;
    }
  }
}

function digest(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        reject(new InvalidClusterMessageError(`body is larger than ${max} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
