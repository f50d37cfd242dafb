import { describe, expect, test } from 'vitest';
import { type Backoff, backoffDelayMs, parseRetryAfterMs } from '../src/policy/backoff.js';

const base = { baseMs: 100, maxMs: 1_000, factor: 2, jitter: 0 } as const;
const noJitter = () => 0.999_999;

describe('backoffDelayMs', () => {
  test('fixed, linear and exponential curves, capped', () => {
    const fixed: Backoff = { ...base, strategy: 'fixed' };
    const linear: Backoff = { ...base, strategy: 'linear' };
    const exp: Backoff = { ...base, strategy: 'exponential' };
    expect([1, 2, 3, 20].map((n) => backoffDelayMs(fixed, n))).toEqual([100, 100, 100, 100]);
    expect([1, 2, 3, 20].map((n) => backoffDelayMs(linear, n))).toEqual([100, 200, 300, 1_000]);
    expect([1, 2, 3, 4, 5, 2000].map((n) => backoffDelayMs(exp, n))).toEqual([
      100, 200, 400, 800, 1_000, 1_000,
    ]);
    expect(backoffDelayMs({ ...exp, factor: 3 }, 3)).toBe(900);
    expect(backoffDelayMs({ ...base, strategy: 'none' }, 7)).toBe(0);
    // retry numbers below 1 count as the first retry
    expect(backoffDelayMs(linear, 0)).toBe(100);
  });

  test('jitter only shortens, by at most jitter · delay', () => {
    const exp: Backoff = { ...base, strategy: 'exponential', jitter: 0.5 };
    expect(backoffDelayMs(exp, 3, () => 0)).toBe(400);
    expect(backoffDelayMs(exp, 3, () => 0.5)).toBe(300);
    expect(backoffDelayMs(exp, 3, noJitter)).toBe(200);
    const full: Backoff = { ...exp, jitter: 1 };
    expect(backoffDelayMs(full, 20, () => 0)).toBe(1_000); // the cap stays a cap
    expect(backoffDelayMs(full, 20, () => 0.25)).toBe(750);
    for (let i = 0; i < 200; i++) {
      const d = backoffDelayMs(exp, 4);
      expect(d).toBeGreaterThanOrEqual(400);
      expect(d).toBeLessThanOrEqual(800);
    }
  });
});

describe('parseRetryAfterMs', () => {
  const now = Date.UTC(2030, 0, 1, 12, 0, 0);

  test('delta-seconds', () => {
    expect(parseRetryAfterMs('3', now)).toBe(3_000);
    expect(parseRetryAfterMs(' 0 ', now)).toBe(0);
    expect(parseRetryAfterMs('86400', now)).toBe(86_400_000);
  });

  test('HTTP-date (IMF-fixdate and the obsolete forms), past dates are 0', () => {
    expect(parseRetryAfterMs(new Date(now + 5_000).toUTCString(), now)).toBe(5_000);
    expect(parseRetryAfterMs('Tuesday, 01-Jan-30 12:00:07 GMT', now)).toBe(7_000);
    expect(parseRetryAfterMs('Tue Jan  1 12:00:09 2030', now)).toBe(9_000); // asctime is GMT, not local time
    expect(parseRetryAfterMs(new Date(now - 60_000).toUTCString(), now)).toBe(0);
  });

  test('absent or unreadable values are undefined (the backoff applies)', () => {
    for (const v of [undefined, null, '', '  ', 'soon', '-1', '1.5', '3s', '99999999999999999999']) {
      expect(parseRetryAfterMs(v, now)).toBeUndefined();
    }
  });
});
