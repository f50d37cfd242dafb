/**
 * A caller's signal and a deadline as one signal, for a request that may take at most `ms` in
 * all. Not `AbortSignal.any`: the engine's signal lives for the whole run, and signals derived
 * from it with `any` stay reachable until it is collected; here the listener goes away with
 * `clear()`.
 */
export class Deadline {
  readonly #controller = new AbortController();
  readonly #outer: AbortSignal | undefined;
  readonly #timer: NodeJS.Timeout;
  readonly #onAbort = () => this.#controller.abort(this.#outer?.reason);
  #expired = false;

  /** `reason` is what the signal aborts with when the deadline passes. */
  constructor(
    outer: AbortSignal | undefined,
    readonly ms: number,
    reason: () => Error,
  ) {
    this.#outer = outer;
    if (outer?.aborted) this.#controller.abort(outer.reason);
    else outer?.addEventListener('abort', this.#onAbort, { once: true });
    this.#timer = setTimeout(() => {
      this.#expired = true;
      this.#controller.abort(reason());
    }, ms);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The deadline passed (and the caller's signal had not aborted first). */
  get expired(): boolean {
    return this.#expired && this.#outer?.aborted !== true;
  }

  /** Stops the timer and lets go of the caller's signal. Idempotent. */
  clear(): void {
    clearTimeout(this.#timer);
    this.#outer?.removeEventListener('abort', this.#onAbort);
  }
}
