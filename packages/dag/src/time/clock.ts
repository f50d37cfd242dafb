/**
 * Time and randomness are injected so that backoff, circuit breakers, timeouts and run-guard
 * renewal can be tested on a manual clock without sleeping, and so that a host (the mocra
 * engine, a test harness) can run the scheduler on its own notion of time.
 */

/** A pending timer; `cancel` is idempotent. */
export interface ClockTimer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `callback` once, `delayMs` from now (0 or less: as soon as possible, never synchronously). */
  setTimeout(callback: () => void, delayMs: number): ClockTimer;
}

/** A source of uniformly distributed numbers in [0, 1), like `Math.random`. */
export type RandomSource = () => number;

/** The real clock: `Date.now` and the global timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(callback, delayMs) {
    const handle = setTimeout(callback, Math.max(0, delayMs));
    return { cancel: () => clearTimeout(handle) };
  },
};

export interface ManualClock extends Clock {
  /** Timers that have not fired or been cancelled. */
  readonly pendingTimers: number;
  /**
   * Moves time forward by `ms`, firing every timer that falls due in order of due time. After
   * each timer it lets pending promise callbacks run, so work a timer starts (a retry, a renewal)
   * can schedule further timers that also fire within the same advance.
   */
  advance(ms: number): Promise<void>;
  /** Advances to the next pending timer and fires it. Returns false when none is pending. */
  next(): Promise<boolean>;
  /** Runs timers until none is pending or `maxSteps` timers have fired (a guard against timers that re-arm forever). */
  runAll(maxSteps?: number): Promise<void>;
}

interface ManualTimer {
  at: number;
  seq: number;
  callback: () => void;
  cancelled: boolean;
}

/** Lets every queued promise callback run (including ones they queue in turn). */
export function flushPromises(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * A clock that only moves when told to. For tests of code that uses a {@link Clock}: nothing
 * sleeps, and the order in which timers fire is exact.
 */
export function createManualClock(startMs = 0): ManualClock {
  let now = startMs;
  let seq = 0;
  const timers: ManualTimer[] = [];

  const dueFirst = (a: ManualTimer, b: ManualTimer) => a.at - b.at || a.seq - b.seq;

  const fireNext = async (limit: number): Promise<boolean> => {
    timers.sort(dueFirst);
    const timer = timers[0];
    if (timer === undefined || timer.at > limit) return false;
    timers.shift();
    now = Math.max(now, timer.at);
    timer.callback();
    await flushPromises();
    return true;
  };

  return {
    now: () => now,
    setTimeout(callback, delayMs) {
      const timer: ManualTimer = { at: now + Math.max(0, delayMs), seq: seq++, callback, cancelled: false };
      timers.push(timer);
      return {
        cancel() {
          if (timer.cancelled) return;
          timer.cancelled = true;
          const i = timers.indexOf(timer);
          if (i >= 0) timers.splice(i, 1);
        },
      };
    },
    get pendingTimers() {
      return timers.length;
    },
    async advance(ms) {
      const target = now + ms;
      await flushPromises();
      while (await fireNext(target)) {
        // keep firing: a callback may have armed a timer that is also due before `target`
      }
      now = target;
      await flushPromises();
    },
    async next() {
      await flushPromises();
      return fireNext(Number.POSITIVE_INFINITY);
    },
    async runAll(maxSteps = 10_000) {
      for (let i = 0; i < maxSteps; i++) {
        if (!(await this.next())) return;
      }
    },
  };
}
