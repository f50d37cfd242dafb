/**
 * Every error @mocra/core raises. Each class carries a stable `code` (listed in
 * `docs/errors.md`; a test keeps the table and the docs in step), the `cause` it wraps, and
 * readonly context fields. Errors that steer the engine say what should happen next:
 * {@link NonRetryableError}, {@link RetryLaterError}, {@link CriticalError},
 * {@link SessionExpiredError}.
 *
 * Each class is built by `createError` from its code in {@link CORE_ERROR_CODES}: an error
 * that differs from the others only in code, message and `retryable` is one declaration, and one
 * with fields of its own extends the same base and adds them.
 */

import { redactUrlCredentials } from './redact.js';

/** Every code this package can raise, with the one-line meaning shown in docs/errors.md. */
export const CORE_ERROR_CODES = {
  MOCRA_ERR_INTERNAL: 'An invariant inside mocra broke; please report it.',
  MOCRA_ERR_MISSING_DEPENDENCY:
    'An optional peer dependency (ioredis, kafkajs, nats, pg, playwright-core, nodejs-polars, exceljs, isolated-vm…) is not installed.',
  MOCRA_ERR_INVALID_ARGUMENT: 'A function was called with an argument it cannot use.',
  MOCRA_ERR_NON_RETRYABLE: 'User code declared the failure permanent; the work is not retried.',
  MOCRA_ERR_RETRY_LATER: 'User code asked for the work to be retried after a delay.',
  MOCRA_ERR_CRITICAL: 'User code asked the engine to stop cleanly.',
  MOCRA_ERR_SESSION_EXPIRED: 'The session is gone; the module logs in again before retrying.',
  MOCRA_ERR_QUEUE_CLOSED: 'A queue was used after it was closed.',
  MOCRA_ERR_PAYLOAD_TOO_LARGE: 'A queue message is larger than the backend accepts.',
  MOCRA_ERR_QUEUE_DECODE:
    'A queue message could not be decoded (poison message); it goes to the dead-letter queue.',
  MOCRA_ERR_QUEUE_ENCODE: 'A queue payload cannot be encoded with the configured codec (json or msgpack).',
  MOCRA_ERR_LEASE_EXPIRED: 'A queue delivery was acked, nacked or extended after its lease ended.',
  MOCRA_ERR_LOCK_LOST: 'A fenced lock expired or was taken over before it was renewed or released.',
  MOCRA_ERR_FENCING_REJECTED: 'A write carried a fencing token lower than one the resource has already seen.',
  MOCRA_ERR_BACKEND_URL:
    'A queue or coordination URL is malformed or names an unknown scheme (memory, redis, nats, kafka, local).',
  MOCRA_ERR_BACKEND_UNAVAILABLE:
    'A queue or coordination server (Redis, NATS, Kafka) could not be reached or failed a command.',
  MOCRA_ERR_QUEUE_DATA_LOST:
    "The queue's server came back without the crawl's data (a Redis restarted without persistence, or flushed): the queued work and the dedup set are gone, so the engine stops instead of calling the crawl finished.",
  MOCRA_ERR_COORDINATION_DATA_LOST:
    "The coordination server came back without the crawl's data (a Redis restarted without persistence, or flushed): the run's markers, locks and fencing counters (and the dedup set, when it held it) are gone, so the engine stops instead of waiting forever for a run that can no longer end.",
  MOCRA_ERR_COORDINATION_CLOSED: 'A coordination backend was used after close().',
  MOCRA_ERR_ENGINE_STATE: 'An engine method was called in a state that does not allow it (e.g. run() twice).',
  MOCRA_ERR_UNKNOWN_MODULE: 'A task or follow-up names a module or node that is not registered.',
  MOCRA_ERR_INVALID_URL: 'A request URL is not an absolute http(s) URL (seed, follow-up or redirect target).',
  MOCRA_ERR_TIMEOUT:
    'A download timed out; `phase` says where (connect, headers, body, or request: the deadline of the whole request).',
  MOCRA_ERR_CONNECTION:
    'The connection failed (refused, reset, DNS) or was closed before the response headers arrived.',
  MOCRA_ERR_MALFORMED_RESPONSE:
    'The response broke HTTP framing: invalid chunked encoding, or the body ended before its Content-Length or last chunk.',
  MOCRA_ERR_BODY_TOO_LARGE:
    'A response body (after decompression) exceeded the size cap; the download was stopped.',
  MOCRA_ERR_TOO_MANY_REDIRECTS: 'A redirect chain was longer than the redirect limit.',
  MOCRA_ERR_REDIRECT_LOOP: 'A redirect pointed back to a URL already in its chain.',
  MOCRA_ERR_CONTENT_DECODING:
    'A body claimed a Content-Encoding (gzip, deflate, br) that it does not decode with, or one mocra does not support.',
  MOCRA_ERR_TOO_MANY_ENCODINGS:
    'A response stacked more content-codings than the downloader decodes (`maxContentCodings`, default 4); it is not decoded and not retried.',
  MOCRA_ERR_TEXT_DECODING: 'Strict text decoding met bytes that are invalid in the detected charset.',
  MOCRA_ERR_HTTP_STATUS:
    'A response had a retryable status (429, 5xx…) and retries remain; the request is retried.',
  MOCRA_ERR_ABORTED: 'The work was aborted (engine shutdown or an abort signal); it is put back, not lost.',
  MOCRA_ERR_GENERATE_FAILED: "A node's generate (a spider's start) threw.",
  MOCRA_ERR_RUN_HOOK_FAILED:
    "A module's onRunStart threw (the task fails like a generate that threw: dead-lettered; throw RetryLaterError to have it retried), or its onRunEnd threw (logged with the stack; the run is over).",
  MOCRA_ERR_PARSE_FAILED: "A node's parse threw.",
  MOCRA_ERR_SINK_FAILED: 'A data sink threw while writing an item.',
  // ── config, schedule, session, middleware ──────────────────────────────────────
  MOCRA_ERR_CONFIG_READ: 'A config file could not be read (missing, unreadable, not a file).',
  MOCRA_ERR_CONFIG_EMPTY:
    'On a hot reload the config file held no settings (0 bytes, or only blanks and comments), as a save in progress or a truncated write leaves it; the running config stays.',
  MOCRA_ERR_CONFIG_SYNTAX: 'A config file is not valid TOML; the error gives the line and column.',
  MOCRA_ERR_CONFIG_INVALID:
    'Config failed validation (unknown key, wrong type or bad value); each issue names the key and where it was set (file:line:column, environment variable, code or module-config layer).',
  MOCRA_ERR_CRON_EXPRESSION:
    'A cron schedule is invalid (not 5 or 6 fields, a value out of range, a bad every(...) argument).',
  MOCRA_ERR_LOGIN_FAILED: "A module's login did not succeed within its bounded number of attempts.",
  MOCRA_ERR_MIDDLEWARE_FAILED: 'A download, data or store middleware threw; the work takes the retry path.',
  MOCRA_ERR_UNKNOWN_MIDDLEWARE: 'A module or request selects a middleware by a name that is not registered.',
  MOCRA_ERR_INVALID_MODULE:
    'A module definition is invalid: its node graph has a cycle, an edge to an unknown node or a duplicate node id, or its cron or login settings are unusable.',
  // ── downloaders: registry, WebSocket, browser ──────────────────────────────────
  MOCRA_ERR_UNKNOWN_DOWNLOADER: 'A module or request selects a downloader by a name that is not registered.',
  MOCRA_ERR_DOWNLOADER_CLOSED:
    'A downloader (or its connection manager or page pool) was used after close().',
  MOCRA_ERR_WEBSOCKET_CONNECT:
    'A WebSocket connection could not be opened (refused, handshake rejected, timed out) within its reconnect attempts.',
  MOCRA_ERR_WEBSOCKET_CLOSED:
    'A WebSocket connection closed abnormally (or with an error code) and was not, or could no longer be, reconnected.',
  MOCRA_ERR_WEBSOCKET_OVERFLOW:
    'More inbound WebSocket messages were waiting than the receive buffer holds; the connection was closed.',
  MOCRA_ERR_BROWSER_LAUNCH:
    'Chromium could not be started (executable missing or not runnable, or it crashed on launch).',
  MOCRA_ERR_BROWSER_NAVIGATION:
    'A browser page failed to load or render (navigation error, page crash, a wait-for function that threw).',
  MOCRA_ERR_BLOCKED:
    'The target refused this exit (403, 429, a captcha page) and blocked responses are retried (`blocked.retry`); the request is retried on another exit.',
  // ── control-plane HTTP API ──────────────────────────────────────────────────────
  MOCRA_ERR_API_BIND:
    'The control API could not listen on its host and port (in use, not permitted, unknown host); start-up stops and nothing is left running.',
  MOCRA_ERR_API_UNAUTHORIZED:
    'An authenticated API endpoint was called without the API key or with a wrong one (HTTP 401).',
  MOCRA_ERR_API_KEY_NOT_CONFIGURED:
    'An authenticated API endpoint was called but no API key is configured, so those endpoints are disabled (HTTP 403).',
  MOCRA_ERR_API_RATE_LIMITED:
    'A key (or, for failed logins, a client address) exceeded the API rate limit; retry after Retry-After (HTTP 429).',
  MOCRA_ERR_API_VALIDATION:
    'An API request body or query string is invalid; `issues` lists each problem with its path (HTTP 400).',
  MOCRA_ERR_API_NOT_FOUND: 'No API endpoint matches the method and path (HTTP 404).',
  MOCRA_ERR_API_HOST_NOT_ALLOWED:
    'An API request named a host (the `Host` header) that is not the bind address, localhost, an IP address or one of `[api] allowed_hosts`; refused so that a web page cannot reach the API through DNS rebinding (HTTP 421).',
  MOCRA_ERR_API_BODY_TOO_LARGE: 'An API request body is larger than the body limit (HTTP 413).',
  MOCRA_ERR_API_UNSUPPORTED_MEDIA_TYPE: 'An API request body is not JSON (HTTP 415).',
  MOCRA_ERR_API_UNAVAILABLE:
    'The API cannot answer now: what it asks (metrics, logs, a queue backend) is not configured, failed or timed out (HTTP 503).',
  // ── failure policy, thresholds, breakers, watchdog ────────────────────────────
  MOCRA_ERR_HANDLER_TIMEOUT:
    'A stage handler (download, parse, generate, store…) did not finish within its deadline; it was aborted and the work takes the retry path.',
  MOCRA_ERR_CIRCUIT_OPEN:
    'The circuit breaker of a host or module is open after repeated failures; the work waits until the breaker lets a probe through.',
  MOCRA_ERR_REQUEST_SKIPPED:
    'A request failed more often than the per-request error limit allows; it is given up (dead-lettered) and the crawl goes on.',
  MOCRA_ERR_MODULE_TERMINATED:
    'A module failed more often than the per-module error limit allows; its remaining work is dead-lettered and it takes no new work.',
  MOCRA_ERR_TASK_TERMINATED:
    'A task (one run of a module) failed more often than the per-task error limit allows; its remaining work is dead-lettered.',
  MOCRA_ERR_STALLED:
    'No stage made progress for the stall window while work was pending; reported loudly (log, channel) so a hung crawl is seen.',
  // ── frontier: stores, robots.txt, sitemaps ─────────────────────────────────────
  MOCRA_ERR_STORE_LOCKED:
    'A LevelDB directory (a persisted frontier, dedup set or queue) is held by another process; stop that process or use another directory.',
  MOCRA_ERR_STORE_FAILED:
    'A LevelDB store (the on-disk dedup set or spilled queue) could not be opened, read or written (disk full, permissions, corruption).',
  MOCRA_ERR_SITEMAP:
    'A sitemap could not be fetched or read (HTTP error, not XML or text, bad gzip, over the size or URL limits); the crawl goes on without it.',
  // ── cluster: distributed DAG runs ─────────────────────────────────────────────
  MOCRA_ERR_REMOTE_NODE_FAILED:
    'A DAG node placed on another node of the cluster failed there; the error carries the remote code and whether a retry may help.',
  // ── data tools: DataFrames, workbooks, the script sandbox, batches ─────────────
  MOCRA_ERR_DATAFRAME_SCHEMA:
    'An item does not fit the DataFrame schema (a column it lacks that is not nullable, a column the schema has not, or a value of another type); `column` and `row` say where.',
  MOCRA_ERR_DATAFRAME_WRITE:
    'A DataFrame store could not write a batch or combine its parts into the output file.',
  MOCRA_ERR_WORKBOOK_READ:
    'A workbook could not be read: not an xlsx file, damaged, a legacy .xls file (not supported), or a sheet that does not exist.',
  MOCRA_ERR_SANDBOX_TIMEOUT:
    'Sandboxed page code ran past its time limit and was stopped; the runtime stays usable.',
  MOCRA_ERR_SANDBOX_MEMORY:
    'Sandboxed page code went over its memory limit; its isolate was disposed (a pool replaces it).',
  MOCRA_ERR_SANDBOX_SCRIPT:
    'Sandboxed page code threw or did not compile; the message and stack come from inside the sandbox.',
  MOCRA_ERR_SANDBOX_VALUE:
    'A value passed into or out of the sandbox is not JSON-safe (a function, a symbol, a cycle, a BigInt).',
  MOCRA_ERR_SANDBOX_CLOSED:
    'A sandbox runtime or worker pool was used after close() (or after its isolate was disposed).',
  MOCRA_ERR_BATCH_FLUSH:
    "A batch buffer's flush function threw; the batch is not counted as flushed and later calls throw.",
  MOCRA_ERR_BATCH_CLOSED: 'An item was added to a batch buffer after close().',
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
    // Messages go to logs, records, the DLQ and the API: a URL's credentials never do.
    super(redactUrlCredentials(message), options.cause === undefined ? undefined : { cause: options.cause });
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

/**
 * A server the crawl depends on came back without the crawl's data (QueueDataLostError,
 * CoordinationDataLostError): the run must stop, not wait or end as if it were done.
 */
export function isDataLost(err: unknown): err is MocraError {
  return (
    isMocraError(err) &&
    (err.code === 'MOCRA_ERR_QUEUE_DATA_LOST' || err.code === 'MOCRA_ERR_COORDINATION_DATA_LOST')
  );
}

type CauseOptions = Omit<MocraErrorOptions, 'retryable'>;

/** What `createError` needs beyond the name and the code. */
interface ErrorSpec<TRetryable extends boolean | undefined, TMessage extends string | undefined> {
  /** Fixes `retryable` for every instance; left out, the thrower's option decides. @default undefined */
  retryable?: TRetryable;
  /** The message when the thrower gives none; left out, a message is required. @default undefined */
  message?: TMessage;
}

/** The class `createError` builds: `new X(message, options)`, with its code and fixed `retryable`. */
interface CoreErrorClass<TName extends string, TArgs extends unknown[]> {
  new (...args: TArgs): MocraError & { readonly name: TName };
  readonly code: CoreErrorCode;
  /** The `retryable` of every instance, or undefined when the thrower decides (default false). */
  readonly retryable: boolean | undefined;
}

type ErrorArgs<TRetryable, TMessage> = [
  ...(TMessage extends string ? [message?: string] : [message: string]),
  // A fixed `retryable` is no option: the type refuses what the constructor would ignore.
  options?: [TRetryable] extends [boolean] ? CauseOptions : MocraErrorOptions,
];

/**
 * The base class of one error of {@link CORE_ERROR_CODES}, as fastify's `createError` builds its
 * errors: `class XError extends createError('XError', CODE) {}`. `name` is passed, not read from
 * the class, so it survives minifiers. V8 leaves the constructors out of the stack, which starts
 * where the error was made.
 */
function createError<
  const TName extends string,
  TRetryable extends boolean | undefined = undefined,
  TMessage extends string | undefined = undefined,
>(
  name: TName,
  code: CoreErrorCode,
  spec: ErrorSpec<TRetryable, TMessage> = {},
): CoreErrorClass<TName, ErrorArgs<TRetryable, TMessage>> {
  const { retryable, message: fallback } = spec;
  const ErrorClass = class extends MocraError {
    static readonly code = code;
    static readonly retryable = retryable;
    override readonly name = name;
    constructor(message: string | undefined = fallback, options: MocraErrorOptions = {}) {
      super(code, message ?? '', retryable === undefined ? options : { ...options, retryable });
    }
  };
  Object.defineProperty(ErrorClass, 'name', { value: name });
  // The one constructor serves every spec; the cast gives each error the narrower signature its spec implies.
  return ErrorClass as unknown as CoreErrorClass<TName, ErrorArgs<TRetryable, TMessage>>;
}

function truncate(text: string, max = 200): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** `: <cause's message>`, or nothing without a cause. */
function causeSuffix(cause: unknown): string {
  return cause === undefined ? '' : `: ${describe(cause)}`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

export class InternalError extends createError('InternalError', 'MOCRA_ERR_INTERNAL') {}

export class InvalidArgumentError extends createError('InvalidArgumentError', 'MOCRA_ERR_INVALID_ARGUMENT') {}

/** An optional integration was used but its package is not installed. */
export class MissingDependencyError extends createError(
  'MissingDependencyError',
  'MOCRA_ERR_MISSING_DEPENDENCY',
) {
  constructor(
    readonly packageName: string,
    readonly feature: string,
    options: MocraErrorOptions = {},
  ) {
    super(
      `${feature} needs the optional package '${packageName}'; install it with: pnpm add ${packageName}`,
      options,
    );
  }
}

/** Throw from user code when retrying cannot help (a 404 that will stay a 404, a page that is not a product). */
export class NonRetryableError extends createError('NonRetryableError', 'MOCRA_ERR_NON_RETRYABLE', {
  retryable: false,
}) {}

/** Throw from user code to have the work retried after `delayMs` (e.g. the site said "come back later"). */
export class RetryLaterError extends createError('RetryLaterError', 'MOCRA_ERR_RETRY_LATER', {
  retryable: true,
}) {
  constructor(
    message: string,
    readonly delayMs: number,
    options: CauseOptions = {},
  ) {
    super(message, options);
  }
}

/** Throw from user code to stop the engine cleanly: in-flight work drains, nothing acknowledged is lost. */
export class CriticalError extends createError('CriticalError', 'MOCRA_ERR_CRITICAL', { retryable: false }) {}

/** Throw from user code (or let the session check raise it) when the login session is gone. */
export class SessionExpiredError extends createError('SessionExpiredError', 'MOCRA_ERR_SESSION_EXPIRED', {
  retryable: true,
  message: 'session expired',
}) {}

export class QueueClosedError extends createError('QueueClosedError', 'MOCRA_ERR_QUEUE_CLOSED') {
  constructor(readonly topic: string) {
    super(`queue '${topic}' is closed`);
  }
}

export class PayloadTooLargeError extends createError('PayloadTooLargeError', 'MOCRA_ERR_PAYLOAD_TOO_LARGE') {
  constructor(
    readonly topic: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`message for '${topic}' is ${bytes} bytes; the backend accepts at most ${limit}`);
  }
}

export class QueueDecodeError extends createError('QueueDecodeError', 'MOCRA_ERR_QUEUE_DECODE') {
  constructor(
    readonly topic: string,
    message: string,
    options: MocraErrorOptions = {},
  ) {
    super(`cannot decode a message on '${topic}': ${message}`, options);
  }
}

export class LeaseExpiredError extends createError('LeaseExpiredError', 'MOCRA_ERR_LEASE_EXPIRED') {
  constructor(
    readonly topic: string,
    readonly deliveryId: string,
  ) {
    super(`the lease on delivery ${deliveryId} of '${topic}' has ended; it will be (or was) delivered again`);
  }
}

export class LockLostError extends createError('LockLostError', 'MOCRA_ERR_LOCK_LOST') {
  constructor(
    readonly lock: string,
    readonly token: number,
  ) {
    super(`lock '${lock}' (token ${token}) expired or was taken over`);
  }
}

export class FencingTokenRejectedError extends createError(
  'FencingTokenRejectedError',
  'MOCRA_ERR_FENCING_REJECTED',
) {
  constructor(
    readonly resource: string,
    readonly token: number,
    readonly highest: number,
  ) {
    super(`'${resource}' rejected fencing token ${token}; it has seen ${highest}`);
  }
}

// ── queue and coordination backends ─────────────────────────────────────────────

/** A payload the codec cannot encode (a BigInt or a cycle with JSON, a function with either codec). */
export class QueueEncodeError extends createError('QueueEncodeError', 'MOCRA_ERR_QUEUE_ENCODE') {
  constructor(
    readonly topic: string,
    message: string,
    options: MocraErrorOptions = {},
  ) {
    super(`cannot encode a message for '${topic}': ${message}`, options);
  }
}

/** A backend URL (`redis://…`, `nats://…`, `kafka://…`, `memory://`, `local://`) that cannot be used. */
export class InvalidBackendUrlError extends createError('InvalidBackendUrlError', 'MOCRA_ERR_BACKEND_URL') {
  constructor(
    readonly url: string,
    reason: string,
  ) {
    super(`invalid backend URL '${url}': ${reason}`);
  }
}

/**
 * The server behind a queue or coordination backend failed: not reachable, connection dropped,
 * a command refused. Retryable: the work it was part of can be tried again later.
 */
export class BackendUnavailableError extends createError(
  'BackendUnavailableError',
  'MOCRA_ERR_BACKEND_UNAVAILABLE',
  {
    retryable: true,
  },
) {
  constructor(
    readonly backend: string,
    message: string,
    options: CauseOptions = {},
  ) {
    super(`${backend}: ${message}`, options);
  }
}

/** Stops the engine (see the code table): what the server held for this crawl is gone. */
export class QueueDataLostError extends createError('QueueDataLostError', 'MOCRA_ERR_QUEUE_DATA_LOST', {
  retryable: false,
}) {
  constructor(
    readonly backend: string,
    readonly server: string,
  ) {
    super(
      `${backend}: ${server} came back without this crawl's queues (restarted without persistence, or flushed); the work queued there is lost — start the crawl again (with an output file it resumes from what was written)`,
    );
  }
}

/** Stops the engine (see the code table): what the coordination server held for this crawl is gone. */
export class CoordinationDataLostError extends createError(
  'CoordinationDataLostError',
  'MOCRA_ERR_COORDINATION_DATA_LOST',
  { retryable: false },
) {
  constructor(
    readonly backend: string,
    readonly server: string,
  ) {
    super(
      `${backend}: ${server} came back without this crawl's coordination data (restarted without persistence, or flushed); the run's markers and locks are lost — start the crawl again (with an output file it resumes from what was written)`,
    );
  }
}

export class CoordinationClosedError extends createError(
  'CoordinationClosedError',
  'MOCRA_ERR_COORDINATION_CLOSED',
) {
  constructor(readonly backend: string) {
    super(`the ${backend} coordination backend is closed`);
  }
}

// ── engine, download and user-code errors ───────────────────────────────────────

/** An engine method was called in a state that does not allow it (run twice, register after start). */
export class EngineStateError extends createError('EngineStateError', 'MOCRA_ERR_ENGINE_STATE', {
  retryable: false,
}) {}

/** A task or follow-up names a module (or a node of a module) that is not registered. */
export class UnknownModuleError extends createError('UnknownModuleError', 'MOCRA_ERR_UNKNOWN_MODULE') {
  constructor(
    readonly module: string,
    readonly node?: string,
  ) {
    super(
      node === undefined ? `no module '${module}' is registered` : `module '${module}' has no node '${node}'`,
    );
  }
}

/** A URL that cannot be fetched: not parseable, relative without a base, or not http(s). */
export class InvalidUrlError extends createError('InvalidUrlError', 'MOCRA_ERR_INVALID_URL', {
  retryable: false,
}) {
  constructor(
    readonly url: string,
    reason: string,
    options: MocraErrorOptions = {},
  ) {
    super(`invalid URL '${truncate(url)}': ${reason}`, options);
  }
}

/** Where in a download a timeout struck; `request` is the deadline of the whole request. */
export type TimeoutPhase = 'connect' | 'headers' | 'body' | 'request';

export class TimeoutError extends createError('TimeoutError', 'MOCRA_ERR_TIMEOUT', { retryable: true }) {
  constructor(
    readonly url: string,
    readonly phase: TimeoutPhase,
    readonly timeoutMs: number | undefined,
    options: CauseOptions = {},
  ) {
    super(
      `${phase} timeout${timeoutMs === undefined ? '' : ` (${timeoutMs} ms)`} for ${truncate(url)}`,
      options,
    );
  }
}

/** Where in a download a connection broke. */
export type ConnectionPhase = 'connect' | 'headers' | 'body';

export class ConnectionError extends createError('ConnectionError', 'MOCRA_ERR_CONNECTION', {
  retryable: true,
}) {
  constructor(
    readonly url: string,
    readonly phase: ConnectionPhase,
    message: string,
    options: CauseOptions = {},
  ) {
    super(`connection failed (${phase}) for ${truncate(url)}: ${message}`, options);
  }
}

/** The server broke HTTP framing: bad chunked encoding, or fewer bytes than Content-Length promised. */
export class MalformedResponseError extends createError(
  'MalformedResponseError',
  'MOCRA_ERR_MALFORMED_RESPONSE',
  {
    retryable: true,
  },
) {
  constructor(
    readonly url: string,
    message: string,
    options: CauseOptions = {},
  ) {
    super(`malformed response from ${truncate(url)}: ${message}`, options);
  }
}

export class BodyTooLargeError extends createError('BodyTooLargeError', 'MOCRA_ERR_BODY_TOO_LARGE') {
  constructor(
    readonly url: string,
    readonly limit: number,
    /** Bytes seen when the download stopped (or the announced Content-Length). */
    readonly received: number,
    /** True when the cap was hit on decompressed bytes (a compression bomb, typically). */
    readonly decoded: boolean,
  ) {
    super(
      `body of ${truncate(url)} exceeds the ${limit}-byte cap (${received}${decoded ? ' decoded' : ''} bytes so far)`,
    );
  }
}

export class TooManyRedirectsError extends createError(
  'TooManyRedirectsError',
  'MOCRA_ERR_TOO_MANY_REDIRECTS',
) {
  constructor(
    readonly url: string,
    readonly limit: number,
    readonly chain: readonly string[],
  ) {
    super(`more than ${limit} redirects starting at ${truncate(url)}`);
  }
}

export class RedirectLoopError extends createError('RedirectLoopError', 'MOCRA_ERR_REDIRECT_LOOP') {
  constructor(
    readonly url: string,
    readonly chain: readonly string[],
  ) {
    super(`redirect loop: ${chain.map((u) => truncate(u)).join(' → ')} → ${truncate(url)}`);
  }
}

export class ContentDecodingError extends createError('ContentDecodingError', 'MOCRA_ERR_CONTENT_DECODING') {
  constructor(
    readonly url: string,
    readonly encoding: string,
    message: string,
    options: CauseOptions = {},
  ) {
    super(`cannot decode '${encoding}' body of ${truncate(url)}: ${message}`, options);
  }
}

/** More content-codings than the limit: each layer costs a full decode, so the count is capped before any runs. */
export class TooManyEncodingsError extends createError(
  'TooManyEncodingsError',
  'MOCRA_ERR_TOO_MANY_ENCODINGS',
) {
  constructor(
    readonly url: string,
    readonly limit: number,
    readonly count: number,
  ) {
    super(`body of ${truncate(url)} has ${count} content-codings; at most ${limit} are decoded`);
  }
}

export class TextDecodingError extends createError('TextDecodingError', 'MOCRA_ERR_TEXT_DECODING') {
  constructor(
    readonly url: string,
    readonly charset: string,
    options: CauseOptions = {},
  ) {
    super(`body of ${truncate(url)} is not valid ${charset}`, options);
  }
}

/** A retryable status (429, 503, …) while retries remain. After the last retry the response reaches parse. */
export class HttpStatusError extends createError('HttpStatusError', 'MOCRA_ERR_HTTP_STATUS', {
  retryable: true,
}) {
  constructor(
    readonly url: string,
    readonly status: number,
    /** From a Retry-After header, when the server sent one. */
    readonly retryAfterMs: number | undefined,
  ) {
    super(`HTTP ${status} from ${truncate(url)}`);
  }
}

export class AbortedError extends createError('AbortedError', 'MOCRA_ERR_ABORTED', {
  retryable: true,
  message: 'aborted',
}) {}

/** Which user hook failed, with where it ran. */
interface UserCodeContext {
  module: string;
  node: string;
  url?: string;
}

export class GenerateFailedError extends createError('GenerateFailedError', 'MOCRA_ERR_GENERATE_FAILED') {
  readonly module: string;
  readonly node: string;
  constructor(context: UserCodeContext, cause: unknown) {
    super(`generate of ${context.module}/${context.node} threw: ${describe(cause)}`, { cause });
    this.module = context.module;
    this.node = context.node;
  }
}

/** A module's `onRunStart` or `onRunEnd` threw. */
export class RunHookFailedError extends createError('RunHookFailedError', 'MOCRA_ERR_RUN_HOOK_FAILED') {
  readonly module: string;
  readonly hook: 'onRunStart' | 'onRunEnd';
  readonly runId: string;
  constructor(context: { module: string; hook: 'onRunStart' | 'onRunEnd'; runId: string }, cause: unknown) {
    super(`${context.hook} of ${context.module} (run ${context.runId}) threw: ${describe(cause)}`, { cause });
    this.module = context.module;
    this.hook = context.hook;
    this.runId = context.runId;
  }
}

export class ParseFailedError extends createError('ParseFailedError', 'MOCRA_ERR_PARSE_FAILED') {
  readonly module: string;
  readonly node: string;
  readonly url: string | undefined;
  constructor(context: UserCodeContext, cause: unknown) {
    const where = context.url ? ` (${truncate(context.url)})` : '';
    super(`parse of ${context.module}/${context.node}${where} threw: ${describe(cause)}`, { cause });
    this.module = context.module;
    this.node = context.node;
    this.url = context.url;
  }
}

/** A sink's `write` threw. Retried (the parse runs again; items keep their `itemId`). */
export class SinkFailedError extends createError('SinkFailedError', 'MOCRA_ERR_SINK_FAILED', {
  retryable: true,
}) {
  readonly module: string;
  readonly itemId: string;
  constructor(context: { module: string; itemId: string }, cause: unknown) {
    super(`sink of ${context.module} failed on item ${context.itemId}: ${describe(cause)}`, { cause });
    this.module = context.module;
    this.itemId = context.itemId;
  }
}

// ── config, schedule, session, middleware ───────────────────────────────────────

/** Where a config value was set: a file position, an environment variable, code, or a module-config layer. */
export type ConfigIssueSource =
  | { kind: 'file'; file: string; line: number; column: number }
  | { kind: 'env'; variable: string }
  | { kind: 'code' }
  | { kind: 'layer'; layer: string };

/** One problem found while validating config. */
export interface ConfigIssue {
  /** `unknown-key`: not in the schema; `type`: the wrong kind of value; `value`: right kind, bad value. */
  kind: 'unknown-key' | 'type' | 'value';
  /** Dotted key as written, with `[n]` for array elements: `crawler.task_concurrency`, `tasks[1].account`. */
  key: string;
  message: string;
  source: ConfigIssueSource;
}

/** `config.toml:3:1`, `env MOCRA_X`, `code`, `module config (platform)`. */
export function formatConfigIssueSource(source: ConfigIssueSource): string {
  switch (source.kind) {
    case 'file':
      return `${source.file}:${source.line}:${source.column}`;
    case 'env':
      return `env ${source.variable}`;
    case 'code':
      return 'code';
    case 'layer':
      return `module config (${source.layer})`;
  }
}

/** A config file that cannot be read. */
export class ConfigReadError extends createError('ConfigReadError', 'MOCRA_ERR_CONFIG_READ') {
  constructor(
    readonly file: string,
    options: CauseOptions = {},
  ) {
    super(`cannot read config file ${file}${causeSuffix(options.cause)}`, options);
  }
}

/** On a hot reload, a config file with no settings: refused, since applying it would reset every key. */
export class ConfigEmptyError extends createError('ConfigEmptyError', 'MOCRA_ERR_CONFIG_EMPTY') {
  constructor(readonly file: string) {
    super(
      `config file ${file} holds no settings (empty, or only comments): not applied, the running config stays`,
    );
  }
}

/** A config file that is not valid TOML. `line` and `column` are 1-based. */
export class ConfigSyntaxError extends createError('ConfigSyntaxError', 'MOCRA_ERR_CONFIG_SYNTAX') {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly column: number,
    reason: string,
    options: CauseOptions = {},
  ) {
    super(`${file}:${line}:${column}: invalid TOML: ${reason}`, options);
  }
}

