// @mocra/store — accounts × platforms × modules in PostgreSQL or SQLite, task results, logs and
// idempotent item stores. See docs/store.md.

// Module configs and the error classes, also the `@mocra/store/config` subpath.
export * from './config-entry.js';
export type { Backend } from './driver/types.js';
export {
  ConfigTypeError,
  ConnectionError,
  type ConstraintDetails,
  ConstraintError,
  ContextUnavailableError,
  type ContextUnavailableReason,
  DriverMissingError,
  InvalidInputError,
  isStoreError,
  MigrationChecksumError,
  MigrationFailedError,
  MissingTableError,
  NotFoundError,
  QueryError,
  SeedFileError,
  SerializationError,
  STORE_ERROR_CODES,
  StoreClosedError,
  StoreError,
  type StoreErrorCode,
  type StoreErrorOptions,
} from './errors.js';
export type {
  ItemColumn,
  ItemColumnType,
  ItemStore,
  ItemStoreOptions,
  ItemTypeSchema,
  JsonItemStoreOptions,
  StoredItem,
  StoreItem,
  TablePerTypeItemStoreOptions,
  WriteBatchResult,
} from './items/types.js';
export { MIGRATIONS, type Migration } from './migrate/migrations.js';
export {
  type MigrateResult,
  type MigrationState,
  type MigrationStatus,
  type MigrationStatusEntry,
  migrationChecksum,
} from './migrate/migrator.js';
export {
  type Account,
  type AccountInput,
  type AccountPlatformInput,
  type AccountPlatformLink,
  ENTITY_KINDS,
  type EntityInputMap,
  type EntityKind,
  type EntityRecordMap,
  LINK_KINDS,
  type LinkInputMap,
  type LinkKey,
  type LinkKeyMap,
  type LinkKind,
  type LinkRecordMap,
  type Middleware,
  type MiddlewareInput,
  type ModuleAccountInput,
  type ModuleAccountLink,
  type ModuleInput,
  type ModuleMiddlewareInput,
  type ModuleMiddlewareLink,
  type ModulePlatformInput,
  type ModulePlatformLink,
  type ModuleRecord,
  type Platform,
  type PlatformInput,
  type RelationFields,
} from './model/entities.js';
export type { JsonObject, JsonValue } from './model/json.js';
export { STORE_CHANNELS } from './observability/channels.js';
export { createStore, parseStoreUrl, type StoreOptions } from './repository/create-store.js';
export type { RetryOptions } from './repository/sql-repository.js';
export type {
  CronContext,
  CronContextList,
  FinishTaskResultInput,
  LogEntry,
  LogEntryInput,
  LogLevel,
  LogQuery,
  MiddlewareBinding,
  ModuleContext,
  ModuleSkipReason,
  StartTaskResultInput,
  StoreRepository,
  SweepZombiesOptions,
  TaskContext,
  TaskContextQuery,
  TaskCounts,
  TaskResult,
  TaskResultQuery,
  TaskResultStatus,
} from './repository/types.js';
export {
  parseSeedText,
  planSeed,
  readSeedFile,
  SEED_SECTIONS,
  type SeedData,
  type SeedReport,
  type SeedStep,
} from './seed/seed-data.js';
