/**
 * `BatchBuffer`: collect items and hand them on in batches — when `maxItems` are waiting, when
 * the oldest has waited `maxWaitMs`, or on `flush()`/`close()`. One batch is flushed at a time
 * and at most `maxPendingBatches` full batches wait behind it; past that, `add` waits (back-
 * pressure) instead of letting memory grow.
 *
 *   add ─▶ [ open batch ] ──full / timer──▶ [ waiting batches ≤ maxPendingBatches ] ─▶ flush(batch)
 *                                                                                 one at a time
 */
import { BatchFlushError, InvalidArgumentError, MocraError } from '../../errors.js';

export interface BatchBufferOptions<TItem> {
  /** Receives each batch, in order; the next batch waits until its promise settles. */
  flush: (batch: TItem[]) => void | Promise<void>;
  /** Items in one batch. @default 1000 */
  maxItems?: number;
  /** The longest an item waits before its batch is flushed anyway; 0 turns the timer off. @default 1000 */
  maxWaitMs?: number;
  /** Full batches that may wait behind the one being flushed before `add` waits. @default 1 */
  maxPendingBatches?: number;
}

export class BatchBuffer<TItem> {
  readonly #flush: (batch: TItem[]) => void | Promise<void>;
  readonly #maxItems: number;
  readonly #maxWaitMs: number;
  readonly #maxPending: number;
  #open: TItem[] = [];
  readonly #waiting: TItem[][] = [];
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #failure: BatchFlushError | undefined;
  #closed = false;
  #flushed = 0;
  /** Callers of `add` waiting for room, woken when a batch finishes. */
  #roomWaiters: (() => void)[] = [];

  constructor(options: BatchBufferOptions<TItem>) {
    if (typeof options?.flush !== 'function')
      throw new InvalidArgumentError('BatchBuffer: `flush` must be a function');
    this.#flush = options.flush;
    this.#maxItems = positiveInt(options.maxItems ?? 1000, 'maxItems', 1);
    this.#maxWaitMs = positiveInt(options.maxWaitMs ?? 1000, 'maxWaitMs', 0);
    this.#maxPending = positiveInt(options.maxPendingBatches ?? 1, 'maxPendingBatches', 0);
  }

  /** Items not yet handed to `flush` (the open batch plus waiting ones). */
  get size(): number {
    return this.#open.length + this.#waiting.reduce((n, b) => n + b.length, 0);
  }

  /** Items handed to `flush` whose flush succeeded. */
  get flushed(): number {
    return this.#flushed;
  }

  /** Add an item. Resolves at once unless too many batches are waiting; then when one is done. */
  async add(item: TItem): Promise<void> {
    this.#check();
    this.#open.push(item);
    if (this.#open.length >= this.#maxItems) this.#seal();
    else if (this.#open.length === 1 && this.#maxWaitMs > 0) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#seal();
      }, this.#maxWaitMs);
    }
    // waiting[0] is the batch being flushed; the rest wait behind it.
    while (this.#waiting.length > this.#maxPending + 1 && this.#failure === undefined) {
      await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
    }
    this.#check();
  }

  /** Flush what is buffered now; resolves when every batch so far is flushed. */
  async flush(): Promise<void> {
    this.#seal();
    while (this.#running) await this.#running;
    if (this.#failure) throw this.#failure;
  }

  /** Flush what remains and refuse further items. */
  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.flush();
    } finally {
      this.#closed = true;
      clearTimeout(this.#timer);
    }
  }

  #check(): void {
    if (this.#failure) throw this.#failure;
    if (this.#closed) throw new MocraError('MOCRA_ERR_BATCH_CLOSED', 'BatchBuffer: add() after close()');
  }

  /** Move the open batch to the waiting list and make sure the flush loop runs. */
  #seal(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#open.length > 0) {
      this.#waiting.push(this.#open);
      this.#open = [];
    }
    if (!this.#running && this.#waiting.length > 0) {
      this.#running = this.#drain().finally(() => {
        this.#running = undefined;
      });
    }
  }

  async #drain(): Promise<void> {
    for (;;) {
      const batch = this.#waiting[0];
      if (batch === undefined || this.#failure) break;
      try {
        await this.#flush(batch);
        this.#flushed += batch.length;
      } catch (err) {
        // Nothing silent: the batch stays counted as not flushed, and every later call throws.
        this.#failure = new BatchFlushError(batch.length, err);
      }
      this.#waiting.shift();
      const waiters = this.#roomWaiters;
      this.#roomWaiters = [];
      for (const wake of waiters) wake();
    }
  }
}

function positiveInt(value: number, name: string, min: number): number {
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidArgumentError(`BatchBuffer: ${name} must be an integer ≥ ${min} (got ${String(value)})`);
  }
  return value;
}
