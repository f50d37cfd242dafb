/** The two databases the store runs on. */
export type Backend = 'postgres' | 'sqlite';

/** A value bound to a `?` placeholder. Drivers convert booleans and dates to what their database takes. */
export type SqlParam = string | number | boolean | null | Date | bigint | Uint8Array;

export type Row = Record<string, unknown>;

/** Runs statements on one connection (inside a transaction) or on the pool (outside). */
export interface SqlSession {
  /** Rows of a statement that returns rows (SELECT, or INSERT/UPDATE … RETURNING). Placeholders are `?`. */
  query<T extends Row = Row>(sql: string, params?: readonly SqlParam[]): Promise<T[]>;
  /** Rows affected by a statement that returns none. */
  execute(sql: string, params?: readonly SqlParam[]): Promise<number>;
  /** Several statements without parameters (migrations). */
  script(sql: string): Promise<void>;
}

export interface TransactionOptions {
  /** A consistent read-only snapshot (Postgres: REPEATABLE READ READ ONLY). @default false */
  readOnly?: boolean;
}

/**
 * The thin layer between the repository and a database. Errors it throws are already typed
 * {@link StoreError}s (see classify-error.ts).
 */
export interface SqlDriver extends SqlSession {
  readonly backend: Backend;
  /** The Postgres schema tables live in; `null` for SQLite. */
  readonly schema: string | null;
  /** A quoted, schema-qualified table name for SQL text. */
  table(name: string): string;
  /** Decodes a JSON column as the driver returns it (Postgres parses jsonb; SQLite returns text). */
  readJson(value: unknown): unknown;
  /** Runs `fn` in a transaction on one connection: committed if it resolves, rolled back if it throws. */
  transaction<T>(fn: (tx: SqlSession) => Promise<T>, options?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

export function isIdentifier(name: string): boolean {
  return IDENTIFIER.test(name);
}

/** Quotes an identifier already checked by {@link isIdentifier}. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
