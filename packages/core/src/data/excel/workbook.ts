/**
 * Workbooks: xlsx bytes → sheets → rows (the header row gives the keys) → DataFrames, on
 * exceljs (an optional peer dependency, loaded on first use).
 *
 * Cells come out typed: numbers, strings, booleans, `Date`s (cells with a date format), the
 * cached result of a formula (what Excel last computed; exceljs does not recalculate), the
 * text of rich text and hyperlinks, and error cells as their text ("#DIV/0!").
 *
 * Legacy .xls (BIFF, in an OLE container) is refused with a typed error: no library that reads
 * it is both maintained and published on npm (see docs/data-tools.md).
 */
import type * as ExcelJS from 'exceljs';
import { InvalidArgumentError, WorkbookReadError } from '../../errors.js';
import { requireOptional } from '../../optional-dependency.js';
import { toDataFrame } from '../dataframe/convert.js';
import type { DataFrame } from '../dataframe/polars.js';
import type { DataFrameSchema } from '../dataframe/schema.js';

/** A cell as mocra gives it. */
export type CellValue = string | number | boolean | Date | null;

export interface ReadWorkbookOptions {
  /** Refuse a file larger than this many bytes (a zip expands many times over). @default 50 MiB */
  maxBytes?: number;
}

export interface SheetRowsOptions {
  /**
   * The 1-based row that holds the column names; `false` for a sheet without one (keys are
   * `column_1`, `column_2`, …). @default the first row that is not empty
   */
  headerRow?: number | false;
  /** Keep rows whose cells are all empty. @default false */
  keepEmptyRows?: boolean;
}

export interface SheetFrameOptions extends SheetRowsOptions {
  /**
   * Column types. @default inferred; a column that mixes kinds of value (numbers and "n/a")
   * becomes a string column instead of failing
   */
  schema?: DataFrameSchema;
}

const OLE_MAGIC = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];
const ZIP_MAGIC = [0x50, 0x4b, 0x03, 0x04];

type ExcelModule = typeof ExcelJS & { default?: typeof ExcelJS };

/** Read an xlsx workbook from its bytes (a download's `res.body`, a file's contents). */
export async function readWorkbook(bytes: Uint8Array, options: ReadWorkbookOptions = {}): Promise<Workbook> {
  if (!(bytes instanceof Uint8Array))
    throw new InvalidArgumentError('readWorkbook: expected the file bytes (a Uint8Array or Buffer)');
  const max = options.maxBytes ?? 50 * 1024 * 1024;
  if (bytes.length > max)
    throw new WorkbookReadError(`the workbook is ${bytes.length} bytes; the limit (maxBytes) is ${max}`);
  if (startsWith(bytes, OLE_MAGIC)) {
    throw new WorkbookReadError(
      'this is a legacy .xls (BIFF) workbook, which mocra does not read; save it as .xlsx (e.g. soffice --headless --convert-to xlsx file.xls)',
    );
  }
  if (!startsWith(bytes, ZIP_MAGIC))
    throw new WorkbookReadError('not an xlsx workbook (an xlsx file is a zip archive)');
  const mod = requireOptional<ExcelModule>('exceljs', 'Workbook reading');
  const excel = mod.default ?? mod;
  const book = new excel.Workbook();
  try {
    await book.xlsx.load(
      Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) as unknown as ArrayBuffer,
    );
  } catch (err) {
    throw new WorkbookReadError(`the workbook could not be read: ${(err as Error).message}`, { cause: err });
  }
  return new Workbook(book);
}

export class Workbook {
  readonly #book: ExcelJS.Workbook;

  constructor(book: ExcelJS.Workbook) {
    this.#book = book;
  }

  /** Sheet names in workbook order. */
  get sheetNames(): string[] {
    return this.#book.worksheets.map((s) => s.name);
  }

  /** Every sheet, in workbook order. */
  get sheets(): Sheet[] {
    return this.#book.worksheets.map((s) => new Sheet(s));
  }

  /** A sheet by name or 0-based position. @default the first sheet */
  sheet(which: string | number = 0): Sheet {
    const sheets = this.#book.worksheets;
    const found = typeof which === 'number' ? sheets[which] : sheets.find((s) => s.name === which);
    if (!found) {
      throw new WorkbookReadError(
        `the workbook has no sheet ${JSON.stringify(which)} (sheets: ${this.sheetNames.join(', ') || 'none'})`,
      );
    }
    return new Sheet(found);
  }
}

export class Sheet {
  readonly #sheet: ExcelJS.Worksheet;

  constructor(sheet: ExcelJS.Worksheet) {
    this.#sheet = sheet;
  }

  get name(): string {
    return this.#sheet.name;
  }

