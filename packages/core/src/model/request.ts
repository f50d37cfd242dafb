/**
 * A request to download: what a node's `generate` (a spider's `start`) and `cx.follow` produce,
 * and the payload of the `request` topic.
 *
 * Requests are plain, mutable data until they are published: `seeds.get(url)` returns one for
 * the caller to adjust (headers, meta, body…). Once a request is on a queue it must not be
 * mutated (the in-memory backend passes it by reference). Everything here survives a
 * serializing backend: {@link Request.toJSON} and {@link Request.from} round-trip it.
 */

import { encodeRequestParts, type RequestEncodingInit, usesEncoding } from './request-encoding.js';

export type RequestBody = string | Uint8Array;

/**
 * How a request (or a module) uses the proxy pool: `false` never, `true` the pool's choice
 * (tiers escalate per host), or a pin to one provider or tier, optionally sticky to a session
 * key (the request's `account` is the session key when none is given).
 */
export type ProxyChoice = boolean | { provider?: string; tier?: number; session?: string };

/**
 * Where the engine caches a request's parsed URL (see `requestUrl` in frontier/fingerprint.ts):
 * a URL, or a string when only the fact is known that this href is a serialized absolute
 * http(s) URL (links resolved without the URL parser). Valid while it (its href) equals `url`.
 * A symbol, so it never shows in JSON, spreads or enumerations.
 */
export const PARSED_URL: unique symbol = Symbol('mocra.parsedUrl');

/** The serializable shape of a {@link Request} (what a JSON/msgpack queue carries). */
export interface RequestData {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  /** A string, raw bytes, or `{ base64 }` for bytes that went through JSON. */
  body?: RequestBody | { base64: string };
  meta?: Record<string, unknown>;
  priority?: number;
  depth?: number;
  timeoutMs?: number;
  maxRedirects?: number;
  skipDedup?: boolean;
  dedupKey?: string;
  module?: string;
  node?: string;
  runId?: string;
  account?: string;
  fingerprint?: string;
  /** Set by the engine for modules with join nodes in a cluster: the request's join credit. */
  credit?: string;
  downloader?: string;
  proxy?: ProxyChoice;
  platform?: string;
  middleware?: string[];
}

/** What can be set when a request is created; everything else has a default. */
export type RequestInit = Omit<RequestData, 'url' | 'body' | 'fingerprint' | 'credit'> & {
  body?: RequestBody;
} & RequestEncodingInit;

export class Request {
  /** Absolute URL (relative URLs given to `cx.follow` are resolved against the response URL). */
  url: string;
  /** @default 'GET' */
  method: string;
  /** Sent as given, on top of the downloader's defaults (User-Agent, Accept-Encoding). */
  headers: Record<string, string>;
  body: RequestBody | undefined;
  /** Free-form data that travels with the request to its response (`res.request.meta`). */
  meta: Record<string, unknown>;
  /** Higher is fetched first. @default 0 */
  priority: number;
  /** Seeds are depth 0; each follow adds 1. */
  depth: number;
  /** Overrides the downloader's headers and body timeouts for this request. */
  timeoutMs: number | undefined;
  /** Overrides the downloader's redirect limit for this request (0 = do not follow). */
  maxRedirects: number | undefined;
  /** Fetch even if an equal request was seen before (Scrapy's `dont_filter`). @default false */
  skipDedup: boolean;
  /** Replaces the computed fingerprint as the dedup key (e.g. to treat two URLs as one page). */
  dedupKey: string | undefined;
  /** Set by the engine: the module and node whose `parse` receives the response. */
  module: string | undefined;
  node: string | undefined;
  /** Set by the engine: the run this request belongs to. */
  runId: string | undefined;
  /** Partition key on distributed queues. */
  account: string | undefined;
  /** Set by the frontier on admission; the first half of every item's `itemId`. */
  fingerprint: string | undefined;
  /**
   * Set by the engine, only for modules with join nodes on shared coordination: the share of
   * its run's join credit this request holds (distributed/credit.ts). Never copied by `clone`.
   */
  credit: string | undefined;
  /** The registered downloader that fetches it (its module's choice, else the default, when unset). */
  downloader: string | undefined;
  /** Proxy use for this request; wins over its module's setting. Unset: the module's, else the pool's choice. */
  proxy: ProxyChoice | undefined;
  /** The platform of its run (with `account`, it names the session). Set by the engine from the task. */
  platform: string | undefined;
  /** Names of non-global middleware to run for this request (and the items parsed from it), besides its module's. */
  middleware: string[] | undefined;
  /** Internal cache; valid while it (its href) equals `url`. */
  [PARSED_URL]: URL | string | undefined;

