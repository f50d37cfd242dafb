/**
 * One logical WebSocket connection on undici's `WebSocket`: it survives lost sockets by
 * reconnecting, closes itself when idle, and hands every inbound message to exactly one
 * consumer, in order.
 *
 * ```
 *            open                      lost (1001, 1005, 1006, 1011–1014), attempts left
 *  connecting ───▶ open ───────────────────────────────▶ reconnecting ──(backoff)──▶ connecting
 *      │            │  server 1000 / close() / idle                │ close()
 *      │            ▼                                              ▼
 *      └──────▶ closed ◀───────────── attempts used up, or a code that retrying cannot fix
 * ```
 *
 * Inbound messages go to a bounded FIFO; `next()` takes from it (or waits). Messages that arrive
 * while nobody waits stay there for the next consumer, so a consumer that starts late loses
 * nothing. When the connection ends, consumers first drain what is buffered, then see the end:
 * `undefined` after a clean close, the error after a failure.
 *
 * The attempt count of a reconnect streak resets only once a socket stayed open for
 * `stableAfterMs`: a server that accepts and then drops every socket at once would otherwise be
 * retried forever.
 */
import type { Dispatcher } from 'undici';
import { WebSocket } from 'undici';
import {
  AbortedError,
  DownloaderClosedError,
  InvalidArgumentError,
  InvalidUrlError,
  type MocraError,
  WebSocketClosedError,
  WebSocketConnectError,
  WebSocketOverflowError,
} from '../../errors.js';
import { Fifo } from '../../queue/fifo.js';
import { type BackoffOptions, backoffDelay, type ResolvedBackoff, resolveBackoff } from './backoff.js';
import { type WebSocketCloseCause, websocketChannels } from './channels.js';

/** One inbound message. */
export interface WebSocketMessage {
  /** The connection's key (a module name, for the downloader). */
  key: string;
  url: string;
  /** Text frames as strings, binary frames as bytes. */
  data: string | Uint8Array;
  binary: boolean;
  /** 1-based position over the connection's whole life, across reconnects. */
  seq: number;
  /** Which socket carried it: 1 for the first, 2 after the first reconnect, … */
  generation: number;
  /** `Date.now()` when it arrived. */
  receivedAt: number;
}

/** How a connection ended. */
export interface WebSocketCloseInfo {
  code: number;
  reason: string;
  /** Whether the closing handshake completed (false for a dropped socket). */
  wasClean: boolean;
  by: WebSocketCloseCause;
}

export type WebSocketState = 'connecting' | 'open' | 'reconnecting' | 'closing' | 'closed';

export interface WebSocketReconnectOptions extends BackoffOptions {
  /** Attempts in a row (a failed open or a lost socket each count) before the connection gives up. @default 5 */
  maxAttempts?: number;
  /** A socket that stayed open this long resets the attempt count. @default 10000 */
  stableAfterMs?: number;
  /**
   * Whether to reconnect after a socket closed with `close` (`opened` is false when the
   * handshake itself failed). @default reconnect on 1001, 1005, 1006 and 1011–1014: the codes
   * of a lost socket or a server that is going away or overloaded; never on 1000 (the server
   * ended the conversation) or on codes that say the request itself is wrong.
   */
  shouldReconnect?: (close: { code: number; reason: string; opened: boolean }) => boolean;
}

export interface WebSocketConnectionOptions {
  /** Close the connection after this long without a message in either direction; 0 = never. @default 30000 */
  idleTimeoutMs?: number;
  /** Longest wait for one opening handshake; a slower one counts as a failed attempt. @default 10000 */
  connectTimeoutMs?: number;
  /** How long `close()` waits for the server's close frame before it lets the socket go. @default 5000 */
  closeTimeoutMs?: number;
  /** Reconnect policy; `false` never reconnects (a lost socket ends the connection). @default {} */
  reconnect?: WebSocketReconnectOptions | false;
  /**
   * Inbound messages held for consumers. One more closes the connection with
   * WebSocketOverflowError: undici's WebSocket cannot pause the server, and dropping messages
   * silently would lose data. @default 10000
   */
  maxBufferedMessages?: number;
  /** Subprotocols offered in the handshake. */
  protocols?: string | string[];
  /** Extra handshake headers (cookies, authorization…). */
  headers?: Record<string, string>;
  /** undici dispatcher for the handshake (a ProxyAgent to go through a proxy). */
  dispatcher?: Dispatcher;
  /**
   * Called after every successful open, also after a reconnect (re-send a subscription there).
   * If it throws, the connection closes with that error.
   */
  onOpen?: (connection: WebSocketConnection, info: { generation: number; reconnect: boolean }) => void;
  /** Random source of the backoff jitter, [0, 1). @default Math.random */
  random?: () => number;
}

