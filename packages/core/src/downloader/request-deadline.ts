/**
 * The deadline of one HTTP request: aborts when the caller's signal aborts or when `ms` pass,
 * whichever comes first. It is what undici is given as the request's `signal`.
 *
 * Not an AbortController: undici accepts any EventTarget-shaped object as a signal (`aborted`,
 * `reason`, `addEventListener` / `removeEventListener` of 'abort'), and a request only needs
 * that much. A controller per request is a full EventTarget (its listener map, an Event per
 * dispatch) made and thrown away once per page; this is one small object whose listeners are a
 * short array (undici adds one or two and removes them when the response is read).
 *
 *   caller's signal ──abort──┐
 *                            ├──▶ #abort(reason) ──▶ each listener once ──▶ undici cancels
 *   setTimeout(ms) ──────────┘     (first one wins; clear() disarms both)
 *
 * The caller's signal is shared by many requests (the stage gives the runs of one watchdog window
 * one signal): each deadline joins that signal's set of followers, and the signal gets a single
 * 'abort' listener for the whole set, instead of an EventTarget listener added and removed per
 * request.
 */
type Listener = (event: { type: 'abort' }) => void;

const ABORT_EVENT = Object.freeze({ type: 'abort' as const });

/** The deadlines that follow each caller's signal (see the module comment). */
const followers = new WeakMap<AbortSignal, Set<RequestDeadline>>();

export class RequestDeadline {
  readonly ms: number;
  readonly #outer: AbortSignal | undefined;
  #timer: NodeJS.Timeout | undefined;
  #listeners: Listener[] | undefined;
  #aborted = false;
  #reason: unknown;
  #expired = false;

  /** `reason` is what the deadline aborts with when `ms` pass. */
  constructor(outer: AbortSignal | undefined, ms: number, reason: () => Error) {
    this.ms = ms;
    this.#outer = outer;
    if (outer?.aborted) {
      this.#abort(outer.reason);
      return;
    }
    if (outer !== undefined) RequestDeadline.#follow(outer, this);
    this.#timer = setTimeout(() => {
      this.#expired = true;
      this.#abort(reason());
    }, ms);
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  /** The deadline passed (and the caller's signal had not aborted first). */
  get expired(): boolean {
    return this.#expired && this.#outer?.aborted !== true;
  }

  /** What undici calls: only 'abort' is ever dispatched. A listener runs at most once. */
  addEventListener(type: string, listener: Listener): void {
    if (type !== 'abort' || this.#aborted) return;
    this.#listeners ??= [];
    this.#listeners.push(listener);
  }

  removeEventListener(type: string, listener: Listener): void {
    const listeners = this.#listeners;
    if (type !== 'abort' || listeners === undefined) return;
    const at = listeners.indexOf(listener);
    if (at >= 0) listeners.splice(at, 1);
  }

  /** Stops the timer and lets go of the caller's signal. Idempotent. */
  clear(): void {
    clearTimeout(this.#timer);
    if (this.#outer !== undefined) followers.get(this.#outer)?.delete(this);
  }

  static #follow(outer: AbortSignal, deadline: RequestDeadline): void {
    let set = followers.get(outer);
    if (set === undefined) {
      const created = new Set<RequestDeadline>();
      set = created;
      followers.set(outer, created);
      outer.addEventListener(
        'abort',
        () => {
          followers.delete(outer);
          for (const d of created) d.#abort(outer.reason);
        },
        { once: true },
      );
    }
    set.add(deadline);
  }

  #abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.clear();
    const listeners = this.#listeners;
    this.#listeners = undefined;
    if (listeners === undefined) return;
    for (const listener of listeners) {
      try {
        listener(ABORT_EVENT);
      } catch (err) {
        // As an EventTarget does: one listener's throw neither stops the others nor the abort.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  /** This deadline as the `signal` undici's request options take (see the module comment). */
  asSignal(): AbortSignal {
    return this as unknown as AbortSignal;
  }
}
