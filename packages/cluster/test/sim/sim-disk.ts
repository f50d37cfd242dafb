/**
 * A model disk for one node. Writes become visible at once (the page cache) but durable only when
 * an fsync completes: a `sync: true` batch is durable when its completion fires, together with
 * every batch written before it. A crash keeps the durable state plus, at random, some of the
 * batches that were still in flight (in order, as LevelDB's write-ahead log would) and maybe a
 * torn prefix of the next one. This is what lets the simulator test fsync ordering and the torn
 * batch checks of RaftStorage, which a SIGKILL on a real machine (page cache survives) cannot.
 */
import type { KvEngine, KvOp } from '../../src/internal.js';
import type { Prng } from './prng.js';
import type { SimWorld } from './sim-world.js';

interface Batch {
  readonly ops: readonly KvOp[];
}

export interface DiskFaults {
  /** Milliseconds an fsync takes (uniform in [min, max]). */
  readonly fsyncMs: readonly [number, number];
  /** On a crash, chance that in-flight batches partly survive (else all are lost). */
  readonly keepInFlight: number;
  /** On a crash, chance that the first lost batch survives as a torn prefix. */
  readonly tear: number;
}

export class SimDisk {
  readonly durable = new Map<string, string>();
  #view = new Map<string, string>();
  #pending: Batch[] = [];
  /** Batches torn by crashes so far (the simulator reports it). */
  tornBatches = 0;

  /** Batches written but not yet durable. */
  get inFlight(): number {
    return this.#pending.length;
  }

  /** An engine for one incarnation of the node; its completions die with `owner`. */
  engine(world: SimWorld, owner: string, prng: Prng, faults: DiskFaults): KvEngine {
    const disk = this;
    return {
      async get(key) {
        return disk.#view.get(key);
      },
      async range(gte, lt) {
        return [...disk.#view]
          .filter(([k]) => k >= gte && k < lt)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      },
      write(ops, options) {
        const batch: Batch = { ops: [...ops] };
        for (const op of ops) {
          if (op.type === 'put') disk.#view.set(op.key, op.value);
          else disk.#view.delete(op.key);
        }
        disk.#pending.push(batch);
        return new Promise<void>((resolve) => {
          const delay = options.sync ? prng.int(faults.fsyncMs[0], faults.fsyncMs[1]) : 0;
          world.schedule(
            delay,
            () => {
              if (options.sync) disk.#syncThrough(batch);
              resolve();
            },
            owner,
          );
        });
      },
      async close() {},
    };
  }

  #syncThrough(batch: Batch): void {
    const i = this.#pending.indexOf(batch);
    if (i < 0) return;
    for (const b of this.#pending.slice(0, i + 1)) this.#applyTo(this.durable, b.ops);
    this.#pending = this.#pending.slice(i + 1);
  }

  #applyTo(map: Map<string, string>, ops: readonly KvOp[]): void {
    for (const op of ops) {
      if (op.type === 'put') map.set(op.key, op.value);
      else map.delete(op.key);
    }
  }

  /** Lose power: keep what was synced and, perhaps, some of what was in flight. */
  crash(prng: Prng, faults: DiskFaults): void {
    const pending = this.#pending;
    this.#pending = [];
    let keep = 0;
    if (pending.length > 0 && prng.chance(faults.keepInFlight)) keep = prng.int(0, pending.length);
    for (const b of pending.slice(0, keep)) this.#applyTo(this.durable, b.ops);
    const next = pending[keep];
    if (next && next.ops.length > 1 && prng.chance(faults.tear)) {
      this.#applyTo(this.durable, next.ops.slice(0, prng.int(1, next.ops.length - 1)));
      this.tornBatches++;
    }
    this.#view = new Map(this.durable);
  }

  /** A process kill that keeps the page cache (what SIGKILL does on a real machine). */
  killKeepingCache(): void {
    for (const b of this.#pending) this.#applyTo(this.durable, b.ops);
    this.#pending = [];
    this.#view = new Map(this.durable);
  }
}
