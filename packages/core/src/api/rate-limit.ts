/**
 * Token buckets per key: `ratePerSecond` tokens refill continuously up to `burst`; a request
 * takes one or is refused with the time until the next token. Unlike a minimum interval between
 * requests, a client may spend a burst at once (a person clicking replay twice is not abuse).
 *
 * What is limited is decided by the server (see server.ts): mutating requests per API key and
 * failed authentications per client address. Read-only observability endpoints — everything the
 * dashboard polls — never pass through here, so the limit cannot throttle the dashboard.
 *
 * The table of buckets is bounded: past `maxKeys`, the least recently used bucket is forgotten
 * (a forgotten bucket starts full again, which only ever errs towards letting a request in).
 */

export interface RateLimiterOptions {
  /** Tokens added per second; 0 turns the limiter off. */
  ratePerSecond: number;
  /** Bucket size. @default max(1, 2 × ratePerSecond) */
  burst?: number;
  /** Buckets kept. @default 10000 */
  maxKeys?: number;
}

export type RateDecision = { allowed: true; remaining: number } | { allowed: false; retryAfterMs: number };

interface Bucket {
  tokens: number;
  at: number;
}

export class RateLimiter {
  readonly ratePerSecond: number;
  readonly burst: number;
  readonly #maxKeys: number;
  readonly #buckets = new Map<string, Bucket>();

  constructor(options: RateLimiterOptions) {
    this.ratePerSecond = Math.max(0, options.ratePerSecond);
    this.burst = Math.max(1, options.burst ?? Math.ceil(2 * this.ratePerSecond));
    this.#maxKeys = options.maxKeys ?? 10_000;
  }

  get enabled(): boolean {
    return this.ratePerSecond > 0;
  }

  take(key: string, now = performance.now()): RateDecision {
    if (!this.enabled) return { allowed: true, remaining: Number.POSITIVE_INFINITY };
    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      bucket = { tokens: this.burst, at: now };
      if (this.#buckets.size >= this.#maxKeys) {
        const oldest = this.#buckets.keys().next().value;
        if (oldest !== undefined) this.#buckets.delete(oldest);
      }
    } else {
      // Re-insert to keep the map in least-recently-used order.
      this.#buckets.delete(key);
      bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.ratePerSecond);
      bucket.at = now;
    }
    this.#buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true, remaining: Math.floor(bucket.tokens) };
    }
    return { allowed: false, retryAfterMs: Math.ceil(((1 - bucket.tokens) / this.ratePerSecond) * 1000) };
  }

  /** Buckets currently tracked. */
  get size(): number {
    return this.#buckets.size;
  }
}
