/**
 * Keyed WebSocket connections: `connect(key, url)` opens a connection for `key` or reuses the
 * one that is already there (the downloader keys by module: one connection per module). A connection that ends leaves the map by itself, so the next
 * `connect` opens a fresh one; `close()` ends them all.
 */
import type { Dispatcher } from 'undici';
import { DownloaderClosedError } from '../../errors.js';
import {
  resolveWebSocketOptions,
  type WebSocketCloseInfo,
  WebSocketConnection,
  type WebSocketConnectionOptions,
  type WebSocketConnectionStats,
} from './connection.js';

/** Defaults for every connection the manager opens. */
export type WebSocketManagerOptions = WebSocketConnectionOptions;

/** Per-call settings; they apply when this call opens the connection and are ignored when it reuses one. */
export interface WebSocketConnectOptions {
  /** Stops waiting for the socket to open (the connection itself stays, for other callers). */
  signal?: AbortSignal;
  protocols?: string | string[];
  headers?: Record<string, string>;
  dispatcher?: Dispatcher;
  onOpen?: WebSocketConnectionOptions['onOpen'];
}

export function createWebSocketManager(options: WebSocketManagerOptions = {}): WebSocketManager {
  return new WebSocketManager(options);
}

export class WebSocketManager {
  readonly #options: WebSocketManagerOptions;
  readonly #connections = new Map<string, WebSocketConnection>();
  #closed = false;

  constructor(options: WebSocketManagerOptions = {}) {
    this.#options = options;
    resolveWebSocketOptions(options); // bad options fail here, not on the first connect
  }

  /** Open connections (connecting, open or reconnecting). */
  get size(): number {
    return this.#connections.size;
  }

  get closed(): boolean {
    return this.#closed;
  }

  get(key: string): WebSocketConnection | undefined {
    return this.#connections.get(key);
  }

  keys(): string[] {
    return [...this.#connections.keys()];
  }

  stats(): WebSocketConnectionStats[] {
    return [...this.#connections.values()].map((c) => c.stats());
  }

  /**
   * The connection for `key`, opened if there is none, once its socket is open. A connection
   * for `key` that points at another URL is closed (reason `replaced`) and a new one opened.
   * Rejects with WebSocketConnectError when no socket opened within the reconnect attempts.
   */
  async connect(
    key: string,
    url: string,
    options: WebSocketConnectOptions = {},
  ): Promise<WebSocketConnection> {
    if (this.#closed) throw new DownloaderClosedError('WebSocket manager');
    let connection = this.#connections.get(key);
    if (connection !== undefined && (connection.url !== url || !isLive(connection))) {
      this.#connections.delete(key);
      if (connection.url !== url) void connection.close(1000, 'replaced');
      connection = undefined;
    }
    if (connection === undefined) {
      const { signal: _signal, ...perConnection } = options;
      connection = new WebSocketConnection(
        key,
        url,
        { ...this.#options, ...definedOnly(perConnection) },
        (done) => {
          if (this.#connections.get(key) === done) this.#connections.delete(key);
        },
      );
      // A connection that ended inside its constructor (a URL undici refuses) never enters the map.
      if (isLive(connection)) this.#connections.set(key, connection);
    }
    await connection.ready(options.signal);
    return connection;
  }

  /** Close the connection for `key`, if any. */
  async closeConnection(key: string, code = 1000, reason = ''): Promise<WebSocketCloseInfo | undefined> {
    const connection = this.#connections.get(key);
    if (connection === undefined) return undefined;
    this.#connections.delete(key);
    return connection.close(code, reason);
  }

  /** Close every connection (clean close frames, bounded by `closeTimeoutMs`); later `connect` calls throw. */
  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#connections.values()];
    this.#connections.clear();
    await Promise.all(all.map((c) => c.close(1000, 'shutdown')));
  }
}

function isLive(connection: WebSocketConnection): boolean {
  return connection.state !== 'closed' && connection.state !== 'closing';
}

/** `{ a: undefined }` would override a manager default under exactOptionalPropertyTypes; drop such keys. */
function definedOnly(value: Omit<WebSocketConnectOptions, 'signal'>): WebSocketConnectionOptions {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = v;
  return out as WebSocketConnectionOptions;
}