/** Config that does not match the schema. Every problem found is listed, so one pass fixes them all. */
export class ConfigValidationError extends createError('ConfigValidationError', 'MOCRA_ERR_CONFIG_INVALID') {
  readonly issues: readonly ConfigIssue[];
  constructor(issues: readonly ConfigIssue[]) {
    const lines = issues.map((i) => `${formatConfigIssueSource(i.source)} ${i.key}: ${i.message}`);
    super(lines.length === 1 ? `invalid config: ${lines[0]}` : `invalid config:\n  ${lines.join('\n  ')}`);
    this.issues = issues;
  }
}

/** A cron expression or `every(...)` schedule that cannot be used. */
export class InvalidCronError extends createError('InvalidCronError', 'MOCRA_ERR_CRON_EXPRESSION') {
  constructor(
    readonly expression: string,
    reason: string,
    options: CauseOptions = {},
  ) {
    super(`invalid cron schedule '${expression}': ${reason}`, options);
  }
}

/** Login of an account × platform session failed `attempts` times in a row. Not retried by itself. */
export class LoginFailedError extends createError('LoginFailedError', 'MOCRA_ERR_LOGIN_FAILED') {
  constructor(
    readonly account: string,
    readonly platform: string,
    readonly attempts: number,
    options: CauseOptions = {},
  ) {
    super(
      `login of ${account}@${platform} failed after ${plural(attempts, 'attempt')}${causeSuffix(options.cause)}`,
      options,
    );
  }
}

