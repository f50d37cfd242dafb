import type { Dispatcher } from 'undici';
import type { Request } from '../model/request.js';
import type { Response } from '../model/response.js';

/**
 * Turns a request into a response. The default is the undici HTTP downloader
 * (`createHttpDownloader`); others (WebSocket, a browser) implement the same two methods.
 *
 * Contract: non-2xx statuses are responses, not errors. Failures are typed MocraErrors
 * (TimeoutError, ConnectionError, BodyTooLargeError, …) with `retryable` set truthfully, and
 * an aborted `signal` ends the download with AbortedError.
 */
export interface Downloader {
  /** Shown in logs and stats; the name the registry selects it by unless registered under another. */
  readonly name: string;
  /**
   * `context` is what the engine decided for this request (the proxy to go through). A
   * downloader that cannot use it ignores it, and should then leave `usesProxy` unset.
   */
  download(request: Request, signal: AbortSignal, context?: DownloadContext): Promise<Response>;
  /** Release connections. Called once when the engine stops. */
  close(): Promise<void>;
  /**
   * True when `download` sends through `context.proxy`. The engine acquires a proxy (and reports
   * its outcome to the pool) only for downloaders that do. @default false
   */
  readonly usesProxy?: boolean;
  /** Resolves when the downloader can serve requests, rejects with the reason when not (optional). */
  healthCheck?(): Promise<void>;
  /**
   * A streaming downloader (WebSocket): one request yields any number of responses, each of
   * which goes through the normal parse path. When present, the engine calls it instead of
   * `download`; the request stays leased until the iterable ends. Ending normally acknowledges
   * the request; throwing sends it down the retry path.
   */
  stream?(request: Request, signal: AbortSignal, context?: DownloadContext): AsyncIterable<Response>;
}

/** What the engine hands a downloader besides the request. */
export interface DownloadContext {
  /** The proxy chosen for this request; absent for a direct request. */
  readonly proxy?: DownloadProxy;
}

/** A proxy chosen from the pool for one request. */
export interface DownloadProxy {
  /** Dialable URL, credentials included (keep it out of logs; use `displayUrl`). */
  readonly url: string;
  /** The URL with the password masked. */
  readonly displayUrl: string;
  readonly provider: string;
  readonly tier: number;
  /** A pooled undici ProxyAgent for it (kept alive between requests by the pool). */
  readonly dispatcher: Dispatcher;
}
