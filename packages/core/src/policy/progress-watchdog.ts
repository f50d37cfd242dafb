/**
 * The stall detector: a crawl that has work pending but has not moved for `stallMs` is
 * reported loudly — on `mocra:policy:stall`, through `onStall` (the engine logs it at error
 * level) — once when it stalls and again every `stallMs` while it stays stalled.
 *
 * "Progress" is whatever the owner says it is (the engine calls `progress()` whenever a stage
 * settles a message). "Pending" is asked for only when a stall is suspected, so polling costs
 * nothing while the crawl moves. With the handler watchdog bounding every handler, a stall that
 * persists means something outside the handlers is wrong (a queue backend that stopped
 * delivering, a paused engine someone forgot) — exactly what an operator must hear about.
 *
 * ```
 *   progress() ─▶ lastProgress = now
 *   every checkEveryMs: now − lastProgress ≥ stallMs and pending() > 0 ─▶ report (at most once per stallMs)
 * ```
 */
import { InvalidArgumentError, StalledError } from '../errors.js';
import { type Clock, systemClock, type TimerHandle } from '../schedule/clock.js';
import { policyChannels } from './policy-channels.js';

/** `mocra:policy:stall` — nothing moved for `idleMs` while `pending` messages waited. */
export interface StallReport {
  idleMs: number;
  pending: number;
  /** Epoch ms of the last progress. */
  lastProgressAt: number;
  at: number;
  /** Reports in this stall so far (1 for the first). */
  repeat: number;
  error: StalledError;
}

export interface ProgressWatchdogOptions {
  /** No progress for this long while work is pending is a stall. @default 120000 */
  stallMs?: number;
  /** How often to look. @default min(stallMs / 4, 10000) */
  checkEveryMs?: number;
  /** Work waiting anywhere (ready + delayed + in flight); only asked when a stall is suspected. */
  pending: () => number | Promise<number>;
  /** Called with each report (also published on `mocra:policy:stall`). */
  onStall?: (report: StallReport) => void;
  /** @default the system clock */
  clock?: Clock;
}

export class ProgressWatchdog {
  readonly #stallMs: number;
  readonly #everyMs: number;
  readonly #pending: () => number | Promise<number>;
  readonly #onStall: ((report: StallReport) => void) | undefined;
  readonly #clock: Clock;
  #lastProgress: number;
  #lastReport: number | undefined;
  #repeat = 0;
  #timer: TimerHandle | undefined;
  #running = false;
  #stalls = 0;

  constructor(options: ProgressWatchdogOptions) {
    this.#stallMs = options.stallMs ?? 120_000;
    if (!Number.isInteger(this.#stallMs) || this.#stallMs < 1) {
      throw new InvalidArgumentError(`stallMs must be an integer ≥ 1, got ${this.#stallMs}`);
    }
    this.#everyMs = options.checkEveryMs ?? Math.max(1, Math.min(Math.floor(this.#stallMs / 4), 10_000));
    if (!Number.isInteger(this.#everyMs) || this.#everyMs < 1) {
      throw new InvalidArgumentError(`checkEveryMs must be an integer ≥ 1, got ${this.#everyMs}`);
    }
    this.#pending = options.pending;
    this.#onStall = options.onStall;
    this.#clock = options.clock ?? systemClock;
    this.#lastProgress = this.#clock.now();
  }

  /** Something moved: the stall clock starts over. */
  progress(): void {
    this.#lastProgress = this.#clock.now();
    this.#lastReport = undefined;
    this.#repeat = 0;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#lastProgress = this.#clock.now();
    this.#arm();
  }

  stop(): void {
    this.#running = false;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Stalls reported so far (every report counts). */
  get stalls(): number {
    return this.#stalls;
  }

  /** Look now (the timer calls this); resolves with the report when one was made. */
  async check(): Promise<StallReport | undefined> {
    const now = this.#clock.now();
    const idleMs = now - this.#lastProgress;
    if (idleMs < this.#stallMs) return undefined;
    if (this.#lastReport !== undefined && now - this.#lastReport < this.#stallMs) return undefined;
    const seenProgress = this.#lastProgress;
    let pending: number;
    try {
      pending = await this.#pending();
    } catch {
      return undefined;
    }
    // Progress while we asked: not a stall after all.
    if (this.#lastProgress !== seenProgress || pending <= 0) return undefined;
    this.#lastReport = now;
    this.#repeat++;
    this.#stalls++;
    const report: StallReport = {
      idleMs,
      pending,
      lastProgressAt: this.#lastProgress,
      at: now,
      repeat: this.#repeat,
      error: new StalledError(idleMs, pending),
    };
    if (policyChannels.stall.hasSubscribers) policyChannels.stall.publish(report);
    try {
      this.#onStall?.(report);
    } catch {
      // The report went out on the channel; a throwing listener must not stop the next check.
    }
    return report;
  }

  #arm(): void {
    if (!this.#running) return;
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      void this.check().finally(() => this.#arm());
    }, this.#everyMs);
  }
}

export function createProgressWatchdog(options: ProgressWatchdogOptions): ProgressWatchdog {
  return new ProgressWatchdog(options);
}
