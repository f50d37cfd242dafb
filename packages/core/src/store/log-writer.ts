/**
 * `log` rows, written off the crawl's path: entries go into a bounded buffer and are inserted
 * in batches (when `batchSize` are waiting, or `flushMs` after the first). Nothing the crawl
 * does waits on the database: a full buffer drops new rows, a failed insert drops its batch
 * (`writeLogs` is not idempotent, so a blind retry could double every line) — both are counted
 * and reported on `mocra:db:log-dropped`.
 *
 * ```
 *   log(entry) ─▶ [ e1 e2 … ]  (≤ maxBuffered; beyond: dropped)
 *                     │ batchSize reached / flushMs passed
 *                     ▼
 *                writeLogs(batch)   one insert at a time
 * ```
 */
import type { LogEntryInput, LogLevel, StoreRepository } from '@mocra/store';
import { dbChannels } from './channels.js';

const RANK: Readonly<Record<LogLevel, number>> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
};

export interface StoreLogWriterOptions {
  store: () => Promise<StoreRepository>;
  level: LogLevel;
  batchSize: number;
  flushMs: number;
  maxBuffered: number;
  /** Told about a failed insert (the engine logs it to stderr, never back to the database). */
  onError?: (error: unknown) => void;
}

export interface StoreLogWriterStats {
  written: number;
  dropped: number;
  buffered: number;
}

export class StoreLogWriter {
  readonly #options: StoreLogWriterOptions;
  readonly #min: number;
  #buffer: LogEntryInput[] = [];
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #written = 0;
  #dropped = 0;
  #closed = false;

  constructor(options: StoreLogWriterOptions) {
    this.#options = options;
    this.#min = RANK[options.level];
  }

  /** Whether rows of this level are written at all (check before building one). */
  enabled(level: LogLevel): boolean {
    return !this.#closed && RANK[level] >= this.#min;
  }

  log(entry: LogEntryInput): void {
    if (!this.enabled(entry.level)) return;
    if (this.#buffer.length >= this.#options.maxBuffered) {
      this.#drop(1, 'buffer-full');
      return;
    }
    this.#buffer.push({ ...entry, timestamp: entry.timestamp ?? new Date() });
    if (this.#buffer.length >= this.#options.batchSize) this.#kick();
    else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#kick();
      }, this.#options.flushMs);
      this.#timer.unref();
    }
  }

  stats(): StoreLogWriterStats {
    return { written: this.#written, dropped: this.#dropped, buffered: this.#buffer.length };
  }

  /** Writes everything buffered now. */
  async flush(): Promise<void> {
    while (this.#buffer.length > 0 || this.#writing !== undefined) {
      this.#kick();
      await this.#writing;
    }
  }

  /** Flushes and takes no more rows. */
  async close(): Promise<void> {
    await this.flush();
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** One insert at a time; when it ends, the next batch (if any) starts. */
  #kick(): void {
    if (this.#writing !== undefined || this.#buffer.length === 0) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#buffer.slice(0, this.#options.batchSize);
    this.#buffer = this.#buffer.slice(batch.length);
    this.#writing = (async () => {
      try {
        const store = await this.#options.store();
        this.#written += await store.writeLogs(batch);
      } catch (err) {
        this.#drop(batch.length, 'write-failed');
        if (dbChannels.error.hasSubscribers)
          dbChannels.error.publish({ operation: 'write-logs', error: err });
        this.#options.onError?.(err);
      }
    })().finally(() => {
      this.#writing = undefined;
      if (this.#buffer.length >= this.#options.batchSize) this.#kick();
      else if (this.#buffer.length > 0 && this.#timer === undefined && !this.#closed) {
        this.#timer = setTimeout(() => {
          this.#timer = undefined;
          this.#kick();
        }, this.#options.flushMs);
        this.#timer.unref();
      }
    });
  }

  #drop(count: number, reason: 'buffer-full' | 'write-failed'): void {
    this.#dropped += count;
    if (dbChannels.logDropped.hasSubscribers) dbChannels.logDropped.publish({ count, reason });
  }
}
