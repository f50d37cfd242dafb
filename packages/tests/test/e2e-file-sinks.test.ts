// The library's file sinks on a real crawl of the fixture catalog: createCsvSink and
// createFileSink write what `mocra run --out` writes (the same writer), read back here as CSV
// and JSON Lines; columns fixed or from the first item; a bad file name is refused up front.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { catalogBooks, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { createCsvSink, createFileSink, defineSpider, Mocra } from 'mocra';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { readCsv, readJsonl, tempDir } from './journeys/harness.js';

let site: FixtureSite;
let root: string;
beforeAll(async () => {
  site = await startFixtureSite();
  root = tempDir('file-sinks');
});
afterAll(async () => {
  await site?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

interface Row {
  title: string;
  price: string;
  tags: string[];
}

const books = () =>
  defineSpider<Row>({
    name: 'books',
    startUrls: [`${site.url}/books/page/1`],
    parse(res, cx) {
      for (const el of res.$('article.product_pod').toArray()) {
        const $ = res.$(el);
        cx.emit({
          title: $.find('h3 a').attr('title') ?? '',
          price: $.find('.price_color').text(),
          tags: ['a, b', 'c"d'],
        });
      }
    },
  });

test('createCsvSink: a header from the first item, RFC 4180 quoting, nested values as JSON', async () => {
  const file = path.join(root, 'books.csv');
  const sink = createCsvSink<Row>(file);
  await Mocra.builder().spider(books(), sink).handleSignals(false).run();
  expect(sink.written).toBe(20);
  const { header, rows } = readCsv(file);
  expect(header).toEqual(['title', 'price', 'tags']);
  expect(rows.map((r) => r.title).sort()).toEqual(
    catalogBooks()
      .slice(0, 20)
      .map((b) => b.title)
      .sort(),
  );
  expect(JSON.parse(rows[0]!.tags!)).toEqual(['a, b', 'c"d']);
});

test('fixed CSV columns, and JSON Lines by extension', async () => {
  const csv = path.join(root, 'prices.csv');
  const jsonl = path.join(root, 'books.jsonl');
  const csvSink = createCsvSink<Row>(csv, { columns: ['price', 'title'] });
  await Mocra.builder().spider(books(), csvSink).handleSignals(false).run();
  expect(readCsv(csv).header).toEqual(['price', 'title']);
  await Mocra.builder().spider(books(), createFileSink<Row>(jsonl)).handleSignals(false).run();
  const lines = readJsonl<Row>(jsonl);
  expect(lines).toHaveLength(20);
  expect(lines[0]!.tags).toEqual(['a, b', 'c"d']);
});

test('a file name of no known format is refused with the sink named', () => {
  expect(() => createFileSink(path.join(root, 'books.txt'))).toThrow(
    /file sink .*books\.txt: the file must end in \.jsonl, \.csv, \.parquet or \.arrow/,
  );
  expect(() => createCsvSink(path.join(root, 'books.jsonl'))).toThrow(/must end in \.csv/);
});
