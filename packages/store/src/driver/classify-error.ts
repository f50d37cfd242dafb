import {
  ConnectionError,
  ConstraintError,
  isStoreError,
  MissingTableError,
  QueryError,
  SerializationError,
  type StoreError,
} from '../errors.js';

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

// node-postgres reports a socket that closed under it with messages and no SQLSTATE.
const PG_CONNECTION_MESSAGE =
  /connection terminated|connection error|not queryable|terminating connection|timeout exceeded when trying to connect|server closed the connection/i;

interface PgErrorFields {
  code?: unknown;
  constraint?: unknown;
  table?: unknown;
  column?: unknown;
  detail?: unknown;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** Maps an error from node-postgres to a typed store error (SQLSTATE classes, then socket errors). */
export function classifyPgError(err: unknown): StoreError {
  if (isStoreError(err)) return err;
  const fields = (typeof err === 'object' && err !== null ? err : {}) as PgErrorFields;
  const code = str(fields.code) ?? '';
  const message = err instanceof Error ? err.message : String(err);
  const detail = str(fields.detail);
  const full = detail === undefined ? message : `${message} (${detail})`;
  const options = { cause: err };

  if (code.startsWith('23') || code.startsWith('22')) {
    const details: { constraint?: string; table?: string; column?: string } = {};
    const constraint = str(fields.constraint);
    const table = str(fields.table);
    const column = str(fields.column);
    if (constraint !== undefined) details.constraint = constraint;
    if (table !== undefined) details.table = table;
    if (column !== undefined) details.column = column;
    return new ConstraintError(full, details, options);
  }
  if (code === '42P01' || code === '42703' || code === '3F000')
    return new MissingTableError(message, options);
  if (code === '40001' || code === '40P01' || code === '55P03') return new SerializationError(full, options);
  if (code.startsWith('08') || code.startsWith('57P') || code === '53300') {
    return new ConnectionError(message, options);
  }
  if (NETWORK_CODES.has(code) || (code === '' && PG_CONNECTION_MESSAGE.test(message))) {
    return new ConnectionError(message, options);
  }
  return new QueryError(full, options);
}

/** Maps an error from better-sqlite3 (its `code` is the extended SQLite result code name). */
export function classifySqliteError(err: unknown): StoreError {
  if (isStoreError(err)) return err;
  const code = str((err as { code?: unknown } | null)?.code) ?? '';
  const message = err instanceof Error ? err.message : String(err);
  const options = { cause: err };

  if (code.startsWith('SQLITE_CONSTRAINT') || code === 'SQLITE_MISMATCH' || code === 'SQLITE_TOOBIG') {
    const table = /^[A-Z ]+ constraint failed: ([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)/i.exec(message);
    return new ConstraintError(message, table ? { table: table[1]!, column: table[2]! } : {}, options);
  }
  if (/no such table|no such column|has no column named/i.test(message)) {
    return new MissingTableError(message, options);
  }
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return new SerializationError(message, options);
  }
  if (code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_IOERR') || code === 'SQLITE_NOTADB') {
    return new ConnectionError(message, { ...options, retryable: code.startsWith('SQLITE_IOERR') });
  }
  return new QueryError(message, options);
}
