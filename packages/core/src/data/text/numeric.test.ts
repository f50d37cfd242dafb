import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { toNumeric } from './numeric.js';

describe('toNumeric', () => {
  test.each([
    ['1,299.00 €', 1299],
    ['1.299,00 €', 1299],
    ['1 299,50', 1299.5],
    ["1'299.50", 1299.5],
    ['$1,234,567.89', 1234567.89],
    ['EUR 12,50', 12.5],
    ['USD1,000', 1000],
    ['¥1.2万', 12000],
    ['1.2万', 12000],
    ['12.5亿美元', 1.25e9],
    ['约1.2万人', 12000],
    ['3千5百', 3500],
    ['1万2千', 12000],
    ['一千二百三十四', 1234],
    ['十五', 15],
    ['两万五', 25000],
    ['三千五', 3500],
    ['一百零五', 105],
    ['一亿二千万', 1.2e8],
    ['一万亿', 1e12],
    ['二〇二四', 2024],
    ['三点一四', 3.14],
    ['负五', -5],
    ['１２３', 123],
    ['12%', 0.12],
    ['(3.5%)', -0.035],
    ['−42', -42],
    ['-1,5', -1.5],
    ['2.4K', 2400],
    ['1.5 M', 1.5e6],
    ['3bn', 3e9],
    ['1,234', 1234],
    ['1.234', 1.234],
    ['1.234.567', 1234567],
    ['12,5', 12.5],
    [' 42 ', 42],
    [42, 42],
  ])('%s → %s', (input, expected) => {
    expect(toNumeric(input)).toBe(expected);
  });

  test.each([[''], ['abc'], ['1 and 2'], [null], [undefined], [{}], [Number.NaN], ['五 and 6']])(
    '%s → null',
    (input) => {
      expect(toNumeric(input)).toBeNull();
    },
  );

  test('decimalSeparator settles a lone separator', () => {
    expect(toNumeric('1.234', { decimalSeparator: ',' })).toBe(1234);
    expect(toNumeric('1,234', { decimalSeparator: ',' })).toBe(1.234);
    expect(toNumeric('12%', { percent: 'number' })).toBe(12);
  });

  // Formatting a number with ICU and reading it back gives the number.
  const amounts = fc.double({ min: -1e12, max: 1e12, noNaN: true }).map((n) => Math.round(n * 100) / 100);
  test.each([
    ['en-US', { style: 'currency', currency: 'USD' }, '.'],
    ['en-US', {}, '.'],
    ['de-DE', { style: 'currency', currency: 'EUR' }, ','],
    ['fr-FR', { style: 'currency', currency: 'EUR' }, ','],
    ['de-CH', {}, '.'],
    ['ja-JP', { style: 'currency', currency: 'JPY', maximumFractionDigits: 2 }, '.'],
    ['zh-CN', { style: 'currency', currency: 'CNY' }, '.'],
  ] as const)('round trip through Intl %s %o', (locale, opts, decimalSeparator) => {
    const format = new Intl.NumberFormat(locale, { ...opts, maximumFractionDigits: 2 });
    fc.assert(
      fc.property(amounts, (n) => {
        expect((toNumeric(format.format(n), { decimalSeparator }) ?? Number.NaN) + 0).toBe(n + 0);
      }),
    );
  });

  test('round trip through Chinese compact notation (万, 亿)', () => {
    const format = new Intl.NumberFormat('zh-CN', { notation: 'compact', maximumFractionDigits: 4 });
    fc.assert(
      fc.property(fc.integer({ min: 10_000, max: 9_000_000_000 }), (n) => {
        const text = format.format(n);
        const back = toNumeric(text);
        // compact notation keeps four fraction digits of the unit: the read-back is that value
        const unit = n >= 1e8 ? 1e8 : 1e4;
        expect(back).toBeCloseTo((Math.round((n / unit) * 1e4) / 1e4) * unit, 0);
      }),
    );
  });

  test('percent round trip', () => {
    const format = new Intl.NumberFormat('en-US', { style: 'percent', maximumFractionDigits: 2 });
    fc.assert(
      fc.property(fc.integer({ min: -1_000_000, max: 1_000_000 }), (bp) => {
        const n = bp / 10_000;
        expect(toNumeric(format.format(n))).toBeCloseTo(n, 10);
      }),
    );
  });
});
