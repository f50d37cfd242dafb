/**
 * A small GET for the frontier's own files (robots.txt, sitemaps): redirects followed up to a
 * limit, idle timeouts and a deadline for the whole fetch (the body read included), and a
 * streamed body the caller reads only as far as it wants. The engine
 * can pass its own fetcher instead (to go through its proxies, cookies and User-Agent).
 */

import type { Dispatcher } from 'undici';
import { request as undiciRequest } from 'undici';
import { TimeoutError } from '../../errors.js';
import { Deadline } from '../../model/deadline.js';

export interface FetchedResource {
  /** The final URL, after redirects. */
  url: string;
  status: number;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body, as it arrives. Read it or call `discard`. */
  body: AsyncIterable<Uint8Array>;
  /** Drop the rest of the body (frees the connection). */
  discard(): Promise<void>;
}

export interface ResourceFetchInit {
  signal?: AbortSignal;
}

export type ResourceFetcher = (url: string, init?: ResourceFetchInit) => Promise<FetchedResource>;

export interface ResourceFetcherOptions {
  /** @default 'mocra (+https://github.com/mocra-ts/mocra)' */
  userAgent?: string;
  /** Redirects followed (RFC 9309 asks for at least five for robots.txt). @default 5 */
  maxRedirects?: number;
  /** Headers and body timeout each. @default 30000 */
  timeoutMs?: number;
  /**
   * Longest the whole fetch may take, redirects and the body read included; then the fetch or
   * the body read fails with TimeoutError (`phase: 'request'`).
   * @default 60000
   */
  requestTimeoutMs?: number;
  /** undici dispatcher (a proxy agent, a shared pool). @default undici's global dispatcher */
  dispatcher?: Dispatcher;
}

/** Thrown by the default fetcher when the redirect limit is passed (the caller decides what that means). */
export class TooManyResourceRedirects extends Error {
  override readonly name = 'TooManyResourceRedirects';
  constructor(readonly url: string) {
    super(`too many redirects from ${url}`);
  }
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

export function createResourceFetcher(options: ResourceFetcherOptions = {}): ResourceFetcher {
  const userAgent = options.userAgent ?? 'mocra (+https://github.com/mocra-ts/mocra)';
  const maxRedirects = options.maxRedirects ?? 5;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 60_000;
  return async (url, init = {}) => {
    const deadline = new Deadline(
      init.signal,
      requestTimeoutMs,
      () => new TimeoutError(url, 'request', requestTimeoutMs),
    );
    let current = url;
    try {
      for (let hop = 0; ; hop++) {
        const res = await undiciRequest(current, {
          method: 'GET',
          headers: { 'user-agent': userAgent, accept: '*/*', 'accept-encoding': 'identity' },
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          signal: deadline.signal,
          ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
        });
        const location = res.headers.location;
        if (REDIRECTS.has(res.statusCode) && typeof location === 'string' && location !== '') {
          await res.body.dump();
          if (hop >= maxRedirects) throw new TooManyResourceRedirects(url);
          current = new URL(location, current).href;
          continue;
        }
        // The deadline runs on while the caller reads, and ends with the body.
        res.body.once('close', () => deadline.clear());
        return {
          url: current,
          status: res.statusCode,
          headers: res.headers,
          body: res.body,
          discard: () => res.body.dump().then(() => undefined),
        };
      }
    } catch (err) {
      deadline.clear();
      throw deadline.expired ? new TimeoutError(url, 'request', requestTimeoutMs, { cause: err }) : err;
    }
  };
}

/**
 * Read a body up to `maxBytes`; what is beyond is dropped (and the connection freed).
 * `truncated` says whether that happened.
 */
export async function readLimited(
  resource: FetchedResource,
  maxBytes: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  let truncated = false;
  for await (const chunk of resource.body) {
    const room = maxBytes - total;
    if (chunk.length >= room) {
      if (room > 0) chunks.push(chunk.subarray(0, room));
      total += Math.max(0, room);
      truncated = chunk.length > room;
      break;
    }
    chunks.push(chunk);
    total += chunk.length;
  }
  if (truncated) await resource.discard().catch(() => {});
  return { bytes: Buffer.concat(chunks, total), truncated };
}
