import { expect, test } from 'vitest';
import { RateWindow } from './rate-window.js';

test('a sliding window allows `limit` acquisitions per interval', () => {
  const w = new RateWindow(3, 1_000);
  expect(w.readyAt(0)).toBe(0);
  w.record(0);
  w.record(100);
  w.record(200);
  expect(w.used(200)).toBe(3);
  // Full: the oldest (t=0) leaves the window at t=1000.
  expect(w.readyAt(300)).toBe(1_000);
  expect(w.readyAt(1_000)).toBe(1_000);
  w.record(1_000);
  // Now the oldest is t=100.
  expect(w.readyAt(1_000)).toBe(1_100);
  expect(w.used(1_050)).toBe(3);
  expect(w.used(5_000)).toBe(0);
  expect(w.readyAt(5_000)).toBe(5_000);
});
