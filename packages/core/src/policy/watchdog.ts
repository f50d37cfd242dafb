/**
 * The watchdog for stuck work: run a handler with a deadline. When the deadline passes, the
 * handler's AbortSignal is aborted and the caller gets a `HandlerTimeoutError` at once —
 * without waiting for the handler, which may never return (a parser in an endless loop of
 * awaits, a sink whose connection hangs). The error is retryable and classifies as a
 * `timeout`, so the work takes the ordinary retry path instead of holding a worker slot, and
 * its lease, forever.
 *
 * ```
 *   run(fn) ──▶ fn(signal) ─────────────── settles first ──▶ its result / error
 *          └──▶ clock timer (timeoutMs) ── fires first ────▶ signal.abort(timeout), reject HandlerTimeoutError
 *                                                           (fn's late result is ignored, its rejection swallowed)
 * ```
 *
 * An abandoned handler that ignores its signal keeps running in the background until it ends
 * by itself; whatever it emits late is made harmless by idempotency (items carry a stable
 * `itemId`, requests are deduplicated), which is the same reasoning as for a redelivered lease.
 */
import { setMaxListeners } from 'node:events';
import { HandlerTimeoutError, InvalidArgumentError } from '../errors.js';
import { type Clock, systemClock, type TimerHandle } from '../schedule/clock.js';
import { policyChannels, type WatchdogTimeoutMessage } from './policy-channels.js';

export interface DeadlineOptions {
  /** The deadline; 0 or Infinity runs without one. */
  timeoutMs: number;
  /** Names the work in the error and the channel message: `download https://…`. */
  label: string;
  /** Aborting it aborts the handler's signal too (the handler decides what that means). */
  signal?: AbortSignal | undefined;
  /** @default the system clock */
  clock?: Clock;
}

/**
 * Run `fn` with a deadline (see the module comment). The signal handed to `fn` is aborted on
 * timeout (reason: the `HandlerTimeoutError`) or when `options.signal` aborts.
 */
export function runWithDeadline<T>(
  fn: (signal: AbortSignal) => Promise<T> | T,
  options: DeadlineOptions,
): Promise<T> {
  const { timeoutMs } = options;
  if (!(timeoutMs >= 0)) throw new InvalidArgumentError(`timeoutMs must be ≥ 0, got ${timeoutMs}`);
  // A group of one whose only sweep falls exactly on the deadline.
  const group = new DeadlineGroup({
    timeoutMs,
    resolutionMs: timeoutMs,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
  });
  return group.run(fn, options.label, options.signal);
}

export interface DeadlineGroupOptions {
  /** Every handler of the group gets this deadline; 0 or Infinity: none. */
  timeoutMs: number;
  /**
   * How often deadlines are checked, and how long runs keep joining one cohort: a handler is
   * aborted at most twice this late.
   * @default timeoutMs / 20, between 10 ms and 1 s
   */
  resolutionMs?: number;
  /** @default the system clock */
  clock?: Clock;
  /** A handler ran past its deadline (called once per timeout, after its run was rejected). */
  onTimeout?: (error: HandlerTimeoutError) => void;
}

interface PendingRun {
  readonly cohort: Cohort;
  readonly label: string | (() => string);
  readonly parent: AbortSignal | undefined;
  readonly expire: (error: HandlerTimeoutError) => void;
}

/**
 * The runs that started under one parent within one resolution window. They share one
 * AbortController, and so one deadline: the latest of theirs, so that none is cut short.
 */
class Cohort {
  readonly controller = new AbortController();
  readonly opened: number;
  /** The deadline of the cohort's last run; every run of it expires then. */
  deadline: number;
  aborted = false;
  #signal: AbortSignal | undefined;

  constructor(opened: number, deadline: number) {
    this.opened = opened;
    this.deadline = deadline;
  }

