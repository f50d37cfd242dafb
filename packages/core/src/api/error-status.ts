/**
 * The one table that maps error codes to HTTP statuses. Every error the API answers with goes
 * through {@link errorResponse}: a JSON body with a stable `code`, never an HTML page or a bare
 * string. A code not in the table is a 500 (and a bug worth a row here).
 */
import { ApiRateLimitedError, ApiValidationError, type ApiValidationIssue, isMocraError } from '../errors.js';

export const API_ERROR_STATUS: Readonly<Record<string, number>> = Object.freeze({
  MOCRA_ERR_API_VALIDATION: 400,
  MOCRA_ERR_INVALID_ARGUMENT: 400,
  MOCRA_ERR_INVALID_URL: 400,
  MOCRA_ERR_API_UNAUTHORIZED: 401,
  MOCRA_ERR_API_KEY_NOT_CONFIGURED: 403,
  MOCRA_ERR_API_NOT_FOUND: 404,
  MOCRA_ERR_ENGINE_STATE: 409,
  MOCRA_ERR_API_BODY_TOO_LARGE: 413,
  MOCRA_ERR_PAYLOAD_TOO_LARGE: 413,
  MOCRA_ERR_API_UNSUPPORTED_MEDIA_TYPE: 415,
  MOCRA_ERR_API_HOST_NOT_ALLOWED: 421,
  MOCRA_ERR_UNKNOWN_MODULE: 422,
  MOCRA_ERR_QUEUE_ENCODE: 422,
  MOCRA_ERR_API_RATE_LIMITED: 429,
  MOCRA_ERR_INTERNAL: 500,
  MOCRA_ERR_API_UNAVAILABLE: 503,
  MOCRA_ERR_BACKEND_UNAVAILABLE: 503,
  MOCRA_ERR_QUEUE_CLOSED: 503,
  MOCRA_ERR_COORDINATION_CLOSED: 503,
  MOCRA_ERR_TIMEOUT: 504,
});

export interface ApiErrorBody {
  error: {
    code: string;
    message: string;
    status: number;
    issues?: ApiValidationIssue[];
    retryAfterMs?: number;
  };
  requestId: string;
}

/** Fastify's own request errors (bad JSON, oversize body, wrong content type) by their status. */
const FRAMEWORK_CODE_BY_STATUS: Readonly<Record<number, string>> = {
  400: 'MOCRA_ERR_API_VALIDATION',
  404: 'MOCRA_ERR_API_NOT_FOUND',
  413: 'MOCRA_ERR_API_BODY_TOO_LARGE',
  415: 'MOCRA_ERR_API_UNSUPPORTED_MEDIA_TYPE',
};

/** Status and JSON body for anything thrown while handling a request. */
export function errorResponse(err: unknown, requestId: string): { status: number; body: ApiErrorBody } {
  if (isMocraError(err)) {
    const status = API_ERROR_STATUS[err.code] ?? 500;
    const body: ApiErrorBody = { error: { code: err.code, message: err.message, status }, requestId };
    if (err instanceof ApiValidationError) body.error.issues = [...err.issues];
    if (err instanceof ApiRateLimitedError) body.error.retryAfterMs = err.retryAfterMs;
    return { status, body };
  }
  const statusCode = frameworkStatus(err);
  const code = statusCode === undefined ? undefined : FRAMEWORK_CODE_BY_STATUS[statusCode];
  if (statusCode !== undefined && code !== undefined) {
    const message = err instanceof Error ? err.message : String(err);
    const body: ApiErrorBody = { error: { code, message, status: statusCode }, requestId };
    if (code === 'MOCRA_ERR_API_VALIDATION') body.error.issues = [{ path: 'body', message }];
    return { status: statusCode, body };
  }
  return {
    status: 500,
    body: {
      error: { code: 'MOCRA_ERR_INTERNAL', message: 'internal error; see the server log', status: 500 },
      requestId,
    },
  };
}

function frameworkStatus(err: unknown): number | undefined {
  if (!(err instanceof Error)) return undefined;
  const status = (err as Error & { statusCode?: unknown }).statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : undefined;
}
