/**
 * The page records `mocra crawl` writes: one per fetched page (and one per URL given up on),
 * as JSON Lines or CSV, chosen by the file's extension. Each record is handed to the OS before
 * its page's parse is acknowledged (a synchronous write), so a crawl killed with SIGKILL keeps
 * every record it reported; with `--persist` a resumed crawl appends to the same file and skips
 * URLs already in it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { CliUsageError } from '../errors.js';

export interface PageRecord {
  /** The URL requested. */
  url: string;
  /** The URL after redirects (null when no response arrived). */
  finalUrl: string | null;
  status: number | null;
  contentType: string | null;
  /** Body bytes (after decompression). */
  bytes: number;
  /** Link depth from the start URL (0). */
  depth: number;
  title: string | null;
  /** Links on the page (http(s), before scope and filters). */
  links: number;
  /** Milliseconds from sending the request to the last body byte. */
  fetchMs: number | null;
  /** Error code when the URL was given up on. */
  error: string | null;
}

export const RECORD_FIELDS = [
  'url',
  'finalUrl',
  'status',
  'contentType',
  'bytes',
  'depth',
  'title',
  'links',
  'fetchMs',
  'error',
] as const satisfies readonly (keyof PageRecord)[];

const CSV_HEADER = [
  'url',
  'final_url',
  'status',
  'content_type',
  'bytes',
  'depth',
  'title',
  'links',
  'fetch_ms',
  'error',
];

export type RecordFormat = 'jsonl' | 'csv';

export function formatOf(file: string): RecordFormat {
  if (file === '-') return 'jsonl';
  const ext = path.extname(file).toLowerCase();
  if (ext === '.jsonl' || ext === '.ndjson' || ext === '.json') return 'jsonl';
  if (ext === '.csv') return 'csv';
  throw new CliUsageError(`--out ${file}: the file must end in .jsonl or .csv (or be - for standard output)`);
}

/** One CSV field (RFC 4180): quoted when it holds a comma, quote or line break. */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvLine(record: PageRecord): string {
  return `${RECORD_FIELDS.map((k) => csvField(record[k])).join(',')}\n`;
}

export interface RecordWriterOptions {
  /** Append to an existing file (and skip URLs it already has) instead of replacing it. @default false */
  resume?: boolean;
}

/** Writes page records; `-` is standard output. */
export class RecordWriter {
  readonly file: string;
  readonly format: RecordFormat;
  #fd: number | undefined;
  readonly #seen = new Set<string>();
  #written = 0;
  #resumed = 0;

  constructor(file: string, options: RecordWriterOptions = {}) {
    this.file = file;
    this.format = formatOf(file);
    if (file === '-') {
      this.#fd = 1;
      return;
    }
    const abs = path.resolve(file);
    let existing = '';
    if (options.resume && fs.existsSync(abs)) {
      existing = fs.readFileSync(abs, 'utf8');
      for (const url of urlsIn(existing, this.format)) this.#seen.add(url);
      this.#resumed = this.#seen.size;
    }
    try {
      fs.mkdirSync(path.dirname(abs), { recursive: true });
      this.#fd = fs.openSync(abs, options.resume ? 'a' : 'w');
    } catch (err) {
      throw new CliUsageError(`--out ${file}: cannot open for writing (${(err as Error).message})`);
    }
    if (this.format === 'csv' && existing === '') fs.writeSync(this.#fd, `${CSV_HEADER.join(',')}\n`);
    // A resumed file cut off mid-line by a kill: start on a fresh line.
    if (existing !== '' && !existing.endsWith('\n')) fs.writeSync(this.#fd, '\n');
  }

  /** Records written by this writer. */
  get written(): number {
    return this.#written;
  }

  /** URLs already in the file when it was opened for resuming. */
  get resumed(): number {
    return this.#resumed;
  }

  /** Write one record, unless the file already has one for its URL. */
  write(record: PageRecord): void {
    if (this.#fd === undefined) return;
    if (this.#seen.has(record.url)) return;
    this.#seen.add(record.url);
    const line = this.format === 'csv' ? csvLine(record) : `${JSON.stringify(record)}\n`;
    fs.writeSync(this.#fd, line);
    this.#written++;
  }

  close(): void {
    if (this.#fd !== undefined && this.#fd !== 1) fs.closeSync(this.#fd);
    this.#fd = undefined;
  }
}

/** URLs of the records in a file (JSONL or CSV); unreadable lines are skipped. */
function urlsIn(text: string, format: RecordFormat): string[] {
  const out: string[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    if (format === 'jsonl') {
      try {
        const url = (JSON.parse(line) as { url?: unknown }).url;
        if (typeof url === 'string') out.push(url);
      } catch {
        // a line cut short by a kill
      }
    } else if (i > 0) {
      const first = line.startsWith('"') ? line.slice(1, line.indexOf('"', 1)) : line.split(',', 1)[0]!;
      if (first !== '') out.push(first);
    }
  }
  return out;
}
