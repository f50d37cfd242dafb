/**
 * Where `mocra crawl` writes its page records and `mocra run` its items: one per line, as JSON
 * Lines or CSV (chosen by the file's extension), to a file or to standard output (`-`).
 *
 * Every line is handed to the OS before the parse that produced it is acknowledged, so a crawl
 * killed even with SIGKILL keeps every line of every page it acknowledged. Lines are written in
 * batches: the lines of one turn of the event loop go to the OS in one synchronous write (then
 * their ledger entries in one more), and {@link OutputFile.flushed} is what a parse awaits before
 * its page is acknowledged. A write per line cost a system call per page; a batch costs one per
 * turn, and a page still is not acknowledged before its lines are in the file.
 *
 * Exactly once across a resume (`--persist`). A kill can land after a line was written and
 * before its page was acknowledged: the resumed run parses that page again and writes the same
 * lines again. So with `--persist` the file has a ledger in the persist directory, and every
 * line written to the file is followed by one ledger entry — the line's key (the item's stable
 * `itemId`, a page record's URL) and the file's length after it:
 *
 * ```
 *   out.jsonl                      <persist>/out/<hash of the path>.jsonl (the ledger)
 *   {"title":"A"}\n   ─────────►   {"end":14,"key":"f3a…:0"}
 *   {"title":"B"}\n   ─────────►   {"end":28,"key":"f3a…:1"}
 *   {"title":"C"}\n     (killed before its entry)
 * ```
 *
 * Reopening for the resume, the file is cut back to the last entry's `end` (here "C" goes: its
 * page was not acknowledged, so it is parsed and written again), and a key the ledger holds is
 * not written again (its page may be parsed again, its lines are already in). Each line is in
 * the file exactly once whatever the kill point. The ledger is the point of truth: a file that
 * is missing or shorter than the ledger says was changed by someone else, and the resume stops
 * with MOCRA_ERR_OUTPUT_RESUME rather than write a file with holes. On standard output nothing
 * can be cut back: the ledger still keeps keys from being written twice by later runs, but a
 * line written just before a kill can appear again after the resume.
 *
 * `.parquet` and `.arrow` files are written by a DataFrameStore (nodejs-polars, an optional
 * package) a batch at a time; until its batch is written, each item is also a line of the
 * store's journal (`<file>.parts/journal.ndjson`), written before the ledger entry. A ledger
 * entry's `end` is then a row count: the resume adopts that many rows (parts, then journal
 * lines) and drops the rest, the columnar version of cutting the file back.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { type DataFrameSchema, DataFrameStore } from '@mocra/core/dataframe';
import { CliUsageError, OutputResumeError } from '../errors.js';
import { csvField, formatOf, type OutputErrors, type RecordFormat } from './records.js';

/** CSV columns: a fixed list (field → header name), or the first item's keys. */
export type CsvColumns = { fields: readonly string[]; header: readonly string[] } | 'first-item';

export interface OutputFileOptions {
  /** How CSV lines are laid out. @default 'first-item' */
  csv?: CsvColumns;
  /** The persist directory: keep a ledger there and resume from it (see the module comment). */
  persist?: string;
  /** Parquet / Arrow column types. @default inferred from the first batch */
  schema?: DataFrameSchema;
  /** How errors name the file and what a bad one throws. @default the CLI's (`--out <file>`, a usage error) */
  errors?: OutputErrors;
}

interface LedgerEntry {
  end?: number | null;
  key?: string;
  columns?: string[];
}

/** Lines waiting for their write, and the parses waiting for them. */
interface Batch {
  text: string;
  /** One per line, in order: what the line's ledger entry says (its `end` filled in on write). */
  entries: LedgerEntry[];
  /** The lines' UTF-8 lengths, kept only with a ledger (it records where each line ends). */
  bytes: number[];
  keys: string[];
  settled: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** Past this many characters a batch is written at once, without waiting for the turn to end. */
const BATCH_CHARS = 1 << 20;

export class OutputFile {
  /** The path as given (`-` for standard output). */
  readonly file: string;
  readonly format: RecordFormat;
  readonly #fd: number;
  readonly #frame: DataFrameStore<unknown> | undefined;
  readonly #ledger: number | undefined;
  readonly #keys = new Set<string>();
  readonly #fixedColumns: { fields: readonly string[]; header: readonly string[] } | undefined;
  #columns: string[] | undefined;
  #end = 0;
  #batch: Batch | undefined;
  #written = 0;
  #resumed = 0;
  #closed = false;

