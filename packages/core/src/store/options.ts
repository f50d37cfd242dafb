/**
 * What an engine does with a database (`EngineOptions.store`, the builder's `.store()`, the
 * `[db]` config table), and the defaults each part falls back to.
 */
import type { LogLevel as StoreLogLevel, StoreOptions, StoreRepository } from '@mocra/store';
import { InvalidArgumentError } from '../errors.js';
import type { ItemStoreMiddlewareSettings } from './item-store-middleware.js';

/** Cron targets from the database (enabled module × account × platform). */
export interface StoreCronOptions {
  /** How often the change token is compared (and the contexts listed again when it moved). @default 30000 */
  refreshMs?: number;
  /**
   * In a cluster (a coordination backend is set), fire each context only on the node that owns
   * its key (rendezvous hashing over the live members); the per-tick claim holds either way.
   * @default true
   */
  partition?: boolean;
}

/** `task_result` rows: one per run × module, with heartbeats and a zombie sweep. */
export interface TaskResultOptions {
  /** How often running rows get a heartbeat (and their counts). @default 15000 */
  heartbeatMs?: number;
  /** A running row without a heartbeat for this long is marked failed by the sweep. @default 120000 */
  staleAfterMs?: number;
  /** How often the zombie sweep runs (once per interval cluster-wide with a coordination backend). `false`: never. @default 60000 */
  sweepEveryMs?: number | false;
}

/** `log` rows, written in batches off the crawl's path. */
export interface StoreLogOptions {
  /** Lowest level written: failures retried are `warn`, given up `error`, run start/end `info`. @default 'warn' */
  level?: StoreLogLevel;
  /** Rows per insert. @default 100 */
  batchSize?: number;
  /** Longest a row waits before its batch is written. @default 1000 */
  flushMs?: number;
  /** Rows held at most while the database is slow; more are dropped (and counted). @default 10000 */
  maxBuffered?: number;
}

/** How an engine uses a database (docs/store.md, "The engine and the database"). */
export interface EngineStoreOptions {
  /** An open store (`createStore`), used as is and not closed by the engine. */
  store?: StoreRepository;
  /** Or where to open one: `postgres://…` or `sqlite:<path>`. A store the engine opens is closed when the run ends. */
  url?: string;
  /** Postgres schema. @default 'mocra' */
  schema?: string;
  /** Postgres pool size. @default 10 */
  poolSize?: number;
  /** Postgres connect timeout. @default 10000 */
  connectTimeoutMs?: number;
  /** Postgres `application_name`. @default 'mocra' */
  applicationName?: string;
  /** Other options of the store the engine opens (retries, clock, SQLite busy timeout). */
  storeOptions?: Omit<StoreOptions, 'url'>;
  /** Apply pending migrations when the store is opened. @default false */
  migrate?: boolean;
  /** Module config layers and middleware selection from the database. @default true */
  moduleConfig?: boolean;
  /** How long a read of the change token is trusted before it is read again (config cache). @default 1000 */
  configCacheMs?: number;
  /** With auto-seed, start one task per enabled account × platform of the database. @default true */
  seed?: boolean;
  /** Cron targets from the database; `false`: modules keep the targets of their code. @default {} */
  cron?: boolean | StoreCronOptions;
  /** `task_result` rows; `false`: none. @default {} */
  taskResults?: boolean | TaskResultOptions;
  /** `log` rows; `false`: none. @default { level: 'warn' } */
  logs?: boolean | StoreLogOptions;
  /**
   * Write every module's items to the database (an item-store middleware over this store).
   * `true`: one JSON table; or the middleware's settings (mode, types, batching, `global: false`
   * to let module config or database relations select it by name). @default false
   */
  items?: boolean | ItemStoreMiddlewareSettings;
}

/** {@link EngineStoreOptions} with every default filled in. */
export interface ResolvedEngineStoreOptions {
  store: StoreRepository | undefined;
  open: StoreOptions | undefined;
  migrate: boolean;
  moduleConfig: boolean;
  configCacheMs: number;
  seed: boolean;
  cron: Required<StoreCronOptions> | false;
  taskResults: { heartbeatMs: number; staleAfterMs: number; sweepEveryMs: number | false } | false;
  logs: Required<StoreLogOptions> | false;
  items: ItemStoreMiddlewareSettings | false;
}

