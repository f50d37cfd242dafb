/**
 * The simple retry options (`.retry({...})`, the `[retry]` table, `--retries`) expressed as
 * policy overrides applied before any `[[policy.overrides]]`: only what is set changes the
 * defaults. The options are checked here, by hand, so the overrides made from them are valid
 * by construction and need no schema: a run that sets nothing but these never loads one.
 */
import { InvalidArgumentError } from '../errors.js';
import type { PolicyOverride } from './policy-table.js';
import type { SimpleRetryPolicyOptions } from './simple-retry-policy.js';

const RETRIED_KINDS = [
  'network',
  'timeout',
  'http-429',
  'http-503',
  'http-5xx',
  'http-4xx',
  'middleware',
  'store',
  'unknown',
] as const;
const STATUS_KINDS = ['http-429', 'http-503', 'http-5xx', 'http-4xx', 'timeout'] as const;

/** The bounds `[[policy.overrides]]` holds the same settings to. */
const MAX_RETRIES = 1000;
const DAY_MS = 86_400_000;

function checkInt(name: string, value: number | undefined, min: number, max: number): void {
  if (value === undefined) return;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`retry.${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}

/** Checks `retry` (throws `MOCRA_ERR_INVALID_ARGUMENT` naming the option) and returns its overrides. */
export function retryOverrides(retry: SimpleRetryPolicyOptions): PolicyOverride[] {
  checkInt('maxRetries', retry.maxRetries, 0, MAX_RETRIES);
  checkInt('baseDelayMs', retry.baseDelayMs, 0, DAY_MS);
  checkInt('maxDelayMs', retry.maxDelayMs, 0, DAY_MS);
  if (
    retry.baseDelayMs !== undefined &&
    retry.maxDelayMs !== undefined &&
    retry.maxDelayMs < retry.baseDelayMs
  ) {
    throw new InvalidArgumentError(
      `retry.maxDelayMs must be at least retry.baseDelayMs (${retry.baseDelayMs}), got ${retry.maxDelayMs}`,
    );
  }
  if (retry.jitter !== undefined && typeof retry.jitter !== 'boolean') {
    throw new InvalidArgumentError(`retry.jitter must be true or false, got ${String(retry.jitter)}`);
  }
  for (const status of retry.retryStatuses ?? []) checkInt('retryStatuses[]', status, 100, 599);

  const out: PolicyOverride[] = [];
  const curve: PolicyOverride = { kind: [...RETRIED_KINDS] };
  if (retry.maxRetries !== undefined) curve.max_retries = retry.maxRetries;
  if (retry.baseDelayMs !== undefined) {
    curve.backoff = 'exponential';
    curve.backoff_ms = retry.baseDelayMs;
  }
  if (retry.maxDelayMs !== undefined) {
    curve.max_backoff_ms = retry.maxDelayMs;
    curve.retry_after_cap_ms = retry.maxDelayMs;
  }
  if (retry.jitter === false) curve.jitter = 0;
  if (Object.keys(curve).length > 1) out.push(curve);
  if (retry.retryStatuses !== undefined) {
    const listed = new Set(retry.retryStatuses);
    const others: number[] = [];
    for (let s = 400; s <= 599; s++) if (!listed.has(s)) others.push(s);
    if (others.length > 0) out.push({ kind: [...STATUS_KINDS], status: others, retryable: false });
    if (listed.size > 0) out.push({ kind: [...STATUS_KINDS], status: [...listed], retryable: true });
  }
  return out;
}
