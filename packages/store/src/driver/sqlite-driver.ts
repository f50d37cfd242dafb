import type BetterSqlite3 from 'better-sqlite3';
import { ConnectionError, StoreClosedError } from '../errors.js';
import { classifySqliteError } from './classify-error.js';
import { defaultExport, importOptional } from './load-optional.js';
import {
  quoteIdent,
  type Row,
  type SqlDriver,
  type SqlParam,
  type SqlSession,
  type TransactionOptions,
} from './types.js';

export interface SqliteDriverOptions {
  /** A file path, or `:memory:`. */
  filename: string;
  busyTimeoutMs: number;
}

type DatabaseConstructor = new (filename: string, options?: BetterSqlite3.Options) => BetterSqlite3.Database;

function toSqlite(params: readonly SqlParam[] | undefined): unknown[] {
  if (params === undefined) return [];
  return params.map((p) => {
    if (typeof p === 'boolean') return p ? 1 : 0;
    if (p instanceof Date) return p.toISOString();
    return p;
  });
}

/**
 * better-sqlite3 is synchronous and has one connection. The async API above it must not let two
 * operations interleave inside one transaction, so every operation — a lone statement or a whole
 * transaction — runs behind one promise-chain mutex:
 *
 *   op A ──▶ op B (waits for A) ──▶ transaction C (holds the mutex from BEGIN to COMMIT) ──▶ …
 */
export async function createSqliteDriver(options: SqliteDriverOptions): Promise<SqlDriver> {
  const Database = defaultExport<DatabaseConstructor>(
    await importOptional<unknown>('better-sqlite3', 'sqlite'),
  );
  let db: BetterSqlite3.Database;
  try {
    db = new Database(options.filename, { timeout: options.busyTimeoutMs });
    if (options.filename !== ':memory:') db.pragma('journal_mode = WAL');
    db.pragma('foreign_keys = ON');
  } catch (err) {
    // better-sqlite3 reports a missing directory as a plain TypeError, so opening failures are
    // mapped here rather than by code.
    const message = err instanceof Error ? err.message : String(err);
    throw new ConnectionError(`cannot open SQLite database '${options.filename}': ${message}`, {
      cause: err,
      retryable: false,
    });
  }

  const statements = new Map<string, BetterSqlite3.Statement>();
  const prepare = (sql: string): BetterSqlite3.Statement => {
    let stmt = statements.get(sql);
    if (stmt === undefined) {
      stmt = db.prepare(sql);
      if (statements.size > 500) statements.clear();
      statements.set(sql, stmt);
    }
    return stmt;
  };

  let closed = false;
  let tail: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T> | T): Promise<T> => {
    const run = tail.then(() => {
      if (closed) throw new StoreClosedError();
      return fn();
    });
    tail = run.catch(() => undefined);
    return run;
  };

  // Statements that run directly on the connection; callers hold the mutex.
  const direct: SqlSession = {
    async query<T extends Row = Row>(sql: string, params?: readonly SqlParam[]): Promise<T[]> {
      try {
        const stmt = prepare(sql);
        if (stmt.reader) return stmt.all(...toSqlite(params)) as T[];
        stmt.run(...toSqlite(params));
        return [];
      } catch (err) {
        throw classifySqliteError(err);
      }
    },
    async execute(sql: string, params?: readonly SqlParam[]): Promise<number> {
      try {
        return prepare(sql).run(...toSqlite(params)).changes;
      } catch (err) {
        throw classifySqliteError(err);
      }
    },
    async script(sql: string): Promise<void> {
      try {
        db.exec(sql);
      } catch (err) {
        throw classifySqliteError(err);
      }
    },
  };

  return {
    backend: 'sqlite',
    schema: null,
    table: (name) => quoteIdent(name),
    readJson: (value) => (typeof value === 'string' ? (JSON.parse(value) as unknown) : value),
    query: (sql, params) => exclusive(() => direct.query(sql, params)),
    execute: (sql, params) => exclusive(() => direct.execute(sql, params)),
    script: (sql) => exclusive(() => direct.script(sql)),

    transaction<T>(fn: (tx: SqlSession) => Promise<T>, txOptions: TransactionOptions = {}): Promise<T> {
      return exclusive(async () => {
        // IMMEDIATE takes the write lock up front, so two processes never deadlock upgrading a read lock.
        await direct.script(txOptions.readOnly ? 'BEGIN DEFERRED' : 'BEGIN IMMEDIATE');
        try {
          const result = await fn(direct);
          await direct.script('COMMIT');
          return result;
        } catch (err) {
          if (db.inTransaction) db.exec('ROLLBACK');
          throw classifySqliteError(err);
        }
      });
    },

    close(): Promise<void> {
      return exclusive(() => {
        closed = true;
        statements.clear();
        db.close();
      }).catch((err: unknown) => {
        if (err instanceof StoreClosedError) return;
        throw err;
      });
    },
  };
}
