/**
 * Time for the scheduler, injectable so tests fire cron jobs on a clock they move by hand
 * instead of waiting for real minutes to pass.
 */

/** A handle returned by {@link Clock.setTimeout}. */
export type TimerHandle = { readonly __timer: unique symbol } | object;

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  /** Call `fn` once, `ms` from now. Timers do not keep the process alive. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** Node's timers' longest delay; longer waits are re-armed in steps. */
const MAX_DELAY = 2 ** 31 - 1;

/** The real clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const timer = setTimeout(fn, Math.min(Math.max(0, ms), MAX_DELAY));
    timer.unref();
    return timer;
  },
  clearTimeout(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

interface ManualTimer {
  id: number;
  at: number;
  fn: () => void;
}

/**
 * A clock that only moves when told to. `advance(ms)` runs every timer that falls due on the
 * way, in time order, each at its own time, and lets promise callbacks settle after each one, so
 * async work a timer starts (a cron firing that submits a task) completes before the next.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: ManualTimer[] = [];

  constructor(start: number | Date = 0) {
    this.#now = typeof start === 'number' ? start : start.getTime();
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: ManualTimer = { id: ++this.#seq, at: this.#now + Math.max(0, ms), fn };
    this.#timers.push(timer);
    return timer;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#timers = this.#timers.filter((t) => t !== handle);
  }

  /** Timers waiting to fire. */
  get pending(): number {
    return this.#timers.length;
  }

  /**
   * Moves time forward without firing anything, as a blocked event loop or a suspended process
   * would experience it; overdue timers fire (late) on the next `advance`.
   */
  jump(ms: number): void {
    this.#now += Math.max(0, ms);
  }

  /** Moves time forward by `ms`, firing due timers on the way. */
  advance(ms: number): Promise<void> {
    return this.advanceTo(this.#now + ms);
  }

  /** Moves time forward to `epochMs` (never backwards), firing due timers on the way. */
  async advanceTo(epochMs: number | Date): Promise<void> {
    const target = typeof epochMs === 'number' ? epochMs : epochMs.getTime();
    await settle();
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
      await settle();
    }
    this.#now = Math.max(this.#now, target);
    await settle();
  }
}

/** Lets pending promise chains (several hops deep) run before time moves on. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
