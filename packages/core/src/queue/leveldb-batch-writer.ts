/**
 * Write coalescing for the LevelDB queue: every put/delete goes through one writer that
 * applies them in arrival order, as few batches as possible (all operations that arrive while
 * a batch is being written form the next one). One batch is in flight at a time, so an ack's
 * delete can never overtake the publish's put of the same message.
 */
import { StoreFailedError } from '../errors.js';
import type { BinaryLevel } from './leveldb-store.js';

export type WriteOp = { type: 'put'; key: Uint8Array; value: Uint8Array } | { type: 'del'; key: Uint8Array };

export class BatchWriter {
  readonly #db: BinaryLevel;
  readonly #dir: string;
  #ops: WriteOp[] = [];
  #waiters: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  #running: Promise<void> | undefined;
  /** Batches written (observability and tests). */
  batches = 0;

  constructor(db: BinaryLevel, dir: string) {
    this.#db = db;
    this.#dir = dir;
  }

  /** Queue operations; resolves once they are written (handed to the OS). */
  write(ops: readonly WriteOp[]): Promise<void> {
    if (ops.length === 0) return this.idle();
    for (const op of ops) this.#ops.push(op);
    const done = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    this.#running ??= this.#loop().finally(() => {
      this.#running = undefined;
    });
    return done;
  }

  /** Resolves when everything queued so far is written. */
  idle(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  async #loop(): Promise<void> {
    while (this.#ops.length > 0) {
      const ops = this.#ops;
      const waiters = this.#waiters;
      this.#ops = [];
      this.#waiters = [];
      try {
        await this.#db.batch(ops);
        this.batches++;
        for (const w of waiters) w.resolve();
      } catch (err) {
        const error = new StoreFailedError(this.#dir, 'writing a batch', { cause: err });
        for (const w of waiters) w.reject(error);
      }
    }
  }
}