export type MiddlewareKind = 'download' | 'data' | 'store';
export type MiddlewarePhase =
  | 'beforeRequest'
  | 'afterResponse'
  | 'handle'
  | 'beforeStore'
  | 'store'
  | 'afterStore';

/**
 * A middleware threw. Retryable unless the middleware threw a non-retryable mocra error (then
 * that error's `retryable` is kept), so the work takes the same retry path as a failed download.
 */
export class MiddlewareFailedError extends createError(
  'MiddlewareFailedError',
  'MOCRA_ERR_MIDDLEWARE_FAILED',
) {
  constructor(
    readonly kind: MiddlewareKind,
    readonly middleware: string,
    readonly phase: MiddlewarePhase,
    cause: unknown,
  ) {
    super(`${kind} middleware '${middleware}' failed in ${phase}: ${describe(cause)}`, {
      cause,
      retryable: isMocraError(cause) ? cause.retryable : true,
    });
  }
}

/** A module that cannot run as defined (names the module; `cause` holds the graph error, if any). */
export class InvalidModuleError extends createError('InvalidModuleError', 'MOCRA_ERR_INVALID_MODULE') {
  constructor(
    readonly module: string,
    reason: string,
    options: CauseOptions = {},
  ) {
    super(`module '${module}': ${reason}`, options);
  }
}

