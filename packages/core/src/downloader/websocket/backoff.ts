/**
 * Exponential backoff with jitter, for reconnecting. Jitter matters more than the curve: when a
 * server restarts, every client lost its socket at the same instant, and without jitter they all
 * come back at the same instants too.
 *
 * ```
 *  attempt   base (initial 250 ms, ×2, max 10 s)   delay with jitter 0.5
 *     1          250 ms                              125 … 250 ms
 *     2          500 ms                              250 … 500 ms
 *     3         1000 ms                              500 … 1000 ms
 *     …
 *     7+       10000 ms                             5000 … 10000 ms
 * ```
 */
import { InvalidArgumentError } from '../../errors.js';

export interface BackoffOptions {
  /** Delay before the first retry. @default 250 */
  initialDelayMs?: number;
  /** The delay never grows past this. @default 10000 */
  maxDelayMs?: number;
  /** Growth factor per attempt. @default 2 */
  multiplier?: number;
  /**
   * Share of the delay that is random, 0…1: the delay is drawn from `[base × (1 − jitter), base]`.
   * 0 gives exact delays, 1 gives "full jitter". @default 0.5
   */
  jitter?: number;
}

export interface ResolvedBackoff {
  initialDelayMs: number;
  maxDelayMs: number;
  multiplier: number;
  jitter: number;
}

export function resolveBackoff(options: BackoffOptions = {}, prefix = 'backoff'): ResolvedBackoff {
  const initialDelayMs = options.initialDelayMs ?? 250;
  const maxDelayMs = options.maxDelayMs ?? 10_000;
  const multiplier = options.multiplier ?? 2;
  const jitter = options.jitter ?? 0.5;
  if (!Number.isFinite(initialDelayMs) || initialDelayMs < 0)
    throw new InvalidArgumentError(`${prefix}.initialDelayMs must be a number ≥ 0, got ${initialDelayMs}`);
  if (!Number.isFinite(maxDelayMs) || maxDelayMs < initialDelayMs)
    throw new InvalidArgumentError(`${prefix}.maxDelayMs must be ≥ initialDelayMs, got ${maxDelayMs}`);
  if (!Number.isFinite(multiplier) || multiplier < 1)
    throw new InvalidArgumentError(`${prefix}.multiplier must be a number ≥ 1, got ${multiplier}`);
  if (!Number.isFinite(jitter) || jitter < 0 || jitter > 1)
    throw new InvalidArgumentError(`${prefix}.jitter must be between 0 and 1, got ${jitter}`);
  return { initialDelayMs, maxDelayMs, multiplier, jitter };
}

/** The delay before retry number `attempt` (1-based). `random` returns [0, 1). */
export function backoffDelay(
  attempt: number,
  backoff: ResolvedBackoff,
  random: () => number = Math.random,
): number {
  const exponent = Math.max(0, attempt - 1);
  const base = Math.min(backoff.maxDelayMs, backoff.initialDelayMs * backoff.multiplier ** exponent);
  return Math.round(base * (1 - backoff.jitter * random()));
}
