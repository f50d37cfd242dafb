import type { ProxyFailureReason } from '../pool/types.js';

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
]);
const AUTH_CODES = new Set([
  'UND_ERR_SOCKS5_AUTH_FAILED',
  'UND_ERR_SOCKS5_AUTH_REJECTED',
  'UND_ERR_SOCKS5_AUTH_METHOD',
]);
const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

/**
 * Maps an error from a request sent through a proxy (undici's, or Node's socket errors) to the
 * reason {@link ProxyPool.reportFailure} takes, walking the `cause` chain:
 *
 * - `'auth'`: the proxy answered 407, or SOCKS5 authentication failed;
 * - `'timeout'`: connect, headers or body timeout, or an abort by `AbortSignal.timeout`;
 * - `'connect'`: the proxy could not be reached, reset the connection, or refused the tunnel;
 * - `'error'`: anything else.
 *
 * Blocks (a 403 or 429 from the target, a captcha page) are not errors at this level; the
 * caller decides and reports `'blocked'`.
 */
export function classifyProxyError(err: unknown): ProxyFailureReason {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as Error & { code?: unknown }).code;
    const message = current.message;
    if (typeof code === 'string') {
      if (AUTH_CODES.has(code)) return 'auth';
      if (TIMEOUT_CODES.has(code)) return 'timeout';
    }
    if (/\(407\)/.test(message)) return 'auth';
    if (current.name === 'TimeoutError') return 'timeout';
    if (/^Proxy response \(\d+\) !== 200/.test(message)) return 'connect';
    if (typeof code === 'string' && (CONNECT_CODES.has(code) || code.startsWith('UND_ERR_SOCKS5')))
      return 'connect';
    current = current.cause;
  }
  return 'error';
}
