// The classes are found by walking this module's exports and the code table, not a list kept by
// hand: a class added, renamed or dropped changes what is checked, and a code without a class fails.
import { describe, expect, test } from 'vitest';
import type { CoreErrorCode, MocraErrorOptions, SandboxErrorCode } from './errors.js';
import * as errors from './errors.js';
import { CORE_ERROR_CODES, MocraError } from './errors.js';

/** What the factory puts on a class it builds (SandboxError, written by hand, has neither). */
interface ErrorClass {
  new (...args: never[]): MocraError;
  readonly name: string;
  readonly code?: CoreErrorCode;
  readonly retryable?: boolean | undefined;
}

const classes = Object.entries(errors as Record<string, unknown>).filter(
  (entry): entry is [string, ErrorClass] =>
    typeof entry[1] === 'function' && entry[1].prototype instanceof MocraError,
);

/**
 * Codes raised without a class of their own: the sandbox's five are SandboxError's (it takes the
 * code), the batch buffer raises a plain MocraError, and the API's body errors come from fastify.
 */
const WITHOUT_CLASS = new Set<string>([
  ...Object.keys(CORE_ERROR_CODES).filter((code) => code.startsWith('MOCRA_ERR_SANDBOX_')),
  'MOCRA_ERR_BATCH_CLOSED',
  'MOCRA_ERR_API_BODY_TOO_LARGE',
  'MOCRA_ERR_API_UNSUPPORTED_MEDIA_TYPE',
]);

const cause = new Error('root cause');

interface Sample {
  make: () => MocraError;
  /** Whether `make` hands the error a cause. @default true */
  cause?: boolean;
  /** The `retryable` these arguments give, when the class computes it. */
  retryable?: boolean;
  /** The code, for a class that takes it as an argument. */
  code?: string;
}

/**
 * Arguments for the classes with fields of their own. A class built by the factory alone needs
 * none: it is built as `new X(message, { cause })`.
 */
