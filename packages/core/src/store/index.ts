/**
 * The engine's use of a @mocra/store database: items, task results, logs, module config and
 * cron definitions kept in SQL.
 *
 * @module @mocra/core/store
 */
export type { DbErrorMessage, ModuleSkippedMessage } from './channels.js';
export { DB_CHANNEL_NAMES } from './channels.js';
export { EngineStore } from './engine-store.js';
export { storeOptionsFromConfig } from './from-config.js';
export type {
  ItemStoreMiddleware,
  ItemStoreMiddlewareOptions,
  ItemStoreMiddlewareSettings,
  ItemStoreMiddlewareStats,
} from './item-store-middleware.js';
export { createItemStoreMiddleware } from './item-store-middleware.js';
export type { StoreLogWriterStats } from './log-writer.js';
export type {
  EngineStoreOptions,
  ResolvedEngineStoreOptions,
  StoreCronOptions,
  StoreLogOptions,
  TaskResultOptions,
} from './options.js';
export { resolveEngineStoreOptions } from './options.js';
export type { StoreMiddlewareSelection, StoreModuleConfigProviderOptions } from './store-config-provider.js';
export { StoreModuleConfigProvider } from './store-config-provider.js';
export type { StoreCronRefresh } from './store-cron.js';
export { STORE_CRON_PREFIX } from './store-cron.js';
export type { TaskRunKey } from './task-results.js';
