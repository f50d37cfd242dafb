import type { ClockTimer, ProxyClock } from '../../src/index.js';

/** A clock that moves only when a test says so; timers fire in time order as it moves. */
export class ManualClock implements ProxyClock {
  #now: number;
  #seq = 0;
  readonly #timers = new Map<number, { at: number; callback: () => void }>();

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(callback: () => void, ms: number): ClockTimer {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), callback });
    return id;
  }

  clearTimeout(timer: ClockTimer): void {
    this.#timers.delete(timer as number);
  }

  /** Timers not yet fired. */
  get pending(): number {
    return this.#timers.size;
  }

  /**
   * Moves time forward by `ms`, firing each due timer at its own instant, and lets promise
   * continuations (and I/O callbacks already queued) run after each one.
   */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (let guard = 0; guard < 100_000; guard++) {
      let next: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.#timers)
        if (entry[1].at <= target && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = next[1].at;
      next[1].callback();
      await settle();
    }
    this.#now = target;
    await settle();
  }
}

/** Lets queued promise continuations and immediate callbacks run. */
export async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
