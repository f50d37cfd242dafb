/**
 * One stage of the pipeline: a bounded worker pool over one topic.
 *
 * ```
 *            consume({ max: free slots })            handler(delivery, signal)
 *   topic ──────────────────────────────▶ in flight ────────────────────────▶ ack | nack | dead-letter
 *     ▲        (never more than `concurrency`)   │  lease extended while it runs
 *     └──────────────── nack on shutdown ────────┘
 * ```
 *
 * - Concurrency is exact: the runner only asks the queue for as many messages as it has free
 *   slots, and running handlers never exceed `concurrency`. A handler's slot frees when it
 *   returns; its ack/nack (a round trip on a remote queue) completes outside the slot, and at
 *   most `concurrency` settles are outstanding before the stage stops pulling.
 * - Backpressure comes from the handlers: a handler that waits on a full downstream topic
 *   keeps its slot, so the stage pulls less.
 * - Leases are extended by one timer per stage (not one per message): every third of the
 *   lease, deliveries whose lease ends within half a lease are extended.
 * - Pause stops pulling (work in flight finishes). Stop stops pulling, lets work in flight
 *   finish until the deadline, then aborts it (the handler's signal) and nacks whatever is
 *   still unsettled, so nothing taken from the queue is lost.
 * - Work made in this process can skip the queue: `runHere` starts a delivery that was never
 *   published (a `LocalDelivery`) when a slot is free, under the same concurrency, watchdog,
 *   stats and stop rules. A handler that handed its result on that way returns
 *   `{ settleAfter }`: its slot frees, but its own delivery stays leased until the hand-off is
 *   done, so a crash in between redelivers it and nothing is lost.
 */
import { setMaxListeners } from 'node:events';
import { isMocraError } from '../errors.js';
import type { Delivery, LeaseQueue } from '../queue/types.js';

/** How the runner settles a delivery after its handler returned. */
export type HandlerResult =
  | undefined
  | { nack: { delayMs?: number; reason?: string } }
  | { deadLetter: string }
  /**
   * Ack once this settles (a hand-off to `runHere` of another stage); nack if it rejects.
   * `hold`: the wait is for bookkeeping that is written in batches (join credit), so it does not
   * stop the stage from pulling; whoever holds it bounds how many and how long.
   */
  | { settleAfter: Promise<void>; hold?: true };

export interface StageRunnerOptions<T> {
  name: string;
  queue: LeaseQueue<T>;
  /** Handlers running at once. */
  concurrency: number;
  /** Do the work; resolve to settle (ack by default). Must not settle the delivery itself. */
  handle(delivery: Delivery<T>, signal: AbortSignal): Promise<HandlerResult> | HandlerResult;
  /**
   * The handler threw (and the stage was not stopping): report it and say how to settle.
   * If this throws too, the delivery is nacked without delay.
   */
  onFailure(delivery: Delivery<T>, error: unknown): Promise<HandlerResult>;
  /** A delivery was settled (or given up): the engine re-checks idleness. */
  onSettled(): void;
  /** Something went wrong outside a handler (queue errors, a settle that failed). */
  onInternalError(error: unknown, context: string): void;
  /**
   * A handler finished (not aborted by shutdown): how long it ran and whether it threw. Only
   * timed when given, so a runner without observers reads no clock.
   */
  onHandled?(durationMs: number, ok: boolean): void;
  /** Lease length asked for on consume. @default the topic's leaseMs */
  leaseMs?: number;
  /** How long one consume call waits for a message before looping. @default 30000 */
  pollMs?: number;
}

export interface StageRunnerStats {
  inFlight: number;
  done: number;
  failed: number;
  concurrency: number;
  paused: boolean;
}

export class StageRunner<T> {
  readonly name: string;
  readonly #queue: LeaseQueue<T>;
  readonly #options: StageRunnerOptions<T>;
  readonly #leaseMs: number;
  #concurrency: number;
  readonly #inFlight = new Set<Delivery<T>>();
  /**
   * Taken from the queue while `runHere` work filled the slots a consume had asked for: held
   * (leases kept) and started before anything else as slots free, so concurrency stays exact.
   */
  readonly #waiting: Delivery<T>[] = [];
  /** Deliveries in `#inFlight` whose handler is done and whose ack/nack is on its way. */
  #settling = 0;
  /** Of those, settles held for batched bookkeeping (`hold`): they never count as busy. */
  #held = 0;
  #started = 0;
  #done = 0;
  #failed = 0;
  #running = false;
  #paused = false;
  /** Aborts a waiting consume (pause/stop). Replaced after use. */
  #pull = new AbortController();
  /** Aborts handlers (shutdown deadline). */
  readonly #work = new AbortController();
  #wake: (() => void) | undefined;
  #drained: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #leaseTimer: NodeJS.Timeout | undefined;

