/** Policy checking, retry classification and backoff arithmetic. Pure functions; no clocks. */
import { retryableOf } from '../errors.js';
import type { Backoff, CircuitBreakerPolicy, NodePolicy, RetryPolicy } from './types.js';

/** A node's policy with every default filled in, as the scheduler uses it. */
export interface ResolvedPolicy {
  readonly maxRetries: number;
  readonly backoff: Backoff;
  readonly jitter: number;
  readonly retryAll: boolean;
  /** 0 = no timeout. */
  readonly timeoutMs: number;
  readonly breaker: Required<CircuitBreakerPolicy> | undefined;
}

const NO_BACKOFF: Backoff = Object.freeze({ kind: 'fixed', delayMs: 0 });

const isNonNegative = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * Returns what is wrong with `policy` (naming the field), or undefined when it is usable.
 * The caller wraps the message in the error for its context (a node, the scheduler options).
 */
export function policyProblem(policy: NodePolicy): string | undefined {
  if (policy.timeoutMs !== undefined && !(isNonNegative(policy.timeoutMs) && policy.timeoutMs > 0)) {
    return `timeoutMs must be a positive number of milliseconds, got ${String(policy.timeoutMs)}`;
  }
  const retry = policy.retry;
  if (retry !== undefined) {
    if (typeof retry !== 'object' || retry === null) return 'retry must be an object';
    if (!isCount(retry.maxRetries))
      return `retry.maxRetries must be a non-negative integer, got ${String(retry.maxRetries)}`;
    if (retry.jitter !== undefined && !(isNonNegative(retry.jitter) && retry.jitter <= 1)) {
      return `retry.jitter must be between 0 and 1, got ${String(retry.jitter)}`;
    }
    if (retry.retryOn !== undefined && retry.retryOn !== 'all' && retry.retryOn !== 'retryable') {
      return `retry.retryOn must be 'all' or 'retryable', got ${String(retry.retryOn)}`;
    }
    const b = retry.backoff;
    if (b !== undefined) {
      if (b.kind === 'fixed') {
        if (!isNonNegative(b.delayMs))
          return `retry.backoff.delayMs must be a non-negative number, got ${String(b.delayMs)}`;
      } else if (b.kind === 'exponential') {
        if (!isNonNegative(b.initialDelayMs)) {
          return `retry.backoff.initialDelayMs must be a non-negative number, got ${String(b.initialDelayMs)}`;
        }
        if (b.factor !== undefined && !(isNonNegative(b.factor) && b.factor >= 1)) {
          return `retry.backoff.factor must be a number >= 1, got ${String(b.factor)}`;
        }
        if (b.maxDelayMs !== undefined && !(typeof b.maxDelayMs === 'number' && b.maxDelayMs >= 0)) {
          return `retry.backoff.maxDelayMs must be a non-negative number, got ${String(b.maxDelayMs)}`;
        }
      } else {
        return `retry.backoff.kind must be 'fixed' or 'exponential', got ${String((b as { kind?: unknown }).kind)}`;
      }
    }
  }
  const cb = policy.circuitBreaker;
  if (cb !== undefined) {
    if (typeof cb !== 'object' || cb === null) return 'circuitBreaker must be an object';
    if (!(isCount(cb.failureThreshold) && cb.failureThreshold >= 1)) {
      return `circuitBreaker.failureThreshold must be an integer >= 1, got ${String(cb.failureThreshold)}`;
    }
    if (!isNonNegative(cb.openMs))
      return `circuitBreaker.openMs must be a non-negative number, got ${String(cb.openMs)}`;
    if (cb.key !== undefined && (typeof cb.key !== 'string' || cb.key.length === 0)) {
      return 'circuitBreaker.key must be a non-empty string';
    }
  }
  return undefined;
}

/** Fills a node's policy from its own fields first, then the scheduler's defaults. */
export function resolvePolicy(nodeId: string, own: NodePolicy, defaults: NodePolicy): ResolvedPolicy {
  const retry: RetryPolicy | undefined = own.retry ?? defaults.retry;
  const breaker = own.circuitBreaker ?? defaults.circuitBreaker;
  return {
    maxRetries: retry?.maxRetries ?? 0,
    backoff: retry?.backoff ?? NO_BACKOFF,
    jitter: retry?.jitter ?? 0,
    retryAll: (retry?.retryOn ?? 'all') === 'all',
    timeoutMs: own.timeoutMs ?? defaults.timeoutMs ?? 0,
    breaker:
      breaker === undefined
        ? undefined
        : { failureThreshold: breaker.failureThreshold, openMs: breaker.openMs, key: breaker.key ?? nodeId },
  };
}

/** Whether a failure may be retried under a policy that retries `all` errors or only `retryable` ones. */
export function shouldRetry(err: unknown, retryAll: boolean): boolean {
  const flag = retryableOf(err);
  return retryAll ? flag !== false : flag === true;
}

/**
 * The wait before retry number `retry` (1-based), before jitter. An error that carries its own
 * `delayMs` (RetryableNodeError, mocra's RetryLaterError) overrides the policy.
 */
export function backoffDelay(backoff: Backoff, retry: number): number {
  if (backoff.kind === 'fixed') return backoff.delayMs;
  const raw = backoff.initialDelayMs * (backoff.factor ?? 2) ** (retry - 1);
  return Math.min(raw, backoff.maxDelayMs ?? Number.POSITIVE_INFINITY);
}

/** `delay` spread uniformly over ±`jitter` of itself using `u` ∈ [0, 1). */
export function applyJitter(delay: number, jitter: number, u: number): number {
  if (jitter === 0 || delay === 0) return delay;
  return Math.max(0, delay * (1 + jitter * (2 * u - 1)));
}

/** The delay a failure asks for itself, if it is retryable and says so. */
export function requestedDelay(err: unknown): number | undefined {
  if (retryableOf(err) !== true) return undefined;
  const delay = (err as { delayMs?: unknown }).delayMs;
  return typeof delay === 'number' && Number.isFinite(delay) && delay >= 0 ? delay : undefined;
}
