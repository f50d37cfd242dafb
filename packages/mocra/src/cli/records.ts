/**
 * The page records `mocra crawl` writes: one per fetched page (and one per URL given up on),
 * as JSON Lines, CSV, Parquet or Arrow, chosen by the file's extension (written by output-file.ts).
 */
import path from 'node:path';
import type { DataFrameSchema } from '@mocra/core/dataframe';
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

/** CSV header names of RECORD_FIELDS, in the same order. */
export const CSV_HEADER = [
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

export type RecordFormat = 'jsonl' | 'csv' | 'parquet' | 'ipc';

/** How an output file is named in errors, and the error a bad one is (the CLI's: a usage error). */
export interface OutputErrors {
  /** @default `--out <file>` */
  name: string;
  usage(message: string): Error;
}

export function formatOf(file: string, errors?: OutputErrors): RecordFormat {
  if (file === '-') return 'jsonl';
  const ext = path.extname(file).toLowerCase();
  if (ext === '.jsonl' || ext === '.ndjson' || ext === '.json') return 'jsonl';
  if (ext === '.csv') return 'csv';
  if (ext === '.parquet') return 'parquet';
  if (ext === '.arrow' || ext === '.ipc') return 'ipc';
  const message = `${errors?.name ?? `--out ${file}`}: the file must end in .jsonl, .csv, .parquet or .arrow (or be - for standard output)`;
  throw errors ? errors.usage(message) : new CliUsageError(message);
}

/** Column types of a page record in a Parquet or Arrow file. */
export const RECORD_SCHEMA: DataFrameSchema = {
  url: { type: 'string', nullable: false },
  finalUrl: 'string',
  status: 'int32',
  contentType: 'string',
  bytes: 'int64',
  depth: 'int32',
  title: 'string',
  links: 'int32',
  fetchMs: 'int64',
  error: 'string',
};

/** One CSV field (RFC 4180): quoted when it holds a comma, quote or line break. */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