  constructor(url: string, init: RequestInit = {}) {
    this.url = url;
    this.method = init.method?.toUpperCase() ?? 'GET';
    this.headers = init.headers ? { ...init.headers } : {};
    this.body = init.body;
    if (usesEncoding(init)) applyEncoding(this, init);
    this.meta = init.meta ? { ...init.meta } : {};
    this.priority = init.priority ?? 0;
    this.depth = init.depth ?? 0;
    this.timeoutMs = init.timeoutMs;
    this.maxRedirects = init.maxRedirects;
    this.skipDedup = init.skipDedup ?? false;
    this.dedupKey = init.dedupKey;
    this.module = init.module;
    this.node = init.node;
    this.runId = init.runId;
    this.account = init.account;
    this.fingerprint = undefined;
    this.credit = undefined;
    this.downloader = init.downloader;
    this.proxy = init.proxy;
    this.platform = init.platform;
    this.middleware = init.middleware ? [...init.middleware] : undefined;
  }

  /** Set a header (chainable). */
  header(name: string, value: string): this {
    this.headers[name] = value;
    return this;
  }

  /** Merge `meta` into the request's meta (chainable). */
  withMeta(meta: Record<string, unknown>): this {
    Object.assign(this.meta, meta);
    return this;
  }

  /** A copy with its own headers and meta objects; the engine-set fields are not copied. */
  clone(overrides: Partial<RequestInit> & { url?: string } = {}): Request {
    return new Request(overrides.url ?? this.url, {
      method: this.method,
      headers: { ...this.headers },
      meta: { ...this.meta },
      priority: this.priority,
      depth: this.depth,
      ...(this.body === undefined ? {} : { body: this.body }),
      ...(this.timeoutMs === undefined ? {} : { timeoutMs: this.timeoutMs }),
      ...(this.maxRedirects === undefined ? {} : { maxRedirects: this.maxRedirects }),
      skipDedup: this.skipDedup,
      ...(this.dedupKey === undefined ? {} : { dedupKey: this.dedupKey }),
      ...(this.downloader === undefined ? {} : { downloader: this.downloader }),
      ...(this.proxy === undefined ? {} : { proxy: this.proxy }),
      ...(this.middleware === undefined ? {} : { middleware: [...this.middleware] }),
      ...overrides,
    });
  }

  toJSON(): RequestData {
    const data: RequestData = { url: this.url, method: this.method };
    if (Object.keys(this.headers).length > 0) data.headers = this.headers;
    if (this.body !== undefined) {
      data.body =
        typeof this.body === 'string' ? this.body : { base64: Buffer.from(this.body).toString('base64') };
    }
    if (Object.keys(this.meta).length > 0) data.meta = this.meta;
    if (this.priority !== 0) data.priority = this.priority;
    if (this.depth !== 0) data.depth = this.depth;
    if (this.timeoutMs !== undefined) data.timeoutMs = this.timeoutMs;
    if (this.maxRedirects !== undefined) data.maxRedirects = this.maxRedirects;
    if (this.skipDedup) data.skipDedup = true;
    if (this.dedupKey !== undefined) data.dedupKey = this.dedupKey;
    if (this.module !== undefined) data.module = this.module;
    if (this.node !== undefined) data.node = this.node;
    if (this.runId !== undefined) data.runId = this.runId;
    if (this.account !== undefined) data.account = this.account;
    if (this.fingerprint !== undefined) data.fingerprint = this.fingerprint;
    if (this.credit !== undefined) data.credit = this.credit;
    if (this.downloader !== undefined) data.downloader = this.downloader;
    if (this.proxy !== undefined) data.proxy = this.proxy;
    if (this.platform !== undefined) data.platform = this.platform;
    if (this.middleware !== undefined) data.middleware = this.middleware;
    return data;
  }

  /**
   * The request itself when it already is one (the in-memory backend hands payloads over by
   * reference), else a request rebuilt from its serialized form.
   */
  static from(value: Request | RequestData): Request {
    if (value instanceof Request) return value;
    const { body, fingerprint, credit, url, ...rest } = value;
    const request = new Request(url, {
      ...rest,
      ...(body === undefined
        ? {}
        : { body: typeof body === 'object' && 'base64' in body ? Buffer.from(body.base64, 'base64') : body }),
    });
    request.fingerprint = fingerprint;
    request.credit = credit;
    return request;
  }
}

/**
 * Request fields of `init` onto an existing request (a follow-up built from a link or a
 * Request): headers and meta are merged, the other fields set when given. Routing fields
 * (module, node, run, depth) are not the caller's to change here.
 */
export function applyRequestInit(
  request: Request,
  init: Omit<RequestInit, 'module' | 'node' | 'runId' | 'depth'>,
): void {
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
  if (init.downloader !== undefined) request.downloader = init.downloader;
  if (init.proxy !== undefined) request.proxy = init.proxy;
  if (init.middleware !== undefined) request.middleware = [...init.middleware];
  if (usesEncoding(init)) applyEncoding(request, init);
}

function applyEncoding(request: Request, init: RequestInit): void {
  const parts = encodeRequestParts(request.url, request.headers, init);
  request.url = parts.url;
  if (parts.body !== undefined) request.body = parts.body;
  if (parts.method !== undefined) request.method = parts.method;
  Object.assign(request.headers, parts.headers);
}
