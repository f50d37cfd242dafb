/**
 * A store middleware that writes items to PostgreSQL or SQLite through `@mocra/store`'s item
 * stores: upserts by `itemId` (a redelivered parse updates its rows instead of adding new ones),
 * in batches that group the items of concurrent parses (group commit), and the parse — so the
 * response's ack — waits until its items are committed.
 *
 * ```
 *   parse A ─ beforeStore([a1 a2]) ─┐
 *   parse B ─ beforeStore([b1])    ─┼─▶ pending ── batchSize reached, or flushMs after the first ─▶ writeBatch (one transaction)
 *   parse C ─ beforeStore([c1 c2]) ─┘                                                               │
 *        ◀── each resolves (ack follows) or rejects (the parse takes the retry path) ◀──────────────┘
 * ```
 *
 * A batch is all or nothing. When it fails for a reason a retry cannot fix (a constraint, a bad
 * value) and it holds several parses' items, each parse's items are written again alone, so
 * only the parse with the bad item fails; a retryable failure (a lost connection) fails every
 * parse of the batch, and each is retried by the failure policy — never half-written.
 */
import type { ItemStore, ItemStoreOptions, StoreItem, StoreRepository } from '@mocra/store';
import { InvalidArgumentError, isMocraError } from '../errors.js';
import type { StoreBatch, StoreMiddleware } from '../middleware/types.js';
import type { ItemMeta } from '../model/item.js';
import { dbChannels } from './channels.js';

/** Settings of an item-store middleware (everything but the store). */
export interface ItemStoreMiddlewareSettings {
  /** Name modules and relations select it by. @default 'item-store' */
  name?: string;
  /** @default 0 */
  weight?: number;
  /**
   * Only where the engine registers it (`store.items`): run for every module, or only where a
   * module's `store_middleware` or a `data_middleware` relation row names it. @default true
   */
  global?: boolean;
  /** How items are laid out: one JSON table, or a table per type with declared columns. @default { mode: 'json' } */
  itemStore?: ItemStoreOptions;
  /** The item's type (its table with `table-per-type`). @default the module's name */
  type?: string | ((item: unknown, meta: ItemMeta) => string);
  /** The columns / JSON object stored for an item. @default a plain object as is, anything else as `{ value }` */
  data?: (item: unknown, meta: ItemMeta) => Record<string, unknown>;
  /** Items per transaction at most (a bigger parse is still one transaction). @default 500 */
  batchSize?: number;
  /** Longest an item waits for others to share its transaction. @default 20 */
  flushMs?: number;
}

export interface ItemStoreMiddlewareOptions extends ItemStoreMiddlewareSettings {
  /** The store, or how to get it (called on first write). */
  store: StoreRepository | (() => StoreRepository | Promise<StoreRepository>);
}

export interface ItemStoreMiddlewareStats {
  /** Transactions committed. */
  batches: number;
  /** Items committed (a redelivered item counts again). */
  items: number;
  /** Parses whose items failed to commit (each takes the retry path). */
  failedParses: number;
  /** Batches written again parse by parse after a non-retryable failure. */
  splits: number;
}

export interface ItemStoreMiddleware extends StoreMiddleware {
  /** Writes whatever is pending now. */
  flush(): Promise<void>;
  stats(): ItemStoreMiddlewareStats;
}

