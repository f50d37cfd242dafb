/**
 * Returned join credit in coordination: one key per run × module × phase, changed only by
 * compare-and-set, so every backend (Redis, Raft, local) runs the same code and the one
 * conformance-tested primitive decides races.
 *
 * The value records the sum and the ids of the units it covers. A batch adds only the units
 * not covered yet — a redelivered unit whose return was written before its ack was lost counts
 * once — and exactly one successful swap takes the sum to 1: that writer is told `completed`.
 */
import type { Coordination } from '../coordination/types.js';
import { BackendUnavailableError, InternalError } from '../errors.js';
import { addPower, type CreditSum, exceedsWhole, isWhole, ZERO } from './credit.js';

interface StoredCredit {
  sum: CreditSum;
  units: Set<string>;
}

export interface CreditReturn {
  /** The returned sum is exactly 1: every unit of the phase is done. */
  whole: boolean;
  /** This call's swap made it whole (true for exactly one call per key). */
  completed: boolean;
  /** Whether this call wrote (false when every unit in the batch was already covered). */
  wrote: boolean;
  /** Swaps that lost a race and were tried again. */
  conflicts: number;
  /** Units of the batch that were already covered (redeliveries). */
  duplicates: number;
}

export interface CreditStoreOptions {
  coordination: Coordination;
  /** How long a phase's record lives. @default 86400000 (a day) */
  ttlMs?: number;
  /** Lost races tried again before giving up. @default 200 */
  maxAttempts?: number;
}

export class CreditStore {
  readonly #coordination: Coordination;
  readonly #ttlMs: number;
  readonly #maxAttempts: number;

  constructor(options: CreditStoreOptions) {
    this.#coordination = options.coordination;
    this.#ttlMs = options.ttlMs ?? 86_400_000;
    this.#maxAttempts = options.maxAttempts ?? 200;
  }

  /** Adds the units' credit (id → exponent: each holds 2^-exp) to the phase's record. */
  async return(key: string, units: ReadonlyMap<string, number>): Promise<CreditReturn> {
    for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
      const raw = await this.#coordination.get(key);
      const stored = decode(raw);
      const wasWhole = isWhole(stored.sum);
      let sum = stored.sum;
      let duplicates = 0;
      for (const [id, exp] of units) {
        if (stored.units.has(id)) {
          duplicates++;
          continue;
        }
        stored.units.add(id);
        sum = addPower(sum, exp);
      }
      if (duplicates === units.size) {
        return { whole: wasWhole, completed: false, wrote: false, conflicts: attempt, duplicates };
      }
      if (exceedsWhole(sum)) {
        throw new InternalError(
          `join credit of ${key} would exceed 1: units were given credit twice (a non-deterministic generate or follow order?)`,
        );
      }
      const next = encode({ sum, units: stored.units });
      if (await this.#coordination.compareAndSet(key, raw, next, { ttlMs: this.#ttlMs })) {
        const whole = isWhole(sum);
        return { whole, completed: whole && !wasWhole, wrote: true, conflicts: attempt, duplicates };
      }
    }
    throw new BackendUnavailableError(
      `${this.#coordination.kind} coordination`,
      `join credit of ${key}: ${this.#maxAttempts} compare-and-set attempts in a row lost a race`,
    );
  }

  /** The returned sum so far (for tests and stats). */
  async read(key: string): Promise<{ whole: boolean; units: number }> {
    const stored = decode(await this.#coordination.get(key));
    return { whole: isWhole(stored.sum), units: stored.units.size };
  }
}

function encode(stored: StoredCredit): string {
  return JSON.stringify({ s: stored.sum.scale, n: stored.sum.numerator.toString(16), u: [...stored.units] });
}

function decode(raw: string | undefined): StoredCredit {
  if (raw === undefined) return { sum: ZERO, units: new Set() };
  const value = JSON.parse(raw) as { s?: unknown; n?: unknown; u?: unknown };
  if (typeof value.s !== 'number' || typeof value.n !== 'string' || !Array.isArray(value.u))
    throw new InternalError('a join credit record in coordination is malformed');
  return {
    sum: { scale: value.s, numerator: BigInt(`0x${value.n}`) },
    units: new Set(value.u as string[]),
  };
}
