/**
 * The cron scheduler: fires jobs on their schedules, with no database.
 *
 * ```
 *   timer(next due) ─▶ tick ─▶ for each due job:
 *        latest scheduled time ≤ now  ── later than misfire tolerance ─▶ skip 'misfire' (reported)
 *                 │ (earlier missed times: skip 'misfire', at most one firing per wake-up)
 *                 ▼
 *        gate(job)? ── no ─▶ skip 'not-owner'   (partition / leader gating in a cluster)
 *                 ▼
 *        compareAndSet(<ns>:cron:<job>:<time>, absent → nodeId) ── lost ─▶ skip 'claimed'
 *                 ▼
 *        fire(job)                     ─▶ re-arm the timer for the next due job
 * ```
 *
 * The claim makes "at most one firing per scheduled time, cluster-wide" hold whatever the gate
 * says: every node may compute the same tick, exactly one wins the compare-and-set. The claim
 * key lives long enough (two misfire windows) that no node can still be within tolerance when
 * it lapses.
 *
 * Ownership moves (a node dies, another joins), so with `recheckRefusedMs` a time the gate
 * refused here (or whose claim could not be made) is asked again until it is out of the misfire
 * tolerance: the node that becomes its owner fires it late, and the claim keeps it at most once.
 * A partition's times are then fired at least once while any node lives, too.
 *
 * Time comes from an injectable {@link Clock}, so a test moves a {@link ManualClock} instead of
 * waiting.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import { createLocalCoordination } from '../coordination/local-coordination.js';
import type { Coordination } from '../coordination/types.js';
import { InternalError, InvalidArgumentError, isMocraError, type MocraError } from '../errors.js';
import { type Clock, systemClock, type TimerHandle } from './clock.js';
import { type CronInput, type CronSchedule, nextFireTime, previousFireTime, toCronSchedule } from './cron.js';

/** One firing handed to a job. */
export interface CronFiring {
  readonly jobId: string;
  /** The scheduled time (epoch ms); for a run-now firing, when it was triggered. */
  readonly scheduledAt: number;
  /** When it actually fired (epoch ms, by the scheduler's clock). */
  readonly firedAt: number;
  readonly reason: 'schedule' | 'run-now';
}

export interface CronJob {
  /** Unique per scheduler; part of the cluster-wide claim key, so the same on every node. */
  id: string;
  schedule: CronInput;
  /** Partition key for the gate (e.g. the account). @default the id */
  key?: string;
  fire(firing: CronFiring): void | Promise<void>;
}

export type CronSkipReason = 'misfire' | 'not-owner' | 'claimed' | 'claim-failed' | 'disabled';

/** `mocra:schedule:skip` — a scheduled time that did not fire here, and why. */
export interface CronSkipMessage {
  jobId: string;
  scheduledAt: number;
  reason: CronSkipReason;
  /** For 'misfire': how late the wake-up was for `scheduledAt`. */
  lateByMs?: number;
  /** For 'misfire': how many scheduled times this report stands for (from `scheduledAt` on; capped at 10000). */
  count?: number;
  /** For 'claim-failed': why the claim could not be made. */
  error?: MocraError;
}

const MAX_COUNTED = 10_000;
/** Refused times kept per job for a recheck. */
const MAX_REFUSED = 1_000;

/** `mocra:schedule:fire` — a job fired on this node. */
export type CronFireMessage = CronFiring;

export const SCHEDULE_CHANNEL_NAMES = {
  fire: 'mocra:schedule:fire',
  skip: 'mocra:schedule:skip',
  error: 'mocra:schedule:error',
} as const;

const fireChannel = diagnostics_channel.channel(SCHEDULE_CHANNEL_NAMES.fire);
const skipChannel = diagnostics_channel.channel(SCHEDULE_CHANNEL_NAMES.skip);
const errorChannel = diagnostics_channel.channel(SCHEDULE_CHANNEL_NAMES.error);

