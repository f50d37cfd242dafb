/**
 * A sink you read with `for await`: items flow through a bounded buffer, so a slow reader
 * slows the crawl instead of letting items pile up in memory.
 *
 * ```
 *  parse ──write──▶ [ buffer, ≤ capacity ] ──next()──▶ for await (const item of sink)
 *          (waits while full)                (waits while empty; ends after the run ends)
 * ```
 *
 * The iteration ends when the run ends (the engine closes the sink) and the buffer is drained.
 * Leaving the loop early (`break`) closes the channel: later writes fail with SinkClosedError.
 * Only one reader should iterate.
 */
import type { DataSink, ItemMeta } from '@mocra/core';
import { InvalidArgumentError } from '@mocra/core';
import { SinkClosedError } from '../errors.js';

export interface ChannelSinkOptions {
  /** Items buffered before `write` waits for the reader. @default 100 */
  capacity?: number;
}

/** One buffered item with its meta (what `entries()` yields). */
export interface ChannelEntry<TItem> {
  item: TItem;
  meta: ItemMeta;
}

export class ChannelSink<TItem> implements DataSink<TItem>, AsyncIterable<TItem> {
  readonly capacity: number;
  readonly #buffer: ChannelEntry<TItem>[] = [];
  #head = 0;
  #ended = false;
  #readerGone = false;
  #reader: (() => void) | undefined;
  #writers: { resolve: () => void; reject: (err: unknown) => void }[] = [];

  constructor(options: ChannelSinkOptions = {}) {
    const capacity = options.capacity ?? 100;
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new InvalidArgumentError(`channel sink capacity must be an integer ≥ 1, got ${capacity}`);
    }
    this.capacity = capacity;
  }

  /** Items waiting for the reader. */
  get size(): number {
    return this.#buffer.length - this.#head;
  }

  async write(item: TItem, meta: ItemMeta): Promise<void> {
    while (this.size >= this.capacity && !this.#readerGone) {
      await new Promise<void>((resolve, reject) => this.#writers.push({ resolve, reject }));
    }
    if (this.#readerGone) throw new SinkClosedError();
    this.#buffer.push({ item, meta });
    this.#wakeReader();
  }

  /** No more items will come (called by the engine when the run ends). */
  close(): void {
    this.#ended = true;
    this.#wakeReader();
  }

  /** Iterate items with their meta (`{ item, meta }`). */
  entries(): AsyncIterableIterator<ChannelEntry<TItem>> {
    const next = async (): Promise<IteratorResult<ChannelEntry<TItem>>> => {
      for (;;) {
        if (this.#readerGone) return { done: true, value: undefined };
        if (this.size > 0) {
          const entry = this.#buffer[this.#head]!;
          this.#head++;
          // Compact now and then so the array does not grow with the crawl.
          if (this.#head > 1024 && this.#head * 2 > this.#buffer.length) {
            this.#buffer.splice(0, this.#head);
            this.#head = 0;
          }
          this.#writers.shift()?.resolve();
          return { done: false, value: entry };
        }
        if (this.#ended) return { done: true, value: undefined };
        await new Promise<void>((resolve) => {
          this.#reader = resolve;
        });
      }
    };
    const iterator: AsyncIterableIterator<ChannelEntry<TItem>> = {
      next,
      return: async () => {
        this.#stopReading();
        return { done: true, value: undefined };
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  [Symbol.asyncIterator](): AsyncIterator<TItem> {
    const entries = this.entries();
    return {
      next: async () => {
        const r = await entries.next();
        return r.done ? { done: true, value: undefined } : { done: false, value: r.value.item };
      },
      return: async () => {
        await entries.return?.();
        return { done: true, value: undefined };
      },
    };
  }

  #stopReading(): void {
    this.#readerGone = true;
    const writers = this.#writers;
    this.#writers = [];
    for (const w of writers) w.reject(new SinkClosedError());
  }

  #wakeReader(): void {
    const reader = this.#reader;
    this.#reader = undefined;
    reader?.();
  }
}

export function createChannelSink<TItem>(options: ChannelSinkOptions = {}): ChannelSink<TItem> {
  return new ChannelSink<TItem>(options);
}
