// Scrape an HTML <table> across pages into one Parquet file, with prices read by toNumeric
// ("£23.45" → 23.45) and a schema checked on every row. The DataFrameStore is the spider's
// sink: it writes a batch at a time, so memory stays flat however many pages there are.
// Runs offline against mocra's fixture site (needs the optional package nodejs-polars):
//
//   node --import tsx --conditions=@mocra/source examples/table-to-parquet.ts
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra, toNumeric } from 'mocra';
import { DataFrameStore, readDataFrame, readHtmlTable } from 'mocra/dataframe';

interface PriceRow {
  id: number;
  title: string;
  price: number;
  stock: number;
  rating: number;
}

const site = await startFixtureSite({ catalog: { books: 1000 } });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-table-'));
const file = path.join(dir, 'prices.parquet');

const store = new DataFrameStore<PriceRow>({
  path: file,
  schema: { id: 'int64', title: 'string', price: 'float64', stock: 'int32', rating: 'int32' },
  batchSize: 250,
});

const prices = defineSpider<PriceRow>({
  name: 'prices',
  startUrls: [`${site.url}/data/prices?page=1`],
  parse(res, cx) {
    for (const row of readHtmlTable(res, { selector: 'table#prices' })) {
      cx.emit({
        id: Number(row.ID),
        title: row.Title ?? '',
        price: toNumeric(row.Price) ?? Number.NaN,
        stock: Number(row.Stock),
        rating: toNumeric(row.Rating?.split('/')[0]) ?? 0,
      });
    }
    const next = res.$('a.next').attr('href');
    if (next) cx.follow(next);
  },
});

const summary = await Mocra.builder().spider(prices, store).logging({ level: 'error' }).run();

const frame = readDataFrame(file);
const total = frame.getColumn('price').sum() as number;
console.log(`${summary.items} rows from ${summary.pages} pages → ${path.basename(file)}`);
console.log(`read back: ${frame.height} rows, columns ${frame.columns.join(', ')}`);
console.log(`first: ${JSON.stringify(frame.head(1).toRecords()[0])}`);
console.log(`total price: ${total.toFixed(2)}`);
fs.rmSync(dir, { recursive: true, force: true });
await site.close();