export interface WebSocketConnectionStats {
  key: string;
  url: string;
  state: WebSocketState;
  /** Sockets opened so far (1 + successful reconnects). */
  opens: number;
  /** Reconnect attempts started so far. */
  reconnects: number;
  messagesIn: number;
  messagesOut: number;
  /** Inbound messages waiting for a consumer. */
  buffered: number;
}

interface ResolvedReconnect extends ResolvedBackoff {
  maxAttempts: number;
  stableAfterMs: number;
  shouldReconnect: (close: { code: number; reason: string; opened: boolean }) => boolean;
}

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
}

/** Close codes after which a reconnect may help. */
const TRANSIENT_CODES = new Set([1001, 1005, 1006, 1011, 1012, 1013, 1014]);
const WS_PROTOCOLS = new Set(['ws:', 'wss:', 'http:', 'https:']);

export function defaultShouldReconnect(close: { code: number }): boolean {
  return TRANSIENT_CODES.has(close.code);
}

export class WebSocketConnection {
  readonly key: string;
  readonly url: string;
  readonly #idleTimeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #closeTimeoutMs: number;
  readonly #reconnect: ResolvedReconnect | undefined;
  readonly #maxBuffered: number;
  readonly #init: {
    protocols?: string | string[];
    headers?: Record<string, string>;
    dispatcher?: Dispatcher;
  };
  readonly #onOpen: WebSocketConnectionOptions['onOpen'];
  readonly #random: () => number;
  readonly #onFinal: ((connection: WebSocketConnection) => void) | undefined;

  #state: WebSocketState = 'connecting';
  #socket: WebSocket | undefined;
  #generation = 0;
  #opens = 0;
  #reconnects = 0;
  /** Failed attempts in the current streak. */
  #attempts = 0;
  #openedAt = 0;
  #lastError: unknown;
  #seq = 0;
  #messagesOut = 0;
  #lastActivity = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #connectTimer: NodeJS.Timeout | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #closeTimer: NodeJS.Timeout | undefined;
  /** Set once the client decided to end the connection (close(), idle, overflow). */
  #ending: { by: WebSocketCloseCause; failure?: MocraError } | undefined;
  readonly #buffer = new Fifo<WebSocketMessage>();
  readonly #consumers: Waiter<WebSocketMessage | undefined>[] = [];
  readonly #openWaiters: Waiter<void>[] = [];
  #final: WebSocketCloseInfo | undefined;
  #failure: MocraError | undefined;
  readonly #closed: Promise<WebSocketCloseInfo>;
  #resolveClosed!: (info: WebSocketCloseInfo) => void;

  /** @internal Use {@link WebSocketManager.connect}. */
  constructor(
    key: string,
    url: string,
    options: WebSocketConnectionOptions = {},
    onFinal?: (connection: WebSocketConnection) => void,
  ) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch (err) {
      throw new InvalidUrlError(url, 'not an absolute URL', { cause: err });
    }
    if (!WS_PROTOCOLS.has(parsed.protocol))
      throw new InvalidUrlError(
        url,
        `a WebSocket URL must be ws:, wss:, http: or https:, not ${parsed.protocol}`,
      );
    this.key = key;
    this.url = url;
    const resolved = resolveWebSocketOptions(options);
    this.#idleTimeoutMs = resolved.idleTimeoutMs;
    this.#connectTimeoutMs = resolved.connectTimeoutMs;
    this.#closeTimeoutMs = resolved.closeTimeoutMs;
    this.#maxBuffered = resolved.maxBufferedMessages;
    this.#reconnect = resolved.reconnect;
    this.#init = {
      ...(options.protocols === undefined ? {} : { protocols: options.protocols }),
      ...(options.headers === undefined ? {} : { headers: options.headers }),
      ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
    };
    this.#onOpen = options.onOpen;
    this.#random = options.random ?? Math.random;
    this.#onFinal = onFinal;
    this.#closed = new Promise((resolve) => {
      this.#resolveClosed = resolve;
    });
    this.#openSocket();
  }

  get state(): WebSocketState {
    return this.#state;
  }

  /** Resolves once the connection has closed for good (never rejects). */
  get closed(): Promise<WebSocketCloseInfo> {
    return this.#closed;
  }

  /** How it ended, once it has. */
  get closeInfo(): WebSocketCloseInfo | undefined {
    return this.#final;
  }

  /** The error it ended with, if it did not end cleanly. */
  get failure(): MocraError | undefined {
    return this.#failure;
  }

  /** Inbound messages waiting for a consumer. */
  get buffered(): number {
    return this.#buffer.size;
  }

  stats(): WebSocketConnectionStats {
    return {
      key: this.key,
      url: this.url,
      state: this.#state,
      opens: this.#opens,
      reconnects: this.#reconnects,
      messagesIn: this.#seq,
      messagesOut: this.#messagesOut,
      buffered: this.#buffer.size,
    };
  }

  /** Resolves when a socket is open (now or after connecting/reconnecting); rejects if the connection ends first. */
  ready(signal?: AbortSignal): Promise<void> {
    if (this.#state === 'open') return Promise.resolve();
    if (this.#state === 'closed' || this.#state === 'closing') return Promise.reject(this.#endError());
    return this.#wait(this.#openWaiters, signal);
  }

  /** Send a text or binary message, waiting for the socket to (re)open if needed. */
  async send(data: string | Uint8Array, signal?: AbortSignal): Promise<void> {
    if (this.#state !== 'open') await this.ready(signal);
    const socket = this.#socket;
    if (socket === undefined || this.#state !== 'open') throw this.#endError();
    socket.send(data);
    this.#messagesOut++;
    this.#touch();
  }

  /**
   * The next inbound message, waiting for one if none is buffered. `undefined` once the
   * connection closed cleanly and the buffer is drained; throws the failure after an unclean end.
   */
  next(signal?: AbortSignal): Promise<WebSocketMessage | undefined> {
    const buffered = this.#buffer.shift();
    if (buffered !== undefined) return Promise.resolve(buffered);
    if (this.#state === 'closed') {
      return this.#failure === undefined ? Promise.resolve(undefined) : Promise.reject(this.#failure);
    }
    return this.#wait(this.#consumers, signal);
  }

  /** Every inbound message until the connection ends (see {@link next}). */
  async *messages(signal?: AbortSignal): AsyncGenerator<WebSocketMessage, void, undefined> {
    for (;;) {
      const message = await this.next(signal);
      if (message === undefined) return;
      yield message;
    }
  }

  /**
   * Close for good (no reconnect). Waits for the server's close frame for at most
   * `closeTimeoutMs`. Buffered messages stay readable. Calling it again returns the same end.
   */
  close(code = 1000, reason = ''): Promise<WebSocketCloseInfo> {
    this.#end({ by: 'client' }, code, reason);
    return this.#closed;
  }

  // ── sockets ──────────────────────────────────────────────────────────────────

  #openSocket(): void {
    this.#reconnectTimer = undefined;
    this.#state = 'connecting';
    const generation = ++this.#generation;
    let socket: WebSocket;
    try {
      socket = new WebSocket(this.url, this.#init);
    } catch (err) {
      // Only a URL undici refuses gets here (we checked the scheme); retrying cannot help.
      this.#finish(
        { code: 1006, reason: '', wasClean: false, by: 'error' },
        new WebSocketConnectError(this.url, this.#attempts + 1, { cause: err }),
      );
      return;
    }
    socket.binaryType = 'arraybuffer';
    this.#socket = socket;
    this.#connectTimer = setTimeout(() => {
      this.#lastError = new Error(`opening handshake took longer than ${this.#connectTimeoutMs} ms`);
      // close() while CONNECTING fails the connection: an error event, then close with 1006.
      socket.close();
    }, this.#connectTimeoutMs);

    socket.addEventListener('open', () => {
      if (this.#socket !== socket) return;
      clearTimeout(this.#connectTimer);
      const reconnect = this.#opens > 0;
      this.#opens++;
      this.#openedAt = Date.now();
      this.#lastError = undefined;
      if (this.#ending) {
        // close() was called while connecting: finish the handshake, then say goodbye.
        this.#closeSocket(socket, 1000, '');
        return;
      }
      this.#state = 'open';
      this.#touch();
      if (websocketChannels.open.hasSubscribers)
        websocketChannels.open.publish({ key: this.key, url: this.url, generation, reconnect });
      if (this.#onOpen) {
        try {
          this.#onOpen(this, { generation, reconnect });
        } catch (err) {
          this.#end(
            {
              by: 'error',
              failure: new WebSocketClosedError(this.url, 1000, 'onOpen threw', { cause: err }),
            },
            1000,
            'client error',
          );
          return;
        }
      }
      for (const waiter of this.#openWaiters.splice(0)) waiter.resolve();
    });

    socket.addEventListener('message', (event) => {
      if (this.#socket !== socket || this.#state !== 'open') return;
      this.#touch();
      const raw: unknown = event.data;
      const binary = typeof raw !== 'string';
      const message: WebSocketMessage = {
        key: this.key,
        url: this.url,
        data: binary ? new Uint8Array(raw as ArrayBuffer) : raw,
        binary,
        seq: ++this.#seq,
        generation,
        receivedAt: Date.now(),
      };
      const consumer = this.#consumers.shift();
      if (consumer) {
        consumer.resolve(message);
        return;
      }
      if (this.#buffer.size >= this.#maxBuffered) {
        this.#end(
          { by: 'error', failure: new WebSocketOverflowError(this.url, this.#maxBuffered) },
          1000,
          'receive buffer full',
        );
        return;
      }
      this.#buffer.push(message);
    });

    socket.addEventListener('error', (event) => {
      if (this.#socket !== socket) return;
      const error: unknown = (event as unknown as { error?: unknown }).error;
      this.#lastError ??= error instanceof Error ? error : new Error('WebSocket error');
    });

    socket.addEventListener('close', (event) => {
      if (this.#socket !== socket) return;
      this.#onSocketClosed(event.code, event.reason, event.wasClean);
    });
  }

  #onSocketClosed(code: number, reason: string, wasClean: boolean): void {
    clearTimeout(this.#connectTimer);
    clearTimeout(this.#closeTimer);
    this.#disarmIdle();
    this.#socket = undefined;
    const opened = this.#state === 'open';
    if (this.#ending) {
      this.#finish({ code, reason, wasClean, by: this.#ending.by }, this.#ending.failure);
      return;
    }
    if (opened && Date.now() - this.#openedAt >= (this.#reconnect?.stableAfterMs ?? 0)) this.#attempts = 0;
    this.#openedAt = 0;
    const policy = this.#reconnect;
    if (policy && this.#attempts < policy.maxAttempts && policy.shouldReconnect({ code, reason, opened })) {
      this.#attempts++;
      this.#reconnects++;
      const delayMs = backoffDelay(this.#attempts, policy, this.#random);
      this.#state = 'reconnecting';
      if (websocketChannels.reconnect.hasSubscribers)
        websocketChannels.reconnect.publish({
          key: this.key,
          url: this.url,
          attempt: this.#attempts,
          delayMs,
          code,
        });
      this.#reconnectTimer = setTimeout(() => this.#openSocket(), delayMs);
      return;
    }
    const info: WebSocketCloseInfo = { code, reason, wasClean, by: 'server' };
    if (!opened) {
      this.#finish(info, new WebSocketConnectError(this.url, this.#attempts + 1, { cause: this.#lastError }));
    } else if (code === 1000) {
      this.#finish(info);
    } else {
      this.#finish(
        info,
        new WebSocketClosedError(this.url, code, reason, {
          retryable: TRANSIENT_CODES.has(code),
          ...(this.#lastError === undefined ? {} : { cause: this.#lastError }),
        }),
      );
    }
  }

  /** The client ends the connection (close(), idle timer, overflow, a throwing onOpen). */
  #end(ending: { by: WebSocketCloseCause; failure?: MocraError }, code: number, reason: string): void {
    if (this.#ending || this.#state === 'closed') return;
    this.#ending = ending;
    this.#disarmIdle();
    const socket = this.#socket;
    if (socket === undefined) {
      // Between two sockets (waiting to reconnect): nothing to say goodbye to.
      clearTimeout(this.#reconnectTimer);
      this.#finish({ code, reason, wasClean: true, by: ending.by }, ending.failure);
      return;
    }
    if (socket.readyState === WebSocket.CONNECTING) {
      // Let the handshake finish (the open handler closes it) but do not wait past the timeout.
      this.#state = 'closing';
      this.#armCloseTimer(code, reason);
      return;
    }
    this.#closeSocket(socket, code, reason);
  }

  #closeSocket(socket: WebSocket, code: number, reason: string): void {
    this.#state = 'closing';
    try {
      socket.close(code, reason);
    } catch {
      // A code the API refuses (only 1000 and 3000–4999 may be sent): close without one.
      socket.close();
    }
    this.#armCloseTimer(code, reason);
  }

  /** A server that never answers our close frame must not keep the connection half-open. */
  #armCloseTimer(code: number, reason: string): void {
    clearTimeout(this.#closeTimer);
    this.#closeTimer = setTimeout(() => {
      if (this.#state === 'closed') return;
      this.#socket = undefined; // ignore whatever that socket does later
      clearTimeout(this.#connectTimer);
      const ending = this.#ending ?? { by: 'client' as const };
      this.#finish({ code, reason, wasClean: false, by: ending.by }, ending.failure);
    }, this.#closeTimeoutMs);
    this.#closeTimer.unref();
  }

  #finish(info: WebSocketCloseInfo, failure?: MocraError): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#final = info;
    this.#failure = failure;
    clearTimeout(this.#connectTimer);
    clearTimeout(this.#reconnectTimer);
    clearTimeout(this.#closeTimer);
    this.#disarmIdle();
    const endError = this.#endError();
    for (const waiter of this.#openWaiters.splice(0)) waiter.reject(endError);
    for (const consumer of this.#consumers.splice(0)) {
      if (failure === undefined) consumer.resolve(undefined);
      else consumer.reject(failure);
    }
    if (websocketChannels.close.hasSubscribers)
      websocketChannels.close.publish({
        key: this.key,
        url: this.url,
        code: info.code,
        reason: info.reason,
        by: info.by,
        ...(failure === undefined ? {} : { error: failure }),
      });
    this.#onFinal?.(this);
    this.#resolveClosed(info);
  }

  #endError(): MocraError {
    return this.#failure ?? new DownloaderClosedError(`WebSocket connection '${this.key}' (${this.url})`);
  }

  // ── idle timer ───────────────────────────────────────────────────────────────
  // One timer per connection, re-armed lazily: a message only records the time, and the timer,
  // when it fires early, sleeps for the remainder. No clear/set per message.

  #touch(): void {
    this.#lastActivity = Date.now();
    if (this.#idleTimeoutMs > 0 && this.#idleTimer === undefined) this.#armIdle(this.#idleTimeoutMs);
  }

  #armIdle(ms: number): void {
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      if (this.#state !== 'open') return;
      const idleFor = Date.now() - this.#lastActivity;
      if (idleFor >= this.#idleTimeoutMs) this.#end({ by: 'idle' }, 1000, 'idle timeout');
      else this.#armIdle(this.#idleTimeoutMs - idleFor);
    }, ms);
    // The open socket keeps the process alive; the timer alone should not.
    this.#idleTimer.unref();
  }

  #disarmIdle(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }

  #wait<T>(list: Waiter<T>[], signal: AbortSignal | undefined): Promise<T> {
    if (signal?.aborted) return Promise.reject(new AbortedError('aborted', { cause: signal.reason }));
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        resolve: (value) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      const onAbort = (): void => {
        const i = list.indexOf(waiter);
        if (i >= 0) list.splice(i, 1);
        reject(new AbortedError('aborted', { cause: signal?.reason }));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      list.push(waiter);
    });
  }
}

interface ResolvedConnectionOptions {
  idleTimeoutMs: number;
  connectTimeoutMs: number;
  closeTimeoutMs: number;
  maxBufferedMessages: number;
  reconnect: ResolvedReconnect | undefined;
}

/** Validates connection options (InvalidArgumentError on a bad one) and fills in defaults. */
export function resolveWebSocketOptions(options: WebSocketConnectionOptions): ResolvedConnectionOptions {
  return {
    idleTimeoutMs: nonNegative('idleTimeoutMs', options.idleTimeoutMs, 30_000),
    connectTimeoutMs: positive('connectTimeoutMs', options.connectTimeoutMs, 10_000),
    closeTimeoutMs: positive('closeTimeoutMs', options.closeTimeoutMs, 5_000),
    maxBufferedMessages: positive('maxBufferedMessages', options.maxBufferedMessages, 10_000),
    reconnect: options.reconnect === false ? undefined : resolveReconnect(options.reconnect ?? {}),
  };
}

function resolveReconnect(options: WebSocketReconnectOptions): ResolvedReconnect {
  const maxAttempts = options.maxAttempts ?? 5;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 0)
    throw new InvalidArgumentError(`reconnect.maxAttempts must be an integer ≥ 0, got ${maxAttempts}`);
  return {
    ...resolveBackoff(options, 'reconnect'),
    maxAttempts,
    stableAfterMs: nonNegative('reconnect.stableAfterMs', options.stableAfterMs, 10_000),
    shouldReconnect: options.shouldReconnect ?? defaultShouldReconnect,
  };
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0)
    throw new InvalidArgumentError(`${name} must be a number > 0, got ${value}`);
  return value;
}

function nonNegative(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0)
    throw new InvalidArgumentError(`${name} must be a number ≥ 0, got ${value}`);
  return value;
}