export class UnknownMiddlewareError extends createError(
  'UnknownMiddlewareError',
  'MOCRA_ERR_UNKNOWN_MIDDLEWARE',
) {
  constructor(
    readonly kind: MiddlewareKind,
    readonly middleware: string,
    /** Who selected it: `module 'x'` or `request <url>`. */
    readonly selectedBy: string,
  ) {
    super(`${selectedBy} selects ${kind} middleware '${middleware}', which is not registered`);
  }
}

// ── downloaders: registry, WebSocket, browser ───────────────────────────────────

/** A module or request names a downloader that was never registered. Not retryable: a typo stays a typo. */
export class UnknownDownloaderError extends createError(
  'UnknownDownloaderError',
  'MOCRA_ERR_UNKNOWN_DOWNLOADER',
) {
  constructor(
    readonly downloader: string,
    /** Who selected it: `module 'x'` or `request <url>`. */
    readonly selectedBy: string,
    /** The names that are registered, for the message. */
    readonly known: readonly string[],
  ) {
    const names = known.length === 0 ? 'none' : known.join(', ');
    super(`${selectedBy} selects downloader '${downloader}', which is not registered (known: ${names})`);
  }
}

/** A downloader, WebSocket manager or browser page pool was used after `close()`. */
export class DownloaderClosedError extends createError(
  'DownloaderClosedError',
  'MOCRA_ERR_DOWNLOADER_CLOSED',
) {
  constructor(readonly downloader: string) {
    super(`${downloader} is closed`);
  }
}

