/**
 * Every error @mocra/store raises. The package stands alone (it imports no other mocra package), so
 * it has its own base class, {@link StoreError}, shaped like `@mocra/core`'s `MocraError`: a stable
 * `code` (listed in `docs/errors.md`; a test keeps the table and the docs in step), a `retryable`
 * flag that tells the engine whether trying the same work again can help, the `cause` it wraps, and
 * readonly context fields. `isMocraError` in core recognises these errors by shape.
 */

/** Every code this package can raise or record, with the one-line meaning shown in docs/errors.md. */
export const STORE_ERROR_CODES = {
  MOCRA_ERR_STORE_DRIVER_MISSING:
    'The database driver for the chosen backend (pg or better-sqlite3) is not installed.',
  MOCRA_ERR_STORE_INVALID_INPUT:
    'A store option, entity, seed file entry or item is malformed; the message names the key.',
  MOCRA_ERR_STORE_SEED_FILE: 'A seed file could not be read or parsed as TOML or JSON.',
  MOCRA_ERR_STORE_NOT_FOUND: 'A named account, platform, module, middleware or relation does not exist.',
  MOCRA_ERR_STORE_CONTEXT_UNAVAILABLE:
    'A task names an account × platform that is missing, disabled or not linked; the task cannot run.',
  MOCRA_ERR_STORE_CONFIG_TYPE: 'A module config value has a different JSON type than the getter asked for.',
  MOCRA_ERR_STORE_CONSTRAINT:
    'The database rejected a write (unique, foreign key, not-null or check constraint, bad value).',
  MOCRA_ERR_STORE_MISSING_TABLE: 'A table or column the store needs does not exist (run the migrations).',
  MOCRA_ERR_STORE_CONNECTION:
    'The database connection was lost or could not be opened; retryable unless a local SQLite file cannot be opened.',
  MOCRA_ERR_STORE_SERIALIZATION:
    'The database aborted a transaction to keep it consistent (serialization failure, deadlock, busy); retryable.',
  MOCRA_ERR_STORE_QUERY: 'The database failed a statement for another reason; the cause is attached.',
  MOCRA_ERR_STORE_MIGRATION_CHECKSUM:
    'An applied migration differs from the one this version ships; migrations refuse to run.',
  MOCRA_ERR_STORE_MIGRATION_FAILED: 'A migration failed; its transaction was rolled back.',
  MOCRA_ERR_STORE_CLOSED: 'The store was used after close().',
  MOCRA_ERR_STORE_ZOMBIE_RUN:
    'Recorded in task_result.error_code: the run stopped sending heartbeats and the zombie sweep marked it failed.',
} as const;

export type StoreErrorCode = keyof typeof STORE_ERROR_CODES;

export interface StoreErrorOptions {
  /** The error this one wraps. */
  cause?: unknown;
  /** Whether trying the same work again may succeed. @default false */
  retryable?: boolean;
}

/** Base class of every error @mocra/store raises. `code` is stable across versions; `message` is not. */
export class StoreError extends Error {
  override readonly name: string = 'StoreError';
  readonly code: StoreErrorCode;
  readonly retryable: boolean;

  constructor(code: StoreErrorCode, message: string, options: StoreErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
  }

  /** A plain, JSON-safe view for logs and task_result rows. */
  toJSON(): { name: string; code: string; message: string; retryable: boolean; cause?: string } {
    const cause =
      this.cause instanceof Error
        ? this.cause.message
        : this.cause === undefined
          ? undefined
          : String(this.cause);
    return {
      name: this.name,
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(cause === undefined ? {} : { cause }),
    };
  }
}

/** True for any error this package raised (checks the shape, so duplicated package copies count too). */
export function isStoreError(err: unknown): err is StoreError {
  if (err instanceof StoreError) return true;
  const code = err instanceof Error ? (err as Error & { code?: unknown }).code : undefined;
  return typeof code === 'string' && code in STORE_ERROR_CODES;
}

/** The optional driver package for a backend is not installed. */
export class DriverMissingError extends StoreError {
  override readonly name = 'DriverMissingError';
  constructor(
    readonly packageName: string,
    readonly backend: string,
    options: StoreErrorOptions = {},
  ) {
    super(
      'MOCRA_ERR_STORE_DRIVER_MISSING',
      `the ${backend} store needs the optional package '${packageName}'; install it with: pnpm add ${packageName}`,
      options,
    );
  }
}

/** Malformed input. `key` is the path of the offending value (`modules[2].config`, `url`, `items[0].data.price`). */
export class InvalidInputError extends StoreError {
  override readonly name = 'InvalidInputError';
  constructor(
    readonly key: string,
    message: string,
    options: StoreErrorOptions = {},
  ) {
    super('MOCRA_ERR_STORE_INVALID_INPUT', `${key}: ${message}`, options);
  }
}

