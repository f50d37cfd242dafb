import { randomBytes } from 'node:crypto';

/** Resolves after `ms`, or earlier when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** A unique-enough message id: a random prefix per process plus a counter. */
export function createIdGenerator(): () => string {
  const prefix = `${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
  let seq = 0;
  return () => `${prefix}-${(seq++).toString(36)}`;
}

/** setTimeout's largest delay; a later deadline is reached in steps. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One timer for the earliest of many deadlines (delayed messages, lease expiries): `arm(at)` sets
 * it only when `at` is earlier than the deadline already armed, so arming on every change costs
 * a comparison, not a timer.
 */
export class EarliestDeadlineTimer {
  readonly #fire: () => void;
  readonly #now: () => number;
  readonly #unref: boolean;
  #timer: NodeJS.Timeout | undefined;
  #at = Number.POSITIVE_INFINITY;

  /** `unref`: the timer alone does not keep the process alive. */
  constructor(fire: () => void, now: () => number, options: { unref?: boolean } = {}) {
    this.#fire = fire;
    this.#now = now;
    this.#unref = options.unref ?? false;
  }

  arm(at: number | undefined): void {
    if (at === undefined) return;
    if (this.#timer && at >= this.#at) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#at = at;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#at = Number.POSITIVE_INFINITY;
        this.#fire();
      },
      Math.min(Math.max(0, at - this.#now()), MAX_TIMER_MS),
    );
    if (this.#unref) this.#timer.unref();
  }

  clear(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#at = Number.POSITIVE_INFINITY;
  }
}
