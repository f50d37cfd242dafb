/**
 * Items ⇄ DataFrames, and HTML tables → rows → DataFrames.
 */
import type { CheerioAPI } from 'cheerio';
import { InvalidArgumentError } from '../../errors.js';
import { lazyRequire } from '../../optional-dependency.js';
import { toNumeric } from '../text/numeric.js';
import { type DataFrame, loadPolars } from './polars.js';
import { asRecord, checkValue, type DataFrameSchema, frameOf, inferSchema, resolveSchema } from './schema.js';

export interface ToDataFrameOptions {
  /** Column names and types. @default inferred from the items */
  schema?: DataFrameSchema;
}

/** A DataFrame of `items` (plain objects), checked against `schema` or one inferred from them. */
export function toDataFrame(items: readonly unknown[], options: ToDataFrameOptions = {}): DataFrame {
  const pl = loadPolars();
  if (items.length === 0 && !options.schema) return pl.DataFrame({});
  const columns = options.schema ? resolveSchema(options.schema) : inferSchema(items);
  const values = columns.map((c) =>
    items.map((item, row) => checkValue(c, asRecord(item, row)[c.name], row)),
  );
  return frameOf(pl, columns, values);
}

/** The rows of a DataFrame as plain objects (nulls kept, datetimes as `Date`). */
export function dataFrameToItems<TItem = Record<string, unknown>>(frame: DataFrame): TItem[] {
  return frame.toRecords() as TItem[];
}

export interface HtmlTableOptions {
  /** CSS selector of the table. @default 'table' (the first one) */
  selector?: string;
  /** Which of the tables the selector matches. @default 0 */
  index?: number;
  /**
   * Column names. @default the header row: `<thead>`'s last row, else a first row of `<th>`
   * cells; without one, `column_1`, `column_2`, …
   */
  columns?: readonly string[];
}

/** Something with a parsed HTML body: a Response (`res.$`) or an HTML string. */
export type HtmlSource = string | { readonly $: CheerioAPI };

const cheerio = lazyRequire<{ load: (html: string) => CheerioAPI }>('cheerio/slim');

/**
 * The rows of an HTML `<table>` as records of trimmed cell text, keyed by the header. A cell
 * with `colspan`/`rowspan` fills every column/row it spans; a repeated header name gets a
 * suffix (`price`, `price_2`).
 */
export function readHtmlTable(source: HtmlSource, options: HtmlTableOptions = {}): Record<string, string>[] {
  const $ = typeof source === 'string' ? cheerio().load(source) : source.$;
  const tables = $(options.selector ?? 'table');
  const index = options.index ?? 0;
  const table = tables.eq(index);
  if (table.length === 0) {
    throw new InvalidArgumentError(
      `readHtmlTable: no table matches '${options.selector ?? 'table'}'${index > 0 ? ` at index ${index}` : ''} (found ${tables.length})`,
    );
  }
  // Rows of this table only (not of tables nested in its cells), as a grid with spans filled.
  const rows = table.find('tr').filter((_, tr) => $(tr).closest('table').is(table));
  const grid: { text: string; header: boolean }[][] = [];
  const carried: ({ text: string; header: boolean; left: number } | undefined)[] = [];
  let headerRows = 0;
  rows.each((r, tr) => {
    const line: { text: string; header: boolean }[] = [];
    const cells = $(tr).children('td, th').toArray();
    let col = 0;
    const fillCarried = () => {
      while (carried[col] && carried[col]!.left > 0) {
        const c = carried[col]!;
        line[col] = { text: c.text, header: c.header };
        c.left--;
        col++;
      }
    };
    for (const cell of cells) {
      fillCarried();
      const $cell = $(cell);
      const text = $cell.text().replace(/\s+/g, ' ').trim();
      const header = cell.tagName === 'th';
      const colspan = clampSpan($cell.attr('colspan'));
      const rowspan = clampSpan($cell.attr('rowspan'));
      for (let k = 0; k < colspan; k++) {
        line[col] = { text, header };
        if (rowspan > 1) carried[col] = { text, header, left: rowspan - 1 };
        col++;
      }
    }
    fillCarried();
    if ($(tr).parent().is('thead')) headerRows = r + 1;
    grid.push(line);
  });
  if (headerRows === 0 && grid[0]?.length && grid[0].every((c) => c?.header)) headerRows = 1;
  const width = Math.max(0, ...grid.map((l) => l.length));
  const names = uniqueNames(
    options.columns ??
      (headerRows > 0
        ? Array.from({ length: width }, (_, i) => grid[headerRows - 1]![i]?.text || `column_${i + 1}`)
        : Array.from({ length: width }, (_, i) => `column_${i + 1}`)),
  );
  return grid
    .slice(headerRows)
    .filter((line) => line.some((c) => c && c.text !== ''))
    .map((line) => Object.fromEntries(names.map((name, i) => [name, line[i]?.text ?? ''])));
}

export interface TableToDataFrameOptions extends HtmlTableOptions {
  /**
   * Turn a column whose every non-empty cell is a number ("1,299.00", "¥1.2万", "12%") into a
   * `float64` column with `toNumeric`; empty cells become null. @default true
   */
  parseNumbers?: boolean;
}

/** An HTML `<table>` as a DataFrame: text columns, and number columns where every cell is one. */
export function tableToDataFrame(source: HtmlSource, options: TableToDataFrameOptions = {}): DataFrame {
  const rows = readHtmlTable(source, options);
  const pl = loadPolars();
  const names = rows[0] ? Object.keys(rows[0]) : [...(options.columns ?? [])];
  const series = names.map((name) => {
    const cells = rows.map((r) => r[name] ?? '');
    if (options.parseNumbers ?? true) {
      const numbers = cells.map((c) => (c === '' ? null : toNumeric(c)));
      if (numbers.some((n) => n !== null) && numbers.every((n, i) => n !== null || cells[i] === '')) {
        return pl.Series(name, numbers, pl.Float64);
      }
    }
    return pl.Series(name, cells, pl.Utf8);
  });
  return pl.DataFrame(series);
}

function clampSpan(value: string | undefined): number {
  const n = Number.parseInt(value ?? '1', 10);
  // Browsers cap colspan at 1000 and rowspan at 65534; a hostile page must not make a huge grid.
  return Number.isFinite(n) && n > 1 ? Math.min(n, 1000) : 1;
}

function uniqueNames(names: readonly string[]): string[] {
  const seen = new Map<string, number>();
  return names.map((name) => {
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    return n === 1 ? name : `${name}_${n}`;
  });
}
