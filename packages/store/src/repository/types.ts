import type { ModuleConfig } from '../config/module-config.js';
import type { Backend } from '../driver/types.js';
import type { ItemStore, ItemStoreOptions } from '../items/types.js';
import type { MigrateResult, MigrationStatus } from '../migrate/migrator.js';
import type {
  Account,
  AccountPlatformLink,
  EntityInputMap,
  EntityKind,
  EntityRecordMap,
  LinkInputMap,
  LinkKey,
  LinkKind,
  LinkRecordMap,
  ModuleAccountLink,
  ModulePlatformLink,
  ModuleRecord,
  Platform,
} from '../model/entities.js';
import type { JsonObject, JsonValue } from '../model/json.js';
import type { SeedData, SeedReport } from '../seed/seed-data.js';

// ── task contexts ──────────────────────────────────────────────────────────────────────────────

/** What a `TaskEvent(account, platform, modules?)` asks for. */
export interface TaskContextQuery {
  account: string;
  platform: string;
  /** Run only these modules (each must still be enabled and linked). @default every linked, enabled module */
  modules?: readonly string[];
}

/** A middleware selected for a module through its relation table (both enabled). */
export interface MiddlewareBinding {
  id: number;
  name: string;
  /** The middleware's own weight. */
  weight: number;
  /** The relation's priority (higher first). */
  priority: number;
  /** The middleware's own config. */
  config: JsonObject;
  /** The relation's config (module-specific settings for this middleware). */
  relationConfig: JsonObject;
}

/** One module ready to run for an account × platform. */
export interface ModuleContext {
  module: ModuleRecord;
  moduleAccount: ModuleAccountLink;
  modulePlatform: ModulePlatformLink;
  /** Ordered: relation priority desc, then weight desc, then name. */
  downloadMiddleware: MiddlewareBinding[];
  /** Ordered like `downloadMiddleware`. */
  dataMiddleware: MiddlewareBinding[];
  /** The 10-layer module config (see config/module-config.ts). */
  config: ModuleConfig;
}

/** Why a module listed in {@link TaskContextQuery.modules} is not in the context. */
export type ModuleSkipReason =
  | 'not_found'
  | 'disabled'
  | 'not_linked_to_account'
  | 'account_link_disabled'
  | 'not_linked_to_platform'
  | 'platform_link_disabled';

export interface TaskContext {
  account: Account;
  platform: Platform;
  accountPlatform: AccountPlatformLink;
  /** Ordered by module priority desc, then name. */
  modules: ModuleContext[];
  /** Listed modules left out, and why. Always empty when no list was given. */
  skipped: { module: string; reason: ModuleSkipReason }[];
  /** {@link StoreRepository.changeToken} as of this read: cache the context until the token moves. */
  token: string;
}

/** An enabled module × account × platform, for the cron scheduler. */
export interface CronContext extends ModuleContext {
  /** `account/platform/module`, stable across refreshes: a partition key for "fire on exactly one node". */
  key: string;
  account: Account;
  platform: Platform;
  accountPlatform: AccountPlatformLink;
}

export interface CronContextList {
  /** {@link StoreRepository.changeToken} read in the same snapshot as `contexts`. */
  token: string;
  /** Ordered by account, platform, then module priority desc and name. */
  contexts: CronContext[];
}

// ── task results ───────────────────────────────────────────────────────────────────────────────

export type TaskResultStatus = 'running' | 'succeeded' | 'failed' | 'cancelled';

export interface TaskCounts {
  requests: number;
  items: number;
  errors: number;
}

export interface TaskResult {
  id: number;
  taskId: string;
  runId: string;
  account: string;
  platform: string;
  /** `null` for a run that is not about one module. */
  module: string | null;
  nodeId: string | null;
  status: TaskResultStatus;
  /** 1 on the first start; +1 each time the same run × module is started again (a redelivery). */
  attempt: number;
  startTime: Date;
  endTime: Date | null;
  heartbeatAt: Date;
  counts: TaskCounts;
  result: JsonValue | null;
  error: string | null;
  errorCode: string | null;
  updatedAt: Date;
}

export interface StartTaskResultInput {
  runId: string;
  account: string;
  platform: string;
  module?: string;
  /** @default `${account}-${platform}` */
  taskId?: string;
  /** The node running it, for operators. */
  nodeId?: string;
}

export interface FinishTaskResultInput {
  status: Exclude<TaskResultStatus, 'running'>;
  /** Final counts; omitted ones keep the last heartbeat's value. */
  counts?: Partial<TaskCounts>;
  result?: JsonValue;
  /** A message, or an error whose `message` (and string `code`) are recorded. */
  error?: string | Error;
  /** Overrides the code taken from `error`. */
  errorCode?: string;
}

export interface TaskResultQuery {
  runId?: string;
  taskId?: string;
  status?: TaskResultStatus;
  /** @default 100 */
  limit?: number;
}

export interface SweepZombiesOptions {
  /** A running row whose last heartbeat is older than this is marked failed. */
  staleAfterMs: number;
}

// ── logs ───────────────────────────────────────────────────────────────────────────────────────

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';

