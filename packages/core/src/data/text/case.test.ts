import { expect, test } from 'vitest';
import { keysToCase, toCase } from './case.js';

test('toCase', () => {
  expect(toCase('XMLHttpRequest', 'snake')).toBe('xml_http_request');
  expect(toCase('product name', 'camel')).toBe('productName');
  expect(toCase('product_name', 'kebab')).toBe('product-name');
  expect(toCase('productName', 'constant')).toBe('PRODUCT_NAME');
  expect(toCase('product-name', 'pascal')).toBe('ProductName');
  expect(() => toCase('x', 'shouty' as never)).toThrow(
    expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
  );
});

test('keysToCase renames own keys only', () => {
  expect(keysToCase({ 'Product Name': 1, unitPrice: { innerKey: 2 } }, 'snake')).toEqual({
    product_name: 1,
    unit_price: { innerKey: 2 },
  });
});
