/**
 * The middleware registry and the three chains. Which middleware runs for a piece of work is its
 * plan: every global middleware of the kind, plus the non-global ones the module or the request
 * selects by name, ordered by weight (a module's `middleware_weights` override a middleware's
 * own weight):
 *
 * ```
 *   beforeRequest, data, store:  weight ascending   (ties: registration order)
 *   afterResponse:               weight descending  (ties: reverse registration order)
 * ```
 *
 * so the middleware that sees a request first sees its response last, like layers of an onion.
 * Plans are cached per selection; registering a middleware clears the cache.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import {
  InvalidArgumentError,
  MiddlewareFailedError,
  type MiddlewareKind,
  type MiddlewarePhase,
  UnknownMiddlewareError,
} from '../errors.js';
import type { ItemMeta } from '../model/item.js';
import type { Request } from '../model/request.js';
import type { Response } from '../model/response.js';
import type {
  ChainResult,
  DataMiddleware,
  DownloadMiddleware,
  Middleware,
  MiddlewareContext,
  MiddlewareOptions,
  MiddlewareResult,
  MiddlewareSelection,
  StoreBatch,
  StoreMiddleware,
} from './types.js';

/** `mocra:middleware:drop` — a middleware dropped a request, a response or an item. */
export interface MiddlewareDropMessage {
  kind: MiddlewareKind;
  middleware: string;
  phase: MiddlewarePhase;
  module: string;
  runId: string;
  /** URL of the request or response (for download middleware). */
  url?: string;
  /** The dropped item's id (for data middleware). */
  itemId?: string;
}

export const MIDDLEWARE_CHANNEL_NAMES = { drop: 'mocra:middleware:drop' } as const;
const dropChannel = diagnostics_channel.channel(MIDDLEWARE_CHANNEL_NAMES.drop);

interface Entry<T> {
  readonly middleware: T;
  readonly global: boolean;
  readonly seq: number;
}

/** The middleware that runs for one selection, in the order each hook runs. */
export interface MiddlewarePlan {
  readonly beforeRequest: readonly DownloadMiddleware[];
  readonly afterResponse: readonly DownloadMiddleware[];
  readonly data: readonly DataMiddleware[];
  readonly store: readonly StoreMiddleware[];
}

/** Items that went through the data chain. */
export interface DataChainResult<TItem> {
  kept: { item: TItem; meta: ItemMeta }[];
  dropped: { meta: ItemMeta; droppedBy: string }[];
}

const EMPTY: readonly string[] = Object.freeze([]);

/** Tells the kind of a middleware from `kind` or, without it, from its methods. */
export function middlewareKind(middleware: Middleware): MiddlewareKind {
  if (middleware.kind !== undefined) {
    if (middleware.kind !== 'download' && middleware.kind !== 'data' && middleware.kind !== 'store') {
      throw new InvalidArgumentError(
        `middleware '${middleware.name}': unknown kind '${String(middleware.kind)}'`,
      );
    }
    return middleware.kind;
  }
  if (typeof (middleware as StoreMiddleware).store === 'function') return 'store';
  if (typeof (middleware as DataMiddleware).handle === 'function') return 'data';
  const d = middleware as DownloadMiddleware;
  if (typeof d.beforeRequest === 'function' || typeof d.afterResponse === 'function') return 'download';
  throw new InvalidArgumentError(
    `middleware '${String(middleware.name)}' has none of beforeRequest/afterResponse (download), handle (data) or store (store)`,
  );
}

export class MiddlewareManager {
  readonly #entries: Record<MiddlewareKind, Entry<Middleware>[]> = { download: [], data: [], store: [] };
  readonly #plans = new Map<string, MiddlewarePlan>();
  /**
   * The last plan handed out, by the selection's parts: a crawl of one module asks for the same
   * plan (the same settings' arrays) twice per page, and its key is strings joined anew each time.
   */
  #last: { selection: MiddlewareSelection; plan: MiddlewarePlan } | undefined;
  #seq = 0;