  constructor(options: StageRunnerOptions<T>) {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
      throw new RangeError(
        `stage '${options.name}': concurrency must be an integer ≥ 1, got ${options.concurrency}`,
      );
    }
    this.name = options.name;
    this.#queue = options.queue;
    this.#options = options;
    this.#concurrency = options.concurrency;
    this.#leaseMs = options.leaseMs ?? options.queue.options.leaseMs;
    // Every handler (every download) listens on this one signal.
    setMaxListeners(0, this.#work.signal);
  }

  /** Deliveries handed to the handler so far (moves whenever the stage does anything). */
  get started(): number {
    return this.#started;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get running(): boolean {
    return this.#running;
  }

  stats(): StageRunnerStats {
    return {
      inFlight: this.#inFlight.size,
      done: this.#done,
      failed: this.#failed,
      concurrency: this.#concurrency,
      paused: this.#paused,
    };
  }

  start(): void {
    if (this.#running || this.#work.signal.aborted) return;
    this.#running = true;
    const every = Math.max(50, Math.floor(this.#leaseMs / 3));
    this.#leaseTimer = setInterval(() => this.#extendLeases(), every);
    this.#leaseTimer.unref();
    this.#loop = this.#run();
  }

  pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.#abortPull();
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#wakeUp();
  }

  /** Change the pool size while running (takes effect as slots free up). */
  setConcurrency(concurrency: number): void {
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`stage '${this.name}': concurrency must be an integer ≥ 1, got ${concurrency}`);
    }
    this.#concurrency = concurrency;
    this.#wakeUp();
  }

