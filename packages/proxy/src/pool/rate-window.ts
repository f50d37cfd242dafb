/**
 * A sliding-window rate limit: at most `limit` acquisitions in any `interval` ms.
 *
 * It keeps the times of the last `limit` acquisitions in a ring; the slot after the newest is
 * the oldest, and a new acquisition is allowed once that oldest one has left the window:
 *
 * ```
 *   times: [ t3 | t4 | t1 | t2 ]      limit = 4, full
 *                      ▲ head = oldest (t1)
 *   allowed at now  ⇔  t1 <= now - interval
 * ```
 *
 * Memory is `limit` numbers per proxy; validation caps `limit` at 100 000.
 */
export class RateWindow {
  readonly #times: number[] = [];
  #head = 0;

  constructor(
    readonly limit: number,
    readonly interval: number,
  ) {}

  /** Earliest time an acquisition is allowed: `now` when one is allowed right away. */
  readyAt(now: number): number {
    if (this.#times.length < this.limit) return now;
    return Math.max(now, this.#times[this.#head]! + this.interval);
  }

  /** Records an acquisition at `now`. The caller checks {@link readyAt} first. */
  record(now: number): void {
    if (this.#times.length < this.limit) {
      this.#times.push(now);
      return;
    }
    this.#times[this.#head] = now;
    this.#head = (this.#head + 1) % this.limit;
  }

  /** Acquisitions inside the window ending at `now`. */
  used(now: number): number {
    let n = 0;
    for (const t of this.#times) if (t > now - this.interval) n++;
    return n;
  }
}