const samples = new Map<ErrorClass, Sample>([
  [
    errors.MissingDependencyError,
    { make: () => new errors.MissingDependencyError('pg', 'the postgres store', { cause }) },
  ],
  [errors.RetryLaterError, { make: () => new errors.RetryLaterError('come back', 5_000, { cause }) }],
  [errors.QueueClosedError, { make: () => new errors.QueueClosedError('crawl'), cause: false }],
  [
    errors.PayloadTooLargeError,
    { make: () => new errors.PayloadTooLargeError('crawl', 10, 5), cause: false },
  ],
  [errors.QueueDecodeError, { make: () => new errors.QueueDecodeError('crawl', 'bad bytes', { cause }) }],
  [errors.LeaseExpiredError, { make: () => new errors.LeaseExpiredError('crawl', 'd1'), cause: false }],
  [errors.LockLostError, { make: () => new errors.LockLostError('run', 3), cause: false }],
  [
    errors.FencingTokenRejectedError,
    { make: () => new errors.FencingTokenRejectedError('run', 1, 2), cause: false },
  ],
  [errors.QueueEncodeError, { make: () => new errors.QueueEncodeError('crawl', 'a BigInt', { cause }) }],
  [
    errors.InvalidBackendUrlError,
    { make: () => new errors.InvalidBackendUrlError('redis://h:1/x', 'bad db'), cause: false },
  ],
  [
    errors.BackendUnavailableError,
    { make: () => new errors.BackendUnavailableError('redis', 'refused', { cause }) },
  ],
  [errors.QueueDataLostError, { make: () => new errors.QueueDataLostError('redis', 'h:1'), cause: false }],
  [
    errors.CoordinationDataLostError,
    { make: () => new errors.CoordinationDataLostError('redis', 'h:1'), cause: false },
  ],
  [errors.CoordinationClosedError, { make: () => new errors.CoordinationClosedError('redis'), cause: false }],
  [errors.UnknownModuleError, { make: () => new errors.UnknownModuleError('shop', 'list'), cause: false }],
  [errors.InvalidUrlError, { make: () => new errors.InvalidUrlError('ftp://x', 'not http(s)', { cause }) }],
  [errors.TimeoutError, { make: () => new errors.TimeoutError('https://x.test/', 'body', 100, { cause }) }],
  [
    errors.ConnectionError,
    { make: () => new errors.ConnectionError('https://x.test/', 'connect', 'refused', { cause }) },
  ],
  [
    errors.MalformedResponseError,
    { make: () => new errors.MalformedResponseError('https://x.test/', 'short', { cause }) },
  ],
  [
    errors.BodyTooLargeError,
    { make: () => new errors.BodyTooLargeError('https://x.test/', 10, 11, true), cause: false },
  ],
  [
    errors.TooManyRedirectsError,
    { make: () => new errors.TooManyRedirectsError('https://x.test/', 3, ['a']), cause: false },
  ],
  [
    errors.RedirectLoopError,
    { make: () => new errors.RedirectLoopError('https://x.test/', ['a', 'b']), cause: false },
  ],
  [
    errors.ContentDecodingError,
    { make: () => new errors.ContentDecodingError('https://x.test/', 'br', 'bad', { cause }) },
  ],
  [
    errors.TooManyEncodingsError,
    { make: () => new errors.TooManyEncodingsError('https://x.test/', 4, 5), cause: false },
  ],
  [
    errors.TextDecodingError,
    { make: () => new errors.TextDecodingError('https://x.test/', 'utf-8', { cause }) },
  ],
  [
    errors.HttpStatusError,
    { make: () => new errors.HttpStatusError('https://x.test/', 503, 1_000), cause: false },
  ],
  [
    errors.GenerateFailedError,
    { make: () => new errors.GenerateFailedError({ module: 'shop', node: 'list' }, cause) },
  ],
  [
    errors.RunHookFailedError,
    { make: () => new errors.RunHookFailedError({ module: 'shop', hook: 'onRunStart', runId: 'r1' }, cause) },
  ],
  [
    errors.ParseFailedError,
    {
      make: () =>
        new errors.ParseFailedError({ module: 'shop', node: 'list', url: 'https://x.test/' }, cause),
    },
  ],
  [
    errors.SinkFailedError,
    { make: () => new errors.SinkFailedError({ module: 'shop', itemId: 'i1' }, cause) },
  ],
  [errors.ConfigReadError, { make: () => new errors.ConfigReadError('mocra.toml', { cause }) }],
  [errors.ConfigEmptyError, { make: () => new errors.ConfigEmptyError('mocra.toml'), cause: false }],
  [
    errors.ConfigSyntaxError,
    { make: () => new errors.ConfigSyntaxError('mocra.toml', 1, 2, 'bad', { cause }) },
  ],
  [
    errors.ConfigValidationError,
    {
      make: () =>
        new errors.ConfigValidationError([
          { kind: 'type', key: 'a', message: 'bad', source: { kind: 'code' } },
        ]),
      cause: false,
    },
  ],
  [errors.InvalidCronError, { make: () => new errors.InvalidCronError('* *', 'two fields', { cause }) }],
  [errors.LoginFailedError, { make: () => new errors.LoginFailedError('me', 'shop', 3, { cause }) }],
  [
    errors.MiddlewareFailedError,
    {
      make: () => new errors.MiddlewareFailedError('download', 'auth', 'beforeRequest', cause),
      retryable: true,
    },
  ],
  [errors.InvalidModuleError, { make: () => new errors.InvalidModuleError('shop', 'a cycle', { cause }) }],
  [
    errors.UnknownMiddlewareError,
    { make: () => new errors.UnknownMiddlewareError('data', 'clean', "module 'shop'"), cause: false },
  ],
  [
    errors.UnknownDownloaderError,
    { make: () => new errors.UnknownDownloaderError('ws', "module 'shop'", ['http']), cause: false },
  ],
  [errors.DownloaderClosedError, { make: () => new errors.DownloaderClosedError('http'), cause: false }],
  [
    errors.WebSocketConnectError,
    { make: () => new errors.WebSocketConnectError('wss://x.test/', 2, { cause }) },
  ],
  [
    errors.WebSocketClosedError,
    { make: () => new errors.WebSocketClosedError('wss://x.test/', 1006, 'gone', { cause }) },
  ],
  [
    errors.WebSocketOverflowError,
    { make: () => new errors.WebSocketOverflowError('wss://x.test/', 9), cause: false },
  ],
  [
    errors.BrowserLaunchError,
    { make: () => new errors.BrowserLaunchError('/bin/chromium', 'not found', { cause }) },
  ],
  [
    errors.BlockedResponseError,
    { make: () => new errors.BlockedResponseError('https://x.test/', 403, undefined), cause: false },
  ],
  [
    errors.BrowserNavigationError,
    { make: () => new errors.BrowserNavigationError('https://x.test/', 'crashed', { cause }) },
  ],
  [errors.ApiBindError, { make: () => new errors.ApiBindError('127.0.0.1', 80, { cause }) }],
  [errors.ApiRateLimitedError, { make: () => new errors.ApiRateLimitedError(1_500), cause: false }],
  [
    errors.ApiValidationError,
    { make: () => new errors.ApiValidationError([{ path: 'body.x', message: 'bad' }]), cause: false },
  ],
  [errors.ApiNotFoundError, { make: () => new errors.ApiNotFoundError('GET', '/x'), cause: false }],
  [
    errors.ApiHostNotAllowedError,
    { make: () => new errors.ApiHostNotAllowedError('evil.test'), cause: false },
  ],
  [
    errors.HandlerTimeoutError,
    { make: () => new errors.HandlerTimeoutError('parse shop/list', 10), cause: false },
  ],
  [
    errors.CircuitOpenError,
    { make: () => new errors.CircuitOpenError('host', 'x.test', 10), cause: false, retryable: true },
  ],
  [errors.RequestSkippedError, { make: () => new errors.RequestSkippedError('r1', 3, 2), cause: false }],
  [
    errors.ModuleTerminatedError,
    { make: () => new errors.ModuleTerminatedError('shop', 3, 2), cause: false },
  ],
  [errors.TaskTerminatedError, { make: () => new errors.TaskTerminatedError('t1', 3, 2), cause: false }],
  [errors.StalledError, { make: () => new errors.StalledError(61_000, 2), cause: false }],
  [errors.StoreLockedError, { make: () => new errors.StoreLockedError('/tmp/x', { cause }) }],
  [errors.StoreFailedError, { make: () => new errors.StoreFailedError('/tmp/x', 'open', { cause }) }],
  [
    errors.SitemapError,
    { make: () => new errors.SitemapError('https://x.test/s.xml', 'not XML', { cause }) },
  ],
  [
    errors.RemoteNodeFailedError,
    {
      make: () =>
        new errors.RemoteNodeFailedError('g', 'n', 'MOCRA_ERR_TIMEOUT', 'w1', 'timed out', {
          retryable: true,
        }),
      cause: false,
      retryable: true,
    },
  ],
  [
    errors.DataFrameSchemaError,
    { make: () => new errors.DataFrameSchemaError('price', 3, 'not a number'), cause: false },
  ],
  [
    errors.DataFrameWriteError,
    { make: () => new errors.DataFrameWriteError('/tmp/x.parquet', 'disk full', { cause }) },
  ],
  [
    errors.SandboxError,
    {
      make: () => new errors.SandboxError('MOCRA_ERR_SANDBOX_SCRIPT', 'threw', 'at <isolated-vm>', { cause }),
      code: 'MOCRA_ERR_SANDBOX_SCRIPT',
    },
  ],
  [errors.BatchFlushError, { make: () => new errors.BatchFlushError(3, cause) }],
]);