  /**
   * Start a delivery made in this process (never published) when a slot is free and the stage
   * runs unpaused with nothing waiting; false otherwise (the caller publishes it instead).
   */
  runHere(delivery: Delivery<T>): boolean {
    if (!this.#running || this.#paused || this.#waiting.length > 0) return false;
    if (this.#busy() >= this.#concurrency) return false;
    this.#start(delivery);
    return true;
  }

  /** Abort the handlers in flight now (their deliveries are nacked as they end). */
  abort(): void {
    this.#work.abort();
  }

  /**
   * Stop pulling, give work in flight until `deadlineMs` to finish, then abort it and wait
   * `graceMs` more; whatever is still unsettled is nacked (back on the queue, not lost).
   */
  async stop(deadlineMs: number, graceMs = 2_000): Promise<void> {
    this.#running = false;
    this.#abortPull();
    this.#wakeUp();
    for (const delivery of this.#waiting.splice(0)) {
      await this.#settle(delivery, { nack: { reason: `stage '${this.name}' stopped` } });
    }
    if (this.#inFlight.size > 0) {
      if (!(await this.#waitDrained(deadlineMs))) {
        this.#work.abort();
        if (!(await this.#waitDrained(graceMs))) {
          for (const delivery of [...this.#inFlight]) {
            this.#inFlight.delete(delivery);
            await this.#settle(delivery, { nack: { reason: `stage '${this.name}' stopped` } });
          }
        }
      }
    }
    await this.#loop;
    if (this.#leaseTimer) clearInterval(this.#leaseTimer);
    this.#leaseTimer = undefined;
  }

  async #run(): Promise<void> {
    while (this.#running) {
      const free = this.#concurrency - this.#busy() - this.#waiting.length;
      if (this.#paused || free <= 0) {
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
        continue;
      }
      let batch: Delivery<T>[];
      try {
        batch = await this.#queue.consume({
          max: free,
          waitMs: this.#options.pollMs ?? 30_000,
          leaseMs: this.#leaseMs,
          signal: this.#pull.signal,
        });
      } catch (err) {
        if (!this.#running) break;
        this.#options.onInternalError(err, `consume on '${this.#queue.name}'`);
        // A failing backend (broker down) is retried calmly, not in a hot loop.
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, 1_000);
          this.#wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        continue;
      }
      if (!this.#running) {
        // Stopped while the consume was in flight: give these back untouched.
        for (const delivery of batch) await this.#settle(delivery, { nack: { reason: 'stage stopped' } });
        break;
      }
      for (const delivery of batch) {
        if (this.#busy() < this.#concurrency) this.#start(delivery);
        else this.#waiting.push(delivery);
      }
    }
  }

  #start(delivery: Delivery<T>): void {
    this.#inFlight.add(delivery);
    this.#started++;
    const startedAt = this.#options.onHandled === undefined ? 0 : performance.now();
    let result: Promise<HandlerResult> | HandlerResult;
    try {
      result = this.#options.handle(delivery, this.#work.signal);
    } catch (err) {
      result = Promise.reject(err);
    }
    if (result instanceof Promise) {
      result.then(
        (r) => this.#finish(delivery, r, undefined, startedAt),
        (err: unknown) => this.#finish(delivery, undefined, err ?? new Error('handler rejected'), startedAt),
      );
    } else {
      void this.#finish(delivery, result, undefined, startedAt);
    }
  }

  async #finish(
    delivery: Delivery<T>,
    result: HandlerResult,
    error: unknown,
    startedAt: number,
  ): Promise<void> {
    // Given up by stop() already (deadline passed): it was nacked there.
    if (!this.#inFlight.has(delivery)) return;
    if (this.#options.onHandled !== undefined && !(error !== undefined && this.#work.signal.aborted)) {
      this.#options.onHandled(performance.now() - startedAt, error === undefined);
    }
    let outcome = result;
    if (error !== undefined) {
      if (this.#work.signal.aborted) {
        // Aborted by shutdown: not a failure of the work, put it back.
        outcome = { nack: { reason: `stage '${this.name}' stopped` } };
      } else {
        this.#failed++;
        try {
          outcome = await this.#options.onFailure(delivery, error);
        } catch (reportErr) {
          this.#options.onInternalError(reportErr, `reporting a failure on '${this.#queue.name}'`);
          outcome = { nack: { reason: 'failure could not be reported' } };
        }
      }
    } else {
      this.#done++;
    }
    // The handler's slot is free once it returned: on a remote queue the ack is a round trip,
    // and holding the slot for it would spend the stage's concurrency (downloads, say) on
    // waiting for the broker. The delivery stays in flight (leases, stop, idleness) until settled.
    const held = outcome !== undefined && 'settleAfter' in outcome && outcome.hold === true;
    if (held) this.#held++;
    this.#settling++;
    this.#startWaiting();
    this.#wakeUp();
    try {
      if (outcome !== undefined && 'settleAfter' in outcome) {
        outcome = await outcome.settleAfter.then(
          () => undefined,
          (err: unknown) => ({ nack: { reason: `hand-off failed: ${describe(err)}` } }),
        );
        // Given up by stop() while the hand-off ran: it was nacked there.
        if (!this.#inFlight.has(delivery)) return;
      }
      await this.#settle(delivery, outcome);
    } finally {
      this.#settling--;
      if (held) this.#held--;
    }
    this.#inFlight.delete(delivery);
    if (this.#inFlight.size === 0) this.#drained?.();
    this.#startWaiting();
    this.#wakeUp();
    this.#options.onSettled();
  }

  /**
   * Slots in use: running handlers, plus settling deliveries beyond one per slot — a broker that
   * stops answering acks stops the stage from pulling more, instead of piling up settles.
   */
  #busy(): number {
    const running = this.#inFlight.size - this.#settling;
    return running + Math.max(0, this.#settling - this.#held - this.#concurrency);
  }

  #startWaiting(): void {
    while (this.#waiting.length > 0 && this.#busy() < this.#concurrency) this.#start(this.#waiting.shift()!);
  }

  async #settle(
    delivery: Delivery<T>,
    outcome: Exclude<HandlerResult, { settleAfter: Promise<void> }>,
  ): Promise<void> {
    try {
      if (outcome === undefined) await delivery.ack();
      else if ('deadLetter' in outcome) await delivery.deadLetter(outcome.deadLetter);
      else await delivery.nack(outcome.nack);
    } catch (err) {
      // A lapsed lease (the message went to someone else) or a closed queue: nothing to undo.
      if (
        !(
          isMocraError(err) &&
          (err.code === 'MOCRA_ERR_LEASE_EXPIRED' || err.code === 'MOCRA_ERR_QUEUE_CLOSED')
        )
      ) {
        this.#options.onInternalError(err, `settling a delivery of '${this.#queue.name}'`);
      }
    }
  }

  #extendLeases(): void {
    if (this.#inFlight.size === 0 && this.#waiting.length === 0) return;
    const soon = Date.now() + this.#leaseMs / 2;
    for (const delivery of this.#inFlight) this.#extendIfDue(delivery, soon);
    for (const delivery of this.#waiting) this.#extendIfDue(delivery, soon);
  }

  #extendIfDue(delivery: Delivery<T>, soon: number): void {
    if (delivery.leaseDeadline > soon) return;
    delivery.extendLease(this.#leaseMs).catch((err: unknown) => {
      if (!(isMocraError(err) && err.code === 'MOCRA_ERR_LEASE_EXPIRED')) {
        this.#options.onInternalError(err, `extending a lease on '${this.#queue.name}'`);
      }
    });
  }

  #waitDrained(ms: number): Promise<boolean> {
    if (this.#inFlight.size === 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.#drained = undefined;
        resolve(this.#inFlight.size === 0);
      }, ms);
      this.#drained = () => {
        clearTimeout(timer);
        this.#drained = undefined;
        resolve(true);
      };
    });
  }

  #abortPull(): void {
    this.#pull.abort();
    this.#pull = new AbortController();
  }

  #wakeUp(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
