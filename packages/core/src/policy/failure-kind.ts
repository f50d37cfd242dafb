/**
 * What kind of failure an error is, for the failure policy. The policy table is keyed by
 * (kind, stage): a kind says what went wrong (the network, the server, the content, user code,
 * a store, a queue…), the stage says where.
 *
 * Classification works from plain fields (`code`, HTTP `status`) as well as from error objects,
 * because an error event may have crossed a serializing queue (Redis, NATS, Kafka) on its way
 * to the error stage: classes do not survive that, codes do. Given an error object, the cause
 * chain is searched for a steering error first, so a `NonRetryableError` thrown inside a
 * middleware still reads as `non-retryable`, not as `middleware`.
 *
 * (The metrics' `errorKind` label is a coarser grouping for dashboards; this one drives
 * decisions.)
 */
import { isMocraError } from '../errors.js';

/** Every failure kind, in the order the policy table lists them. */
export const FAILURE_KINDS = [
  /** Refused, reset, DNS, a dropped or malformed response, a WebSocket or browser that broke. */
  'network',
  /** Connect / headers / body timeouts, a watchdog deadline, HTTP 408. */
  'timeout',
  /** HTTP 429 Too Many Requests. */
  'http-429',
  /** HTTP 503 Service Unavailable. */
  'http-503',
  /** Any other 5xx. */
  'http-5xx',
  /** Any other 4xx (only reaches the policy when a status is configured as retryable). */
  'http-4xx',
  /** A body over the size cap (or a compression bomb). */
  'body-too-large',
  /** A body that does not decode (Content-Encoding, charset). */
  'decode',
  /** Too many redirects, a redirect loop. */
  'redirect',
  /** Work that can never run: an invalid URL, an unknown module, downloader or middleware. */
  'invalid-request',
  /** A node's parse or generate threw (a bug, or a page the parser did not expect). */
  'parse',
  /** A download, data or store middleware threw. */
  'middleware',
  /** A sink (data store) threw while writing an item. */
  'store',
  /** A queue or its server failed: decode/encode, payload too large, backend unavailable, lease lost. */
  'queue',
  /** The login session is gone (`SessionExpiredError`). */
  'session-expired',
  /** User code said: do not retry (`NonRetryableError`), or login failed for good. */
  'non-retryable',
  /** User code said: retry after a delay (`RetryLaterError`). */
  'retry-later',
  /** User code said: stop the engine (`CriticalError`). */
  'critical',
  /** The work was aborted (shutdown); it is put back, not counted as a failure. */
  'aborted',
  /** A circuit breaker refused the work (its host looks down for good); not counted as a failure. */
  'circuit-open',
  /** The request was skipped, or its module or task terminated, by the error thresholds. */
  'terminated',
  /** Anything else: an internal error, a non-mocra error. */
  'unknown',
] as const;

export type FailureKind = (typeof FAILURE_KINDS)[number];

/**
 * Where a failure happened. Finer than the engine's stages: the parse stage also runs the data
 * and store middleware and the sink, so a failure there is `middleware` or `store`, not `parse`.
 */
export const POLICY_STAGES = ['generate', 'download', 'parse', 'middleware', 'store', 'queue'] as const;

export type PolicyStage = (typeof POLICY_STAGES)[number];