export interface CronSchedulerOptions {
  /** Where per-tick claims are made. @default a private local coordination (one process) */
  coordination?: Coordination;
  /** Prefix of claim keys. @default 'mocra' */
  namespace?: string;
  /** @default the system clock */
  clock?: Clock;
  /** A scheduled time missed by more than this is skipped, not fired late. @default 300000 */
  misfireToleranceMs?: number;
  /**
   * Whether this node should fire a job at all (partition ownership or leadership). Whatever it
   * says, the claim still guarantees one firing per scheduled time.
   * @default every job
   */
  gate?: (job: { id: string; key: string }) => boolean;
  /**
   * Ask the gate again for a time it refused (or whose claim failed) every this many ms, while
   * the time is within the misfire tolerance; when it lets the time through, the time fires late
   * (if no other node claimed it). 0 = a refused time is skipped for good. @default 0
   */
  recheckRefusedMs?: number;
  /** Called when a job's `fire` throws or rejects (also published on `mocra:schedule:error`). */
  onError?: (jobId: string, error: unknown) => void;
  /** Called for each skipped scheduled time (also published on `mocra:schedule:skip`). */
  onSkip?: (skip: CronSkipMessage) => void;
}

interface JobState {
  readonly id: string;
  readonly key: string;
  readonly schedule: CronSchedule;
  readonly fire: CronJob['fire'];
  /** Next scheduled time not yet handled; undefined = none (run-now only, or no more runs). */
  next: number | undefined;
  /** A run-now firing is owed. */
  runNowPending: boolean;
}

/** Summary of a job for stats and the dashboard. */
export interface CronJobInfo {
  id: string;
  key: string;
  expression: string | undefined;
  timezone: string | undefined;
  enabled: boolean;
  /** Epoch ms of the next scheduled time, if any. */
  nextFireAt: number | undefined;
}

export class CronScheduler {
  readonly #coordination: Coordination;
  readonly #ownsCoordination: boolean;
  readonly #namespace: string;
  readonly #clock: Clock;
  #misfireToleranceMs: number;
  readonly #gate: CronSchedulerOptions['gate'];
  readonly #onError: CronSchedulerOptions['onError'];
  readonly #onSkip: CronSchedulerOptions['onSkip'];
  readonly #recheckMs: number;
  /** Scheduled times refused here, by job id, oldest first (only with recheckRefusedMs). */
  readonly #refused = new Map<string, number[]>();
  #recheckTimer: TimerHandle | undefined;
  readonly #jobs = new Map<string, JobState>();
  readonly #inFlight = new Set<Promise<void>>();
  #timer: TimerHandle | undefined;
  #running = false;
  #ticking: Promise<void> | undefined;
  #tickAgain = false;

