/**
 * Write coalescing for the LevelDB queue: every put/delete goes through one writer that
 * applies them in arrival order, as few batches as possible (all operations that arrive while
 * a batch is being written form the next one). One batch is in flight at a time, so an ack's
 * delete can never overtake the publish's put of the same message.
 *
 * Operations are copied into LevelDB's native batch the moment they arrive (a chained batch),
 * not kept as JavaScript objects until their turn: a frontier spilling a thousand records per
 * page would otherwise hold every waiting key and value on the heap for as long as the batch
 * ahead takes to write — long enough for them to be promoted to the old generation, which is
 * what set the peak memory of a crawl with a million queued URLs.
 */
import { StoreFailedError } from '../errors.js';
import type { BinaryLevel } from './leveldb-store.js';

export type WriteOp = { type: 'put'; key: Uint8Array; value: Uint8Array } | { type: 'del'; key: Uint8Array };

type NativeBatch = ReturnType<BinaryLevel['batch']>;

export class BatchWriter {
  readonly #db: BinaryLevel;
  readonly #dir: string;
  /** The next batch: filled while the one before it is written. */
  #next: NativeBatch | undefined;
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
    try {
      this.#next ??= this.#db.batch();
      const batch = this.#next;
      for (const op of ops) {
        if (op.type === 'put') batch.put(op.key, op.value);
        else batch.del(op.key);
      }
    } catch (err) {
      // The database is closing or closed: nothing of these operations can be written.
      return Promise.reject(new StoreFailedError(this.#dir, 'queueing a batch', { cause: err }));
    }
    const done = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    this.#start();
    return done;
  }

  #start(): void {
    // Operations queued after the loop's last check but before this callback ran would
    // otherwise wait for a loop that has ended: start another.
    this.#running ??= this.#loop().finally(() => {
      this.#running = undefined;
      if (this.#next !== undefined) this.#start();
    });
  }

  /** Resolves when everything queued so far is written. */
  idle(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  async #loop(): Promise<void> {
    while (this.#next !== undefined) {
      const batch = this.#next;
      const waiters = this.#waiters;
      this.#next = undefined;
      this.#waiters = [];
      try {
        await batch.write();
        this.batches++;
        for (const w of waiters) w.resolve();
      } catch (err) {
        const error = new StoreFailedError(this.#dir, 'writing a batch', { cause: err });
        for (const w of waiters) w.reject(error);
      }
    }
  }
}
