/**
 * Time as the pool sees it. Everything time-driven — expiry, rate-limit windows, refill
 * back-off, the maintenance sweep and health-check rounds — goes through one `ProxyClock`, so a
 * test can drive hours of pool life by moving a manual clock instead of sleeping.
 */
export interface ProxyClock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `callback` once after `ms`. Real timers must not keep the process alive (unref them). */
  setTimeout(callback: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer): void;
}

/** Opaque handle returned by {@link ProxyClock.setTimeout}. */
export type ClockTimer = object | number;

/** Wall-clock time with unref'd Node timers: a pool never holds a process open by itself. */
export const systemClock: ProxyClock = {
  now: () => Date.now(),
  setTimeout(callback, ms) {
    const timer = setTimeout(callback, ms);
    timer.unref();
    return timer;
  },
  clearTimeout(timer) {
    clearTimeout(timer as NodeJS.Timeout);
  },
};
