/** Per-node execution policy. Every field is optional; a scheduler's `defaultPolicy` fills gaps. */

/** How long to wait before retry number `n` (1-based). */
export type Backoff =
  | {
      readonly kind: 'fixed';
      /** Wait this long before every retry. */
      readonly delayMs: number;
    }
  | {
      readonly kind: 'exponential';
      /** Wait before the first retry. */
      readonly initialDelayMs: number;
      /** Multiplier per retry. @default 2 */
      readonly factor?: number;
      /** Upper bound of one wait. @default Infinity */
      readonly maxDelayMs?: number;
    };

export interface RetryPolicy {
  /** Attempts after the first (a node without a retry policy makes one attempt). */
  readonly maxRetries: number;
  /** @default { kind: 'fixed', delayMs: 0 } */
  readonly backoff?: Backoff;
  /**
   * Spread each wait by ±`jitter` of itself, drawn from the scheduler's random source, so that
   * many nodes failing together do not retry together. 0.2 means 80 %–120 %. @default 0
   */
  readonly jitter?: number;
  /**
   * Which failures are retried:
   * - `'all'` — every error except one that says `retryable: false` (e.g. {@link PermanentNodeError});
   * - `'retryable'` — only errors that say `retryable: true` (timeouts, {@link RetryableNodeError},
   *   mocra's `RetryLaterError`).
   * @default 'all'
   */
  readonly retryOn?: 'all' | 'retryable';
}

/**
 * After `failureThreshold` consecutive failed attempts the breaker opens: no attempt of a node
 * using it starts until `openMs` have passed. Then one attempt goes through (half-open): a
 * success closes the breaker, a failure opens it again. Breaker state lives in the
 * {@link DagScheduler}, so it carries over between runs of the same scheduler.
 */
export interface CircuitBreakerPolicy {
  readonly failureThreshold: number;
  readonly openMs: number;
  /** Nodes with the same key share one breaker (e.g. every node calling one API). @default the node id */
  readonly key?: string;
}

export interface NodePolicy {
  readonly retry?: RetryPolicy;
  /** Abort an attempt (through `ctx.signal`) that runs longer than this. @default undefined (no limit) */
  readonly timeoutMs?: number;
  readonly circuitBreaker?: CircuitBreakerPolicy;
}