/** A WebSocket could not be opened, after `attempts` tries. Retryable: the server may come back. */
export class WebSocketConnectError extends createError(
  'WebSocketConnectError',
  'MOCRA_ERR_WEBSOCKET_CONNECT',
  {
    retryable: true,
  },
) {
  constructor(
    readonly url: string,
    readonly attempts: number,
    options: CauseOptions = {},
  ) {
    super(
      `cannot open WebSocket ${truncate(url)} (${plural(attempts, 'attempt')})${causeSuffix(options.cause)}`,
      options,
    );
  }
}

/**
 * A WebSocket closed in a way that ends its work with an error: an abnormal close (1006) once the
 * reconnect attempts ran out, or a close code that says reconnecting cannot help (1002, 1003,
 * 1007–1010, application codes). Retryable only when the close was abnormal.
 */
export class WebSocketClosedError extends createError('WebSocketClosedError', 'MOCRA_ERR_WEBSOCKET_CLOSED') {
  constructor(
    readonly url: string,
    readonly closeCode: number,
    readonly reason: string,
    options: MocraErrorOptions = {},
  ) {
    super(
      `WebSocket ${truncate(url)} closed with ${closeCode}${reason ? ` (${truncate(reason, 120)})` : ''}`,
      options,
    );
  }
}

