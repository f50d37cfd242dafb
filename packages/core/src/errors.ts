/**
 * Every error @mocra/core raises. Each class carries a stable `code` (listed in
 * `docs/errors.md`; a test keeps the table and the docs in step), the `cause` it wraps, and
 * readonly context fields. Errors that steer the engine say what should happen next:
 * {@link NonRetryableError}, {@link RetryLaterError}, {@link CriticalError},
 * {@link SessionExpiredError}.
 */

/** Every code this package can raise, with the one-line meaning shown in docs/errors.md. */
export const CORE_ERROR_CODES = {
  MOCRA_ERR_INTERNAL: 'An invariant inside mocra broke; please report it.',
  MOCRA_ERR_MISSING_DEPENDENCY:
    'An optional peer dependency (ioredis, kafkajs, nats, pg, playwright-core…) is not installed.',
  MOCRA_ERR_INVALID_ARGUMENT: 'A function was called with an argument it cannot use.',
  MOCRA_ERR_NON_RETRYABLE: 'User code declared the failure permanent; the work is not retried.',
  MOCRA_ERR_RETRY_LATER: 'User code asked for the work to be retried after a delay.',
  MOCRA_ERR_CRITICAL: 'User code asked the engine to stop cleanly.',
  MOCRA_ERR_SESSION_EXPIRED: 'The session is gone; the module logs in again before retrying.',
  MOCRA_ERR_QUEUE_CLOSED: 'A queue was used after it was closed.',
  MOCRA_ERR_PAYLOAD_TOO_LARGE: 'A queue message is larger than the backend accepts.',
  MOCRA_ERR_QUEUE_DECODE:
    'A queue message could not be decoded (poison message); it goes to the dead-letter queue.',
  MOCRA_ERR_LEASE_EXPIRED: 'A queue delivery was acked, nacked or extended after its lease ended.',
  MOCRA_ERR_LOCK_LOST: 'A fenced lock expired or was taken over before it was renewed or released.',
  MOCRA_ERR_FENCING_REJECTED: 'A write carried a fencing token lower than one the resource has already seen.',
} as const;

export type CoreErrorCode = keyof typeof CORE_ERROR_CODES;

export interface MocraErrorOptions {
  /** The error this one wraps. */
  cause?: unknown;
  /** Whether the engine may retry the work that failed. @default false */
  retryable?: boolean;
}

/** Base class of every error mocra raises. `code` is stable across versions; `message` is not. */
export class MocraError extends Error {
  override readonly name: string = 'MocraError';
  readonly code: string;
  readonly retryable: boolean;

  constructor(code: string, message: string, options: MocraErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
  }

  /** A plain, JSON-safe view for logs, the DLQ and the HTTP API. */
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

/** True for any mocra error, also across duplicated package copies (checks the shape, not the prototype). */
export function isMocraError(err: unknown): err is MocraError {
  if (err instanceof MocraError) return true;
  const code = err instanceof Error ? (err as Error & { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('MOCRA_ERR_');
}

export class InternalError extends MocraError {
  override readonly name = 'InternalError';
  constructor(message: string, options: MocraErrorOptions = {}) {
    super('MOCRA_ERR_INTERNAL', message, options);
  }
}

export class InvalidArgumentError extends MocraError {
  override readonly name = 'InvalidArgumentError';
  constructor(message: string, options: MocraErrorOptions = {}) {
    super('MOCRA_ERR_INVALID_ARGUMENT', message, options);
  }
}

/** An optional integration was used but its package is not installed. */
export class MissingDependencyError extends MocraError {
  override readonly name = 'MissingDependencyError';
  constructor(
    readonly packageName: string,
    readonly feature: string,
    options: MocraErrorOptions = {},
  ) {
    super(
      'MOCRA_ERR_MISSING_DEPENDENCY',
      `${feature} needs the optional package '${packageName}'; install it with: pnpm add ${packageName}`,
      options,
    );
  }
}

/** Throw from user code when retrying cannot help (a 404 that will stay a 404, a page that is not a product). */
export class NonRetryableError extends MocraError {
  override readonly name = 'NonRetryableError';
  constructor(message: string, options: Omit<MocraErrorOptions, 'retryable'> = {}) {
    super('MOCRA_ERR_NON_RETRYABLE', message, { ...options, retryable: false });
  }
}

/** Throw from user code to have the work retried after `delayMs` (e.g. the site said "come back later"). */
export class RetryLaterError extends MocraError {
  override readonly name = 'RetryLaterError';
  constructor(
    message: string,
    readonly delayMs: number,
    options: Omit<MocraErrorOptions, 'retryable'> = {},
  ) {
    super('MOCRA_ERR_RETRY_LATER', message, { ...options, retryable: true });
  }
}

/** Throw from user code to stop the engine cleanly: in-flight work drains, nothing acknowledged is lost. */
export class CriticalError extends MocraError {
  override readonly name = 'CriticalError';
  constructor(message: string, options: Omit<MocraErrorOptions, 'retryable'> = {}) {
    super('MOCRA_ERR_CRITICAL', message, { ...options, retryable: false });
  }
}

/** Throw from user code (or let the session check raise it) when the login session is gone. */
export class SessionExpiredError extends MocraError {
  override readonly name = 'SessionExpiredError';
  constructor(message = 'session expired', options: Omit<MocraErrorOptions, 'retryable'> = {}) {
    super('MOCRA_ERR_SESSION_EXPIRED', message, { ...options, retryable: true });
  }
}

export class QueueClosedError extends MocraError {
  override readonly name = 'QueueClosedError';
  constructor(readonly topic: string) {
    super('MOCRA_ERR_QUEUE_CLOSED', `queue '${topic}' is closed`);
  }
}

export class PayloadTooLargeError extends MocraError {
  override readonly name = 'PayloadTooLargeError';
  constructor(
    readonly topic: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(
      'MOCRA_ERR_PAYLOAD_TOO_LARGE',
      `message for '${topic}' is ${bytes} bytes; the backend accepts at most ${limit}`,
    );
  }
}

export class QueueDecodeError extends MocraError {
  override readonly name = 'QueueDecodeError';
  constructor(
    readonly topic: string,
    message: string,
    options: MocraErrorOptions = {},
  ) {
    super('MOCRA_ERR_QUEUE_DECODE', `cannot decode a message on '${topic}': ${message}`, options);
  }
}

export class LeaseExpiredError extends MocraError {
  override readonly name = 'LeaseExpiredError';
  constructor(
    readonly topic: string,
    readonly deliveryId: string,
  ) {
    super(
      'MOCRA_ERR_LEASE_EXPIRED',
      `the lease on delivery ${deliveryId} of '${topic}' has ended; it will be (or was) delivered again`,
    );
  }
}

export class LockLostError extends MocraError {
  override readonly name = 'LockLostError';
  constructor(
    readonly lock: string,
    readonly token: number,
  ) {
    super('MOCRA_ERR_LOCK_LOST', `lock '${lock}' (token ${token}) expired or was taken over`);
  }
}

export class FencingTokenRejectedError extends MocraError {
  override readonly name = 'FencingTokenRejectedError';
  constructor(
    readonly resource: string,
    readonly token: number,
    readonly highest: number,
  ) {
    super(
      'MOCRA_ERR_FENCING_REJECTED',
      `'${resource}' rejected fencing token ${token}; it has seen ${highest}`,
    );
  }
}