  constructor(file: string, options: OutputFileOptions = {}) {
    this.file = file;
    this.format = formatOf(file, options.errors);
    const csv = options.csv ?? 'first-item';
    this.#fixedColumns = csv === 'first-item' ? undefined : csv;
    if (this.#fixedColumns) this.#columns = [...this.#fixedColumns.fields];
    const stdout = file === '-';
    const abs = stdout ? '-' : path.resolve(file);
    const ledgerPath = options.persist === undefined ? undefined : ledgerPathOf(options.persist, abs);
    const entries = ledgerPath === undefined ? [] : readLedger(ledgerPath);
    const resuming = entries.length > 0;
    let trusted = 0;
    for (const entry of entries) {
      if (typeof entry.end === 'number') trusted = entry.end;
      if (entry.columns && !this.#fixedColumns) this.#columns = entry.columns;
      if (entry.key !== undefined) this.#keys.add(entry.key);
    }
    this.#resumed = this.#keys.size;
    if (this.format === 'parquet' || this.format === 'ipc') {
      this.#fd = -1;
      this.#frame = new DataFrameStore<unknown>({
        path: abs,
        format: this.format,
        ...(options.schema ? { schema: options.schema } : {}),
        journal: true,
        append: resuming,
        ...(resuming ? { trustedRows: trusted } : {}),
      });
      if (resuming && this.#frame.adoptedRows < trusted)
        throw new OutputResumeError(file, 'shorter', trusted);
    } else if (stdout) {
      this.#fd = 1;
    } else {
      if (resuming) {
        const size = fs.existsSync(abs) ? fs.statSync(abs).size : -1;
        if (size < trusted) throw new OutputResumeError(file, size < 0 ? 'missing' : 'shorter', trusted);
      }
      try {
        fs.mkdirSync(path.dirname(abs), { recursive: true });
        this.#fd = fs.openSync(abs, resuming ? 'r+' : 'w');
      } catch (err) {
        const message = `${options.errors?.name ?? `--out ${file}`}: cannot open for writing (${(err as Error).message})`;
        throw options.errors ? options.errors.usage(message) : new CliUsageError(message);
      }
      if (resuming) fs.ftruncateSync(this.#fd, trusted);
      this.#end = trusted;
    }
    if (ledgerPath !== undefined) {
      fs.mkdirSync(path.dirname(ledgerPath), { recursive: true });
      this.#ledger = fs.openSync(ledgerPath, resuming ? 'a' : 'w');
      // An entry cut short by a kill: the next one starts on a fresh line.
      if (resuming && !fs.readFileSync(ledgerPath, 'utf8').endsWith('\n')) fs.writeSync(this.#ledger, '\n');
    }
    if (!resuming && this.format === 'csv' && this.#fixedColumns) {
      this.#append(`${this.#fixedColumns.header.map(csvField).join(',')}\n`, { columns: this.#columns! });
    }
  }

  /** Lines written by this process. */
  get written(): number {
    return this.#written;
  }

  /** Lines that were already in the file when it was reopened for a resume. */
  get resumed(): number {
    return this.#resumed;
  }

  /**
   * Write one record or item under its key; false when the file already has that key. The line
   * is with the OS once {@link flushed} resolves (or after {@link flush} or {@link close}).
   */
  write(key: string, value: unknown): boolean {
    if (this.#closed || this.#keys.has(key)) return false;
    this.#keys.add(key);
    this.#written++;
    if (this.#frame) {
      this.#frame.write(value);
      if (this.#ledger !== undefined) {
        const end = this.#frame.adoptedRows + this.#frame.rows;
        fs.writeSync(this.#ledger, `${JSON.stringify({ end, key })}\n`);
      }
    } else if (this.format === 'jsonl') {
      this.#append(`${JSON.stringify(value)}\n`, { key });
    } else {
      const record =
        value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : { value };
      if (this.#columns === undefined) {
        this.#columns = Object.keys(record);
        this.#append(`${this.#columns.map(csvField).join(',')}\n`, { columns: this.#columns });
      }
      const line = this.#columns.map((k) => {
        const v = record[k];
        return csvField(v !== null && typeof v === 'object' ? JSON.stringify(v) : v);
      });
      this.#append(`${line.join(',')}\n`, { key });
    }
    return true;
  }

  /**
   * Settles once every line written so far is with the OS (rejects if its write failed, and the
   * lines' keys may then be written again); undefined when nothing is waiting.
   */
  flushed(): Promise<void> | undefined {
    return this.#batch?.settled;
  }

  /** Hand every waiting line to the OS now. Throws what the write threw. */
  flush(): void {
    const batch = this.#batch;
    if (batch === undefined) return;
    this.#batch = undefined;
    try {
      this.#writeBatch(batch);
    } catch (err) {
      // Not in the file: a parse that runs again may write these keys again.
      for (const key of batch.keys) this.#keys.delete(key);
      this.#written -= batch.keys.length;
      batch.reject(err);
      throw err;
    }
    batch.resolve();
  }

  close(): void {
    if (this.#closed) return;
    try {
      this.flush();
    } finally {
      this.#closeFiles();
    }
  }

  #closeFiles(): void {
    this.#closed = true;
    this.#frame?.close();
    if (this.#fd >= 0 && this.#fd !== 1) fs.closeSync(this.#fd);
    if (this.#ledger !== undefined) fs.closeSync(this.#ledger);
  }

  /** Add a line to the waiting batch (written at the end of this turn of the event loop). */
  #append(text: string, entry: LedgerEntry): void {
    let batch = this.#batch;
    if (batch === undefined) {
      let resolve!: () => void;
      let reject!: (err: unknown) => void;
      const settled = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      // A failed write is reported to the parses that await it; nobody awaiting is no crash.
      settled.catch(() => {});
      batch = { text: '', entries: [], bytes: [], keys: [], settled, resolve, reject };
      this.#batch = batch;
      setImmediate(() => {
        if (this.#batch !== batch) return;
        try {
          this.flush();
        } catch {
          // rejected the batch's promise: the parses that wait for it fail and are not acknowledged
        }
      });
    }
    batch.text += text;
    if (entry.key !== undefined) batch.keys.push(entry.key);
    if (this.#ledger !== undefined) {
      batch.entries.push(entry);
      batch.bytes.push(Buffer.byteLength(text));
    }
    if (batch.text.length >= BATCH_CHARS) this.flush();
  }

  /** The lines, then their ledger entries (the order the module comment relies on). */
  #writeBatch(batch: Batch): void {
    // The string goes to the OS as it is (no Buffer); the count it returns is in bytes.
    const start = this.#end;
    if (this.#fd === 1) writeAll(1, batch.text, null);
    else this.#end += writeAll(this.#fd, batch.text, this.#end);
    if (this.#ledger === undefined) return;
    let end = start;
    let entries = '';
    for (let i = 0; i < batch.entries.length; i++) {
      end += batch.bytes[i]!;
      entries += `${JSON.stringify({ end: this.#fd === 1 ? null : end, ...batch.entries[i] })}\n`;
    }
    writeAll(this.#ledger, entries, null);
  }
}

/** One write of `text` at `position` (null: the file's offset); the bytes written. */
function writeAll(fd: number, text: string, position: number | null): number {
  const written = fs.writeSync(fd, text, position);
  const bytes = Buffer.byteLength(text);
  if (written === bytes) return written;
  // A short write (a full pipe, a signal): the rest, as bytes from where it stopped.
  const buffer = Buffer.from(text);
  let done = written;
  while (done < bytes) {
    done += fs.writeSync(fd, buffer, done, bytes - done, position === null ? null : position + done);
  }
  return done;
}

/** `<persist>/out/<hash>.jsonl`: one ledger per output path, so a resume with another --out starts its own. */
export function ledgerPathOf(persist: string, absoluteOut: string): string {
  const hash = createHash('sha256').update(absoluteOut).digest('hex').slice(0, 16);
  return path.join(persist, 'out', `${hash}.jsonl`);
}

/** The complete entries of a ledger (an entry cut short by a kill is dropped). */
function readLedger(file: string): LedgerEntry[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const out: LedgerEntry[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    try {
      out.push(JSON.parse(line) as LedgerEntry);
    } catch {
      // the entry a kill cut short: its line is past `end`, and is cut off the file
    }
  }
  return out;
}