  /** Adds a middleware (global unless `{ global: false }`). Names are unique per kind. */
  register(middleware: Middleware, options: MiddlewareOptions = {}): this {
    if (typeof middleware?.name !== 'string' || middleware.name === '') {
      throw new InvalidArgumentError('a middleware needs a non-empty name');
    }
    if (middleware.weight !== undefined && !Number.isFinite(middleware.weight)) {
      throw new InvalidArgumentError(`middleware '${middleware.name}': weight must be a finite number`);
    }
    const kind = middlewareKind(middleware);
    const checks: Record<MiddlewareKind, [string, boolean][]> = {
      download: [],
      data: [['handle', typeof (middleware as DataMiddleware).handle === 'function']],
      store: [['store', typeof (middleware as StoreMiddleware).store === 'function']],
    };
    for (const [method, ok] of checks[kind]) {
      if (!ok) throw new InvalidArgumentError(`${kind} middleware '${middleware.name}' has no ${method}()`);
    }
    if (this.#entries[kind].some((e) => e.middleware.name === middleware.name)) {
      throw new InvalidArgumentError(`a ${kind} middleware named '${middleware.name}' is already registered`);
    }
    this.#entries[kind].push({ middleware, global: options.global ?? true, seq: this.#seq++ });
    this.#plans.clear();
    this.#last = undefined;
    return this;
  }

  has(kind: MiddlewareKind, name: string): boolean {
    return this.#entries[kind].some((e) => e.middleware.name === name);
  }

  /** Registered names of a kind, in registration order. */
  names(kind: MiddlewareKind): string[] {
    return this.#entries[kind].map((e) => e.middleware.name);
  }

  get size(): number {
    return this.#entries.download.length + this.#entries.data.length + this.#entries.store.length;
  }

  /** Throws UnknownMiddlewareError when a selection names a middleware that is not registered. */
  validate(selection: MiddlewareSelection): void {
    this.plan(selection);
  }

  /** The ordered middleware for a selection (see the module comment). Throws UnknownMiddlewareError. */
  plan(selection: MiddlewareSelection = {}): MiddlewarePlan {
    const last = this.#last;
    if (last !== undefined && sameSelection(last.selection, selection)) return last.plan;
    const key = planKey(selection);
    const cached = this.#plans.get(key);
    if (cached) {
      this.#last = { selection, plan: cached };
      return cached;
    }
    const selectedBy = selection.selectedBy ?? 'a module';
    const requested = selection.request ?? EMPTY;
    for (const name of requested) {
      if (!this.has('download', name) && !this.has('data', name) && !this.has('store', name)) {
        throw new UnknownMiddlewareError('download', name, `${selectedBy}'s request`);
      }
    }
    const weights = selection.weights ?? {};
    const pick = <T extends Middleware>(kind: MiddlewareKind, names: readonly string[]): Entry<T>[] => {
      for (const name of names) {
        if (!this.has(kind, name)) throw new UnknownMiddlewareError(kind, name, selectedBy);
      }
      const chosen = this.#entries[kind].filter(
        (e) => e.global || names.includes(e.middleware.name) || requested.includes(e.middleware.name),
      ) as Entry<T>[];
      const weight = (e: Entry<T>) => weights[e.middleware.name] ?? e.middleware.weight ?? 0;
      return chosen.sort((a, b) => weight(a) - weight(b) || a.seq - b.seq);
    };
    const download = pick<DownloadMiddleware>('download', selection.download ?? EMPTY);
    const plan: MiddlewarePlan = {
      beforeRequest: download.filter((e) => e.middleware.beforeRequest).map((e) => e.middleware),
      afterResponse: download
        .filter((e) => e.middleware.afterResponse)
        .reverse()
        .map((e) => e.middleware),
      data: pick<DataMiddleware>('data', selection.data ?? EMPTY).map((e) => e.middleware),
      store: pick<StoreMiddleware>('store', selection.store ?? EMPTY).map((e) => e.middleware),
    };
    if (this.#plans.size > 1_000) this.#plans.clear();
    this.#plans.set(key, plan);
    this.#last = { selection, plan };
    return plan;
  }

  /** Runs `beforeRequest` of the plan. A throw becomes MiddlewareFailedError (the retry path). */
  async beforeRequest(
    request: Request,
    ctx: MiddlewareContext,
    plan: MiddlewarePlan,
  ): Promise<ChainResult<Request>> {
    let current = request;
    for (const middleware of plan.beforeRequest) {
      let out: MiddlewareResult<Request>;
      try {
        out = await middleware.beforeRequest!(current, ctx);
      } catch (err) {
        throw new MiddlewareFailedError('download', middleware.name, 'beforeRequest', err);
      }
      if (out === null) {
        reportDrop({
          kind: 'download',
          middleware: middleware.name,
          phase: 'beforeRequest',
          ctx,
          url: current.url,
        });
        return { droppedBy: middleware.name };
      }
      if (out !== undefined) current = out;
    }
    return { value: current };
  }

