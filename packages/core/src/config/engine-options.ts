/**
 * From a loaded config to the engine: which engine option each key sets, and how a reload
 * applies the live keys to a running engine. `Mocra.builder().fromToml(path)` uses both.
 *
 * ```
 *   name                      → namespace          crawler.*_concurrency → stages (live)
 *   crawler.shutdown_timeout  → shutdownTimeoutMs  crawler.auto_seed     → autoSeed
 *   crawler.parse_where_downloaded → parseWhereDownloaded
 *   download.*                → download (HttpDownloaderOptions)
 *   frontier.*                → frontier           retry.*, policy.*     → retry, recovery
 *   logger.level              → logLevel (live)    scheduler.*           → cron (misfire live)
 *   module_defaults, modules, accounts, platforms → moduleConfig (live)
 *   proxy                     → proxies (the pool is built from the table; restart)
 *   db.*                      → store (the database; restart)
 * ```
 */
import type { Engine, EngineOptions } from '../engine/engine.js';
import { storeOptionsFromConfig } from '../store/from-config.js';
import type { ConfigChange } from './live-config.js';
import {
  createMemoryModuleConfigProvider,
  createModuleConfigResolver,
  type MemoryModuleConfigData,
  MemoryModuleConfigProvider,
  type ModuleConfigResolver,
  moduleConfigOf,
} from './module-config.js';
import type { MocraConfig } from './schema.js';

export interface EngineConfigOptions {
  /** Layers given in code; config.toml's `[modules]`/`[accounts]`/`[platforms]` tables win over them. */
  moduleLayers?: MemoryModuleConfigData;
}

/** The engine options a config sets. The module-config resolver it creates is live-reloadable. */
export function engineOptionsFromConfig(
  config: MocraConfig,
  options: EngineConfigOptions = {},
): EngineOptions & { moduleConfig: ModuleConfigResolver } {
  const { download: d, frontier: f, retry: r, crawler: c } = config;
  const { data, defaults } = moduleConfigOf(config);
  const provider = createMemoryModuleConfigProvider(mergeLayers(options.moduleLayers ?? {}, data));
  return {
    namespace: config.name,
    stages: {
      download: c.task_concurrency,
      task: c.generate_concurrency,
      parse: c.parser_concurrency,
      followUp: c.follow_up_concurrency,
      error: c.error_task_concurrency,
    },
    concurrency: c.task_concurrency,
    shutdownTimeoutMs: c.shutdown_timeout_ms,
    autoSeed: c.auto_seed,
    parseWhereDownloaded: c.parse_where_downloaded,
    download: {
      ...(d.user_agent === undefined ? {} : { userAgent: d.user_agent }),
      headers: d.headers,
      connectTimeoutMs: d.connect_timeout_ms,
      headersTimeoutMs: d.headers_timeout_ms,
      bodyTimeoutMs: d.body_timeout_ms,
      requestTimeoutMs: d.request_timeout_ms,
      maxBodyBytes: d.max_response_size,
      maxRedirects: d.max_redirects,
      decompress: d.decompress,
      connections: d.pool_size,
      keepAliveTimeoutMs: d.keep_alive_timeout_ms,
    },
    frontier: {
      dedup: f.dedup,
      ...(f.max_depth === undefined ? {} : { maxDepth: f.max_depth }),
      ...(f.max_pages === undefined ? {} : { maxPages: f.max_pages }),
    },
    // Only the keys the user set: an unset key keeps the per-kind policy default.
    retry: definedOnly({
      maxRetries: r.max_retries,
      baseDelayMs: r.base_delay_ms,
      maxDelayMs: r.max_delay_ms,
      retryStatuses: r.retry_statuses,
      jitter: r.jitter,
    }),
    recovery: {
      overrides: config.policy.overrides,
      thresholds: definedOnly({
        maxRequestErrors: c.request_max_errors,
        maxTaskErrors: c.task_max_errors,
        maxModuleErrors: c.module_max_errors,
      }),
    },
    ...(config.logger.level === undefined ? {} : { logLevel: config.logger.level }),
    cron: { enabled: config.scheduler.enabled, misfireToleranceMs: config.scheduler.misfire_tolerance_ms },
    moduleConfig: createModuleConfigResolver({ provider, defaults }),
    ...(config.proxy === undefined ? {} : { proxies: config.proxy }),
    // `[db]`: the database (docs/store.md), when `db.url` is set.
    ...(config.db.url === undefined ? {} : { store: storeOptionsFromConfig(config)! }),
  };
}

/**
 * Applies the live keys of a reload to a running engine: stage sizes, the log level, the cron
 * misfire tolerance and module config. Returns the keys it applied.
 */
export function applyLiveConfig(
  engine: Engine,
  config: MocraConfig,
  changes: readonly ConfigChange[],
  options: EngineConfigOptions = {},
): string[] {
  const applied: string[] = [];
  const c = config.crawler;
  const stages = {
    'crawler.task_concurrency': ['download', c.task_concurrency],
    'crawler.generate_concurrency': ['task', c.generate_concurrency],
    'crawler.parser_concurrency': ['parse', c.parser_concurrency],
    'crawler.follow_up_concurrency': ['followUp', c.follow_up_concurrency],
    'crawler.error_task_concurrency': ['error', c.error_task_concurrency],
  } as const;
  let moduleConfigChanged = false;
  for (const change of changes) {
    if (!change.live) continue;
    if (change.key in stages) {
      const [stage, n] = stages[change.key as keyof typeof stages];
      engine.setConcurrency(stage, n);
    } else if (change.key === 'logger.level') {
      if (config.logger.level !== undefined) engine.log.level = config.logger.level;
    } else if (change.key === 'scheduler.misfire_tolerance_ms') {
      if (engine.cron) engine.cron.misfireToleranceMs = config.scheduler.misfire_tolerance_ms;
    } else if (['module_defaults', 'modules', 'accounts', 'platforms'].includes(change.key)) {
      moduleConfigChanged = true;
    } else {
      continue;
    }
    applied.push(change.key);
  }
  if (moduleConfigChanged) {
    const resolver = engine.moduleConfig;
    const { data, defaults } = moduleConfigOf(config);
    // A database provider keeps config.toml's layers under its own (`memory`).
    const memory =
      resolver.provider instanceof MemoryModuleConfigProvider ? resolver.provider : resolver.provider.memory;
    memory?.replace(mergeLayers(options.moduleLayers ?? {}, data));
    resolver.setDefaults(defaults);
  }
  return applied;
}

/** Layers from code, with each named layer of `over` replacing the one of `base` (a file wins over code). */
function mergeLayers(base: MemoryModuleConfigData, over: MemoryModuleConfigData): MemoryModuleConfigData {
  const out: MemoryModuleConfigData = { ...base };
  for (const key of Object.keys(over) as (keyof MemoryModuleConfigData)[]) {
    const layer = over[key];
    if (layer === undefined) continue;
    out[key] = { ...base[key], ...layer };
  }
  return out;
}

/** Drops the keys whose value is undefined (options use exactOptionalPropertyTypes). */
function definedOnly<T extends Record<string, unknown>>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}