const LOG_LEVELS: readonly StoreLogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];

/** Validates and fills in defaults. A URL string is `{ url }`. Throws InvalidArgumentError. */
export function resolveEngineStoreOptions(input: string | EngineStoreOptions): ResolvedEngineStoreOptions {
  const options: EngineStoreOptions = typeof input === 'string' ? { url: input } : input;
  if (options === null || typeof options !== 'object') {
    throw new InvalidArgumentError('store: expected a URL or an options object');
  }
  if (options.store === undefined && (typeof options.url !== 'string' || options.url === '')) {
    throw new InvalidArgumentError('store: give a url (postgres://… or sqlite:<path>) or an open store');
  }
  if (options.store !== undefined && options.url !== undefined) {
    throw new InvalidArgumentError('store: give either a url or an open store, not both');
  }
  const open: StoreOptions | undefined =
    options.store !== undefined
      ? undefined
      : {
          ...options.storeOptions,
          url: options.url as string,
          applicationName: options.applicationName ?? options.storeOptions?.applicationName ?? 'mocra',
          ...(options.schema === undefined ? {} : { schema: options.schema }),
          ...(options.poolSize === undefined ? {} : { poolSize: options.poolSize }),
          ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
        };
  const cron = options.cron ?? true;
  const results = options.taskResults ?? true;
  const logs = options.logs ?? true;
  const items = options.items ?? false;
  const resolvedResults =
    results === false
      ? false
      : {
          heartbeatMs: ms('taskResults.heartbeatMs', (results === true ? {} : results).heartbeatMs, 15_000),
          staleAfterMs: ms(
            'taskResults.staleAfterMs',
            (results === true ? {} : results).staleAfterMs,
            120_000,
          ),
          sweepEveryMs:
            results !== true && results.sweepEveryMs === false
              ? (false as const)
              : ms(
                  'taskResults.sweepEveryMs',
                  (results === true ? {} : results).sweepEveryMs as number | undefined,
                  60_000,
                ),
        };
  if (resolvedResults !== false && resolvedResults.staleAfterMs <= resolvedResults.heartbeatMs) {
    throw new InvalidArgumentError(
      `store: taskResults.staleAfterMs (${resolvedResults.staleAfterMs}) must be longer than heartbeatMs (${resolvedResults.heartbeatMs}), or live runs would be swept`,
    );
  }
  const logOptions = logs === true ? {} : logs === false ? undefined : logs;
  const level = logOptions?.level ?? 'warn';
  if (!LOG_LEVELS.includes(level)) {
    throw new InvalidArgumentError(
      `store: logs.level must be one of ${LOG_LEVELS.join(', ')}, got '${level}'`,
    );
  }
  return {
    store: options.store,
    open,
    migrate: options.migrate ?? false,
    moduleConfig: options.moduleConfig ?? true,
    configCacheMs: ms('configCacheMs', options.configCacheMs, 1_000, 0),
    seed: options.seed ?? true,
    cron:
      cron === false
        ? false
        : {
            refreshMs: ms('cron.refreshMs', (cron === true ? {} : cron).refreshMs, 30_000),
            partition: (cron === true ? {} : cron).partition ?? true,
          },
    taskResults: resolvedResults,
    logs:
      logOptions === undefined
        ? false
        : {
            level,
            batchSize: ms('logs.batchSize', logOptions.batchSize, 100),
            flushMs: ms('logs.flushMs', logOptions.flushMs, 1_000),
            maxBuffered: ms('logs.maxBuffered', logOptions.maxBuffered, 10_000),
          },
    items: items === false ? false : items === true ? {} : items,
  };
}

function ms(name: string, value: number | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidArgumentError(`store: ${name} must be an integer ≥ ${min}, got ${String(value)}`);
  }
  return value;
}