const KIND_BY_CODE: Readonly<Record<string, FailureKind>> = {
  MOCRA_ERR_CONNECTION: 'network',
  MOCRA_ERR_MALFORMED_RESPONSE: 'network',
  MOCRA_ERR_WEBSOCKET_CONNECT: 'network',
  MOCRA_ERR_WEBSOCKET_CLOSED: 'network',
  MOCRA_ERR_WEBSOCKET_OVERFLOW: 'network',
  MOCRA_ERR_BROWSER_NAVIGATION: 'network',
  MOCRA_ERR_TIMEOUT: 'timeout',
  MOCRA_ERR_HANDLER_TIMEOUT: 'timeout',
  MOCRA_ERR_BODY_TOO_LARGE: 'body-too-large',
  MOCRA_ERR_CONTENT_DECODING: 'decode',
  MOCRA_ERR_TEXT_DECODING: 'decode',
  MOCRA_ERR_TOO_MANY_REDIRECTS: 'redirect',
  MOCRA_ERR_REDIRECT_LOOP: 'redirect',
  MOCRA_ERR_INVALID_URL: 'invalid-request',
  MOCRA_ERR_INVALID_ARGUMENT: 'invalid-request',
  MOCRA_ERR_UNKNOWN_MODULE: 'invalid-request',
  MOCRA_ERR_UNKNOWN_DOWNLOADER: 'invalid-request',
  MOCRA_ERR_UNKNOWN_MIDDLEWARE: 'invalid-request',
  MOCRA_ERR_PARSE_FAILED: 'parse',
  MOCRA_ERR_GENERATE_FAILED: 'parse',
  MOCRA_ERR_RUN_HOOK_FAILED: 'parse',
  MOCRA_ERR_MIDDLEWARE_FAILED: 'middleware',
  MOCRA_ERR_SINK_FAILED: 'store',
  // @mocra/store: the database failed (retried with the store backoff) or the write can never
  // succeed as it is (bad value, constraint, missing table or driver: dead-lettered for replay
  // once the cause is fixed).
  MOCRA_ERR_STORE_CONNECTION: 'store',
  MOCRA_ERR_STORE_SERIALIZATION: 'store',
  MOCRA_ERR_STORE_QUERY: 'store',
  MOCRA_ERR_STORE_CONSTRAINT: 'invalid-request',
  MOCRA_ERR_STORE_INVALID_INPUT: 'invalid-request',
  MOCRA_ERR_STORE_CONFIG_TYPE: 'invalid-request',
  MOCRA_ERR_STORE_MISSING_TABLE: 'invalid-request',
  MOCRA_ERR_STORE_DRIVER_MISSING: 'invalid-request',
  MOCRA_ERR_STORE_CONTEXT_UNAVAILABLE: 'invalid-request',
  MOCRA_ERR_STORE_NOT_FOUND: 'invalid-request',
  MOCRA_ERR_QUEUE_CLOSED: 'queue',
  MOCRA_ERR_QUEUE_DECODE: 'queue',
  MOCRA_ERR_QUEUE_ENCODE: 'queue',
  MOCRA_ERR_PAYLOAD_TOO_LARGE: 'queue',
  MOCRA_ERR_LEASE_EXPIRED: 'queue',
  MOCRA_ERR_BACKEND_UNAVAILABLE: 'queue',
  MOCRA_ERR_SESSION_EXPIRED: 'session-expired',
  MOCRA_ERR_NON_RETRYABLE: 'non-retryable',
  MOCRA_ERR_LOGIN_FAILED: 'non-retryable',
  MOCRA_ERR_RETRY_LATER: 'retry-later',
  MOCRA_ERR_CRITICAL: 'critical',
  MOCRA_ERR_ABORTED: 'aborted',
  MOCRA_ERR_CIRCUIT_OPEN: 'circuit-open',
  MOCRA_ERR_REQUEST_SKIPPED: 'terminated',
  MOCRA_ERR_MODULE_TERMINATED: 'terminated',
  MOCRA_ERR_TASK_TERMINATED: 'terminated',
};

/** Codes of the errors user code throws to steer the engine; they win over whatever wraps them. */
const STEERING_CODES: ReadonlySet<string> = new Set([
  'MOCRA_ERR_CRITICAL',
  'MOCRA_ERR_NON_RETRYABLE',
  'MOCRA_ERR_RETRY_LATER',
  'MOCRA_ERR_SESSION_EXPIRED',
]);

/** The kind of an HTTP status that reached the policy. */
export function kindOfStatus(status: number): FailureKind {
  if (status === 429) return 'http-429';
  if (status === 503) return 'http-503';
  if (status === 408) return 'timeout';
  if (status >= 500 && status <= 599) return 'http-5xx';
  if (status >= 400 && status <= 499) return 'http-4xx';
  return 'unknown';
}

/** The kind of an error code (and, for `MOCRA_ERR_HTTP_STATUS`, its status). Unknown codes are `unknown`. */
export function classifyCode(code: string, status?: number): FailureKind {
  if (code === 'MOCRA_ERR_HTTP_STATUS') return status === undefined ? 'http-5xx' : kindOfStatus(status);
  return KIND_BY_CODE[code] ?? 'unknown';
}

/**
 * The kind of a thrown value. A steering error anywhere in the cause chain wins (a
 * `RetryLaterError` a middleware wrapped is still a retry-later); otherwise the outermost mocra
 * error decides; anything that is not a mocra error is `unknown`.
 */
export function classifyError(error: unknown): FailureKind {
  const steering = steeringCause(error);
  if (steering !== undefined) return classifyCode(steering.code);
  if (!isMocraError(error)) return 'unknown';
  return classifyCode(error.code, statusOf(error));
}

/**
 * The steering error (critical, non-retryable, retry-later, session-expired) in `error`'s cause
 * chain, outermost first, or undefined. The engine records its code so the decision survives
 * serialization.
 */
export function steeringCause(error: unknown): (Error & { code: string }) | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    if (isMocraError(current) && STEERING_CODES.has(current.code)) return current;
    current = current instanceof Error ? current.cause : undefined;
  }
  return undefined;
}

/** True for kinds that say something about the health of the host that served the request. */
export function isHostFailure(kind: FailureKind): boolean {
  return (
    kind === 'network' ||
    kind === 'timeout' ||
    kind === 'http-429' ||
    kind === 'http-503' ||
    kind === 'http-5xx'
  );
}

function statusOf(error: unknown): number | undefined {
  const status = (error as { status?: unknown }).status;
  return typeof status === 'number' ? status : undefined;
}
