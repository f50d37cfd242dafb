import { expect, test } from 'vitest';
import { TierTracker } from './tier-tracker.js';

const ladder = [0, 1, 2];

test('escalates after consecutive failures at the current tier, not before', () => {
  const t = new TierTracker(ladder, { escalateAfter: 2, deescalateAfter: 0, maxScopes: 10 });
  expect(t.current('a.test')).toBe(0);
  expect(t.onFailure('a.test', 0)).toBeUndefined();
  t.onSuccess('a.test', 0); // a success breaks the streak
  expect(t.onFailure('a.test', 0)).toBeUndefined();
  expect(t.onFailure('a.test', 0)).toEqual({ scope: 'a.test', from: 0, to: 1 });
  expect(t.current('a.test')).toBe(1);
  expect(t.current('b.test')).toBe(0);
});

test('late reports about another tier do not move the scope', () => {
  const t = new TierTracker(ladder, { escalateAfter: 1, deescalateAfter: 1, maxScopes: 10 });
  t.onFailure('h', 0);
  expect(t.current('h')).toBe(1);
  // Requests that started on tier 0 fail after the move: ignored.
  expect(t.onFailure('h', 0)).toBeUndefined();
  expect(t.onSuccess('h', 2)).toBeUndefined();
  expect(t.current('h')).toBe(1);
});

test('steps down after successes, on probation: one failure sends it straight back', () => {
  const t = new TierTracker(ladder, { escalateAfter: 3, deescalateAfter: 2, maxScopes: 10 });
  for (let i = 0; i < 6; i++) t.onFailure('h', t.current('h'));
  expect(t.current('h')).toBe(2);
  t.onSuccess('h', 2);
  expect(t.onSuccess('h', 2)).toEqual({ scope: 'h', from: 2, to: 1 });
  expect(t.onFailure('h', 1)).toEqual({ scope: 'h', from: 1, to: 2 });
  t.onSuccess('h', 2);
  t.onSuccess('h', 2);
  expect(t.current('h')).toBe(1);
  t.onSuccess('h', 1); // probation passed: escalation needs the full streak again
  t.onFailure('h', 1);
  expect(t.current('h')).toBe(1);
});

test('never leaves the ladder and forgets the least recently used scopes', () => {
  const t = new TierTracker([1, 2], { escalateAfter: 1, deescalateAfter: 1, maxScopes: 2 });
  t.onFailure('a', 1);
  t.onFailure('a', 2);
  expect(t.current('a')).toBe(2);
  t.onSuccess('a', 2);
  t.onSuccess('a', 1);
  expect(t.current('a')).toBe(1);
  t.onFailure('a', 1);
  t.onFailure('b', 1);
  t.onFailure('c', 1); // evicts a
  expect(t.size).toBe(2);
  expect(t.current('a')).toBe(1);
  expect(t.distribution()).toEqual({ 1: 0, 2: 2 });
});
