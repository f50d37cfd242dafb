/**
 * Credit for cluster-wide joins (weight-throwing termination detection), in exact arithmetic.
 *
 * A phase of a run starts with credit 1. Every unit of work holds a power of two, 2^-exp. A unit
 * that makes children gives the i-th child (1-based) half of what it still holds:
 *
 * ```
 *   unit 2^-e ─┬─ child 1: 2^-(e+1)
 *              ├─ child 2: 2^-(e+2)
 *              ├─ …
 *              ├─ child k: 2^-(e+k)
 *              └─ kept and returned when the unit is done: 2^-(e+k)
 * ```
 *
 * so no unit needs to know in advance how many children it will have, and what is out plus
 * what came back is always exactly 1. Returned credit is a sum of powers of two, kept as a
 * bigint numerator over 2^scale: the phase is over exactly when that sum is 1 — never early by
 * rounding, never stuck by it.
 *
 * Unit ids are deterministic (parent id + child index), so a parent that runs again after a
 * crash makes the same children with the same ids and the same credit, and a unit whose return
 * was already counted is recognised by its id and not counted twice.
 */
import { createHash } from 'node:crypto';

/** What a message carries: which phase of the join bookkeeping it belongs to, its id and its share. */
export interface UnitCredit {
  readonly phase: number;
  readonly id: string;
  /** The unit holds 2^-exp. */
  readonly exp: number;
}

/** Serialized on a payload as `phase:exp:id`. */
export function formatCredit(credit: UnitCredit): string {
  return `${credit.phase}:${credit.exp}:${credit.id}`;
}

/** Undefined for anything that is not a credit written by {@link formatCredit}. */
export function parseCredit(value: unknown): UnitCredit | undefined {
  if (typeof value !== 'string') return undefined;
  const first = value.indexOf(':');
  const second = value.indexOf(':', first + 1);
  if (first <= 0 || second <= first + 1 || second === value.length - 1) return undefined;
  const phase = Number(value.slice(0, first));
  const exp = Number(value.slice(first + 1, second));
  if (!Number.isSafeInteger(phase) || phase < 0 || !Number.isSafeInteger(exp) || exp < 0) return undefined;
  return { phase, exp, id: value.slice(second + 1) };
}

/** The i-th child (1-based) of a unit: its id and its half of what the parent still holds. */
export function childCredit(parent: UnitCredit, index: number): UnitCredit {
  return { phase: parent.phase, id: childId(parent.id, index), exp: parent.exp + index };
}

/**
 * A child's id: a hash of the parent's id and the index, so ids stay short however deep the
 * run goes (a collision would need 2^64-scale luck within one run).
 */
export function childId(parentId: string, index: number): string {
  return createHash('sha256').update(`${parentId}/${index}`).digest('base64url').slice(0, 16);
}

/** A sum of returned credit: `numerator / 2^scale`. */
export interface CreditSum {
  readonly numerator: bigint;
  readonly scale: number;
}

export const ZERO: CreditSum = { numerator: 0n, scale: 0 };

/** Adds 2^-exp to a sum (exact). */
export function addPower(sum: CreditSum, exp: number): CreditSum {
  if (exp <= sum.scale)
    return { numerator: sum.numerator + (1n << BigInt(sum.scale - exp)), scale: sum.scale };
  return { numerator: (sum.numerator << BigInt(exp - sum.scale)) + 1n, scale: exp };
}

/** Whether the sum is exactly 1: every unit of the phase is done. */
export function isWhole(sum: CreditSum): boolean {
  return sum.numerator === 1n << BigInt(sum.scale);
}

/** Whether the sum is above 1 — only possible when units were counted twice (a bug, never expected). */
export function exceedsWhole(sum: CreditSum): boolean {
  return sum.numerator > 1n << BigInt(sum.scale);
}