  /** Made on first read: a run whose handler never reads it costs no signal. */
  get signal(): AbortSignal {
    if (this.#signal === undefined) {
      this.#signal = this.controller.signal;
      // Every run of the cohort (a download and its HTTP request) may listen on it.
      setMaxListeners(0, this.#signal);
    }
    return this.#signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.controller.abort(reason);
  }
}

/** The one abort listener a group keeps on a parent signal, and the runs it serves. */
interface ParentWatch {
  readonly runs: Set<PendingRun>;
  readonly onAbort: () => void;
}

/**
 * Deadlines for many concurrent handlers with one coarse timer. Every stage handler of the
 * engine runs through one of these, so the hot path pays a Set insert and delete per handler
 * instead of arming and clearing a timer each (and the label is only formatted for a handler
 * that actually times out). A deadline of minutes enforced up to two `resolutionMs` late
 * changes nothing for the work.
 *
 * The runs that start under the same parent signal (a stage's shutdown signal) within one
 * `resolutionMs` form a cohort: they share one AbortController — an AbortSignal is a whole
 * EventTarget, and one per handler was a measurable share of a small page's cost — and one
 * deadline, the latest of theirs, at which every run of the cohort still running expires.
 * So a run's signal may abort after the run has ended (another run of its cohort timed out,
 * or the parent aborted): work must not keep using it past its run. Runs under the same
 * parent share one abort listener on it, kept while any of them runs.
 *
 * ```
 *   run(fn) ─▶ cohort (opened ≤ resolutionMs ago, same parent) ─▶ fn(cohort's signal)
 *                │
 *                ├─ live set ◀── sweep every resolutionMs (only while the set is non-empty)
 *                │                 └─ cohort's deadline passed ─▶ its live runs: reject(HandlerTimeoutError);
 *                │                                               the cohort's signal aborts
 *                ├─ parent aborts ─▶ one listener aborts every cohort under it
 *                └─ fn settles first ─▶ removed, its result / error
 * ```
 */
export class DeadlineGroup {
  readonly timeoutMs: number;
  readonly #resolutionMs: number;
  readonly #clock: Clock;
  readonly #limited: boolean;
  readonly #onTimeout: ((error: HandlerTimeoutError) => void) | undefined;
  readonly #live = new Set<PendingRun>();
  readonly #parents = new Map<AbortSignal, ParentWatch>();
  /** The cohort new runs join, by parent (`undefined`: runs with no parent). */
  readonly #open = new Map<AbortSignal | undefined, Cohort>();
  #timer: TimerHandle | undefined;

  constructor(options: DeadlineGroupOptions) {
    const { timeoutMs } = options;
    if (!(timeoutMs >= 0)) throw new InvalidArgumentError(`timeoutMs must be ≥ 0, got ${timeoutMs}`);
    this.timeoutMs = timeoutMs;
    this.#limited = timeoutMs > 0 && Number.isFinite(timeoutMs);
    this.#resolutionMs = options.resolutionMs ?? Math.min(1000, Math.max(10, timeoutMs / 20));
    this.#clock = options.clock ?? systemClock;
    this.#onTimeout = options.onTimeout;
  }

  /** Handlers running now. */
  get size(): number {
    return this.#live.size;
  }