  constructor(options: CronSchedulerOptions = {}) {
    this.#coordination = options.coordination ?? createLocalCoordination();
    this.#ownsCoordination = options.coordination === undefined;
    this.#namespace = options.namespace ?? 'mocra';
    this.#clock = options.clock ?? systemClock;
    this.#misfireToleranceMs = checkTolerance(options.misfireToleranceMs ?? 300_000);
    this.#gate = options.gate;
    this.#onError = options.onError;
    this.#onSkip = options.onSkip;
    this.#recheckMs = options.recheckRefusedMs ?? 0;
    if (!Number.isFinite(this.#recheckMs) || this.#recheckMs < 0)
      throw new InvalidArgumentError(`recheckRefusedMs must be ≥ 0, got ${this.#recheckMs}`);
  }

  get running(): boolean {
    return this.#running;
  }

  get misfireToleranceMs(): number {
    return this.#misfireToleranceMs;
  }

  /** Changes the misfire tolerance (a live config key). */
  set misfireToleranceMs(ms: number) {
    this.#misfireToleranceMs = checkTolerance(ms);
  }

  /** Adds a job. In a running scheduler it is armed at once (and a run-now job fires). */
  add(job: CronJob): void {
    if (typeof job?.id !== 'string' || job.id === '')
      throw new InvalidArgumentError('a cron job needs a non-empty id');
    if (typeof job.fire !== 'function') throw new InvalidArgumentError(`cron job '${job.id}' has no fire()`);
    if (this.#jobs.has(job.id)) throw new InvalidArgumentError(`a cron job '${job.id}' is already scheduled`);
    const schedule = toCronSchedule(job.schedule);
    const state: JobState = {
      id: job.id,
      key: job.key ?? job.id,
      schedule,
      fire: job.fire,
      next: undefined,
      runNowPending: schedule.enabled && schedule.runNow,
    };
    this.#jobs.set(job.id, state);
    if (this.#running) {
      state.next = schedule.enabled ? nextFireTime(schedule, this.#clock.now()) : undefined;
      this.#kick();
    }
  }

  /** Removes a job; returns whether it existed. A firing in progress finishes. */
  remove(id: string): boolean {
    const removed = this.#jobs.delete(id);
    this.#refused.delete(id);
    if (removed && this.#running) this.#kick();
    return removed;
  }

  jobs(): CronJobInfo[] {
    return [...this.#jobs.values()].map((j) => ({
      id: j.id,
      key: j.key,
      expression: j.schedule.expression,
      timezone: j.schedule.timezone,
      enabled: j.schedule.enabled,
      nextFireAt: j.next,
    }));
  }

  /** Arms every job from now; run-now jobs fire right away. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    const now = this.#clock.now();
    for (const job of this.#jobs.values()) {
      job.next = job.schedule.enabled ? nextFireTime(job.schedule, now) : undefined;
    }
    this.#kick();
  }

  /** Stops firing and waits for firings in progress. The private coordination (if any) is closed. */
  async stop(): Promise<void> {
    this.#running = false;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#recheckTimer !== undefined) this.#clock.clearTimeout(this.#recheckTimer);
    this.#recheckTimer = undefined;
    this.#refused.clear();
    await this.#ticking;
    await Promise.allSettled([...this.#inFlight]);
    if (this.#ownsCoordination) await this.#coordination.close();
  }

  /** Handles whatever is due now (the timer calls this; so can a test). */
  tick(): Promise<void> {
    if (this.#ticking) {
      this.#tickAgain = true;
      return this.#ticking;
    }
    const run = (async () => {
      try {
        do {
          this.#tickAgain = false;
          await this.#tickOnce();
        } while (this.#tickAgain && this.#running);
      } finally {
        this.#ticking = undefined;
        this.#arm();
      }
    })();
    this.#ticking = run;
    return run;
  }

  #kick(): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      void this.tick();
    }, 0);
  }

  #arm(): void {
    if (!this.#running) return;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    let earliest: number | undefined;
    for (const job of this.#jobs.values()) {
      if (job.runNowPending) earliest = this.#clock.now();
      else if (job.next !== undefined && (earliest === undefined || job.next < earliest)) earliest = job.next;
    }
    if (earliest === undefined) return;
    this.#timer = this.#clock.setTimeout(
      () => {
        this.#timer = undefined;
        void this.tick();
      },
      Math.max(0, earliest - this.#clock.now()),
    );
  }

  async #tickOnce(): Promise<void> {
    if (!this.#running) return;
    const now = this.#clock.now();
    const work: Promise<void>[] = [];
    for (const job of this.#jobs.values()) {
      if (job.runNowPending) {
        job.runNowPending = false;
        work.push(this.#attempt(job, now, 'run-now', now));
      }
      if (job.next === undefined || job.next > now) continue;
      // Every scheduled time in [next, now] is due; only the latest may fire.
      const latest = previousFireTime(job.schedule, now) ?? job.next;
      const lateBy = now - latest;
      if (job.next < latest) {
        // Earlier times missed during one wake-up are folded into one report (counted up to a cap).
        let count = 0;
        for (let t: number | undefined = job.next; t !== undefined && t < latest && count < MAX_COUNTED; ) {
          count++;
          t = nextFireTime(job.schedule, t);
        }
        this.#skip({
          jobId: job.id,
          scheduledAt: job.next,
          reason: 'misfire',
          lateByMs: now - job.next,
          count,
        });
      }
      job.next = nextFireTime(job.schedule, now);
      if (lateBy > this.#misfireToleranceMs) {
        this.#skip({ jobId: job.id, scheduledAt: latest, reason: 'misfire', lateByMs: lateBy, count: 1 });
        continue;
      }
      work.push(this.#attempt(job, latest, 'schedule', now));
    }
    await Promise.all(work);
  }

  async #attempt(
    job: JobState,
    scheduledAt: number,
    reason: CronFiring['reason'],
    now: number,
  ): Promise<void> {
    if (this.#gate && !this.#gate({ id: job.id, key: job.key })) {
      this.#skip({ jobId: job.id, scheduledAt, reason: 'not-owner' });
      if (reason === 'schedule') this.#refuse(job, scheduledAt);
      return;
    }
    if (reason === 'schedule') {
      const claim = this.#claimKey(job, scheduledAt);
      let won: boolean;
      try {
        won = await this.#coordination.compareAndSet(claim, undefined, this.#coordination.nodeId, {
          ttlMs: Math.max(2 * this.#misfireToleranceMs, 60_000),
        });
      } catch (err) {
        // Without a claim the firing could double; at most once wins over at least once here.
        const error = isMocraError(err) ? err : new InternalError('cron claim failed', { cause: err });
        this.#skip({ jobId: job.id, scheduledAt, reason: 'claim-failed', error });
        this.#refuse(job, scheduledAt);
        return;
      }
      if (!won) {
        this.#skip({ jobId: job.id, scheduledAt, reason: 'claimed' });
        return;
      }
    }
    const firing: CronFiring = { jobId: job.id, scheduledAt, firedAt: now, reason };
    if (fireChannel.hasSubscribers) fireChannel.publish(firing);
    const run = (async () => {
      try {
        await job.fire(firing);
      } catch (err) {
        if (errorChannel.hasSubscribers) errorChannel.publish({ jobId: job.id, error: err });
        this.#onError?.(job.id, err);
      }
    })();
    this.#inFlight.add(run);
    void run.finally(() => this.#inFlight.delete(run));
  }

  #claimKey(job: JobState, scheduledAt: number): string {
    return `${this.#namespace}:cron:${job.id}:${scheduledAt}`;
  }

  /** Keep a refused time to ask about again (with recheckRefusedMs). */
  #refuse(job: JobState, scheduledAt: number): void {
    if (this.#recheckMs === 0 || !this.#running) return;
    let times = this.#refused.get(job.id);
    if (times === undefined) {
      times = [];
      this.#refused.set(job.id, times);
    }
    if (!times.includes(scheduledAt)) times.push(scheduledAt);
    // Bounded: a job refused for a long time keeps its latest times.
    if (times.length > MAX_REFUSED) times.splice(0, times.length - MAX_REFUSED);
    this.#armRecheck();
  }

  #armRecheck(): void {
    if (this.#recheckTimer !== undefined || !this.#running || this.#refused.size === 0) return;
    this.#recheckTimer = this.#clock.setTimeout(() => {
      this.#recheckTimer = undefined;
      void this.#recheck();
    }, this.#recheckMs);
  }

  /** Ask again about refused times still within the tolerance; fire those the gate now lets through. */
  async #recheck(): Promise<void> {
    if (!this.#running) return;
    const now = this.#clock.now();
    const work: Promise<void>[] = [];
    for (const [id, times] of [...this.#refused]) {
      const job = this.#jobs.get(id);
      const live = times.filter((t) => now - t <= this.#misfireToleranceMs);
      this.#refused.delete(id);
      if (job === undefined || live.length === 0) continue;
      if (this.#gate && !this.#gate({ id: job.id, key: job.key })) {
        this.#refused.set(id, live);
        continue;
      }
      // Oldest first. Most were fired by their owner at the time: a read (cheaper than a
      // compare-and-set on every backend) finds those; a failed claim puts its time back.
      work.push(
        (async () => {
          for (const t of live) {
            const taken = await this.#coordination.get(this.#claimKey(job, t)).catch(() => undefined);
            if (taken !== undefined) continue;
            await this.#attempt(job, t, 'schedule', now);
          }
        })(),
      );
    }
    await Promise.all(work);
    this.#armRecheck();
  }

  #skip(message: CronSkipMessage): void {
    if (skipChannel.hasSubscribers) skipChannel.publish(message);
    this.#onSkip?.(message);
  }
}

export function createCronScheduler(options: CronSchedulerOptions = {}): CronScheduler {
  return new CronScheduler(options);
}

function checkTolerance(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0)
    throw new InvalidArgumentError(`misfireToleranceMs must be ≥ 0, got ${ms}`);
  return ms;
}
