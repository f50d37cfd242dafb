/**
 * The database module-config provider: the ten layers of a module config from `@mocra/store`'s
 * `loadTaskContext`, over the in-memory layers (config.toml `[modules]`/`[accounts]`/
 * `[platforms]`, code), with the module's middleware selected by the relation tables.
 *
 * ```
 *   resolve(module, account, platform)
 *     └─ version() ── token read at most every cacheMs ── same token? ─▶ cached config (no query)
 *     └─ layers()  ── context of account × platform, cached per token
 *                       ├─ pair unknown to the database ─▶ in-memory layers only
 *                       ├─ pair disabled / not linked   ─▶ ContextUnavailableError (the work fails, reported)
 *                       └─ module in the context        ─▶ DB layers over in-memory layers, per key
 *                                                         + download/data/store middleware from relations
 * ```
 *
 * Reads are coalesced: one token read and one context load at a time, however many stages ask.
 * A token read that fails while a token is cached keeps serving the cached configs (the crawl
 * goes on through a database hiccup, reported on `mocra:db:error`).
 */
import type { ModuleContext, StoreRepository, TaskContext } from '@mocra/store';
import {
  ContextUnavailableError,
  type JsonObject,
  type ModuleConfigLayers,
  type NamedConfig,
} from '@mocra/store/config';
import {
  type MemoryModuleConfigData,
  MemoryModuleConfigProvider,
  type ModuleConfigProvider,
  type ModuleConfigQuery,
} from '../config/module-config.js';
import type { MiddlewareManager } from '../middleware/manager.js';
import { dbChannels } from './channels.js';

export interface StoreModuleConfigProviderOptions {
  /** The store, or how to get it (opened on first use). */
  store: StoreRepository | (() => Promise<StoreRepository>);
  /**
   * Layers under the database's: the in-memory layers (config.toml, code) or any provider.
   * @default none
   */
  under?: ModuleConfigProvider | MemoryModuleConfigData;
  /** How long a change-token read is trusted. @default 1000 */
  cacheMs?: number;
  /** Tells store middleware from data middleware by name (a `data_middleware` relation may name either). */
  middleware?: MiddlewareManager;
  /** A module's config from its code: its middleware lists are kept when relations add to them. */
  codeConfig?: (module: string) => JsonObject | undefined;
  /** @default Date.now */
  now?: () => number;
}

/** Middleware a module selects through the database, per kind, with weights from the relations. */
export interface StoreMiddlewareSelection {
  download: string[];
  data: string[];
  store: string[];
  weights: Record<string, number>;
}

type CachedContext = { token: string; context: TaskContext | undefined; error?: ContextUnavailableError };

/** Reasons that mean "the database does not know this pair": it is not governed, not refused. */
const UNKNOWN_PAIR = new Set(['account_not_found', 'platform_not_found']);
const MAX_CACHED_CONTEXTS = 10_000;

export class StoreModuleConfigProvider implements ModuleConfigProvider {
  /** The provider whose layers the database's go over. */
  readonly under: ModuleConfigProvider;
  readonly #store: () => Promise<StoreRepository>;
  readonly #cacheMs: number;
  readonly #middleware: MiddlewareManager | undefined;
  readonly #codeConfig: ((module: string) => JsonObject | undefined) | undefined;
  readonly #now: () => number;
  #token: string | undefined;
  #tokenAt = Number.NEGATIVE_INFINITY;
  #tokenRead: Promise<string> | undefined;
  readonly #contexts = new Map<string, CachedContext>();
  readonly #loading = new Map<string, Promise<CachedContext>>();

  constructor(options: StoreModuleConfigProviderOptions) {
    const store = options.store;
    this.#store = typeof store === 'function' ? store : () => Promise.resolve(store);
    const under = options.under;
    this.under =
      under !== undefined && typeof (under as ModuleConfigProvider).layers === 'function'
        ? (under as ModuleConfigProvider)
        : new MemoryModuleConfigProvider((under ?? {}) as MemoryModuleConfigData);
    this.#cacheMs = options.cacheMs ?? 1_000;
    this.#middleware = options.middleware;
    this.#codeConfig = options.codeConfig;
    this.#now = options.now ?? Date.now;
  }

  /** The in-memory layers a config reload replaces (config.toml's tables), when that is what is under. */
  get memory(): MemoryModuleConfigProvider | undefined {
    return this.under instanceof MemoryModuleConfigProvider ? this.under : this.under.memory;
  }

  /** The store's change token (re-read after `cacheMs`) and the version of the layers under. */
  async version(): Promise<string> {
    const under = this.under.version === undefined ? '' : await this.under.version();
    return `${under}:${await this.token()}`;
  }

  /** The change token, read at most once per `cacheMs` (coalesced). */
  async token(): Promise<string> {
    if (this.#token !== undefined && this.#now() - this.#tokenAt < this.#cacheMs) return this.#token;
    this.#tokenRead ??= (async () => {
      try {
        const store = await this.#store();
        const token = await store.changeToken();
        this.#token = token;
        this.#tokenAt = this.#now();
        return token;
      } catch (err) {
        if (this.#token === undefined) throw err;
        // Keep serving what is cached; try again after another cacheMs.
        this.#tokenAt = this.#now();
        if (dbChannels.error.hasSubscribers)
          dbChannels.error.publish({ operation: 'change-token', error: err });
        return this.#token;
      } finally {
        this.#tokenRead = undefined;
      }
    })();
    return this.#tokenRead;
  }

