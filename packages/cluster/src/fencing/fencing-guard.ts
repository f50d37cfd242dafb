import { FencingRejectedError } from '../errors.js';

/**
 * The resource side of a fenced lock (Kleppmann, "How to do distributed locking"): remember the
 * highest token seen per key and refuse anything lower. A lock holder that paused past its TTL
 * comes back with an old token and is turned away, however late its request arrives.
 *
 * Check every access, reads included: a holder that read under token t must not be overtaken by
 * a write from an older holder, or increments are lost.
 *
 * ```ts
 * const guard = new FencingGuard();
 * guard.admit('orders-db', lease.token); // throws FencingRejectedError for a stale token
 * ```
 */
export class FencingGuard {
  readonly #highest = new Map<string, number>();

  /** Accept `token` for `key` (it becomes the highest seen) or throw {@link FencingRejectedError}. */
  admit(key: string, token: number): void {
    if (!this.tryAdmit(key, token)) throw new FencingRejectedError(key, token, this.highest(key));
  }

  /** Like {@link admit} but returns false instead of throwing. */
  tryAdmit(key: string, token: number): boolean {
    if (!Number.isSafeInteger(token) || token <= 0) return false;
    const highest = this.#highest.get(key) ?? 0;
    if (token < highest) return false;
    this.#highest.set(key, token);
    return true;
  }

  /** The highest token seen for `key` (0 if none). */
  highest(key: string): number {
    return this.#highest.get(key) ?? 0;
  }
}
