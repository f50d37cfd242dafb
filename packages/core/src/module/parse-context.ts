/**
 * What `parse` works with (`cx` in a spider): emit items, follow links or requests. Output is
 * collected here and handed on by the engine only after `parse` returns, so a parse that
 * throws has no effect beyond its error.
 */

import type { ModuleConfig } from '@mocra/store';
import type { ModuleSettings } from '../config/module-config.js';
import { InvalidUrlError, type MocraError } from '../errors.js';
import { parseHttpUrl } from '../frontier/fingerprint.js';
import {
  type EnqueueLinksOptions,
  type EnqueueLinksResult,
  enqueueLinks,
} from '../frontier/links/enqueue-links.js';
import { applyRequestInit, PARSED_URL, Request, type RequestInit } from '../model/request.js';
import type { Response } from '../model/response.js';
import type { Logger } from '../observability/logger.js';
import type { LoginInfo } from '../session/session.js';

/** Options of `cx.follow`: request fields, plus where the response should be parsed. */
export interface FollowOptions extends Omit<RequestInit, 'module' | 'node' | 'runId' | 'depth'> {
  /** Node of the target module whose `parse` handles the response. @default the current node */
  node?: string;
  /** Module to hand the request to. @default the current module */
  module?: string;
  /** Stored as `request.meta.label`: which handler of a router parses the response. */
  label?: string;
}

/** What `cx.start(module, …)` starts. */
export interface StartModuleOptions {
  module: string;
  /** The new run's `ctx.params`. @default {} */
  params?: Record<string, unknown>;
  /** @default this run's account */
  account?: string;
  /** @default this run's platform */
  platform?: string;
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
  /** Hand-offs to the successor nodes (`cx.next`), in call order. */
  readonly handoffs: { meta: Record<string, unknown> }[] = [];
  /** Runs of other modules started from this parse (`cx.start`). */
  readonly starts: StartModuleOptions[] = [];
  /** Set by `cx.stop()`: the run of this module ends after this parse. */
  stopReason: string | undefined;
  /** The account and platform of the run. @default 'default' */
  readonly account: string;
  readonly platform: string;
  /** The module's layered config (typed getters for your own keys). */
  readonly config: ModuleConfig | undefined;
  /** The typed module settings mocra reads. */
  readonly settings: ModuleSettings | undefined;
  /** The session's login, for modules with `shouldLogin`. */
  readonly login: LoginInfo | undefined;

  constructor(init: {
    response: Response;
    module: string;
    node: string;
    runId: string;
    log: Logger;
    signal: AbortSignal;
    account?: string | undefined;
    platform?: string | undefined;
    config?: ModuleConfig | undefined;
    settings?: ModuleSettings | undefined;
    login?: LoginInfo | undefined;
  }) {
    this.response = init.response;
    this.module = init.module;
    this.node = init.node;
    this.runId = init.runId;
    this.log = init.log;
    this.signal = init.signal;
    this.account = init.account ?? 'default';
    this.platform = init.platform ?? 'default';
    this.config = init.config;
    this.settings = init.settings;
    this.login = init.login;
  }

  /** True once `cx.stop()` was called in this parse. */
  get stopped(): boolean {
    return this.stopReason !== undefined;
  }

  /**
   * Hand the run on to the successor nodes (every one: fan-out), whose `generate` gets `meta`
   * as `ctx.params`. Call it several times to hand on several pieces of work. A leaf node has
   * no successors: the call is reported (UnknownModuleError) after the parse.
   */
  next(meta: Record<string, unknown> = {}): void {
    this.handoffs.push({ meta: { ...meta } });
  }

  /**
   * Start a run of another module (every entry node's `generate`, with `params`), in the same
   * run id, account and platform unless given.
   */
  start(module: string, options: Omit<StartModuleOptions, 'module'> = {}): void {
    this.starts.push({ ...options, module });
  }

  /**
   * End this module's run: later work of the run (queued requests, responses, hand-offs) is
   * dropped and reported on `mocra:module:drop` — not run, not silently lost. Items emitted in
   * this parse are still written; its follow-ups are dropped.
   */
  stop(reason = 'stopped by parse'): void {
    this.stopReason = reason;
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
      if (options !== undefined) applyRequestInit(request, options);
    } else {
      request = target;
      request.url = parsed.href;
      if (options !== undefined) applyRequestInit(request, options);
    }
    if (options?.label !== undefined) request.meta.label = options.label;
    request[PARSED_URL] = parsed;
    request.depth = this.response.request.depth + 1;
    this.follows.push({ request, module: options?.module, node: options?.node });
    return request;
  }

  /**
   * Follow the links of this page: `<a href>`, `<area href>` and `<link rel=next|prev>` (or what
   * `selector` picks), kept by `scope` (same host by default), `include` / `exclude` (globs or
   * regexes), `respectNofollow` and `maxDepth`, then `transform`ed. One streaming pass over the
   * HTML; the requests are follow-ups like `cx.follow`'s. Returns how many were enqueued, how
   * many links the page had, and its title (docs/crawling.md). An options object is compiled
   * once and reused while the same object is passed: pass a new object to change options.
   */
  enqueueLinks(options?: EnqueueLinksOptions): EnqueueLinksResult {
    return enqueueLinks(this, options);
  }
}
