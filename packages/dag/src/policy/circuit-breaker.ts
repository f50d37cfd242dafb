/**
 * Circuit breakers keyed by name. A breaker counts consecutive failed attempts; at the
 * threshold it opens until `openMs` have passed, then lets attempts through again (half-open):
 * the next success closes it, the next failure opens it again at once.
 *
 * ```
 *   closed ──(failures ≥ threshold)──▶ open ──(openMs elapsed)──▶ half-open
 *     ▲                                  ▲                           │
 *     └──────────── success ─────────────┼──────── failure ──────────┘
 * ```
 */
export interface BreakerState {
  consecutiveFailures: number;
  /** Epoch ms until which no attempt starts; 0 when closed. */
  openUntil: number;
  halfOpen: boolean;
}

export class CircuitBreakers {
  readonly #states = new Map<string, BreakerState>();

  #state(key: string): BreakerState {
    let s = this.#states.get(key);
    if (s === undefined) {
      s = { consecutiveFailures: 0, openUntil: 0, halfOpen: false };
      this.#states.set(key, s);
    }
    return s;
  }

  /** Milliseconds until an attempt may start (0 = now). Marks the breaker half-open once its window has passed. */
  waitMs(key: string, now: number): number {
    const s = this.#states.get(key);
    if (s === undefined || s.openUntil === 0) return 0;
    if (now < s.openUntil) return s.openUntil - now;
    s.openUntil = 0;
    s.halfOpen = true;
    return 0;
  }

  onSuccess(key: string): void {
    const s = this.#states.get(key);
    if (s === undefined) return;
    s.consecutiveFailures = 0;
    s.openUntil = 0;
    s.halfOpen = false;
  }

  /** Records a failed attempt; returns true when this failure opened the breaker. */
  onFailure(key: string, threshold: number, openMs: number, now: number): boolean {
    const s = this.#state(key);
    s.consecutiveFailures++;
    if (s.halfOpen || s.consecutiveFailures >= threshold) {
      s.halfOpen = false;
      s.openUntil = now + openMs;
      return true;
    }
    return false;
  }

  /** A copy of one breaker's state, for inspection. */
  snapshot(key: string): Readonly<BreakerState> | undefined {
    const s = this.#states.get(key);
    return s && { ...s };
  }
}
