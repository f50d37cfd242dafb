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
  /** Shown in logs and stats. */
  readonly name: string;
  download(request: Request, signal: AbortSignal): Promise<Response>;
  /** Release connections. Called once when the engine stops. */
  close(): Promise<void>;
}
