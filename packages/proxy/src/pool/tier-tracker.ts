/**
 * Tiered escalation per scope (a host, or a session key): which rung of the tier ladder a
 * scope should use now.
 *
 * ```
 *   ladder:  [ 0 (direct) ]──▶[ 1 (cheap) ]──▶[ 2 (expensive) ]
 *             escalateAfter consecutive failures at the current rung: one rung up
 *             deescalateAfter consecutive successes: one rung down, on probation —
 *             the first failure on probation goes straight back up
 * ```
 *
 * Only reports about the scope's current rung move it; a late report about another rung (a
 * request that started before the last change) is ignored, so a burst of in-flight failures
 * cannot push a host up several tiers at once. Scopes are kept in LRU order and bounded.
 */
export interface TierChange {
  readonly scope: string;
  readonly from: number;
  readonly to: number;
}

interface ScopeState {
  level: number;
  failures: number;
  successes: number;
  probation: boolean;
}

export interface TierTrackerOptions {
  escalateAfter: number;
  /** `0` never steps down. */
  deescalateAfter: number;
  maxScopes: number;
}

export class TierTracker {
  readonly #scopes = new Map<string, ScopeState>();

  /** @param ladder distinct tiers, ascending */
  constructor(
    readonly ladder: readonly number[],
    readonly options: TierTrackerOptions,
  ) {}

  /** The tier `scope` should use now (the lowest rung for a scope never seen). */
  current(scope: string): number {
    const state = this.#scopes.get(scope);
    return this.ladder[state?.level ?? 0]!;
  }

  /** Number of scopes remembered. */
  get size(): number {
    return this.#scopes.size;
  }

  /** How many remembered scopes sit on each tier. */
  distribution(): Record<number, number> {
    const out: Record<number, number> = {};
    for (const tier of this.ladder) out[tier] = 0;
    for (const state of this.#scopes.values()) {
      const tier = this.ladder[state.level]!;
      out[tier] = (out[tier] ?? 0) + 1;
    }
    return out;
  }

  onFailure(scope: string, tier: number): TierChange | undefined {
    const state = this.#touch(scope);
    if (this.ladder[state.level] !== tier) return undefined;
    state.successes = 0;
    state.failures++;
    const top = this.ladder.length - 1;
    if (state.level < top && (state.probation || state.failures >= this.options.escalateAfter)) {
      return this.#move(scope, state, state.level + 1, false);
    }
    return undefined;
  }

  onSuccess(scope: string, tier: number): TierChange | undefined {
    const state = this.#touch(scope);
    if (this.ladder[state.level] !== tier) return undefined;
    state.failures = 0;
    state.probation = false;
    state.successes++;
    const after = this.options.deescalateAfter;
    if (after > 0 && state.level > 0 && state.successes >= after) {
      return this.#move(scope, state, state.level - 1, true);
    }
    return undefined;
  }

  #move(scope: string, state: ScopeState, level: number, probation: boolean): TierChange {
    const from = this.ladder[state.level]!;
    state.level = level;
    state.failures = 0;
    state.successes = 0;
    state.probation = probation;
    return { scope, from, to: this.ladder[level]! };
  }

  #touch(scope: string): ScopeState {
    let state = this.#scopes.get(scope);
    if (state) {
      this.#scopes.delete(scope);
    } else {
      state = { level: 0, failures: 0, successes: 0, probation: false };
      if (this.#scopes.size >= this.options.maxScopes) {
        const oldest = this.#scopes.keys().next();
        if (!oldest.done) this.#scopes.delete(oldest.value);
      }
    }
    this.#scopes.set(scope, state);
    return state;
  }
}
