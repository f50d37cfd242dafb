import { expect, test } from 'vitest';
import { parseDuration } from './duration.js';

test('parseDuration reads milliseconds and unit strings', () => {
  expect(parseDuration(250)).toBe(250);
  expect(parseDuration('250')).toBe(250);
  expect(parseDuration('500ms')).toBe(500);
  expect(parseDuration('30s')).toBe(30_000);
  expect(parseDuration('5m')).toBe(300_000);
  expect(parseDuration('1h')).toBe(3_600_000);
  expect(parseDuration('1d')).toBe(86_400_000);
  expect(parseDuration('1m30s')).toBe(90_000);
  expect(parseDuration('1.5s')).toBe(1_500);
  for (const bad of [-1, Number.NaN, '', '5 minutes', '5x', '1m 30s', true, null, {}]) {
    expect(parseDuration(bad), String(bad)).toBeUndefined();
  }
});
