import { describe, expect, test } from 'vitest';
import { InvalidCronError } from '../errors.js';
import { cron, every, nextFireTime, previousFireTime, runNow, toCronSchedule } from './cron.js';

const T0 = Date.UTC(2024, 0, 1, 0, 0, 0); // a Monday

describe('cron()', () => {
  test('accepts 6 fields (seconds first) and 5 fields (minute precision)', () => {
    const six = cron('*/10 * * * * *', { timezone: 'UTC' });
    expect(nextFireTime(six, T0)).toBe(T0 + 10_000);
    const five = cron('*/5 * * * *', { timezone: 'UTC' });
    expect(nextFireTime(five, T0)).toBe(T0 + 5 * 60_000);
    expect(five).toEqual({ expression: '*/5 * * * *', timezone: 'UTC', runNow: false, enabled: true });
  });

  test('invalid schedules are InvalidCronError with a reason', () => {
    for (const [expression, reason] of [
      ['* * * *', /five, six, or seven/],
      ['0 0 0 * * * 2030', /5 or 6 parts/],
      ['61 * * * *', /minute: 61/],
      ['bogus', /space separated/],
    ] as const) {
      let error: unknown;
      try {
        cron(expression);
      } catch (err) {
        error = err;
      }
      expect(error, expression).toBeInstanceOf(InvalidCronError);
      expect(error).toMatchObject({ code: 'MOCRA_ERR_CRON_EXPRESSION', expression });
      expect((error as Error).message).toMatch(reason);
    }
    expect(() => cron('* * * * *', { timezone: 'Mars/Base' })).toThrowError(
      /invalid cron schedule.*Mars\/Base/,
    );
  });

  test('time zones are honoured', () => {
    const tokyo = every.days(1).at(3, 30).timezone('Asia/Tokyo').build();
    // 03:30 in Tokyo (UTC+9) is 18:30 UTC the day before
    expect(new Date(nextFireTime(tokyo, T0)!).toISOString()).toBe('2024-01-01T18:30:00.000Z');
  });

  test('previousFireTime includes the reference time itself', () => {
    const s = cron('0 * * * * *', { timezone: 'UTC' });
    expect(previousFireTime(s, T0 + 60_000)).toBe(T0 + 60_000);
    expect(previousFireTime(s, T0 + 59_999)).toBe(T0);
  });
});

describe('every(...) helpers', () => {
  test('each interval builds the expected expression', () => {
    expect(every.seconds(15).expression).toBe('*/15 * * * * *');
    expect(every.minutes(5).expression).toBe('0 */5 * * * *');
    expect(every.minutes(5).atSecond(30).expression).toBe('30 */5 * * * *');
    expect(every.hours(2).atMinute(15).expression).toBe('0 15 */2 * * *');
    expect(every.days(1).at(3, 30).expression).toBe('0 30 3 */1 * *');
    expect(every.weekdays([5, 1, 3, 1]).at(9).expression).toBe('0 0 9 * * 1,3,5');
    expect(every.months(3).onDay(15).at(6).expression).toBe('0 0 6 15 */3 *');
  });

  test('run-now variants', () => {
    expect(every.hours(1).runNowAndSchedule().build()).toMatchObject({
      expression: '0 0 */1 * * *',
      runNow: true,
    });
    expect(runNow()).toEqual({ expression: undefined, timezone: undefined, runNow: true, enabled: true });
    expect(nextFireTime(runNow(), T0)).toBeUndefined();
  });

  test('out-of-range arguments are InvalidCronError', () => {
    expect(() => every.minutes(0)).toThrowError(InvalidCronError);
    expect(() => every.minutes(60)).toThrowError(/1–59/);
    expect(() => every.hours(1.5)).toThrowError(InvalidCronError);
    expect(() => every.days(1).at(24)).toThrowError(/hour must be an integer 0–23, got 24/);
    expect(() => every.months(1).onDay(0)).toThrowError(/day must be/);
    expect(() => every.weekdays([])).toThrowError(/non-empty list/);
    expect(() => every.weekdays([8])).toThrowError(InvalidCronError);
  });

  test('toCronSchedule accepts an expression, a builder or a schedule, and validates each', () => {
    expect(toCronSchedule('0 0 * * *').expression).toBe('0 0 * * *');
    expect(toCronSchedule(every.minutes(2)).expression).toBe('0 */2 * * * *');
    expect(
      toCronSchedule({ expression: '0 0 * * *', timezone: undefined, runNow: true, enabled: false }),
    ).toMatchObject({
      runNow: true,
      enabled: false,
    });
    expect(() =>
      toCronSchedule({ expression: 'x', timezone: undefined, runNow: false, enabled: true }),
    ).toThrowError(InvalidCronError);
    expect(() =>
      toCronSchedule({ expression: undefined, timezone: undefined, runNow: false, enabled: true }),
    ).toThrowError(/needs an expression or runNow/);
    expect(() => toCronSchedule(42 as never)).toThrowError(InvalidCronError);
  });
});
