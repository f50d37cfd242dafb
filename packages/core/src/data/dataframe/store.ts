/**
 * `DataFrameStore`: a data sink that writes items as a DataFrame file — Parquet, Arrow IPC,
 * CSV or NDJSON — holding at most one batch in memory.
 *
 *   write(item) ─▶ check against the schema ─▶ column arrays (≤ batchSize rows)
 *        full ─▶ CSV / NDJSON: appended to the file
 *                Parquet / IPC: written as one part file in `<file>.parts/`
 *   close() ─▶ parts streamed into `<file>` by polars (scan → sink, one row group per part
 *              at most), then the part directory is removed
 *
 * nodejs-polars has no writer that appends row groups to an open Parquet or IPC file, so the
 * parts are joined by polars' streaming engine at the end instead; memory stays bounded by a
 * batch either way. A run that is killed leaves its parts; `append: true` adopts them (and an
 * existing output file) on the next open, so nothing flushed is lost.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DataFrameSchemaError, DataFrameWriteError, InvalidArgumentError } from '../../errors.js';
import type { DataSink } from '../../model/item.js';
import { type DataFrame, loadPolars, type PolarsModule } from './polars.js';
import {
  asRecord,
  checkValue,
  type DataFrameSchema,
  frameOf,
  inferSchema,
  type ResolvedColumn,
  resolveSchema,
} from './schema.js';

export type DataFrameFormat = 'parquet' | 'ipc' | 'csv' | 'ndjson';

export type ParquetCompression = 'uncompressed' | 'snappy' | 'gzip' | 'lz4' | 'zstd' | 'brotli';

export interface DataFrameStoreOptions {
  /** The output file. */
  path: string;
  /**
   * The file format. @default from the extension: .parquet/.pq, .arrow/.ipc/.feather,
   * .csv, .ndjson/.jsonl
   */
  format?: DataFrameFormat;
  /** Column names and types. @default inferred from the first batch */
  schema?: DataFrameSchema;
  /** Rows per batch: one Parquet row group / IPC record batch, and the most held in memory. @default 10000 */
  batchSize?: number;
  /** What a field that the schema does not name does: refused, or dropped. @default 'error' */
  extraFields?: 'error' | 'drop';
  /** Parquet compression. @default 'zstd' */
  compression?: ParquetCompression;
  /**
   * Keep what an earlier run wrote — the output file and the parts a killed run left — and add
   * to it. Not for CSV or NDJSON, which are appended to directly when this is set.
   * @default false
   */
  append?: boolean;
  /**
   * Parquet / IPC: also append each item to a journal (`<file>.parts/journal.ndjson`, one
   * synchronous write per item, emptied when its batch is written) so that a process killed
   * mid-batch loses nothing it wrote; `append` replays the journal. The CLI turns this on.
   * @default false
   */
  journal?: boolean;
  /**
   * With `append`: adopt only the first this-many rows (the caller's own ledger says which were
   * acknowledged); journal lines past it are dropped. Parts holding more rows is an error.
   * @default every row found
   */
  trustedRows?: number;
}

const JOURNAL = 'journal.ndjson';

/** Journal lines keep Dates as Dates: `{"$date": "…"}` on the way out, a Date on the way back. */
function journalLine(index: number, record: Record<string, unknown>): string {
  return `${JSON.stringify({ i: index, r: record }, function (this: Record<string, unknown>, key, value) {
    const raw = this[key];
    return raw instanceof Date ? { $date: raw.toISOString() } : value;
  })}\n`;
}

function reviveJournal(_key: string, value: unknown): unknown {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const v = value as Record<string, unknown>;
    if (typeof v.$date === 'string' && Object.keys(v).length === 1) return new Date(v.$date);
  }
  return value;
}

const EXTENSIONS: Record<string, DataFrameFormat> = {
  '.parquet': 'parquet',
  '.pq': 'parquet',
  '.arrow': 'ipc',
  '.ipc': 'ipc',
  '.feather': 'ipc',
  '.csv': 'csv',
  '.ndjson': 'ndjson',
  '.jsonl': 'ndjson',
};

/** The format a file name asks for, or undefined. */
export function dataFrameFormatOf(file: string): DataFrameFormat | undefined {
  return EXTENSIONS[path.extname(file).toLowerCase()];
}

