/**
 * A crawl of N items into a Parquet file through a DataFrameStore, with peak RSS: the fixture
 * site's price table (100 rows a page), each row parsed (toNumeric) and emitted, the store
 * writing one row group per batch. Afterwards the file is read back with polars and checked row
 * by row against the fixture data.
 *
 *   node --import tsx --conditions=@mocra/source bench/dataframe-sink.ts [--items 100000] [--batch 10000] [--sink none]
 *
 * `--sink none` runs the same crawl with items dropped, the baseline the store's share of the
 * peak is read against.
 * Peak RSS is the process's maxRSS (it includes the fixture site, which runs in this process
 * too, and the read-back at the end is reported separately). Bounded: one crawl, one pass.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { priceTableRows, startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra, toNumeric } from 'mocra';
import { DataFrameStore, readDataFrame, readHtmlTable } from 'mocra/dataframe';

const { values } = parseArgs({
  options: {
    items: { type: 'string', default: '100000' },
    batch: { type: 'string', default: '10000' },
    sink: { type: 'string', default: 'parquet' },
  },
});
const ITEMS = Math.min(Math.max(Number(values.items), 100), 1_000_000);
const BATCH = Math.max(Number(values.batch), 100);

const site = await startFixtureSite({ catalog: { books: ITEMS } });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-bench-df-'));
const file = path.join(dir, 'prices.parquet');
const store = new DataFrameStore({
  path: file,
  batchSize: BATCH,
  schema: { id: 'int64', title: 'string', price: 'float64', stock: 'int32', rating: 'int32' },
});
const spider = defineSpider({
  name: 'bench-prices',
  startUrls: [`${site.url}/data/prices?page=1`],
  parse(res, cx) {
    for (const r of readHtmlTable(res)) {
      cx.emit({
        id: Number(r.ID),
        title: r.Title,
        price: toNumeric(r.Price),
        stock: Number(r.Stock),
        rating: Number(r.Rating?.split('/')[0]),
      });
    }
    const next = res.$('a.next').attr('href');
    if (next) cx.follow(next);
  },
});

const started = performance.now();
const baseline = values.sink === 'none';
const summary = await Mocra.builder()
  .spider(spider, baseline ? () => {} : store)
  .logging({ level: 'error' })
  .run();
const seconds = (performance.now() - started) / 1000;
const crawlPeak = process.resourceUsage().maxRSS / 1024;
if (baseline) {
  console.log(
    JSON.stringify(
      {
        sink: 'none',
        items: summary.items,
        seconds: Number(seconds.toFixed(1)),
        peakRssMbDuringCrawl: Math.round(crawlPeak),
      },
      null,
      2,
    ),
  );
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
  await site.close();
  process.exit(0);
}

const frame = readDataFrame(file);
const rows = frame.sort('id').toRecords() as Record<string, unknown>[];
const expected = priceTableRows({ catalog: { books: ITEMS } });
let mismatches = 0;
expected.forEach((e, i) => {
  const r = rows[i];
  if (
    !r ||
    r.id !== Number(e.ID) ||
    r.title !== e.Title ||
    r.price !== toNumeric(e.Price) ||
    r.stock !== Number(e.Stock)
  ) {
    mismatches++;
  }
});
console.log(
  JSON.stringify(
    {
      items: summary.items,
      pages: summary.pages,
      batch: BATCH,
      seconds: Number(seconds.toFixed(1)),
      itemsPerSecond: Math.round(summary.items / seconds),
      peakRssMbDuringCrawl: Math.round(crawlPeak),
      fileMb: Number((fs.statSync(file).size / 1e6).toFixed(1)),
      readBackRows: frame.height,
      mismatches,
      peakRssMbWithReadBack: Math.round(process.resourceUsage().maxRSS / 1024),
    },
    null,
    2,
  ),
);
fs.rmSync(dir, { recursive: true, force: true });
await site.close();
if (mismatches > 0 || frame.height !== ITEMS) process.exitCode = 1;