export interface LogEntryInput {
  taskId: string;
  level: LogLevel;
  message: string;
  runId?: string;
  module?: string;
  requestId?: string;
  status?: string;
  /** @default the store's clock */
  timestamp?: Date;
  traceback?: string;
}

export interface LogEntry {
  id: number;
  taskId: string;
  level: LogLevel;
  message: string;
  runId: string | null;
  module: string | null;
  requestId: string | null;
  status: string | null;
  timestamp: Date;
  traceback: string | null;
}

export interface LogQuery {
  taskId?: string;
  runId?: string;
  level?: LogLevel;
  /** @default 200 */
  limit?: number;
}

// ── the repository ─────────────────────────────────────────────────────────────────────────────

/**
 * Everything the engine and the `mocra store` CLI need from the database, the same on Postgres
 * and SQLite (one conformance suite runs against both). Every method validates its input and
 * throws typed {@link StoreError}s. Idempotent operations are retried on retryable errors
 * (connection loss, serialization failure) up to `retry.maxRetries` times; `writeLogs` is not
 * (a retried insert could duplicate lines).
 */
export interface StoreRepository {
  readonly backend: Backend;
  /** Postgres schema, `null` for SQLite. */
  readonly schema: string | null;

  /** Applies pending migrations in one transaction; refuses if an applied one changed. */
  migrate(): Promise<MigrateResult>;
  /** Applied / pending / changed migrations with checksums. Changes nothing. */
  migrationStatus(): Promise<MigrationStatus>;

  /** Inserts or updates by name. Omitted fields take their defaults (the input is the whole row). */
  upsert<K extends EntityKind>(kind: K, input: EntityInputMap[K]): Promise<EntityRecordMap[K]>;
  get<K extends EntityKind>(kind: K, name: string): Promise<EntityRecordMap[K] | null>;
  /** Ordered by name. */
  list<K extends EntityKind>(kind: K): Promise<EntityRecordMap[K][]>;
  /** Deletes by name, with its relations. False if there was no such row. */
  remove(kind: EntityKind, name: string): Promise<boolean>;

  /** Inserts or updates a relation between two named rows; throws NotFoundError for a missing name. */
  link<K extends LinkKind>(kind: K, input: LinkInputMap[K]): Promise<LinkRecordMap[K]>;
  getLink<K extends LinkKind>(kind: K, key: LinkKey<K>): Promise<LinkRecordMap[K] | null>;
  listLinks<K extends LinkKind>(kind: K): Promise<LinkRecordMap[K][]>;
  unlink<K extends LinkKind>(kind: K, key: LinkKey<K>): Promise<boolean>;

  /**
   * The engine's database config provider: the enabled account, platform and their relation, the
   * modules to run (all enabled ones linked to both, or the listed subset) with their middleware
   * and layered config — read in one consistent snapshot.
   * @throws ContextUnavailableError when the account × platform cannot run.
   */
  loadTaskContext(query: TaskContextQuery): Promise<TaskContext>;
  /** Every enabled module × account × platform, joined through all relation tables. */
  listCronContexts(): Promise<CronContextList>;
  /**
   * A token that changes whenever any catalog row (entity or relation) is inserted, updated or
   * deleted — also by hand in SQL. One indexed single-row read: poll it to refresh caches cheaply.
   */
  changeToken(): Promise<string>;

  /** Records a run as running. Starting the same `runId` × `module` again reopens that row (attempt + 1). */
  startTaskResult(input: StartTaskResultInput): Promise<TaskResult>;
  /** Refreshes a running row's heartbeat (and counts). False when the row is no longer running. */
  heartbeatTaskResult(id: number, counts?: Partial<TaskCounts>): Promise<boolean>;
  /** Ends a run. Finishing again overwrites (also a row the zombie sweep failed). */
  finishTaskResult(id: number, input: FinishTaskResultInput): Promise<TaskResult>;
  getTaskResult(id: number): Promise<TaskResult | null>;
  /** Newest first. */
  listTaskResults(query?: TaskResultQuery): Promise<TaskResult[]>;
  /** Marks running rows without a recent heartbeat as failed (`MOCRA_ERR_STORE_ZOMBIE_RUN`); returns them. */
  sweepZombies(options: SweepZombiesOptions): Promise<TaskResult[]>;

  /** Inserts log rows in one transaction (all or none). Returns the number written. */
  writeLogs(entries: readonly LogEntryInput[]): Promise<number>;
  /** Newest first. */
  listLogs(query?: LogQuery): Promise<LogEntry[]>;
  /** Deletes log rows older than `before`; returns how many. */
  pruneLogs(before: Date): Promise<number>;

  /** Loads a seed document (validated; errors name the key) in one transaction. Idempotent. */
  seed(data: SeedData): Promise<SeedReport>;
  /** {@link seed} from a `.toml` or `.json` file. */
  seedFromFile(path: string): Promise<SeedReport>;

  /** An idempotent item store on this database (see ItemStoreOptions). Call `init()` before writing. */
  createItemStore(options: ItemStoreOptions): ItemStore;

  close(): Promise<void>;
}