  /** Forgets the cached token and contexts: the next read goes to the database. */
  invalidate(): void {
    this.#token = undefined;
    this.#tokenAt = Number.NEGATIVE_INFINITY;
    this.#contexts.clear();
  }

  /**
   * The context of an account × platform (every runnable module), cached per change token;
   * `undefined` when the database does not know the account or the platform. Throws
   * ContextUnavailableError when it knows them but they cannot run (disabled, not linked).
   */
  async taskContext(account: string, platform: string): Promise<TaskContext | undefined> {
    const token = await this.token();
    const key = `${account}\u0000${platform}`;
    let cached = this.#contexts.get(key);
    if (cached === undefined || cached.token !== token) {
      let loading = this.#loading.get(key);
      if (loading === undefined) {
        loading = this.#load(account, platform, token).finally(() => this.#loading.delete(key));
        this.#loading.set(key, loading);
      }
      cached = await loading;
    }
    if (cached.error !== undefined) throw cached.error;
    return cached.context;
  }

  async #load(account: string, platform: string, token: string): Promise<CachedContext> {
    const store = await this.#store();
    let entry: CachedContext;
    try {
      entry = { token, context: await store.loadTaskContext({ account, platform }) };
    } catch (err) {
      if (!(err instanceof ContextUnavailableError)) throw err;
      entry = UNKNOWN_PAIR.has(err.reason)
        ? { token, context: undefined }
        : { token, context: undefined, error: err };
    }
    if (this.#contexts.size >= MAX_CACHED_CONTEXTS) this.#contexts.clear();
    this.#contexts.set(`${account}\u0000${platform}`, entry);
    return entry;
  }

  async layers(query: ModuleConfigQuery): Promise<ModuleConfigLayers> {
    const base = await this.under.layers(query);
    const context = await this.taskContext(query.account, query.platform);
    if (context === undefined) return base;
    const module = context.modules.find((m) => m.module.name === query.module);
    if (module === undefined) {
      // The module is not runnable for this pair (or unknown to the database): the pair's own layers still apply.
      return overLayers(base, {
        account: context.account.config,
        platform: context.platform.config,
        accountPlatform: context.accountPlatform.config,
      });
    }
    const db: ModuleConfigLayers = { ...module.config.layers };
    const selection = this.selection(module);
    if (selection.download.length + selection.data.length + selection.store.length > 0) {
      db.module = withSelection(module.module.config, this.#codeConfig?.(query.module), selection);
    }
    return overLayers(base, db);
  }

  /** The middleware a module selects through its relation rows (both the relation and the middleware enabled). */
  selection(module: ModuleContext): StoreMiddlewareSelection {
    const out: StoreMiddlewareSelection = { download: [], data: [], store: [], weights: {} };
    const weigh = (binding: { name: string; weight: number; relationConfig: JsonObject }) => {
      const override = binding.relationConfig.weight;
      // A row's weight of 0 is the column default, not a choice: the registered weight stays.
      if (Number.isSafeInteger(override)) out.weights[binding.name] = override as number;
      else if (binding.weight !== 0) out.weights[binding.name] = binding.weight;
    };
    for (const binding of module.downloadMiddleware) {
      out.download.push(binding.name);
      weigh(binding);
    }
    for (const binding of module.dataMiddleware) {
      // The data relation stands for the data pipeline, which stores too: a name registered only
      // as a store middleware selects that one.
      const isStore =
        this.#middleware !== undefined &&
        !this.#middleware.has('data', binding.name) &&
        this.#middleware.has('store', binding.name);
      (isStore ? out.store : out.data).push(binding.name);
      weigh(binding);
    }
    return out;
  }
}

/** The module layer with the relation-selected middleware added to its (and its code's) lists. */
function withSelection(
  layer: JsonObject,
  code: JsonObject | undefined,
  selection: StoreMiddlewareSelection,
): JsonObject {
  const list = (key: string, extra: string[]): string[] => {
    const out: string[] = [];
    for (const source of [code?.[key], layer[key], extra]) {
      if (!Array.isArray(source)) continue;
      for (const name of source) if (typeof name === 'string' && !out.includes(name)) out.push(name);
    }
    return out;
  };
  const weights = (source: unknown): JsonObject =>
    source !== null && typeof source === 'object' && !Array.isArray(source) ? (source as JsonObject) : {};
  return {
    ...layer,
    download_middleware: list('download_middleware', selection.download),
    data_middleware: list('data_middleware', selection.data),
    store_middleware: list('store_middleware', selection.store),
    // Weights the module's config sets explicitly win over the relations'.
    middleware_weights: {
      ...selection.weights,
      ...weights(code?.middleware_weights),
      ...weights(layer.middleware_weights),
    },
  };
}

/** `db` over `base`, layer by layer: object layers key by key, per-middleware layers by name. */
function overLayers(base: ModuleConfigLayers, db: ModuleConfigLayers): ModuleConfigLayers {
  const out: Record<string, unknown> = { ...base };
  for (const [name, value] of Object.entries(db) as [string, unknown][]) {
    if (value === undefined) continue;
    const under = out[name];
    if (Array.isArray(value)) {
      const named = value as readonly NamedConfig[];
      const rest = Array.isArray(under)
        ? (under as readonly NamedConfig[]).filter((u) => !named.some((n) => n.name === u.name))
        : [];
      out[name] = [...named, ...rest];
    } else {
      out[name] = under === undefined ? value : { ...(under as JsonObject), ...(value as JsonObject) };
    }
  }
  return out as ModuleConfigLayers;
}