interface PendingGroup {
  items: StoreItem[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** A store middleware over an item store: idempotent by `itemId`, batched, durable before the ack. */
export function createItemStoreMiddleware(options: ItemStoreMiddlewareOptions): ItemStoreMiddleware {
  if (options === null || typeof options !== 'object' || options.store === undefined) {
    throw new InvalidArgumentError('createItemStoreMiddleware: a store is required');
  }
  const batchSize = positive('batchSize', options.batchSize, 500);
  const flushMs = positive('flushMs', options.flushMs, 20, 0);
  const typeOf = options.type ?? ((_item: unknown, meta: ItemMeta) => meta.module);
  if (typeof typeOf !== 'string' && typeof typeOf !== 'function') {
    throw new InvalidArgumentError('createItemStoreMiddleware: type must be a string or a function');
  }
  const dataOf = options.data ?? defaultData;
  const layout: ItemStoreOptions = options.itemStore ?? { mode: 'json' };
  const getStore =
    typeof options.store === 'function' ? options.store : () => options.store as StoreRepository;

  let itemStore: Promise<ItemStore> | undefined;
  const ready = (): Promise<ItemStore> => {
    itemStore ??= (async () => {
      const store = await getStore();
      const created = store.createItemStore(layout);
      await created.init();
      return created;
    })().catch((err: unknown) => {
      itemStore = undefined; // the next batch tries again
      throw err;
    });
    return itemStore;
  };

  const stats: ItemStoreMiddlewareStats = { batches: 0, items: 0, failedParses: 0, splits: 0 };
  let pending: PendingGroup[] = [];
  let pendingCount = 0;
  let timer: NodeJS.Timeout | undefined;
  const inFlight = new Set<Promise<void>>();

  const commit = async (items: StoreItem[], parses: number): Promise<void> => {
    const started = performance.now();
    await (await ready()).writeBatch(items);
    stats.batches++;
    stats.items += items.length;
    if (dbChannels.itemsWritten.hasSubscribers) {
      dbChannels.itemsWritten.publish({ items: items.length, parses, ms: performance.now() - started });
    }
  };

  const write = async (groups: PendingGroup[]): Promise<void> => {
    const items = groups.flatMap((g) => g.items);
    try {
      await commit(items, groups.length);
      for (const g of groups) g.resolve();
      return;
    } catch (err) {
      if (groups.length === 1 || (isMocraError(err) && err.retryable)) {
        stats.failedParses += groups.length;
        for (const g of groups) g.reject(err);
        return;
      }
    }
    // One parse's bad item must not fail the others it happened to share a transaction with.
    stats.splits++;
    for (const g of groups) {
      try {
        await commit(g.items, 1);
        g.resolve();
      } catch (err) {
        stats.failedParses++;
        g.reject(err);
      }
    }
  };

  const flushNow = (): Promise<void> => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    const runs: Promise<void>[] = [];
    while (pending.length > 0) {
      // Take whole parses up to batchSize items (at least one parse, however large).
      let n = 0;
      let take = 0;
      while (take < pending.length && (take === 0 || n + pending[take]!.items.length <= batchSize)) {
        n += pending[take]!.items.length;
        take++;
      }
      const groups = pending.slice(0, take);
      pending = pending.slice(take);
      pendingCount -= n;
      const run = write(groups);
      inFlight.add(run);
      void run.finally(() => inFlight.delete(run));
      runs.push(run);
    }
    return Promise.all(runs).then(() => undefined);
  };

  return {
    name: options.name ?? 'item-store',
    kind: 'store',
    ...(options.weight === undefined ? {} : { weight: options.weight }),
    beforeStore(batch: StoreBatch<unknown>): Promise<void> {
      if (batch.items.length === 0) return Promise.resolve();
      let items: StoreItem[];
      try {
        items = batch.items.map(({ item, meta }) => ({
          itemId: meta.itemId,
          type: typeof typeOf === 'string' ? typeOf : typeOf(item, meta),
          data: dataOf(item, meta),
        }));
      } catch (err) {
        return Promise.reject(err);
      }
      return new Promise<void>((resolve, reject) => {
        pending.push({ items, resolve, reject });
        pendingCount += items.length;
        if (pendingCount >= batchSize || flushMs === 0) void flushNow();
        else timer ??= setTimeout(() => void flushNow(), flushMs);
      });
    },
    store() {
      // Written per parse in beforeStore (one transaction per batch of parses).
    },
    async flush(): Promise<void> {
      await flushNow();
      await Promise.all([...inFlight]);
    },
    stats: () => ({ ...stats }),
  };
}

function defaultData(item: unknown): Record<string, unknown> {
  if (item !== null && typeof item === 'object' && !Array.isArray(item)) {
    const proto = Object.getPrototypeOf(item);
    if (proto === Object.prototype || proto === null) return item as Record<string, unknown>;
  }
  return { value: item };
}

function positive(name: string, value: number | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidArgumentError(
      `createItemStoreMiddleware: ${name} must be an integer ≥ ${min}, got ${value}`,
    );
  }
  return value;
}