export class SeedFileError extends StoreError {
  override readonly name = 'SeedFileError';
  constructor(
    readonly path: string,
    message: string,
    options: StoreErrorOptions = {},
  ) {
    super('MOCRA_ERR_STORE_SEED_FILE', `seed file '${path}': ${message}`, options);
  }
}

export class NotFoundError extends StoreError {
  override readonly name = 'NotFoundError';
  constructor(
    readonly entity: string,
    readonly entityName: string,
    /** Where the name came from, e.g. `module_accounts[0].account`, when known. */
    readonly key?: string,
  ) {
    super(
      'MOCRA_ERR_STORE_NOT_FOUND',
      `${key === undefined ? '' : `${key}: `}${entity} '${entityName}' does not exist`,
    );
  }
}

/** Why {@link ContextUnavailableError} was raised. */
export type ContextUnavailableReason =
  | 'account_not_found'
  | 'account_disabled'
  | 'platform_not_found'
  | 'platform_disabled'
  | 'account_platform_not_linked'
  | 'account_platform_disabled';

export class ContextUnavailableError extends StoreError {
  override readonly name = 'ContextUnavailableError';
  constructor(
    readonly account: string,
    readonly platform: string,
    readonly reason: ContextUnavailableReason,
  ) {
    super(
      'MOCRA_ERR_STORE_CONTEXT_UNAVAILABLE',
      `no task context for account '${account}' × platform '${platform}': ${reason.replaceAll('_', ' ')}`,
    );
  }
}

export class ConfigTypeError extends StoreError {
  override readonly name = 'ConfigTypeError';
  constructor(
    readonly key: string,
    readonly expected: string,
    readonly actual: string,
    readonly layer: string,
  ) {
    super(
      'MOCRA_ERR_STORE_CONFIG_TYPE',
      `module config '${key}' (from the ${layer} layer) is ${actual}, expected ${expected}`,
    );
  }
}

/** Details a database gives about a rejected write, when it gives them. */
export interface ConstraintDetails {
  constraint?: string;
  table?: string;
  column?: string;
}

export class ConstraintError extends StoreError {
  override readonly name = 'ConstraintError';
  readonly constraint: string | undefined;
  readonly table: string | undefined;
  readonly column: string | undefined;
  constructor(message: string, details: ConstraintDetails, options: StoreErrorOptions = {}) {
    super('MOCRA_ERR_STORE_CONSTRAINT', message, { ...options, retryable: false });
    this.constraint = details.constraint;
    this.table = details.table;
    this.column = details.column;
  }
}

export class MissingTableError extends StoreError {
  override readonly name = 'MissingTableError';
  constructor(message: string, options: StoreErrorOptions = {}) {
    super(
      'MOCRA_ERR_STORE_MISSING_TABLE',
      `${message} (has migrate() run against this database and schema?)`,
      options,
    );
  }
}

export class ConnectionError extends StoreError {
  override readonly name = 'ConnectionError';
  constructor(message: string, options: StoreErrorOptions = {}) {
    super('MOCRA_ERR_STORE_CONNECTION', message, { retryable: true, ...options });
  }
}

export class SerializationError extends StoreError {
  override readonly name = 'SerializationError';
  constructor(message: string, options: Omit<StoreErrorOptions, 'retryable'> = {}) {
    super('MOCRA_ERR_STORE_SERIALIZATION', message, { ...options, retryable: true });
  }
}

export class QueryError extends StoreError {
  override readonly name = 'QueryError';
  constructor(message: string, options: StoreErrorOptions = {}) {
    super('MOCRA_ERR_STORE_QUERY', message, options);
  }
}

export class MigrationChecksumError extends StoreError {
  override readonly name = 'MigrationChecksumError';
  constructor(
    readonly version: number,
    readonly migrationName: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(
      'MOCRA_ERR_STORE_MIGRATION_CHECKSUM',
      `migration ${version} (${migrationName}) was applied with checksum ${actual}, but this version ships ${expected}; ` +
        'refusing to migrate (restore the original migration or repair the mocra_migrations row by hand)',
    );
  }
}

export class MigrationFailedError extends StoreError {
  override readonly name = 'MigrationFailedError';
  constructor(
    readonly version: number,
    readonly migrationName: string,
    options: StoreErrorOptions = {},
  ) {
    const why = options.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(
      'MOCRA_ERR_STORE_MIGRATION_FAILED',
      `migration ${version} (${migrationName}) failed and was rolled back${why}`,
      options,
    );
  }
}

export class StoreClosedError extends StoreError {
  override readonly name = 'StoreClosedError';
  constructor() {
    super('MOCRA_ERR_STORE_CLOSED', 'the store is closed');
  }
}
