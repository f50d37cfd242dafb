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
import { HandlerTimeoutError, InvalidArgumentError } from '../errors.js';
import { type Clock, systemClock } from '../schedule/clock.js';
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
  const { timeoutMs, label } = options;
  if (!(timeoutMs >= 0)) throw new InvalidArgumentError(`timeoutMs must be ≥ 0, got ${timeoutMs}`);
  const clock = options.clock ?? systemClock;
  const controller = new AbortController();
  const parent = options.signal;
  const onParentAbort = () => controller.abort(parent?.reason);
  if (parent) {
    if (parent.aborted) controller.abort(parent.reason);
    else parent.addEventListener('abort', onParentAbort, { once: true });
  }

  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const finish = () => {
      settled = true;
      if (timer !== undefined) clock.clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
    };
    const timer =
      timeoutMs > 0 && Number.isFinite(timeoutMs)
        ? clock.setTimeout(() => {
            if (settled) return;
            finish();
            const error = new HandlerTimeoutError(label, timeoutMs);
            if (policyChannels.watchdog.hasSubscribers) {
              const message: WatchdogTimeoutMessage = { label, timeoutMs, at: clock.now() };
              policyChannels.watchdog.publish(message);
            }
            controller.abort(error);
            reject(error);
          }, timeoutMs)
        : undefined;
    let result: Promise<T>;
    try {
      result = Promise.resolve(fn(controller.signal));
    } catch (err) {
      result = Promise.reject(err);
    }
    result.then(
      (value) => {
        if (settled) return;
        finish();
        resolve(value);
      },
      (err: unknown) => {
        // A rejection after the deadline is the abandoned handler's; it is swallowed here.
        if (settled) return;
        finish();
        reject(err);
      },
    );
  });
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