/** The receive buffer of a WebSocket connection filled up: its consumer is slower than the server. */
export class WebSocketOverflowError extends createError(
  'WebSocketOverflowError',
  'MOCRA_ERR_WEBSOCKET_OVERFLOW',
  {
    retryable: true,
  },
) {
  constructor(
    readonly url: string,
    readonly limit: number,
  ) {
    super(
      `more than ${limit} inbound messages of WebSocket ${truncate(url)} were waiting; the connection was closed`,
    );
  }
}

/** Chromium did not start: the executable is missing or not runnable, or it crashed while launching. */
export class BrowserLaunchError extends createError('BrowserLaunchError', 'MOCRA_ERR_BROWSER_LAUNCH') {
  constructor(
    readonly executablePath: string,
    message: string,
    options: CauseOptions = {},
  ) {
    super(`cannot launch Chromium at ${executablePath}: ${message}`, options);
  }
}

/**
 * The response was judged blocked (403, 429, a captcha page) and `blocked.retry` is on: the
 * request is retried, on another exit or tier, instead of the page reaching parse.
 */
export class BlockedResponseError extends createError('BlockedResponseError', 'MOCRA_ERR_BLOCKED', {
  retryable: true,
}) {
  constructor(
    readonly url: string,
    readonly status: number,
    /** The proxy it came through (password masked), or undefined for a direct request. */
    readonly proxy: string | undefined,
  ) {
    super(
      `${truncate(url)} answered ${status} as a block${proxy === undefined ? ' (direct)' : ` through ${proxy}`}`,
    );
  }
}

