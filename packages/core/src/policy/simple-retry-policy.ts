/**
 * The failure policy for now (see `types.ts`): retry what is retryable a few times with
 * exponential backoff, dead-letter the rest.
 *
 *   - `retryable` comes from the error (TimeoutError, ConnectionError, HttpStatusError,
 *     SinkFailedError… are; InvalidUrlError, BodyTooLargeError, ParseFailedError… are not);
 *   - delay = min(maxDelayMs, baseDelayMs · 2^(attempt−1)) ± 20 % jitter, except that the
 *     event's `retryAfterMs` (a RetryLaterError's `delayMs`, a Retry-After header) is used as
 *     given (capped at maxDelayMs);
 *   - it reads only plain fields of the event (`code`, `retryable`, `attempt`, `retryAfterMs`),
 *     so it decides the same after the event went through a serializing queue;
 *   - a CriticalError stops the engine.
 */
import { InvalidArgumentError } from '../errors.js';
import type { ErrorEvent } from '../model/events.js';
import type { Response } from '../model/response.js';
import type { FailurePolicy, PolicyDecision } from './types.js';

export interface SimpleRetryPolicyOptions {
  /** Retries after the first failure (so up to `maxRetries + 1` attempts). @default 3 */
  maxRetries?: number;
  /** First backoff delay. @default 500 */
  baseDelayMs?: number;
  /** Longest delay, also the cap on Retry-After. @default 30000 */
  maxDelayMs?: number;
  /** Statuses retried (while retries remain) instead of reaching parse. @default [408, 429, 500, 502, 503, 504] */
  retryStatuses?: readonly number[];
  /** Spread delays by ±20 % so retries of many requests do not arrive together. @default true */
  jitter?: boolean;
}

export class SimpleRetryPolicy implements FailurePolicy {
  readonly #maxRetries: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #retryStatuses: ReadonlySet<number>;
  readonly #jitter: boolean;

  constructor(options: SimpleRetryPolicyOptions = {}) {
    this.#maxRetries = options.maxRetries ?? 3;
    this.#baseDelayMs = options.baseDelayMs ?? 500;
    this.#maxDelayMs = options.maxDelayMs ?? 30_000;
    this.#retryStatuses = new Set(options.retryStatuses ?? [408, 429, 500, 502, 503, 504]);
    this.#jitter = options.jitter ?? true;
    if (!Number.isInteger(this.#maxRetries) || this.#maxRetries < 0) {
      throw new InvalidArgumentError(`maxRetries must be an integer ≥ 0, got ${this.#maxRetries}`);
    }
    if (!(this.#baseDelayMs >= 0) || !(this.#maxDelayMs >= 0)) {
      throw new InvalidArgumentError('baseDelayMs and maxDelayMs must be ≥ 0');
    }
  }

  decide(event: ErrorEvent): PolicyDecision {
    if (event.code === 'MOCRA_ERR_CRITICAL') {
      return { action: 'stop', reason: `${event.code}: ${event.message}` };
    }
    if (!event.retryable)
      return { action: 'dead-letter', reason: `${event.code} (not retryable): ${event.message}` };
    if (event.attempt > this.#maxRetries) {
      return {
        action: 'dead-letter',
        reason: `${event.code} after ${event.attempt} attempts: ${event.message}`,
      };
    }
    return { action: 'retry', delayMs: this.#delay(event) };
  }

  retryStatus(response: Response, retriesSoFar: number): boolean {
    return this.#retryStatuses.has(response.status) && retriesSoFar < this.#maxRetries;
  }

  #delay(event: ErrorEvent): number {
    if (event.retryAfterMs !== undefined) return Math.min(event.retryAfterMs, this.#maxDelayMs);
    const exp = Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** (event.attempt - 1));
    return this.#jitter ? Math.round(exp * (0.8 + Math.random() * 0.4)) : exp;
  }
}

export function createSimpleRetryPolicy(options: SimpleRetryPolicyOptions = {}): SimpleRetryPolicy {
  return new SimpleRetryPolicy(options);
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date; undefined when absent or unparseable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
