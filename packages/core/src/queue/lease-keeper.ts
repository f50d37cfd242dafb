/**
 * Brokers lease a delivered message for a fixed time set on the consumer (NATS AckWait, the
 * Redis PEL idle time that XAUTOCLAIM compares against). A delivery that asks for a longer lease
 * is kept alive from here by heartbeats (`+WPI` on NATS, `XCLAIM … JUSTID` on Redis) until its
 * own deadline:
 *
 * ```
 *   server lease ├────────┤        beat        beat
 *                ├────────┼───▲────────┼───▲────────┤
 *   wanted lease ├─────────────────────────────┤  (deadline)
 * ```
 *
 * If the process dies the heartbeats stop and the message is free again one server lease after
 * the last beat, which is what a lease is for.
 */
export class LeaseKeeper {
  readonly #serverLeaseMs: number;
  readonly #beat: () => Promise<void>;
  readonly #onLost: (err: unknown) => void;
  #deadline = 0;
  #lastBeat = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(serverLeaseMs: number, beat: () => Promise<void>, onLost: (err: unknown) => void) {
    this.#serverLeaseMs = serverLeaseMs;
    this.#beat = beat;
    this.#onLost = onLost;
  }

  /** Epoch ms at which the server will consider the lease lapsed if no further beat is sent. */
  get serverDeadline(): number {
    return this.#lastBeat + this.#serverLeaseMs;
  }

  /** The message was (re)leased or beaten at `at`; keep it leased until `deadline`. */
  arm(at: number, deadline: number): void {
    if (this.#stopped) return;
    this.#lastBeat = at;
    this.#deadline = deadline;
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#stopped || this.serverDeadline >= this.#deadline) return;
    // Beat at half the server lease: one lost or slow beat still leaves time for the next.
    const wait = Math.max(0, this.#lastBeat + this.#serverLeaseMs / 2 - Date.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopped) return;
      const at = Date.now();
      this.#beat().then(
        () => {
          this.#lastBeat = at;
          this.#schedule();
        },
        (err: unknown) => {
          this.stop();
          this.#onLost(err);
        },
      );
    }, wait);
    // A keeper alone must not hold a finished process open; the work it guards does that.
    this.#timer.unref();
  }
}
