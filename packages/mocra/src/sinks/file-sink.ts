/**
 * Items to a file in the library, as `mocra run --out` writes them: JSON Lines (`.jsonl`,
 * `.ndjson`, `.json`), CSV (`.csv`; columns from the first item, or fixed), Parquet (`.parquet`)
 * or Arrow (`.arrow`) — by the file's extension. The CLI's output writer does the writing, so
 * both behave alike: each line is handed to the OS before the item's page is acknowledged, and
 * an item id already in the file is not written again.
 */
import { type DataSink, InvalidArgumentError, type ItemMeta } from '@mocra/core';
import type { DataFrameSchema } from '@mocra/core/dataframe';
import { OutputFile } from '../cli/output-file.js';

export interface FileSinkOptions {
  /** CSV columns, in order (keys of the item). @default the first item's keys */
  columns?: readonly string[];
  /** Parquet / Arrow column types. @default inferred from the first batch */
  schema?: DataFrameSchema;
}

export class FileSink<TItem> implements DataSink<TItem> {
  readonly #out: OutputFile;

  constructor(file: string, options: FileSinkOptions = {}) {
    const name = `file sink ${file}`;
    this.#out = new OutputFile(file, {
      ...(options.columns === undefined
        ? {}
        : { csv: { fields: [...options.columns], header: [...options.columns] } }),
      ...(options.schema === undefined ? {} : { schema: options.schema }),
      errors: { name, usage: (message) => new InvalidArgumentError(message) },
    });
  }

  /** The path as given. */
  get file(): string {
    return this.#out.file;
  }

  /** Items written. */
  get written(): number {
    return this.#out.written;
  }

  write(item: TItem, meta: ItemMeta): void {
    this.#out.write(meta.itemId, item);
  }

  close(): void {
    this.#out.close();
  }
}

/** A sink that writes items to `file`, in the format its extension names. */
export function createFileSink<TItem>(file: string, options: FileSinkOptions = {}): FileSink<TItem> {
  return new FileSink<TItem>(file, options);
}

/** A CSV sink: {@link createFileSink} for a `.csv` file (the extension is checked). */
export function createCsvSink<TItem>(file: string, options: FileSinkOptions = {}): FileSink<TItem> {
  if (!file.toLowerCase().endsWith('.csv')) {
    throw new InvalidArgumentError(`createCsvSink: ${file} must end in .csv`);
  }
  return new FileSink<TItem>(file, options);
}
