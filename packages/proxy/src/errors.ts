/**
 * Every error @mocra/proxy raises. The package stands alone (it imports no other mocra package),
 * so it has its own base class, {@link ProxyError}, shaped like `MocraError` in @mocra/core: a
 * stable `code` (listed in docs/errors.md; a test keeps the two in step), `retryable`, the
 * `cause` it wraps and readonly context fields. `isMocraError` in core recognises it by shape.
 */

/** Every code this package can raise, with the one-line meaning shown in docs/errors.md. */
export const PROXY_ERROR_CODES = {
  MOCRA_ERR_PROXY_CONFIG: 'The proxy configuration is invalid; the message names every bad key.',
  MOCRA_ERR_PROXY_ADDRESS:
    'A proxy address could not be parsed (expected scheme://[user:pass@]host:port or ip:port[:user:pass]).',
  MOCRA_ERR_PROXY_POOL_EMPTY:
    'No proxy can serve the request: none configured for the tier or provider, all retired or expired, and a refill found none.',
  MOCRA_ERR_PROXY_RATE_LIMITED:
    'Every eligible proxy stayed at its rate limit for longer than the caller may wait; retry after `retryAfterMs`.',
  MOCRA_ERR_PROXY_PROVIDER:
    'A proxy provider failed to load its list (HTTP status, network error, oversized body, or the function threw).',
  MOCRA_ERR_PROXY_INVALID_ARGUMENT:
    'A pool method was called with an argument it cannot use (unknown provider or tier, bad latency, bad reason).',
  MOCRA_ERR_PROXY_CLOSED: 'The proxy pool or its dispatchers were used after close().',
} as const;

export type ProxyErrorCode = keyof typeof PROXY_ERROR_CODES;

export interface ProxyErrorOptions {
  /** The error this one wraps. */
  cause?: unknown;
  /** Whether the work that failed may be retried. @default false */
  retryable?: boolean;
}

/** Base class of every error @mocra/proxy raises. `code` is stable across versions; `message` is not. */
export class ProxyError extends Error {
  override readonly name: string = 'ProxyError';
  readonly code: ProxyErrorCode;
  readonly retryable: boolean;

  constructor(code: ProxyErrorCode, message: string, options: ProxyErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
  }

  /** A plain, JSON-safe view for logs and the HTTP API. */
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

/** One problem found in a configuration, with the dotted key it is about (`proxy.providers[0].url`). */
export interface ProxyConfigIssue {
  readonly key: string;
  readonly message: string;
}

/** The configuration is invalid. `issues` lists every problem found, not only the first. */
export class ProxyConfigError extends ProxyError {
  override readonly name = 'ProxyConfigError';
  readonly issues: readonly ProxyConfigIssue[];

  constructor(issues: readonly ProxyConfigIssue[]) {
    const lines = issues.map((issue) => `${issue.key}: ${issue.message}`);
    super(
      'MOCRA_ERR_PROXY_CONFIG',
      issues.length === 1
        ? `invalid proxy config: ${lines[0]}`
        : `invalid proxy config:\n  ${lines.join('\n  ')}`,
    );
    this.issues = issues;
  }
}

/** A proxy address could not be parsed. `input` has any password masked. */
export class ProxyAddressError extends ProxyError {
  override readonly name = 'ProxyAddressError';
  constructor(
    readonly input: string,
    reason: string,
  ) {
    super('MOCRA_ERR_PROXY_ADDRESS', `invalid proxy address '${input}': ${reason}`);
  }
}

/** Nothing can serve this request. Retrying soon rarely helps unless a provider can refill. */
export class ProxyPoolEmptyError extends ProxyError {
  override readonly name = 'ProxyPoolEmptyError';
  constructor(
    message: string,
    readonly scope: string,
    options: ProxyErrorOptions = {},
  ) {
    super('MOCRA_ERR_PROXY_POOL_EMPTY', message, options);
  }
}

/** Every eligible proxy is busy up to its rate limit; one frees up after `retryAfterMs`. */
export class ProxyRateLimitedError extends ProxyError {
  override readonly name = 'ProxyRateLimitedError';
  constructor(
    readonly retryAfterMs: number,
    readonly scope: string,
  ) {
    super(
      'MOCRA_ERR_PROXY_RATE_LIMITED',
      `every eligible proxy is at its rate limit; the next slot frees in ${retryAfterMs} ms`,
      { retryable: true },
    );
  }
}

/** A provider failed to load. Recorded in `stats()` and published on `mocra:proxy:loaded`. */
export class ProxyProviderError extends ProxyError {
  override readonly name = 'ProxyProviderError';
  constructor(
    readonly provider: string,
    message: string,
    readonly status?: number,
    options: ProxyErrorOptions = {},
  ) {
    super('MOCRA_ERR_PROXY_PROVIDER', `provider '${provider}': ${message}`, { retryable: true, ...options });
  }
}

export class ProxyInvalidArgumentError extends ProxyError {
  override readonly name = 'ProxyInvalidArgumentError';
  constructor(message: string) {
    super('MOCRA_ERR_PROXY_INVALID_ARGUMENT', message);
  }
}

export class ProxyClosedError extends ProxyError {
  override readonly name = 'ProxyClosedError';
  constructor(what = 'proxy pool') {
    super('MOCRA_ERR_PROXY_CLOSED', `the ${what} is closed`);
  }
}