/** The factory's own constructor, `new X(message, options)`. */
function fromMessage(X: ErrorClass, message: string, options: MocraErrorOptions): MocraError {
  return new (X as unknown as new (message: string, options: MocraErrorOptions) => MocraError)(
    message,
    options,
  );
}

describe('core errors', () => {
  test('every code of the table has an exported class, and the codes raised without one are known', () => {
    const raised = new Set(classes.map(([, X]) => X.code).filter((code) => code !== undefined));
    const missing = Object.keys(CORE_ERROR_CODES).filter((code) => !raised.has(code as CoreErrorCode));
    expect(missing.sort()).toEqual([...WITHOUT_CLASS].sort());
  });

  test.each(classes)('%s: name, code, retryable, prototype chain, cause and throw site', (exported, X) => {
    const sample = samples.get(X);
    const err = sample ? sample.make() : fromMessage(X, 'boom', { cause });
    const code = sample?.code ?? X.code;
    expect(code, 'a class that is not in the samples is built by the factory').toBeDefined();
    expect(X.name).toBe(exported);
    expect(err.name).toBe(exported);
    expect(err.code).toBe(code);
    expect(Object.keys(CORE_ERROR_CODES)).toContain(err.code);
    expect(err.retryable).toBe(sample?.retryable ?? X.retryable ?? false);
    expect(err).toBeInstanceOf(X);
    expect(err).toBeInstanceOf(MocraError);
    expect(err).toBeInstanceOf(Error);
    expect(errors.isMocraError(err)).toBe(true);
    if (sample?.cause ?? true) expect(err.cause).toBe(cause);
    // The constructors' frames are left out: the first frame is where the error was made.
    expect(err.stack?.split('\n')[1]).toContain('errors.test.ts');
    expect(err.toJSON()).toMatchObject({ name: exported, code, retryable: err.retryable });
    if (!sample) expect(err.message).toBe('boom');
  });

  test.each(classes.filter(([, X]) => !samples.has(X)))(
    '%s: a retryable fixed by the class ignores the option, any other follows it',
    (_, X) => {
      for (const asked of [true, false]) {
        expect(fromMessage(X, 'boom', { retryable: asked }).retryable).toBe(X.retryable ?? asked);
      }
    },
  );

  test('SandboxError carries every sandbox code of the table', () => {
    const codes = [...WITHOUT_CLASS].filter((code) =>
      code.startsWith('MOCRA_ERR_SANDBOX_'),
    ) as SandboxErrorCode[];
    expect(codes.length).toBe(5);
    for (const code of codes) expect(new errors.SandboxError(code, 'x').code).toBe(code);
  });

  test('the default message of an error built with one', () => {
    expect(new errors.SessionExpiredError().message).toBe('session expired');
    expect(new errors.AbortedError().message).toBe('aborted');
    expect(new errors.ApiKeyNotConfiguredError().message).toContain('no API key is configured');
  });

  test('credentials in a URL never reach the message, built by the factory or by hand', () => {
    expect(new errors.InternalError('fetch https://user:hunter2@x.test/ failed').message).not.toContain(
      'hunter2',
    );
    const err = new errors.InvalidBackendUrlError('redis://user:hunter2@h:1/x', 'bad db');
    expect(err.message).not.toContain('hunter2');
    expect(err.url).toBe('redis://user:hunter2@h:1/x');
  });
});
