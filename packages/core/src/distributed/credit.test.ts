import { describe, expect, test } from 'vitest';
import {
  addPower,
  type CreditSum,
  childCredit,
  exceedsWhole,
  formatCredit,
  isWhole,
  parseCredit,
  type UnitCredit,
  ZERO,
} from './credit.js';

/** Splits like the engine does: each unit gives its children halves and returns the rest. */
function returns(unit: UnitCredit, children: number): { kept: number; children: UnitCredit[] } {
  const made = Array.from({ length: children }, (_, i) => childCredit(unit, i + 1));
  return { kept: unit.exp + children, children: made };
}

describe('join credit', () => {
  test('a 1,000-way fan-out and its parent return exactly 1, and not before the last unit', () => {
    const seed: UnitCredit = { phase: 0, exp: 0, id: 'seed' };
    const { kept, children } = returns(seed, 1_000);
    let sum: CreditSum = addPower(ZERO, kept);
    for (const [i, child] of children.entries()) {
      expect(isWhole(sum)).toBe(false);
      sum = addPower(sum, child.exp);
      if (i < children.length - 1) expect(isWhole(sum)).toBe(false);
    }
    expect(isWhole(sum)).toBe(true);
    expect(exceedsWhole(sum)).toBe(false);
  });

  test('any order of returns, over a deep uneven tree, sums to 1 only when every unit is in', () => {
    // A crawl shape: every page has (depth-dependent) many children; return in a shuffled order.
    const done: number[] = [];
    const walk = (unit: UnitCredit, depth: number): void => {
      const k = depth >= 5 ? 0 : 2 + ((depth * 7 + unit.exp) % 5);
      const { kept, children } = returns(unit, k);
      done.push(kept);
      for (const c of children) walk(c, depth + 1);
    };
    walk({ phase: 0, exp: 0, id: 'seed' }, 0);
    expect(done.length).toBeGreaterThan(100);
    let seed = 7;
    const order = done.map((exp) => {
      seed = (seed * 48_271) % 2_147_483_647;
      return { exp, r: seed };
    });
    order.sort((a, b) => a.r - b.r);
    let sum: CreditSum = ZERO;
    for (const [i, { exp }] of order.entries()) {
      sum = addPower(sum, exp);
      expect(isWhole(sum)).toBe(i === order.length - 1);
    }
    // One unit counted twice is detectable, never taken for done.
    expect(exceedsWhole(addPower(sum, order[0]!.exp))).toBe(true);
  });

  test('children ids are deterministic and distinct; credit survives formatting', () => {
    const parent: UnitCredit = { phase: 2, exp: 3, id: 'abc' };
    const a = childCredit(parent, 1);
    expect(childCredit(parent, 1)).toEqual(a);
    expect(childCredit(parent, 2).id).not.toBe(a.id);
    expect(a).toMatchObject({ phase: 2, exp: 4 });
    expect(parseCredit(formatCredit(a))).toEqual(a);
    for (const bad of [undefined, 3, '', 'x:1:a', '1:-1:a', '1:2:', ':1:a', '1:1.5:a'])
      expect(parseCredit(bad)).toBeUndefined();
  });
});