  /** Runs `afterResponse` of the plan (weight descending). */
  async afterResponse(
    response: Response,
    ctx: MiddlewareContext,
    plan: MiddlewarePlan,
  ): Promise<ChainResult<Response>> {
    let current = response;
    for (const middleware of plan.afterResponse) {
      let out: MiddlewareResult<Response>;
      try {
        out = await middleware.afterResponse!(current, ctx);
      } catch (err) {
        throw new MiddlewareFailedError('download', middleware.name, 'afterResponse', err);
      }
      if (out === null) {
        reportDrop({
          kind: 'download',
          middleware: middleware.name,
          phase: 'afterResponse',
          ctx,
          url: current.url,
        });
        return { droppedBy: middleware.name };
      }
      if (out !== undefined) current = out;
    }
    return { value: current };
  }

  /** Runs every item through the data chain, in order. */
  async handleItems<TItem>(
    items: readonly { item: TItem; meta: ItemMeta }[],
    ctx: MiddlewareContext,
    plan: MiddlewarePlan,
  ): Promise<DataChainResult<TItem>> {
    const result: DataChainResult<TItem> = { kept: [], dropped: [] };
    if (plan.data.length === 0) {
      result.kept.push(...items);
      return result;
    }
    nextItem: for (const { item, meta } of items) {
      let current = item;
      for (const middleware of plan.data as readonly DataMiddleware<TItem>[]) {
        let out: MiddlewareResult<TItem>;
        try {
          out = await middleware.handle(current, meta, ctx);
        } catch (err) {
          throw new MiddlewareFailedError('data', middleware.name, 'handle', err);
        }
        if (out === null) {
          reportDrop({
            kind: 'data',
            middleware: middleware.name,
            phase: 'handle',
            ctx,
            itemId: meta.itemId,
          });
          result.dropped.push({ meta, droppedBy: middleware.name });
          continue nextItem;
        }
        if (out !== undefined) current = out;
      }
      result.kept.push({ item: current, meta });
    }
    return result;
  }

  /**
   * Runs the store chain: per middleware, `beforeStore` → `store` per item → `afterStore`. The
   * first failure stops the chain with MiddlewareFailedError naming the middleware and phase;
   * a failed `beforeStore` skips that middleware's `store` and `afterStore`.
   */
  async store<TItem>(batch: StoreBatch<TItem>, ctx: MiddlewareContext, plan: MiddlewarePlan): Promise<void> {
    if (batch.items.length === 0) return;
    for (const middleware of plan.store as readonly StoreMiddleware<TItem>[]) {
      let phase: MiddlewarePhase = 'beforeStore';
      try {
        await middleware.beforeStore?.(batch, ctx);
        phase = 'store';
        for (const { item, meta } of batch.items) await middleware.store(item, meta, ctx);
        phase = 'afterStore';
        await middleware.afterStore?.(batch, ctx);
      } catch (err) {
        throw new MiddlewareFailedError('store', middleware.name, phase, err);
      }
    }
  }
}

export function createMiddlewareManager(): MiddlewareManager {
  return new MiddlewareManager();
}

/** The same parts (the same arrays and weights objects): the same plan, without building its key. */
function sameSelection(a: MiddlewareSelection, b: MiddlewareSelection): boolean {
  return (
    a.download === b.download &&
    a.data === b.data &&
    a.store === b.store &&
    a.request === b.request &&
    a.weights === b.weights &&
    a.selectedBy === b.selectedBy
  );
}

function planKey(selection: MiddlewareSelection): string {
  const weights = selection.weights
    ? Object.entries(selection.weights)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, v]) => `${k}=${v}`)
        .join(',')
    : '';
  return [
    (selection.download ?? EMPTY).join(','),
    (selection.data ?? EMPTY).join(','),
    (selection.store ?? EMPTY).join(','),
    (selection.request ?? EMPTY).join(','),
    weights,
    selection.selectedBy ?? '',
  ].join('\u0000');
}

function reportDrop(input: {
  kind: MiddlewareKind;
  middleware: string;
  phase: MiddlewarePhase;
  ctx: MiddlewareContext;
  url?: string;
  itemId?: string;
}): void {
  if (!dropChannel.hasSubscribers) return;
  const message: MiddlewareDropMessage = {
    kind: input.kind,
    middleware: input.middleware,
    phase: input.phase,
    module: input.ctx.module,
    runId: input.ctx.runId,
    ...(input.url === undefined ? {} : { url: input.url }),
    ...(input.itemId === undefined ? {} : { itemId: input.itemId }),
  };
  dropChannel.publish(message);
}
