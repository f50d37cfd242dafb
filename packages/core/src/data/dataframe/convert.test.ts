import { describe, expect, test } from 'vitest';
import { dataFrameToItems, readHtmlTable, tableToDataFrame, toDataFrame } from './convert.js';

const html = `<html><body>
<table id="other"><tr><td>ignore me</td></tr></table>
<table class="prices">
  <thead><tr><th colspan="2">Product</th><th>Stock</th></tr>
         <tr><th>Name</th><th>Price</th><th>Stock</th></tr></thead>
  <tbody>
    <tr><td>Tea <b>green</b></td><td>¥1.2万</td><td rowspan="2">12</td></tr>
    <tr><td>Coffee</td><td>1,299.00 €</td></tr>
    <tr><td>Water</td><td></td><td>3</td></tr>
    <tr><td> </td><td></td><td></td></tr>
  </tbody>
</table></body></html>`;

describe('HTML tables', () => {
  test('rows keyed by the last header row, spans filled, blank rows dropped', () => {
    expect(readHtmlTable(html, { selector: 'table.prices' })).toEqual([
      { Name: 'Tea green', Price: '¥1.2万', Stock: '12' },
      { Name: 'Coffee', Price: '1,299.00 €', Stock: '12' },
      { Name: 'Water', Price: '', Stock: '3' },
    ]);
    expect(readHtmlTable('<table><tr><td>a</td><td>b</td></tr></table>')).toEqual([
      { column_1: 'a', column_2: 'b' },
    ]);
    expect(() => readHtmlTable(html, { selector: 'table.none' })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });

  test('tableToDataFrame: number columns where every cell is a number', () => {
    const frame = tableToDataFrame(html, { selector: 'table.prices' });
    expect(frame.toRecords()).toEqual([
      { Name: 'Tea green', Price: 12000, Stock: 12 },
      { Name: 'Coffee', Price: 1299, Stock: 12 },
      { Name: 'Water', Price: null, Stock: 3 },
    ]);
  });
});

test('items to a DataFrame and back', () => {
  const items = [
    { a: 1, b: 'x', c: new Date('2024-01-01T00:00:00Z') },
    { a: 2, b: null, c: null },
  ];
  const frame = toDataFrame(items);
  expect(frame.shape).toEqual({ height: 2, width: 3 });
  expect(dataFrameToItems(frame)).toEqual(items);
  expect(() => toDataFrame([{ a: 1 }, { a: 'x' }])).toThrow(
    expect.objectContaining({ code: 'MOCRA_ERR_DATAFRAME_SCHEMA' }),
  );
});