export class DataFrameStore<TItem = Record<string, unknown>> implements DataSink<TItem> {
  readonly path: string;
  readonly format: DataFrameFormat;
  readonly #pl: PolarsModule;
  readonly #batchSize: number;
  readonly #dropExtra: boolean;
  readonly #compression: ParquetCompression;
  readonly #partsDir: string;
  #columns: ResolvedColumn[] | undefined;
  #names: Set<string> | undefined;
  #pending: unknown[] = [];
  #rows = 0;
  #adoptedRows = 0;
  #parts = 0;
  #closed = false;
  #journal: number | undefined;
  /** Position of the next item in the whole file, across runs (journal lines carry it). */
  #nextIndex = 0;
  /** Items replayed from a killed run's journal (still in the first batch). */
  #replayed: Record<string, unknown>[] = [];

  constructor(options: DataFrameStoreOptions) {
    if (typeof options?.path !== 'string' || options.path === '') {
      throw new InvalidArgumentError('DataFrameStore: `path` must be a file path');
    }
    this.path = path.resolve(options.path);
    const format = options.format ?? dataFrameFormatOf(this.path);
    if (format === undefined) {
      throw new InvalidArgumentError(
        `DataFrameStore: cannot tell the format of '${options.path}' (end it in ${Object.keys(EXTENSIONS).join(', ')} or pass \`format\`)`,
      );
    }
    this.format = format;
    this.#batchSize = options.batchSize ?? 10_000;
    if (!Number.isInteger(this.#batchSize) || this.#batchSize < 1) {
      throw new InvalidArgumentError(
        `DataFrameStore: batchSize must be a positive integer (got ${String(options.batchSize)})`,
      );
    }
    this.#dropExtra = options.extraFields === 'drop';
    this.#compression = options.compression ?? 'zstd';
    this.#partsDir = `${this.path}.parts`;
    this.#pl = loadPolars();
    if (options.schema) this.#setColumns(resolveSchema(options.schema));
    fs.mkdirSync(path.dirname(this.path), { recursive: true });
    if (this.format === 'csv' || this.format === 'ndjson') {
      if (!options.append) fs.rmSync(this.path, { force: true });
    } else {
      this.#openParts(options.append === true, options.journal === true, options.trustedRows);
    }
  }

  /** The columns, once given or inferred. */
  get columns(): readonly ResolvedColumn[] | undefined {
    return this.#columns;
  }

  /** Items written by this store (not counting adopted ones). */
  get rows(): number {
    return this.#rows;
  }

  /** Rows an earlier run had written that this store adopted (`append`), journal included. */
  get adoptedRows(): number {
    return this.#adoptedRows + this.#replayed.length;
  }

  /** Check `item` against the schema and buffer it; a full batch is written before returning. */
  write(item: TItem): void {
    this.#push(item, true);
  }

  #push(item: TItem, journal: boolean): void {
    if (this.#closed) throw new DataFrameWriteError(this.path, 'write() after close()');
    // A full batch is written when the next item arrives, not right after the last one: a
    // caller that notes each write in a ledger of its own (the CLI) has noted every row of a
    // part before the part exists.
    if (this.#pending.length >= this.#batchSize) this.flush();
    const row = this.#rows;
    const record = asRecord(item, row);
    if (this.#columns) this.#checkKeys(record, row);
    this.#pending.push(this.#columns ? this.#columns.map((c) => checkValue(c, record[c.name], row)) : record);
    if (journal && this.#journal !== undefined)
      fs.writeSync(this.#journal, journalLine(this.#nextIndex, record));
    this.#nextIndex++;
    this.#rows++;
  }

  /** Write the buffered rows now (a smaller batch). */
  flush(): void {
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    if (!this.#columns) {
      // The first batch: infer, then check every row of it as later ones will be.
      const records = batch as Record<string, unknown>[];
      this.#setColumns(inferSchema(records, this.#rows - records.length));
      for (let i = 0; i < records.length; i++) {
        const row = this.#rows - records.length + i;
        batch[i] = this.#columns!.map((c) => checkValue(c, records[i]![c.name], row));
      }
    }
    const columns = this.#columns!;
    const values = columns.map((_, ci) => (batch as unknown[][]).map((r) => r[ci]));
    this.#writeFrame(frameOf(this.#pl, columns, values));
  }

  /** Flush, then (Parquet, IPC) join the parts into the output file. */
  close(): void {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    if (this.#journal !== undefined) fs.closeSync(this.#journal);
    this.#journal = undefined;
    if (this.format === 'csv' || this.format === 'ndjson') {
      if (!fs.existsSync(this.path)) fs.writeFileSync(this.path, '');
      return;
    }
    const parts = this.#partFiles();
    try {
      if (parts.length === 0) {
        this.#writeTo(this.#emptyFrame(), this.path);
      } else if (parts.length === 1) {
        fs.renameSync(path.join(this.#partsDir, parts[0]!), this.path);
      } else {
        const glob = path.join(this.#partsDir, `*${path.extname(parts[0]!)}`);
        const tmp = `${this.path}.joining`;
        if (this.format === 'parquet') {
          this.#pl
            .scanParquet(glob)
            .sinkParquet(tmp, { compression: this.#compression, rowGroupSize: this.#batchSize })
            .collectSync();
        } else {
          this.#pl.scanIPC(glob).sinkIpc(tmp, {}).collectSync();
        }
        fs.renameSync(tmp, this.path);
      }
      fs.rmSync(this.#partsDir, { recursive: true, force: true });
    } catch (err) {
      throw new DataFrameWriteError(
        this.path,
        `joining ${parts.length} part(s) failed: ${(err as Error).message}; they are kept in ${this.#partsDir}`,
        {
          cause: err,
        },
      );
    }
  }

  /**
   * Values of one column in what `append` adopted (e.g. the URLs already written, to skip
   * them); read from the part files, column by column.
   */
  adoptedColumn(name: string): unknown[] {
    if (this.format === 'csv' || this.format === 'ndjson' || this.adoptedRows === 0) return [];
    const out: unknown[] = [];
    for (const part of this.#partFiles()) {
      const frame = readDataFrame(path.join(this.#partsDir, part), this.#pl);
      if (frame.columns.includes(name)) out.push(...frame.getColumn(name).toArray());
    }
    for (const record of this.#replayed) out.push(record[name] ?? null);
    return out;
  }

  // DataSink: the engine calls write(item, meta) and close().

  #setColumns(columns: ResolvedColumn[]): void {
    this.#columns = columns;
    this.#names = new Set(columns.map((c) => c.name));
  }

  #checkKeys(record: Record<string, unknown>, row: number): void {
    if (this.#dropExtra) return;
    for (const key of Object.keys(record)) {
      if (!this.#names!.has(key) && record[key] !== undefined) {
        throw new DataFrameSchemaError(
          key,
          row,
          `is not a column of the schema (${[...this.#names!].join(', ')}); pass extraFields: 'drop' to ignore it`,
        );
      }
    }
  }

  #openParts(append: boolean, journal: boolean, trusted: number | undefined): void {
    if (!append) {
      fs.rmSync(this.#partsDir, { recursive: true, force: true });
      fs.mkdirSync(this.#partsDir, { recursive: true });
      // O_APPEND: every write lands at the end, also after the journal is truncated.
      if (journal) this.#journal = fs.openSync(path.join(this.#partsDir, JOURNAL), 'a');
      return;
    }
    fs.mkdirSync(this.#partsDir, { recursive: true });
    // A finished earlier run left the output file: it becomes the first part.
    if (fs.existsSync(this.path)) {
      fs.renameSync(this.path, path.join(this.#partsDir, this.#partName(0).replace('part-', 'part-0-')));
    }
    const parts = this.#partFiles();
    for (const part of parts) {
      const frame = readDataFrame(path.join(this.#partsDir, part), this.#pl);
      this.#adoptedRows += frame.height;
      if (!this.#columns && frame.width > 0) this.#setColumns(columnsOfFrame(frame));
    }
    this.#parts = parts.length;
    // Items of a batch that a killed run never wrote: the journal lines past the rows in parts
    // (a line at or below that count was written to a part just before the kill).
    const journalFile = path.join(this.#partsDir, JOURNAL);
    const text = fs.existsSync(journalFile) ? fs.readFileSync(journalFile, 'utf8') : '';
    const lines = text.split('\n');
    const replay: Record<string, unknown>[] = [];
    for (const line of lines) {
      if (line.trim() === '') continue;
      try {
        const entry = JSON.parse(line, reviveJournal) as { i: number; r: Record<string, unknown> };
        if (entry.i >= this.#adoptedRows && (trusted === undefined || entry.i < trusted))
          replay.push(entry.r);
      } catch {
        // the last line, cut short by the kill: its item was never acknowledged
      }
    }
    if (trusted !== undefined && this.#adoptedRows > trusted) {
      throw new DataFrameWriteError(
        this.path,
        `its parts hold ${this.#adoptedRows} rows, more than the ${trusted} acknowledged`,
      );
    }
    this.#nextIndex = this.#adoptedRows;
    // The old lines stay until their batch is written (a kill now loses nothing either).
    if (journal || text !== '') {
      this.#journal = fs.openSync(journalFile, 'a');
      // A line cut short by the kill must not swallow the next one.
      if (text !== '' && !text.endsWith('\n')) fs.writeSync(this.#journal, '\n');
    }
    for (const record of replay) this.#push(record as TItem, false);
    // Replayed items count as adopted, not as written by this run.
    this.#rows -= replay.length;
    this.#replayed = replay;
  }

  #partName(n: number): string {
    return `part-${String(n).padStart(8, '0')}.${this.format === 'parquet' ? 'parquet' : 'arrow'}`;
  }

  #partFiles(): string[] {
    if (!fs.existsSync(this.#partsDir)) return [];
    return fs
      .readdirSync(this.#partsDir)
      .filter((f) => /^part-.*\.(parquet|arrow)$/.test(f))
      .sort();
  }

  #writeFrame(frame: DataFrame): void {
    try {
      if (this.format === 'csv') {
        const header = !fs.existsSync(this.path) || fs.statSync(this.path).size === 0;
        fs.appendFileSync(this.path, frame.writeCSV({ includeHeader: header }));
      } else if (this.format === 'ndjson') {
        fs.appendFileSync(this.path, frame.writeJSON({ format: 'lines' }));
      } else {
        // Part names sort in write order; an adopted output file sorts first ("part-0-…").
        this.#writeTo(frame, path.join(this.#partsDir, this.#partName(++this.#parts)));
        // The batch is in its part now; its journal lines are no longer needed.
        if (this.#journal !== undefined) fs.ftruncateSync(this.#journal, 0);
      }
    } catch (err) {
      throw new DataFrameWriteError(
        this.path,
        `writing a batch of ${frame.height} rows failed: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
  }

  #writeTo(frame: DataFrame, file: string): void {
    if (this.format === 'parquet') frame.writeParquet(file, { compression: this.#compression });
    else frame.writeIPC(file);
  }

  #emptyFrame(): DataFrame {
    return this.#columns
      ? frameOf(
          this.#pl,
          this.#columns,
          this.#columns.map(() => []),
        )
      : this.#pl.DataFrame({});
  }
}

/**
 * Read a Parquet, IPC, CSV or NDJSON file written by a store. (nodejs-polars' `readIPC` reads
 * a path only when it ends in `.ipc` and takes any other string as IPC bytes; this reads the
 * file itself.)
 */
export function readDataFrame(file: string, pl: PolarsModule = loadPolars()): DataFrame {
  const format = dataFrameFormatOf(file);
  switch (format) {
    case 'parquet':
      return pl.readParquet(file);
    case 'ipc':
      return pl.readIPC(fs.readFileSync(file));
    case 'csv':
      return pl.readCSV(fs.readFileSync(file));
    case 'ndjson':
      return pl.readJSON(fs.readFileSync(file), { format: 'lines' });
    default:
      throw new InvalidArgumentError(`readDataFrame: cannot tell the format of '${file}'`);
  }
}

/** The columns of a frame read back, as store columns (so an adopted file keeps its schema). */
function columnsOfFrame(frame: DataFrame): ResolvedColumn[] {
  return frame.columns.map((name) => {
    const dtype = String(frame.getColumn(name).dtype);
    const type: ResolvedColumn['type'] = dtype.includes('Int64')
      ? 'int64'
      : dtype.includes('Int32')
        ? 'int32'
        : dtype.includes('Float')
          ? 'float64'
          : dtype.includes('Bool')
            ? 'bool'
            : dtype.includes('Datetime')
              ? 'datetime'
              : dtype.includes('Date')
                ? 'date'
                : 'string';
    return { name, type, nullable: true };
  });
}
