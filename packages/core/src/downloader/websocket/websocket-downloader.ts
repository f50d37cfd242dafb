/**
 * The WebSocket downloader: a streaming downloader (see `Downloader.stream`). A request opens
 * the connection of its module (or reuses it), sends its body, and every inbound message becomes
 * a Response that goes through the normal parse path.
 *
 * ```
 *  request (http(s) URL of the endpoint, downloader: 'websocket', body = the message to send)
 *     │
 *     ▼  manager.connect(key = module + endpoint, ws(s)://same host and path)
 *     ▼  take over the connection's stream   (the previous request's stream ends, acked)
 *     ▼  send(body)
 *     ▼  next() ─▶ Response #1 ─▶ parse      each message: status 200, body = the message,
 *     ▼  next() ─▶ Response #2 ─▶ parse      request = a copy whose fingerprint is `<fp>~<n>`
 *     ▼  …                                   (so item ids stay unique and replay-stable)
 *   ends: the server closes (1000), the connection idles out, `maxMessages` reached, a newer
 *   request takes the connection over, or the request's own `idleMs` passes without a message.
 *   fails: the connection is lost for good (WebSocketClosedError, WebSocketConnectError) ─▶ retry.
 * ```
 *
 * Why the newest request owns the stream: a WebSocket has no request/response correlation, so
 * a message can only be attributed by time. Handing each message to whichever request reads
 * first would split a reply between two requests at random; "the request that spoke last gets
 * the answers" is what a request/response protocol over one socket means, and it keeps at most
 * one stream (one leased request) per connection.
 *
 * Request URLs are http(s): the frontier, dedup and politeness work on http(s) URLs, and the
 * handshake is an HTTP GET to that URL. `websocketRequest('wss://…')` builds such a request.
 */
import { AbortedError, InvalidArgumentError, isMocraError } from '../../errors.js';
import { fingerprintRequest } from '../../frontier/fingerprint.js';
import { Request, type RequestInit } from '../../model/request.js';
import { Response } from '../../model/response.js';
import type { Downloader } from '../types.js';
import type { WebSocketConnection, WebSocketMessage } from './connection.js';
import { WebSocketManager, type WebSocketManagerOptions } from './manager.js';

/** The `request.meta` key of per-request WebSocket settings. */
export const WEBSOCKET_META_KEY = 'websocket';

/** Per-request settings, in `request.meta.websocket` (validated: meta crosses queues). */
export interface WebSocketRequestOptions {
  /** Connection key; requests with the same key share a connection. @default the request's module */
  key?: string;
  /** End this request's stream after this many messages (the connection stays open). */
  maxMessages?: number;
  /** End this request's stream after this long without a message for it (the connection stays open). */
  idleMs?: number;
}

export interface WebSocketDownloaderOptions extends WebSocketManagerOptions {
  /** The name modules and requests select it by. @default 'websocket' */
  name?: string;
  /** Defaults for every request; `meta.websocket` overrides them field by field. */
  request?: WebSocketRequestOptions;
  /**
   * After a reconnect, send the body of the request that owns the connection again (re-subscribe).
   * @default true
   */
  resendOnReconnect?: boolean;
}

interface Owner {
  readonly stop: AbortController;
  readonly body: string | Uint8Array | undefined;
}

export function createWebSocketDownloader(options: WebSocketDownloaderOptions = {}): WebSocketDownloader {
  return new WebSocketDownloader(options);
}

/** A request for a WebSocket endpoint: `ws(s)://` becomes `http(s)://`, and `downloader` is set. */
export function websocketRequest(url: string, init: RequestInit = {}, downloader = 'websocket'): Request {
  return new Request(toHttpUrl(url), { downloader, ...init });
}

export class WebSocketDownloader implements Downloader {
  readonly name: string;
  readonly manager: WebSocketManager;
  readonly #defaults: WebSocketRequestOptions;
  readonly #resend: boolean;
  /** The request whose stream currently reads each connection. */
  readonly #owners = new WeakMap<WebSocketConnection, Owner>();

