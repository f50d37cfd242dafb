import { describe, expect, test } from 'vitest';
import { parseDate } from './dates.js';

const reference = new Date('2026-05-01T12:34:56Z');
const iso = (d: Date | null) => d?.toISOString() ?? null;

describe('parseDate', () => {
  test.each([
    ['3 hours ago', {}, '2026-05-01T09:34:56.000Z'],
    ['2 days ago', {}, '2026-04-29T00:00:00.000Z'],
    ['yesterday', {}, '2026-04-30T00:00:00.000Z'],
    ['yesterday 14:30', {}, '2026-04-30T14:30:00.000Z'],
    ['3小时前', {}, '2026-05-01T09:34:56.000Z'],
    ['2024年3月5日 14:30', { timezone: 'Asia/Shanghai' }, '2024-03-05T06:30:00.000Z'],
    ['vor 3 Stunden', { locale: 'de' }, '2026-05-01T09:34:56.000Z'],
    ['5 Mar 2024', {}, '2024-03-05T00:00:00.000Z'],
    ['March 5, 2024 2:30 pm', {}, '2024-03-05T14:30:00.000Z'],
    ['03/05/2024', {}, '2024-03-05T00:00:00.000Z'],
    ['03/05/2024', { locale: 'en-GB' }, '2024-05-03T00:00:00.000Z'],
    ['2024-03-05T14:30:00+09:00', { timezone: 'America/New_York' }, '2024-03-05T05:30:00.000Z'],
    ['2024-03-05 14:30', { timezone: 480 }, '2024-03-05T06:30:00.000Z'],
    ['2024-03-05 14:30', { timezone: 'JST' }, '2024-03-05T05:30:00.000Z'],
    // New York is UTC-5 in January and UTC-4 in July: the offset of the day found is used.
    ['2024-01-15 09:00', { timezone: 'America/New_York' }, '2024-01-15T14:00:00.000Z'],
    ['2024-07-15 09:00', { timezone: 'America/New_York' }, '2024-07-15T13:00:00.000Z'],
    ['1709649000', {}, '2024-03-05T14:30:00.000Z'],
    ['1709649000000', {}, '2024-03-05T14:30:00.000Z'],
  ] as const)('%s %o', (text, options, expected) => {
    expect(iso(parseDate(text, { reference, ...options }))).toBe(expected);
  });

  test('no date, no throw', () => {
    expect(parseDate('not a date', { reference })).toBeNull();
    expect(parseDate('', { reference })).toBeNull();
    expect(parseDate(undefined)).toBeNull();
  });

  test('an unknown zone or locale is a typed error', () => {
    expect(() => parseDate('2024-03-05', { timezone: 'Mars/Olympus' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => parseDate('2024-03-05', { timezone: 'XYZT' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => parseDate('2024-03-05', { locale: 'xx' as never })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});
