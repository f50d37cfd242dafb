/**
 * Retry delays: the backoff curves the policy table names, and Retry-After.
 *
 * ```
 *  retry n (1-based)   fixed     linear      exponential
 *  1                   base      base        base
 *  2                   base      2·base      base·factor
 *  3                   base      3·base      base·factor²
 *  …                   … every value capped at maxMs, then jitter takes off up to jitter·delay
 * ```
 *
 * Jitter only ever *shortens* a delay (delay · (1 − jitter · u), u uniform in [0, 1)), so the
 * cap stays a cap: jitter 1 is AWS-style "full jitter", 0.5 "equal jitter", 0 none. It spreads
 * the retries of many requests that failed together (a host that blipped) so they do not return
 * together.
 */

export const BACKOFF_STRATEGIES = ['none', 'fixed', 'linear', 'exponential'] as const;

/** How a delay grows with the retry number. */
export type BackoffStrategy = (typeof BACKOFF_STRATEGIES)[number];

export interface Backoff {
  strategy: BackoffStrategy;
  /** Delay of the first retry (and every retry for `fixed`). */
  baseMs: number;
  /** No delay is longer than this (before jitter). */
  maxMs: number;
  /** Growth per retry of `exponential`. */
  factor: number;
  /** Fraction (0 … 1) of the delay that jitter may take off. */
  jitter: number;
}

/**
 * The delay before retry number `retry` (1 for the first retry). `random` is injectable so
 * tests get exact values; it must return a number in [0, 1).
 */
export function backoffDelayMs(backoff: Backoff, retry: number, random: () => number = Math.random): number {
  const n = Math.max(1, Math.floor(retry));
  let delay: number;
  switch (backoff.strategy) {
    case 'none':
      return 0;
    case 'fixed':
      delay = backoff.baseMs;
      break;
    case 'linear':
      delay = backoff.baseMs * n;
      break;
    case 'exponential':
      // factor^(n−1) overflows to Infinity for large n; min() then caps it.
      delay = backoff.baseMs * backoff.factor ** (n - 1);
      break;
  }
  delay = Math.min(delay, backoff.maxMs);
  if (backoff.jitter > 0) {
    const u = Math.min(Math.max(random(), 0), 1);
    delay -= delay * backoff.jitter * u;
  }
  return Math.max(0, Math.round(delay));
}

const ASCTIME = /^[A-Za-z]{3} [A-Za-z]{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}$/;

/**
 * A Retry-After header value as milliseconds from `nowMs`: delta-seconds (`120`) or an
 * HTTP-date (`Wed, 21 Oct 2015 07:28:00 GMT`, or the obsolete RFC 850 / asctime forms
 * `Date.parse` reads). A date in the past is 0. Undefined when absent or unreadable (then the
 * backoff applies). The cap is the caller's business (the policy caps every Retry-After).
 */
export function parseRetryAfterMs(value: string | null | undefined, nowMs: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  const trimmed = value.trim();
  if (trimmed === '') return undefined;
  if (/^\d+$/.test(trimmed)) {
    const seconds = Number(trimmed);
    return Number.isSafeInteger(seconds) ? seconds * 1000 : undefined;
  }
  // Only date-looking values: Date.parse accepts odd things like '1.5' or '-1'.
  if (!/[a-z]/i.test(trimmed)) return undefined;
  // asctime (`Sun Nov  6 08:49:37 1994`) carries no zone; HTTP means GMT, Date.parse would use local time.
  const at = Date.parse(ASCTIME.test(trimmed) ? `${trimmed} GMT` : trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