  /** Every row as an array of cell values (index 0 is column A), empty rows as []. */
  values(): CellValue[][] {
    const out: CellValue[][] = [];
    const count = this.#sheet.actualRowCount === 0 ? 0 : this.#sheet.rowCount;
    for (let r = 1; r <= count; r++) {
      const row = this.#sheet.getRow(r);
      const line: CellValue[] = [];
      for (let c = 1; c <= row.cellCount; c++) line.push(cellValue(rawValue(row.getCell(c))));
      while (line.length > 0 && line[line.length - 1] === null) line.pop();
      out.push(line);
    }
    return out;
  }

  /** Rows below the header row as records keyed by the header (repeated names get `_2`, `_3`). */
  rows<TRow = Record<string, CellValue>>(options: SheetRowsOptions = {}): TRow[] {
    const grid = this.values();
    const headerIndex =
      options.headerRow === false
        ? -1
        : options.headerRow !== undefined
          ? options.headerRow - 1
          : grid.findIndex((r) => r.length > 0);
    if (
      options.headerRow !== undefined &&
      options.headerRow !== false &&
      (headerIndex < 0 || headerIndex >= grid.length)
    ) {
      throw new WorkbookReadError(`sheet '${this.name}' has no row ${options.headerRow}`);
    }
    const header = headerIndex >= 0 ? grid[headerIndex]! : [];
    const body = grid.slice(headerIndex + 1);
    const width = Math.max(header.length, ...body.map((r) => r.length));
    const seen = new Map<string, number>();
    const keys = Array.from({ length: width }, (_, i) => {
      const raw = header[i];
      const base =
        raw === null || raw === undefined || raw === ''
          ? `column_${i + 1}`
          : raw instanceof Date
            ? raw.toISOString()
            : String(raw).trim();
      const n = (seen.get(base) ?? 0) + 1;
      seen.set(base, n);
      return n === 1 ? base : `${base}_${n}`;
    });
    return body
      .filter((r) => options.keepEmptyRows || r.some((v) => v !== null && v !== ''))
      .map((r) => Object.fromEntries(keys.map((k, i) => [k, r[i] ?? null])) as TRow);
  }

  /** The rows as a DataFrame (nodejs-polars). */
  toDataFrame(options: SheetFrameOptions = {}): DataFrame {
    const rows = this.rows(options);
    if (options.schema) return toDataFrame(rows, { schema: options.schema });
    return toDataFrame(stringifyMixedColumns(rows));
  }
}

const FORMULA = 6; // ExcelJS.ValueType.Formula (the enum is not exported as a value from the types)

/**
 * A cell's value. exceljs's `cell.value` copies a formula's fields only when truthy, so a
 * cached result of 0, false or '' would vanish; `cell.result` keeps it.
 */
function rawValue(cell: ExcelJS.Cell): ExcelJS.CellValue {
  if (cell.type !== FORMULA) return cell.value;
  return { formula: cell.formula, result: cell.result } as ExcelJS.CellFormulaValue;
}

/** One exceljs cell value as a plain typed value. */
function cellValue(value: ExcelJS.CellValue): CellValue {
  if (value === null || value === undefined) return null;
  if (
    typeof value === 'number' ||
    typeof value === 'string' ||
    typeof value === 'boolean' ||
    value instanceof Date
  )
    return value;
  if ('result' in value || 'formula' in value || 'sharedFormula' in value) {
    const result = (value as { result?: unknown }).result;
    if (result !== null && typeof result === 'object' && 'error' in (result as object))
      return String((result as { error: unknown }).error);
    return result === undefined ? null : cellValue(result as ExcelJS.CellValue);
  }
  if ('richText' in value) return value.richText.map((t) => t.text).join('');
  if ('hyperlink' in value) {
    const text = (value as { text?: unknown }).text;
    return typeof text === 'string'
      ? text
      : text && typeof text === 'object' && 'richText' in text
        ? cellValue(text as ExcelJS.CellValue)
        : value.hyperlink;
  }
  if ('error' in value) return String(value.error);
  return null;
}

/** Columns holding more than one kind of value are turned into text (dates as ISO strings). */
function stringifyMixedColumns(rows: Record<string, CellValue>[]): Record<string, CellValue>[] {
  if (rows.length === 0) return rows;
  const kinds = new Map<string, Set<string>>();
  for (const row of rows) {
    for (const [k, v] of Object.entries(row)) {
      if (v === null) continue;
      const kind = v instanceof Date ? 'date' : typeof v;
      const set = kinds.get(k) ?? new Set<string>();
      set.add(kind);
      kinds.set(k, set);
    }
  }
  const mixed = [...kinds].filter(([, s]) => s.size > 1).map(([k]) => k);
  if (mixed.length === 0) return rows;
  return rows.map((row) => {
    const copy = { ...row };
    for (const k of mixed) {
      const v = copy[k];
      if (v !== null && v !== undefined) copy[k] = v instanceof Date ? v.toISOString() : String(v);
    }
    return copy;
  });
}

function startsWith(bytes: Uint8Array, magic: readonly number[]): boolean {
  return magic.every((b, i) => bytes[i] === b);
}
