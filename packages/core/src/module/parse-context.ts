/**
 * What `parse` works with (`cx` in a spider): emit items, follow links or requests. Output is
 * collected here and handed on by the engine only after `parse` returns, so a parse that
 * throws has no effect beyond its error.
 */
import { InvalidUrlError, type MocraError } from '../errors.js';
import { parseHttpUrl } from '../frontier/fingerprint.js';
import { PARSED_URL, Request, type RequestInit } from '../model/request.js';
import type { Response } from '../model/response.js';
import type { Logger } from '../observability/logger.js';

/** Options of `cx.follow`: request fields, plus where the response should be parsed. */
export interface FollowOptions extends Omit<RequestInit, 'module' | 'node' | 'runId' | 'depth'> {
  /** Node of the target module whose `parse` handles the response. @default the current node */
  node?: string;
  /** Module to hand the request to. @default the current module */
  module?: string;
}

/** One collected follow: the request and where it should go. */
export interface CollectedFollow {
  request: Request;
  module: string | undefined;
  node: string | undefined;
}

export class ParseContext<TItem = unknown> {
  readonly response: Response;
  readonly module: string;
  readonly node: string;
  readonly runId: string;
  readonly log: Logger;
  /** Aborted when the engine stops. */
  readonly signal: AbortSignal;
  /** Items in emit order (position = the second half of `itemId`). */
  readonly items: TItem[] = [];
  readonly follows: CollectedFollow[] = [];
  /** Follows that could not become requests (bad URLs), reported after the parse. */
  readonly rejected: { request: Request | undefined; error: MocraError }[] = [];

  constructor(init: {
    response: Response;
    module: string;
    node: string;
    runId: string;
    log: Logger;
    signal: AbortSignal;
  }) {
    this.response = init.response;
    this.module = init.module;
    this.node = init.node;
    this.runId = init.runId;
    this.log = init.log;
    this.signal = init.signal;
  }

  /** The request whose response is being parsed. */
  get request(): Request {
    return this.response.request;
  }

  /** `request.meta`: data that travelled with the request. */
  get meta(): Record<string, unknown> {
    return this.response.request.meta;
  }

  /** Depth of the response being parsed (seeds are 0). */
  get depth(): number {
    return this.response.request.depth;
  }

  /** Hand an item to the sink (after the parse returns). */
  emit(item: TItem): void {
    this.items.push(item);
  }

  /**
   * Fetch another URL or request. A string becomes a GET; a Request keeps its method, headers,
   * body and meta. Relative URLs resolve against the response's final URL. Its depth is this
   * response's depth + 1. Returns the request (still mutable until `parse` returns), or
   * undefined when the URL is unusable — that is reported as InvalidUrlError and the parse
   * goes on.
   */
  follow(target: string | Request, options?: FollowOptions): Request | undefined {
    const raw = typeof target === 'string' ? target : target.url;
    let parsed: URL;
    try {
      parsed = parseHttpUrl(raw, this.response.url);
    } catch (err) {
      const error =
        err instanceof InvalidUrlError ? err : new InvalidUrlError(raw, 'cannot be resolved', { cause: err });
      this.rejected.push({ request: typeof target === 'string' ? undefined : target, error });
      return undefined;
    }
    let request: Request;
    if (typeof target === 'string') {
      // The common case (a link, no options) allocates nothing but the request.
      request = new Request(parsed.href);
      if (options !== undefined) applyInit(request, options);
    } else {
      request = target;
      request.url = parsed.href;
      if (options !== undefined) applyInit(request, options);
    }
    request[PARSED_URL] = parsed;
    request.depth = this.response.request.depth + 1;
    this.follows.push({ request, module: options?.module, node: options?.node });
    return request;
  }
}

/** Request fields of `options` onto `request` (routing fields are not request fields). */
function applyInit(request: Request, init: FollowOptions): void {
  if (init.method !== undefined) request.method = init.method.toUpperCase();
  if (init.headers !== undefined) Object.assign(request.headers, init.headers);
  if (init.body !== undefined) request.body = init.body;
  if (init.meta !== undefined) Object.assign(request.meta, init.meta);
  if (init.priority !== undefined) request.priority = init.priority;
  if (init.timeoutMs !== undefined) request.timeoutMs = init.timeoutMs;
  if (init.maxRedirects !== undefined) request.maxRedirects = init.maxRedirects;
  if (init.skipDedup !== undefined) request.skipDedup = init.skipDedup;
  if (init.dedupKey !== undefined) request.dedupKey = init.dedupKey;
  if (init.account !== undefined) request.account = init.account;
}