/** A page failed to load or render. Retryable unless the navigation was refused for good (a bad URL). */
export class BrowserNavigationError extends createError(
  'BrowserNavigationError',
  'MOCRA_ERR_BROWSER_NAVIGATION',
) {
  constructor(
    readonly url: string,
    message: string,
    options: MocraErrorOptions = {},
  ) {
    super(`browser could not render ${truncate(url)}: ${message}`, options);
  }
}

// ── control-plane HTTP API ──────────────────────────────────────────────────────

/** The control API could not bind. Start-up fails with this; the server is closed, nothing half-runs. */
export class ApiBindError extends createError('ApiBindError', 'MOCRA_ERR_API_BIND') {
  constructor(
    readonly host: string,
    readonly port: number,
    options: CauseOptions = {},
  ) {
    super(`the control API cannot listen on ${host}:${port}: ${bindReason(options.cause)}`, options);
  }
}

function bindReason(cause: unknown): string {
  const code = cause instanceof Error ? (cause as Error & { code?: unknown }).code : undefined;
  if (code === 'EADDRINUSE') return 'the port is already in use (by another process, or another engine)';
  if (code === 'EACCES') return 'permission denied (ports below 1024 need privileges)';
  if (code === 'EADDRNOTAVAIL') return 'the address is not available on this machine';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'the host name does not resolve';
  return describe(cause);
}

export class ApiUnauthorizedError extends createError('ApiUnauthorizedError', 'MOCRA_ERR_API_UNAUTHORIZED', {
  retryable: false,
  message: 'a valid API key is required (Authorization: Bearer <key> or x-api-key: <key>)',
}) {}

export class ApiKeyNotConfiguredError extends createError(
  'ApiKeyNotConfiguredError',
  'MOCRA_ERR_API_KEY_NOT_CONFIGURED',
  {
    retryable: false,
    message:
      'no API key is configured, so authenticated endpoints are disabled; set [api].api_key, MOCRA_API__API_KEY, the apiKey option or (mocra crawl/run) --api-key',
  },
) {}

export class ApiRateLimitedError extends createError('ApiRateLimitedError', 'MOCRA_ERR_API_RATE_LIMITED', {
  retryable: true,
}) {
  constructor(readonly retryAfterMs: number) {
    super(`rate limit exceeded; retry in ${Math.ceil(retryAfterMs / 1000)} s`);
  }
}

/** One problem with an API request: where (`body.module`, `query.limit`) and what. */
export interface ApiValidationIssue {
  path: string;
  message: string;
}

export class ApiValidationError extends createError('ApiValidationError', 'MOCRA_ERR_API_VALIDATION') {
  constructor(readonly issues: readonly ApiValidationIssue[]) {
    const problems = issues.map((i) => (i.path === '' ? i.message : `${i.path}: ${i.message}`));
    super(problems.length === 0 ? 'invalid request' : `invalid request: ${problems.join('; ')}`);
  }
}

export class ApiNotFoundError extends createError('ApiNotFoundError', 'MOCRA_ERR_API_NOT_FOUND') {
  constructor(
    readonly method: string,
    readonly path: string,
  ) {
    super(`no endpoint ${method} ${truncate(path)}; see /openapi.json`);
  }
}

export class ApiHostNotAllowedError extends createError(
  'ApiHostNotAllowedError',
  'MOCRA_ERR_API_HOST_NOT_ALLOWED',
) {
  constructor(readonly host: string) {
    super(
      `requests for host '${truncate(host)}' are refused; add it to [api] allowed_hosts (MOCRA_API__ALLOWED_HOSTS) to serve it`,
    );
  }
}

export class ApiUnavailableError extends createError('ApiUnavailableError', 'MOCRA_ERR_API_UNAVAILABLE', {
  retryable: true,
}) {}

// ── failure policy, thresholds, breakers, watchdog ──────────────────────────────

/**
 * A handler ran past its deadline. Its AbortSignal was aborted and the work is reported as
 * this (retryable) timeout, so a handler that never returns cannot hang the crawl.
 */
export class HandlerTimeoutError extends createError('HandlerTimeoutError', 'MOCRA_ERR_HANDLER_TIMEOUT', {
  retryable: true,
}) {
  constructor(
    /** What timed out: `download https://…`, `parse catalog/main`… */
    readonly label: string,
    readonly timeoutMs: number,
  ) {
    super(`${truncate(label)} did not finish within ${timeoutMs} ms; aborted`);
  }
}

/**
 * The breaker of a host or module is open (or half-open with its probe out); retry after
 * `retryAfterMs`. `exhausted`: it opened so often without closing that the target looks down
 * for good — then the error is not retryable and the work is given up (dead-lettered).
 */
