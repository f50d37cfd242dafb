/**
 * The dashboard chart's history, kept on the server: every `intervalMs` the engine's totals
 * are read and the rates since the last reading are kept, for `keepMs`. A reloaded page (or a
 * second person opening it) starts from the last minutes instead of an empty chart.
 *
 * ```
 *   totals at t0 ─┐   totals at t1 ─┐
 *                 └─ (t1 − t0) ─────┴─▶ { t: t1, pages/s, items/s, errors/s, bytes/s } ─▶ ring (keepMs)
 * ```
 *
 * Totals that went down (a new engine behind the same API) restart the rates from there.
 */
import type { HistorySample } from './types.js';

export interface ThroughputTotals {
  pages: number;
  items: number;
  errors: number;
  bytes: number;
}

export interface ThroughputHistoryOptions {
  /** Reads the totals (the engine's `stats()`). */
  read: () => Promise<ThroughputTotals>;
  /** @default 2000 */
  intervalMs?: number;
  /** How far back samples are kept. @default 900000 (15 min, the chart's longest window) */
  keepMs?: number;
  /** @default Date.now */
  now?: () => number;
}

const KEYS = ['pages', 'items', 'errors', 'bytes'] as const;

export class ThroughputHistory {
  readonly intervalMs: number;
  readonly #read: () => Promise<ThroughputTotals>;
  readonly #now: () => number;
  readonly #capacity: number;
  readonly #samples: HistorySample[] = [];
  #last: (ThroughputTotals & { t: number }) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #reading = false;

  constructor(options: ThroughputHistoryOptions) {
    this.intervalMs = options.intervalMs ?? 2000;
    this.#read = options.read;
    this.#now = options.now ?? Date.now;
    this.#capacity = Math.max(1, Math.ceil((options.keepMs ?? 900_000) / this.intervalMs));
  }

  /** Take a first reading now and one every interval (the timer never holds the process open). */
  start(): this {
    if (this.#timer !== undefined) return this;
    void this.sample();
    this.#timer = setInterval(() => void this.sample(), this.intervalMs);
    this.#timer.unref();
    return this;
  }

  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Oldest first. */
  samples(): HistorySample[] {
    return [...this.#samples];
  }

  /** Read the totals and keep the rates since the last reading (skipped while one is out). */
  async sample(): Promise<void> {
    if (this.#reading) return;
    this.#reading = true;
    try {
      const totals = await this.#read();
      const t = this.#now();
      const last = this.#last;
      this.#last = {
        t,
        pages: totals.pages,
        items: totals.items,
        errors: totals.errors,
        bytes: totals.bytes,
      };
      if (last === undefined || t <= last.t || KEYS.some((k) => totals[k] < last[k])) return;
      const seconds = (t - last.t) / 1000;
      this.#samples.push({
        t,
        pages: (totals.pages - last.pages) / seconds,
        items: (totals.items - last.items) / seconds,
        errors: (totals.errors - last.errors) / seconds,
        bytes: (totals.bytes - last.bytes) / seconds,
      });
      if (this.#samples.length > this.#capacity) this.#samples.shift();
    } catch {
      // A reading that failed (a backend down) leaves a gap in the chart, nothing else.
    } finally {
      this.#reading = false;
    }
  }
}