  constructor(options: WebSocketDownloaderOptions = {}) {
    const { name, request, resendOnReconnect, ...managerOptions } = options;
    this.name = name ?? 'websocket';
    this.#defaults = parseWebSocketRequestOptions(request ?? {}, 'request');
    this.#resend = resendOnReconnect ?? true;
    const userOnOpen = managerOptions.onOpen;
    this.manager = new WebSocketManager({
      ...managerOptions,
      onOpen: (connection, info) => {
        userOnOpen?.(connection, info);
        if (!info.reconnect || !this.#resend) return;
        const body = this.#owners.get(connection)?.body;
        if (body !== undefined) void connection.send(body).catch(() => undefined);
      },
    });
  }

  /** One response (the first message). A WebSocket request normally runs through `stream`. */
  async download(request: Request, signal: AbortSignal): Promise<Response> {
    for await (const response of this.stream(request, signal, undefined, 1)) return response;
    throw new InvalidArgumentError(`WebSocket ${request.url} closed before sending a message`);
  }

  async *stream(
    request: Request,
    signal: AbortSignal,
    _context?: unknown,
    limit?: number,
  ): AsyncGenerator<Response, void, undefined> {
    const settings = {
      ...this.#defaults,
      ...parseWebSocketRequestOptions(request.meta[WEBSOCKET_META_KEY], `meta.${WEBSOCKET_META_KEY}`),
    };
    const maxMessages = limit ?? settings.maxMessages;
    const url = toWsUrl(request.url);
    // One connection per module and endpoint: a module talking to two endpoints keeps both open.
    const key = settings.key ?? `${request.module ?? ''} ${url}`;
    const connection = await this.manager.connect(key, url, {
      signal,
      ...(Object.keys(request.headers).length === 0 ? {} : { headers: request.headers }),
    });
    const body = request.body;
    const owner: Owner = { stop: new AbortController(), body };
    // Take the connection over: the previous request's stream ends (normally) at its next read.
    this.#owners.get(connection)?.stop.abort();
    this.#owners.set(connection, owner);
    const reading = AbortSignal.any([signal, owner.stop.signal]);
    const base = request.fingerprint ?? fingerprintRequest(request);
    const started = performance.now();
    try {
      if (body !== undefined) await connection.send(body, signal);
      for (let n = 1; maxMessages === undefined || n <= maxMessages; n++) {
        let message: WebSocketMessage | undefined;
        try {
          message = await this.#read(connection, reading, settings.idleMs);
        } catch (err) {
          // Our own stop (taken over, idle) ends the stream; the engine's signal is an abort.
          if (!signal.aborted && isMocraError(err) && err.code === 'MOCRA_ERR_ABORTED') return;
          throw err;
        }
        if (message === undefined) return; // the connection ended cleanly
        yield messageResponse(request, message, `${base}~${n}`, performance.now() - started);
      }
    } finally {
      if (this.#owners.get(connection) === owner) this.#owners.delete(connection);
    }
  }

  /** Every WebSocket connection: clean close frames, bounded by `closeTimeoutMs`. */
  close(): Promise<void> {
    return this.manager.close();
  }

  async #read(
    connection: WebSocketConnection,
    signal: AbortSignal,
    idleMs: number | undefined,
  ): Promise<WebSocketMessage | undefined> {
    // Checked first: next() hands out a buffered message even to an aborted reader, and a
    // stream that was taken over must leave the buffer to the new owner.
    if (signal.aborted) throw new AbortedError('stream ended', { cause: signal.reason });
    if (idleMs === undefined) return connection.next(signal);
    const idle = AbortSignal.timeout(idleMs);
    return connection.next(AbortSignal.any([signal, idle]));
  }
}

/** A message as a Response of (a copy of) the request that owns the stream. */
function messageResponse(
  request: Request,
  message: WebSocketMessage,
  fingerprint: string,
  durationMs: number,
): Response {
  // Same module, node, run, depth and meta; its own fingerprint, so every message's items get
  // their own ids (`<fp>~<n>:<i>`) and a replayed stream yields the same ids again.
  const own = Request.from({ ...request.toJSON(), fingerprint });
  const body = typeof message.data === 'string' ? Buffer.from(message.data, 'utf8') : message.data;
  return new Response({
    url: request.url,
    status: 200,
    headers: {
      'content-type': message.binary ? 'application/octet-stream' : 'text/plain; charset=utf-8',
      'x-mocra-websocket-seq': String(message.seq),
      'x-mocra-websocket-generation': String(message.generation),
    },
    body,
    request: own,
    durationMs,
  });
}

/** Validate `meta.websocket` (or the downloader's `request` defaults). */
export function parseWebSocketRequestOptions(input: unknown, where: string): WebSocketRequestOptions {
  if (input === undefined || input === null) return {};
  if (typeof input !== 'object' || Array.isArray(input))
    throw new InvalidArgumentError(`${where} must be an object { key, maxMessages, idleMs }`);
  const out: WebSocketRequestOptions = {};
  for (const [k, v] of Object.entries(input as Record<string, unknown>)) {
    if (v === undefined) continue;
    if (k === 'key') {
      if (typeof v !== 'string' || v === '')
        throw new InvalidArgumentError(`${where}.key must be a non-empty string`);
      out.key = v;
    } else if (k === 'maxMessages') {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
        throw new InvalidArgumentError(`${where}.maxMessages must be an integer ≥ 1`);
      out.maxMessages = v;
    } else if (k === 'idleMs') {
      if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
        throw new InvalidArgumentError(`${where}.idleMs must be a number > 0`);
      out.idleMs = v;
    } else {
      throw new InvalidArgumentError(`${where}.${k}: unknown key (expected key, maxMessages, idleMs)`);
    }
  }
  return out;
}

function toWsUrl(url: string): string {
  if (url.startsWith('https:')) return `wss:${url.slice(6)}`;
  if (url.startsWith('http:')) return `ws:${url.slice(5)}`;
  return url;
}

function toHttpUrl(url: string): string {
  if (url.startsWith('wss:')) return `https:${url.slice(4)}`;
  if (url.startsWith('ws:')) return `http:${url.slice(3)}`;
  return url;
}