export class CircuitOpenError extends createError('CircuitOpenError', 'MOCRA_ERR_CIRCUIT_OPEN') {
  constructor(
    readonly scope: 'host' | 'module',
    readonly key: string,
    readonly retryAfterMs: number,
    readonly exhausted = false,
  ) {
    super(
      exhausted
        ? `circuit breaker of ${scope} '${truncate(key)}' keeps reopening; the ${scope} looks down, giving the work up`
        : `circuit breaker of ${scope} '${truncate(key)}' is open; retry in ${retryAfterMs} ms`,
      { retryable: !exhausted },
    );
  }
}

/** The per-request error limit was reached: the request is given up. */
export class RequestSkippedError extends createError('RequestSkippedError', 'MOCRA_ERR_REQUEST_SKIPPED') {
  constructor(
    readonly request: string,
    readonly errors: number,
    readonly limit: number,
  ) {
    super(`request ${truncate(request)} failed ${errors} times (limit ${limit}); skipped`);
  }
}

/** The per-module error limit was reached: the module takes no more work in this process. */
export class ModuleTerminatedError extends createError(
  'ModuleTerminatedError',
  'MOCRA_ERR_MODULE_TERMINATED',
) {
  constructor(
    readonly module: string,
    readonly errors: number,
    readonly limit: number,
  ) {
    super(`module '${module}' reached ${errors} errors (limit ${limit}, after success decay); terminated`);
  }
}

/** The per-task error limit was reached: the task's (run's) remaining work is given up. */
export class TaskTerminatedError extends createError('TaskTerminatedError', 'MOCRA_ERR_TASK_TERMINATED') {
  constructor(
    readonly task: string,
    readonly errors: number,
    readonly limit: number,
  ) {
    super(`task '${task}' reached ${errors} errors (limit ${limit}, after success decay); terminated`);
  }
}

/** Nothing moved for `idleMs` while `pending` messages waited: the crawl looks hung. */
export class StalledError extends createError('StalledError', 'MOCRA_ERR_STALLED') {
  constructor(
    readonly idleMs: number,
    readonly pending: number,
  ) {
    super(`no progress for ${Math.round(idleMs / 1000)} s while ${plural(pending, 'message')} were pending`);
  }
}

// ── frontier: stores, robots.txt, sitemaps ───────────────────────────────────────

/** A LevelDB directory is locked by another process (two crawls on one `--persist` dir). */
export class StoreLockedError extends createError('StoreLockedError', 'MOCRA_ERR_STORE_LOCKED') {
  constructor(
    readonly dir: string,
    options: CauseOptions = {},
  ) {
    super(
      `${dir} is in use by another process (LevelDB lock); stop that process or use another directory`,
      options,
    );
  }
}

/** A LevelDB store failed: opening, reading or writing. */
export class StoreFailedError extends createError('StoreFailedError', 'MOCRA_ERR_STORE_FAILED') {
  constructor(
    readonly dir: string,
    readonly operation: string,
    options: CauseOptions = {},
  ) {
    super(`LevelDB store ${dir}: ${operation} failed: ${describe(options.cause)}`, options);
  }
}

/** A sitemap could not be fetched or read. */
export class SitemapError extends createError('SitemapError', 'MOCRA_ERR_SITEMAP') {
  constructor(
    readonly url: string,
    readonly reason: string,
    options: MocraErrorOptions = {},
  ) {
    super(`sitemap ${truncate(url)}: ${reason}`, options);
  }
}

/**
 * A DAG node dispatched through the data-plane queue failed on the worker that ran it. Retryable
 * exactly when the remote error was, so the node's retry policy treats it as it would locally.
 */
export class RemoteNodeFailedError extends createError(
  'RemoteNodeFailedError',
  'MOCRA_ERR_REMOTE_NODE_FAILED',
) {
  /** The wait the remote error asked for before the next attempt (a RetryLaterError's delay). */
  readonly delayMs: number | undefined;
  constructor(
    readonly graph: string,
    readonly nodeId: string,
    /** The `code` of the error on the worker (`MOCRA_ERR_…`), if it had one. */
    readonly remoteCode: string | undefined,
    /** The worker that ran the node. */
    readonly worker: string,
    message: string,
    options: { retryable: boolean; delayMs?: number },
  ) {
    super(`node '${nodeId}' of '${graph}' failed on ${worker}: ${message}`, { retryable: options.retryable });
    this.delayMs = options.delayMs;
  }
}

// ── data tools ──────────────────────────────────────────────────────────────────

/** An item that does not fit a DataFrame store's schema. */
export class DataFrameSchemaError extends createError('DataFrameSchemaError', 'MOCRA_ERR_DATAFRAME_SCHEMA') {
  constructor(
    readonly column: string,
    /** 0-based position of the item in the run (the store's count, not the batch's). */
    readonly row: number,
    reason: string,
  ) {
    super(`item ${row}, column '${column}': ${reason}`);
  }
}

/** A DataFrame store failed to write; `file` is the path it was writing. */
export class DataFrameWriteError extends createError('DataFrameWriteError', 'MOCRA_ERR_DATAFRAME_WRITE') {
  constructor(
    readonly file: string,
    message: string,
    options: MocraErrorOptions = {},
  ) {
    super(`${file}: ${message}`, options);
  }
}

export class WorkbookReadError extends createError('WorkbookReadError', 'MOCRA_ERR_WORKBOOK_READ') {}

export type SandboxErrorCode =
  | 'MOCRA_ERR_SANDBOX_TIMEOUT'
  | 'MOCRA_ERR_SANDBOX_MEMORY'
  | 'MOCRA_ERR_SANDBOX_SCRIPT'
  | 'MOCRA_ERR_SANDBOX_VALUE'
  | 'MOCRA_ERR_SANDBOX_CLOSED';

/**
 * Page code in the sandbox failed. `code` says how (timeout, memory, a throw, a value that
 * cannot cross, a closed runtime); `sandboxStack` is the stack from inside the sandbox. One class
 * for five codes, so it is written by hand rather than built by `createError`.
 */
export class SandboxError extends MocraError {
  override readonly name = 'SandboxError';
  declare readonly code: SandboxErrorCode;
  constructor(
    code: SandboxErrorCode,
    message: string,
    readonly sandboxStack?: string,
    options: MocraErrorOptions = {},
  ) {
    super(code, message, options);
  }
}

/** A batch buffer's flush threw. Raised by the `add`, `flush` or `close` after it. */
export class BatchFlushError extends createError('BatchFlushError', 'MOCRA_ERR_BATCH_FLUSH') {
  constructor(
    readonly items: number,
    cause: unknown,
  ) {
    super(`flushing a batch of ${items} item(s) failed: ${describe(cause)}`, { cause });
  }
}