  run<T>(
    fn: (signal: AbortSignal) => Promise<T> | T,
    label: string | (() => string),
    parent?: AbortSignal,
  ): Promise<T> {
    const cohort = this.#cohortFor(parent);
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const finish = (): boolean => {
        if (settled) return false;
        settled = true;
        this.#release(pending);
        return true;
      };
      const pending: PendingRun = {
        cohort,
        label,
        parent,
        expire: (error) => {
          if (!finish()) return;
          cohort.abort(error);
          reject(error);
        },
      };
      if (this.#limited) {
        this.#live.add(pending);
        this.#arm();
      }
      if (parent !== undefined && !parent.aborted) this.#watch(parent, pending);
      let result: Promise<T>;
      try {
        result = Promise.resolve(fn(cohort.signal));
      } catch (err) {
        result = Promise.reject(err);
      }
      result.then(
        (value) => {
          if (finish()) resolve(value);
        },
        (err: unknown) => {
          // A rejection after the deadline is the abandoned handler's; it is swallowed here.
          if (finish()) reject(err);
        },
      );
    });
  }

  #cohortFor(parent: AbortSignal | undefined): Cohort {
    const now = this.#clock.now();
    const deadline = now + this.timeoutMs;
    if (parent?.aborted) {
      // Starts aborted, alone: nothing else may share an aborted signal.
      const aborted = new Cohort(now, deadline);
      aborted.abort(parent.reason);
      return aborted;
    }
    let cohort = this.#open.get(parent);
    if (cohort === undefined || cohort.aborted || now - cohort.opened >= this.#resolutionMs) {
      cohort = new Cohort(now, deadline);
      this.#open.set(parent, cohort);
    } else {
      cohort.deadline = deadline;
    }
    return cohort;
  }

  #watch(parent: AbortSignal, pending: PendingRun): void {
    let watch = this.#parents.get(parent);
    if (watch === undefined) {
      const runs = new Set<PendingRun>();
      const onAbort = () => {
        this.#parents.delete(parent);
        this.#open.delete(parent);
        for (const run of runs) run.cohort.abort(parent.reason);
      };
      watch = { runs, onAbort };
      this.#parents.set(parent, watch);
      parent.addEventListener('abort', onAbort, { once: true });
    }
    watch.runs.add(pending);
  }

  #release(pending: PendingRun): void {
    const { parent } = pending;
    if (parent !== undefined) {
      const watch = this.#parents.get(parent);
      // The last run under this parent: no listener is left on a signal that may live long.
      if (watch?.runs.delete(pending) && watch.runs.size === 0) {
        this.#parents.delete(parent);
        parent.removeEventListener('abort', watch.onAbort);
      }
    }
    if (!this.#limited) return;
    this.#live.delete(pending);
    // Nothing left to watch: no timer left behind (a busy stage rarely gets here).
    if (this.#live.size === 0 && this.#timer !== undefined) {
      this.#clock.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  #arm(): void {
    if (this.#timer !== undefined || this.#live.size === 0) return;
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      this.#sweep();
    }, this.#resolutionMs);
  }

  #sweep(): void {
    const now = this.#clock.now();
    for (const pending of [...this.#live]) {
      if (pending.cohort.deadline > now) continue;
      const label = typeof pending.label === 'string' ? pending.label : pending.label();
      const error = new HandlerTimeoutError(label, this.timeoutMs);
      if (policyChannels.watchdog.hasSubscribers) {
        const message: WatchdogTimeoutMessage = { label, timeoutMs: this.timeoutMs, at: now };
        policyChannels.watchdog.publish(message);
      }
      pending.expire(error);
      this.#onTimeout?.(error);
    }
    this.#arm();
  }
}

export interface HandlerWatchdogOptions {
  /** Deadline of each kind of handler, by name (`download`, `parse`, …); 0 means none. */
  timeouts: Readonly<Record<string, number>>;
  /** @default the system clock */
  clock?: Clock;
}

/** `runWithDeadline` with a deadline per kind of handler and a count of timeouts per kind. */
export class HandlerWatchdog {
  readonly #timeouts: Readonly<Record<string, number>>;
  readonly #clock: Clock;
  readonly #timedOut = new Map<string, number>();

  constructor(options: HandlerWatchdogOptions) {
    for (const [name, ms] of Object.entries(options.timeouts)) {
      if (!(ms >= 0)) throw new InvalidArgumentError(`watchdog timeout of '${name}' must be ≥ 0, got ${ms}`);
    }
    this.#timeouts = options.timeouts;
    this.#clock = options.clock ?? systemClock;
  }

  /** The deadline of a kind of handler (0: none). */
  timeoutOf(kind: string): number {
    return this.#timeouts[kind] ?? 0;
  }

  run<T>(
    kind: string,
    label: string,
    signal: AbortSignal | undefined,
    fn: (signal: AbortSignal) => Promise<T> | T,
  ): Promise<T> {
    const timeoutMs = this.timeoutOf(kind);
    return runWithDeadline(fn, { timeoutMs, label, signal, clock: this.#clock }).catch((err: unknown) => {
      if (err instanceof HandlerTimeoutError) this.#timedOut.set(kind, (this.#timedOut.get(kind) ?? 0) + 1);
      throw err;
    });
  }

  /** Handlers aborted by their deadline, by kind. */
  timeouts(): Record<string, number> {
    return Object.fromEntries(this.#timedOut);
  }
}
