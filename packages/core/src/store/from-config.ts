/** From a loaded config's `[db]` table to the engine's `store` option. */
import type { MocraConfig } from '../config/schema.js';
import type { EngineStoreOptions } from './options.js';

/** The engine's `store` option for `config.db`, or undefined when `db.url` is unset. */
export function storeOptionsFromConfig(config: Pick<MocraConfig, 'db'>): EngineStoreOptions | undefined {
  const db = config.db;
  if (db.url === undefined) return undefined;
  return {
    url: db.url,
    schema: db.schema,
    poolSize: db.pool_size,
    connectTimeoutMs: db.connect_timeout_ms,
    migrate: db.migrate,
    moduleConfig: db.module_config,
    configCacheMs: db.config_cache_ms,
    seed: db.seed,
    cron: db.cron ? { refreshMs: db.cron_refresh_ms } : false,
    taskResults: db.task_results
      ? {
          heartbeatMs: db.heartbeat_ms,
          staleAfterMs: db.zombie_after_ms,
          sweepEveryMs: db.zombie_sweep_ms === 0 ? false : db.zombie_sweep_ms,
        }
      : false,
    logs:
      db.log_level === 'off'
        ? false
        : {
            level: db.log_level,
            batchSize: db.log_batch_size,
            flushMs: db.log_flush_ms,
            maxBuffered: db.log_buffer,
          },
    items: db.items ? { itemStore: { mode: 'json', table: db.items_table } } : false,
  };
}
