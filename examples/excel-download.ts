// Download a spreadsheet and read it: `res.workbook()` gives the sheets, each sheet's rows come
// keyed by its header row with typed cells (numbers, dates, booleans, formulas' cached values),
// and `toDataFrame()` turns a sheet into a polars DataFrame.
// Runs offline against mocra's fixture site (needs the optional packages exceljs and nodejs-polars):
//
//   node --import tsx --conditions=@mocra/source examples/excel-download.ts
import { startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';

interface BookRow {
  id: number;
  title: string;
  added: string;
  value: number;
}

const site = await startFixtureSite();
const rows: BookRow[] = [];

const report = defineSpider<BookRow>({
  name: 'books-report',
  startUrls: [`${site.url}/data/books.xlsx`],
  async parse(res, cx) {
    const book = await res.workbook();
    console.log(`sheets: ${book.sheetNames.join(', ')}`);
    const sheet = book.sheet('Books');
    const frame = sheet.toDataFrame();
    console.log(`frame: ${frame.height} rows × ${frame.width} columns`);
    for (const row of sheet.rows()) {
      cx.emit({
        id: row.ID as number,
        title: row.Title as string,
        added: (row.Added as Date).toISOString().slice(0, 10),
        value: row.Value as number,
      });
    }
  },
});

const summary = await Mocra.builder()
  .spider(report, (item) => {
    rows.push(item);
  })
  .logging({ level: 'error' })
  .run();

console.log(`first: ${JSON.stringify(rows[0])}`);
const value = rows.reduce((sum, r) => sum + r.value, 0);
console.log(`${summary.items} rows, stock value ${value.toFixed(2)}`);
await site.close();
