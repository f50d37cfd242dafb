import { createPostgresDriver } from '../driver/postgres-driver.js';
import { createSqliteDriver } from '../driver/sqlite-driver.js';
import { isIdentifier, type SqlDriver } from '../driver/types.js';
import { InvalidInputError } from '../errors.js';
import { MIGRATIONS } from '../migrate/migrations.js';
import { isPlainObject, jsonTypeOf } from '../model/json.js';
import { checkCount } from '../model/validate.js';
import { type RetryOptions, SqlStoreRepository } from './sql-repository.js';
import type { StoreRepository } from './types.js';

export interface StoreOptions {
  /**
   * Where the data lives: `postgres://user@host:5432/db` (or `postgresql://`), or
   * `sqlite:<path>`, `sqlite://<path>`, `sqlite::memory:`.
   */
  url: string;
  /** Postgres schema that holds every table (created by `migrate()`). @default 'mocra' */
  schema?: string;
  /** Postgres pool size. @default 10 */
  poolSize?: number;
  /** Postgres `application_name`, shown in pg_stat_activity. @default 'mocra-store' */
  applicationName?: string;
  /** Postgres connect timeout. @default 10000 */
  connectTimeoutMs?: number;
  /** SQLite: how long a writer waits for another connection's lock before failing. @default 5000 */
  busyTimeoutMs?: number;
  /** Retries of idempotent operations on retryable errors. */
  retry?: RetryOptions;
  /** Apply pending migrations before returning. @default false */
  migrate?: boolean;
  /**
   * Source of the timestamps the store writes (created/updated, task_result start/heartbeat/end,
   * and the zombie-sweep cutoff). Nodes' clocks should agree to well within the sweep threshold.
   * @default () => new Date()
   */
  clock?: () => Date;
}

type ParsedUrl = { backend: 'postgres'; connectionString: string } | { backend: 'sqlite'; filename: string };

/** Splits a store URL into backend and driver target. */
export function parseStoreUrl(url: unknown): ParsedUrl {
  if (typeof url !== 'string' || url === '')
    throw new InvalidInputError('url', 'expected a non-empty string');
  if (/^postgres(ql)?:\/\//i.test(url)) return { backend: 'postgres', connectionString: url };
  const sqlite = /^sqlite:(?:\/\/)?(.+)$/i.exec(url);
  if (sqlite) return { backend: 'sqlite', filename: sqlite[1]! };
  throw new InvalidInputError(
    'url',
    `unsupported store URL '${url.replace(/\/\/[^@/]*@/, '//***@')}'; expected postgres://… or sqlite:<path>`,
  );
}

/**
 * Opens a store on Postgres or SQLite. The driver package (`pg` or `better-sqlite3`) is imported
 * here, on first use; a missing one raises `MOCRA_ERR_STORE_DRIVER_MISSING` naming it.
 */
export async function createStore(options: StoreOptions): Promise<StoreRepository> {
  if (!isPlainObject(options))
    throw new InvalidInputError('options', `expected an object, got ${jsonTypeOf(options)}`);
  const target = parseStoreUrl(options.url);
  const schema = options.schema ?? 'mocra';
  if (typeof schema !== 'string' || !isIdentifier(schema)) {
    throw new InvalidInputError(
      'schema',
      `'${String(schema)}' is not a valid schema name (letters, digits, _)`,
    );
  }
  const retry = options.retry ?? {};
  const resolvedRetry = {
    maxRetries: retry.maxRetries === undefined ? 2 : checkCount(retry.maxRetries, 'retry.maxRetries'),
    baseDelayMs: retry.baseDelayMs === undefined ? 50 : checkCount(retry.baseDelayMs, 'retry.baseDelayMs'),
    maxDelayMs: retry.maxDelayMs === undefined ? 1000 : checkCount(retry.maxDelayMs, 'retry.maxDelayMs'),
  };
  const clock = options.clock ?? (() => new Date());
  if (typeof clock !== 'function') throw new InvalidInputError('clock', 'expected a function');

  let driver: SqlDriver;
  if (target.backend === 'postgres') {
    const poolSize = options.poolSize ?? 10;
    if (checkCount(poolSize, 'poolSize') < 1) throw new InvalidInputError('poolSize', 'must be at least 1');
    driver = await createPostgresDriver({
      connectionString: target.connectionString,
      schema,
      poolSize,
      applicationName: options.applicationName ?? 'mocra-store',
      connectTimeoutMs: checkCount(options.connectTimeoutMs ?? 10_000, 'connectTimeoutMs'),
    });
  } else {
    driver = await createSqliteDriver({
      filename: target.filename,
      busyTimeoutMs: checkCount(options.busyTimeoutMs ?? 5000, 'busyTimeoutMs'),
    });
  }
  const store = new SqlStoreRepository(driver, { clock, retry: resolvedRetry, migrations: MIGRATIONS });
  if (options.migrate) {
    try {
      await store.migrate();
    } catch (err) {
      await store.close();
      throw err;
    }
  }
  return store;
}
