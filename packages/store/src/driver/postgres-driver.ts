import type { Pool, PoolClient } from 'pg';
import { StoreClosedError } from '../errors.js';
import { channels } from '../observability/channels.js';
import { classifyPgError } from './classify-error.js';
import { defaultExport, importOptional } from './load-optional.js';
import {
  quoteIdent,
  type Row,
  type SqlDriver,
  type SqlParam,
  type SqlSession,
  type TransactionOptions,
} from './types.js';

export interface PostgresDriverOptions {
  connectionString: string;
  /** Already validated as an identifier. */
  schema: string;
  poolSize: number;
  applicationName: string;
  connectTimeoutMs: number;
}

interface PgModule {
  Pool: new (config: Record<string, unknown>) => Pool;
}

/** `?` placeholders to `$1, $2, …`. Our SQL never contains a literal `?`. */
function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

function toPg(params: readonly SqlParam[] | undefined): unknown[] {
  if (params === undefined) return [];
  // bigint is not serialised by node-postgres; strings are accepted for int8.
  return params.map((p) => (typeof p === 'bigint' ? p.toString() : p));
}

interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Row[]; rowCount: number | null }>;
}

function sessionOf(target: Queryable, guard: () => void): SqlSession {
  return {
    async query<T extends Row = Row>(sql: string, params?: readonly SqlParam[]): Promise<T[]> {
      guard();
      try {
        const res = await target.query(numbered(sql), toPg(params));
        return res.rows as T[];
      } catch (err) {
        throw classifyPgError(err);
      }
    },
    async execute(sql: string, params?: readonly SqlParam[]): Promise<number> {
      guard();
      try {
        const res = await target.query(numbered(sql), toPg(params));
        return res.rowCount ?? 0;
      } catch (err) {
        throw classifyPgError(err);
      }
    },
    async script(sql: string): Promise<void> {
      guard();
      try {
        await target.query(sql);
      } catch (err) {
        throw classifyPgError(err);
      }
    },
  };
}

/** A pooled node-postgres driver. Tables are qualified with the schema, so search_path does not matter. */
export async function createPostgresDriver(options: PostgresDriverOptions): Promise<SqlDriver> {
  const pg = defaultExport<PgModule>(await importOptional<unknown>('pg', 'postgres'));
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.poolSize,
    application_name: options.applicationName,
    connectionTimeoutMillis: options.connectTimeoutMs,
  });
  // An idle pooled connection that dies (server restart, pg_terminate_backend) emits 'error' on the
  // pool; without a listener that would crash the process. The pool drops the client by itself.
  pool.on('error', (err: Error) => {
    if (channels.connectionError.hasSubscribers) {
      channels.connectionError.publish({ backend: 'postgres', error: err });
    }
  });

  let closed = false;
  const guard = () => {
    if (closed) throw new StoreClosedError();
  };
  const schema = quoteIdent(options.schema);
  const poolSession = sessionOf(pool as unknown as Queryable, guard);

  return {
    backend: 'postgres',
    schema: options.schema,
    table: (name) => `${schema}.${quoteIdent(name)}`,
    readJson: (value) => value,
    ...poolSession,

    async transaction<T>(fn: (tx: SqlSession) => Promise<T>, txOptions: TransactionOptions = {}): Promise<T> {
      guard();
      let client: PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw classifyPgError(err);
      }
      // A checked-out client has no error listener (pg-pool removes its idle one); a socket error
      // between two statements of this transaction would otherwise be an uncaught 'error' event.
      let broken: Error | undefined;
      const onError = (err: Error) => {
        broken = err;
      };
      client.on('error', onError);
      const tx = sessionOf(client as unknown as Queryable, guard);
      try {
        await tx.script(txOptions.readOnly ? 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' : 'BEGIN');
        const result = await fn(tx);
        await tx.script('COMMIT');
        return result;
      } catch (err) {
        const typed = classifyPgError(err);
        if (typed.code === 'MOCRA_ERR_STORE_CONNECTION') broken ??= typed;
        if (broken === undefined) {
          try {
            await client.query('ROLLBACK');
          } catch (rollbackErr) {
            broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
          }
        }
        throw typed;
      } finally {
        client.off('error', onError);
        // Passing an error destroys the connection instead of returning it to the pool.
        client.release(broken);
      }
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}
