/**
 * The three middleware chains:
 *
 * ```
 *   request ─▶ download.beforeRequest (weight ↑) ─▶ downloader ─▶ download.afterResponse (weight ↓) ─▶ parse
 *   parse ─▶ items ─▶ data.handle (weight ↑) ─▶ store: beforeStore ─▶ store(item…) ─▶ afterStore (weight ↑) ─▶ sink
 * ```
 *
 * A hook's return value decides what happens next: a value replaces the input (the same object,
 * changed in place, or a new one), `null` drops it, and returning nothing (`undefined`) keeps the
 * input as it is — so a hook that only mutates, or only observes, needs no return statement, and
 * dropping is always explicit.
 */
import type { ModuleConfig } from '@mocra/store';

import type { ItemMeta } from '../model/item.js';
import type { Request } from '../model/request.js';
import type { Response } from '../model/response.js';

export type { MiddlewareKind } from '../errors.js';

/** What every hook is told about where it runs. */
export interface MiddlewareContext {
  readonly module: string;
  /** The node whose request, response or items these are. */
  readonly node: string | undefined;
  readonly runId: string;
  readonly account: string | undefined;
  readonly platform: string | undefined;
  /** The module's layered config; `config.middlewareConfig(kind, name)` is a middleware's own config. */
  readonly config: ModuleConfig | undefined;
  /** Aborted when the engine stops. */
  readonly signal: AbortSignal;
}

/**
 * Keep (`undefined`, or no return at all), replace (a value) or drop (`null`). `void` is part of
 * the type on purpose: a hook that only mutates its input needs no return statement.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: lets hooks without a return statement type-check
export type MiddlewareResult<T> = T | null | undefined | void;

type MaybePromise<T> = T | Promise<T>;

interface MiddlewareBase {
  /** Unique per kind; what modules and requests select it by. */
  readonly name: string;
  /** Order: lower runs earlier in `beforeRequest`, data and store, and later in `afterResponse`. @default 0 */
  readonly weight?: number;
}

export interface DownloadMiddleware extends MiddlewareBase {
  readonly kind?: 'download';
  /** Change the request, replace it, or drop it (`null`: it is not downloaded). */
  beforeRequest?(request: Request, ctx: MiddlewareContext): MaybePromise<MiddlewareResult<Request>>;
  /** Change the response, replace it, or drop it (`null`: it is not parsed). */
  afterResponse?(response: Response, ctx: MiddlewareContext): MaybePromise<MiddlewareResult<Response>>;
}

export interface DataMiddleware<TItem = unknown> extends MiddlewareBase {
  readonly kind?: 'data';
  /** Transform an item, replace it, or drop it (`null`: later middleware, stores and the sink never see it). */
  handle(item: TItem, meta: ItemMeta, ctx: MiddlewareContext): MaybePromise<MiddlewareResult<TItem>>;
}

/** The items of one parse that reached the store chain, in emit order. */
export interface StoreBatch<TItem = unknown> {
  readonly items: readonly { readonly item: TItem; readonly meta: ItemMeta }[];
}

/**
 * Stores items somewhere. For each store middleware, in weight order: `beforeStore(batch)`, then
 * `store(item)` for every item, then `afterStore(batch)`. If `beforeStore` throws, its `store`
 * and `afterStore` are skipped and the error takes the retry path (the parse runs again and
 * emits the same `itemId`s, so `store` must be idempotent on `meta.itemId`).
 */
export interface StoreMiddleware<TItem = unknown> extends MiddlewareBase {
  readonly kind?: 'store';
  beforeStore?(batch: StoreBatch<TItem>, ctx: MiddlewareContext): MaybePromise<void>;
  store(item: TItem, meta: ItemMeta, ctx: MiddlewareContext): MaybePromise<void>;
  afterStore?(batch: StoreBatch<TItem>, ctx: MiddlewareContext): MaybePromise<void>;
}

/** Any of the three. Without `kind`, the kind is told by the methods: `store` → store, `handle` → data, else download. */
export type Middleware = DownloadMiddleware | DataMiddleware | StoreMiddleware;

export interface MiddlewareOptions {
  /**
   * Global middleware runs for every module and request; non-global middleware runs only where a
   * module (config `download_middleware`/`data_middleware`/`store_middleware`) or a request
   * selects it by name.
   * @default true
   */
  global?: boolean;
}

/** Which non-global middleware to run, and weight overrides (from a module's config and a request). */
export interface MiddlewareSelection {
  /** Names selected by the module, per kind. */
  download?: readonly string[];
  data?: readonly string[];
  store?: readonly string[];
  /** Names selected by the request: each runs in every kind where such a middleware exists. */
  request?: readonly string[];
  /** Weight overrides by name (the module's `middleware_weights`). */
  weights?: Readonly<Record<string, number>>;
  /** Who selected it, for errors (`module 'catalog'`). */
  selectedBy?: string;
}

/** Outcome of a chain: the value that came out, or the middleware that dropped it. */
export type ChainResult<T> = { value: T; droppedBy?: undefined } | { value?: undefined; droppedBy: string };
