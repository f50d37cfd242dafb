/**
 * Writes one JSON document per line. Writes wait when the file stream's buffer is full
 * (backpressure reaches the crawl); `close` (called by the engine when the run ends) flushes
 * and closes the file. The file is created on the first write, or on close for a run without
 * items, so a finished run always leaves a file.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { DataSink, ItemMeta } from '@mocra/core';

export interface JsonlSinkOptions {
  /** Append to an existing file instead of replacing it. @default false */
  append?: boolean;
  /** Write `{ "itemId", "url", "item" }` per line instead of the bare item. @default false */
  withMeta?: boolean;
}

export class JsonlSink<TItem> implements DataSink<TItem> {
  readonly path: string;
  readonly #options: JsonlSinkOptions;
  #stream: fs.WriteStream | undefined;
  #error: Error | undefined;
  #closed: Promise<void> | undefined;

  constructor(file: string, options: JsonlSinkOptions = {}) {
    this.path = path.resolve(file);
    this.#options = options;
  }

  async write(item: TItem, meta: ItemMeta): Promise<void> {
    const stream = this.#open();
    if (this.#error) throw this.#error;
    const record = this.#options.withMeta ? { itemId: meta.itemId, url: meta.url, item } : item;
    if (!stream.write(`${JSON.stringify(record)}\n`)) {
      await new Promise<void>((resolve, reject) => {
        const onDrain = () => {
          stream.off('error', onError);
          resolve();
        };
        const onError = (err: Error) => {
          stream.off('drain', onDrain);
          reject(err);
        };
        stream.once('drain', onDrain);
        stream.once('error', onError);
      });
    }
  }

  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve, reject) => {
      const stream = this.#open();
      if (this.#error) {
        reject(this.#error);
        return;
      }
      stream.once('error', reject);
      stream.end(() => resolve());
    });
    return this.#closed;
  }

  #open(): fs.WriteStream {
    if (!this.#stream) {
      fs.mkdirSync(path.dirname(this.path), { recursive: true });
      this.#stream = fs.createWriteStream(this.path, { flags: this.#options.append ? 'a' : 'w' });
      this.#stream.on('error', (err) => {
        this.#error = err;
      });
    }
    return this.#stream;
  }
}

export function createJsonlSink<TItem>(file: string, options: JsonlSinkOptions = {}): JsonlSink<TItem> {
  return new JsonlSink<TItem>(file, options);
}
