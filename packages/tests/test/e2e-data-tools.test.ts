// The data tools as a spider author uses them, on the real engine against the fixture site:
// an API signed by the site's own JS/WASM (run in the sandbox pool), a spreadsheet download
// read with res.workbook(), and a table crawl written to Parquet and Arrow by a DataFrameStore,
// read back with polars and checked row by row. `import 'mocra'` loads none of the heavy parts.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  type FixtureSite,
  priceTableRows,
  SIGNATURE_HEADER,
  signedItems,
  spreadsheetRows,
  startFixtureSite,
} from '@mocra/testkit';
import { defineSpider, Mocra, toNumeric } from 'mocra';
import { DataFrameStore, readDataFrame, readHtmlTable } from 'mocra/dataframe';
import { JsWorkerPool } from 'mocra/sandbox';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

const BOOKS = 5000;
let site: FixtureSite;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-data-tools-'));
beforeAll(async () => {
  site = await startFixtureSite({ catalog: { books: BOOKS } });
});
afterAll(async () => {
  await site.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test("a spider gets the signed API's data by running the site's JS and WASM in the sandbox", async () => {
  let setUp = false;
  const items: unknown[] = [];
  const spider = defineSpider<unknown>({
    name: 'signed',
    startUrls: [`${site.url}/data/signed`],
    async parse(res, cx) {
      const meta = res.request.meta as Record<string, string>;
      if (res.contentType === 'text/html') {
        cx.follow(res.$('script[src]').attr('src')!, {
          meta: { step: 'js', wasm: res.$('#app').attr('data-wasm')! },
        });
      } else if (meta.step === 'js') {
        cx.follow(meta.wasm!, { meta: { step: 'wasm', js: res.text() } });
      } else if (meta.step === 'wasm') {
        const { js } = meta;
        const wasm = res.body;
        const signer = new JsWorkerPool({
          size: 2,
          timeoutMs: 500,
          memoryLimitMb: 32,
          async setup(rt) {
            await rt.instantiateWasm('signerWasm', wasm);
            await rt.exec(js!);
          },
        });
        const ts = Math.floor(Date.now() / 1000);
        for (let page = 1; page <= 3; page++) {
          const p = `/data/api/items?page=${page}`;
          const signature = String(await signer.call('signRequest', p, ts));
          cx.follow(`${p}&ts=${ts}`, { headers: { [SIGNATURE_HEADER]: signature }, meta: { step: 'api' } });
        }
        await signer.close();
        setUp = true;
      } else {
        expect(res.status).toBe(200);
        for (const item of res.json<{ items: unknown[] }>().items) cx.emit(item);
      }
    },
  });
  const summary = await Mocra.builder()
    .spider(spider, (item) => {
      items.push(item);
    })
    .logging({ level: 'error' })
    .run();
  expect(setUp).toBe(true);
  expect(summary.deadLettered).toBe(0);
  const byId = (a: unknown, b: unknown) => (a as { id: number }).id - (b as { id: number }).id;
  expect(items.sort(byId)).toEqual(signedItems({ catalog: { books: BOOKS } }));
});

test('a spider reads the spreadsheet download with res.workbook()', async () => {
  const rows: unknown[] = [];
  const spider = defineSpider<unknown>({
    name: 'xlsx',
    startUrls: [`${site.url}/data/books.xlsx`],
    async parse(res, cx) {
      const book = await res.workbook();
      for (const row of book.sheet('Books').rows()) cx.emit(row);
      expect(book.sheet('Books').toDataFrame().height).toBe(50);
    },
  });
  await Mocra.builder()
    .spider(spider, (row) => {
      rows.push(row);
    })
    .logging({ level: 'error' })
    .run();
  expect(rows).toEqual(spreadsheetRows({ catalog: { books: BOOKS } }));
});

describe('a table crawl into a DataFrameStore', () => {
  const expected = priceTableRows({ catalog: { books: BOOKS } }).map((r) => ({
    id: Number(r.ID),
    title: r.Title,
    price: toNumeric(r.Price),
    stock: Number(r.Stock),
  }));

  test.each(['parquet', 'arrow'] as const)(
    '%s: every row read back with polars, in id order',
    async (ext) => {
      const file = path.join(tmp, `prices.${ext}`);
      const store = new DataFrameStore({
        path: file,
        batchSize: 1000,
        schema: { id: 'int64', title: 'string', price: 'float64', stock: 'int32' },
      });
      const spider = defineSpider({
        name: `prices-${ext}`,
        startUrls: [`${site.url}/data/prices?page=1`],
        parse(res, cx) {
          for (const r of readHtmlTable(res)) {
            cx.emit({ id: Number(r.ID), title: r.Title, price: toNumeric(r.Price), stock: Number(r.Stock) });
          }
          const next = res.$('a.next').attr('href');
          if (next) cx.follow(next);
        },
      });
      const summary = await Mocra.builder().spider(spider, store).logging({ level: 'error' }).run();
      expect(summary.items).toBe(BOOKS);
      expect(fs.existsSync(`${file}.parts`)).toBe(false);
      const frame = readDataFrame(file);
      expect(frame.height).toBe(BOOKS);
      const rows = frame.sort('id').toRecords() as typeof expected;
      for (let i = 0; i < BOOKS; i++) expect(rows[i]).toEqual(expected[i]);
      console.log(
        `${ext}: ${BOOKS} rows; peak RSS of the test process ${Math.round(process.resourceUsage().maxRSS / 1024)} MB`,
      );
    },
    120_000,
  );
});

test("import 'mocra' loads none of polars, exceljs, isolated-vm or chrono-node; using them does", () => {
  const probe = `
    import { createRequire } from 'node:module';
    const loaded = () => { const keys = Object.keys(createRequire(import.meta.url).cache);
      return ['nodejs-polars', 'exceljs', 'isolated-vm', 'chrono-node'].filter((n) => keys.some((k) => k.includes('/node_modules/' + n + '/'))); };
    const mocra = await import('mocra');
    const before = loaded();
    mocra.parseDate('yesterday');
    const { toDataFrame } = await import('mocra/dataframe');
    toDataFrame([{ a: 1 }]);
    const { JsRuntime } = await import('mocra/sandbox');
    new JsRuntime().close();
    const { readWorkbook } = await import('mocra/excel');
    await readWorkbook(new Uint8Array([0x50, 0x4b, 3, 4])).catch(() => {});
    console.log(JSON.stringify({ before, after: loaded() }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe], {
    cwd: path.resolve(import.meta.dirname, '..'),
    encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  expect(JSON.parse(r.stdout)).toEqual({
    before: [],
    after: ['nodejs-polars', 'exceljs', 'isolated-vm', 'chrono-node'],
  });
});
