/**
 * What the engine holds for failure handling, in one place so the engine itself only has hook
 * points: the failure policy (by default a RecoveryPolicy: resolver + thresholds + breakers),
 * the handler watchdog around every stage handler, the stall detector, and the dead-letter
 * view.
 *
 * ```
 *  stage handler ──▶ watchdog deadline ──▶ HandlerTimeoutError on expiry (retry path)
 *  every settle  ──▶ stall detector progress()
 *  error stage   ──▶ policy.decide(event)
 *  engine.deadLetters / engine.breakers() / engine.policyStats()
 * ```
 */
import { type MocraError, RetryLaterError } from '../errors.js';
import type { ErrorEvent, StageName } from '../model/events.js';
import type { Logger } from '../observability/logger.js';
import type { BreakerScope, BreakerSnapshot, BreakerState } from '../policy/circuit-breakers.js';
import type { ThresholdDecision } from '../policy/error-thresholds.js';
import { classifyError, steeringCause } from '../policy/failure-kind.js';
import { ProgressWatchdog } from '../policy/progress-watchdog.js';
import { RecoveryPolicy, type RecoveryPolicyOptions } from '../policy/recovery-policy.js';
import type { SimpleRetryPolicyOptions } from '../policy/simple-retry-policy.js';
import type { FailurePolicy } from '../policy/types.js';
import { DeadlineGroup } from '../policy/watchdog.js';
import type { Clock } from '../schedule/clock.js';
import { EngineDeadLetters, type StageTopics } from './dead-letters.js';

/** Deadline of each stage's handler, in ms (0: none). */
export interface WatchdogTimeouts {
  /** generate of entry nodes. @default 120000 */
  task?: number;
  /** Includes waiting for the host's politeness slot. @default 300000 */
  download?: number;
  /** parse, data/store middleware and the sink. @default 120000 */
  parse?: number;
  /** generate of follow-up nodes. @default 120000 */
  followUp?: number;
  /** @default 60000 */
  error?: number;
}

export const DEFAULT_WATCHDOG_TIMEOUTS: Readonly<Required<WatchdogTimeouts>> = Object.freeze({
  task: 120_000,
  download: 300_000,
  parse: 120_000,
  followUp: 120_000,
  error: 60_000,
});

export interface EngineRecoveryOptions {
  policy?: FailurePolicy | undefined;
  retry?: SimpleRetryPolicyOptions | undefined;
  recovery?: RecoveryPolicyOptions | undefined;
  watchdog?: WatchdogTimeouts | false | undefined;
  stallMs?: number | false | undefined;
  clock?: Clock | undefined;
  log: Logger;
  topics: StageTopics;
  /** Work that should be moving: ready + in flight on every topic (delayed work waits on purpose). */
  pending: () => Promise<number>;
}

/** Counts for `engine.policyStats()`. */
export interface PolicyStats {
  /** Threshold decisions so far. */
  decisions: Record<ThresholdDecision, number>;
  terminatedModules: string[];
  terminatedTasks: string[];
  /** Handlers aborted by the watchdog, by stage. */
  watchdogTimeouts: Record<string, number>;
  /** Stall reports so far. */
  stalls: number;
}

export class EngineRecovery {
  readonly policy: FailurePolicy;
  readonly deadLetters: EngineDeadLetters;
  readonly #recovery: RecoveryPolicy | undefined;
  readonly #timeouts: Readonly<Record<string, number>>;
  readonly #clock: Clock | undefined;
  readonly #stall: ProgressWatchdog | undefined;
  readonly #timedOut = new Map<string, number>();
  readonly #log: Logger;

  constructor(options: EngineRecoveryOptions) {
    this.#log = options.log;
    if (options.policy !== undefined) {
      this.policy = options.policy;
    } else {
      const recovery = options.recovery ?? {};
      this.#recovery = new RecoveryPolicy({
        ...recovery,
        ...(options.retry === undefined ? {} : { retry: options.retry }),
      });
      this.policy = this.#recovery;
    }
    this.#timeouts = options.watchdog === false ? {} : { ...DEFAULT_WATCHDOG_TIMEOUTS, ...options.watchdog };
    this.#clock = options.clock;
    this.deadLetters = new EngineDeadLetters({
      topics: options.topics,
      beforeReplay: (entries) => {
        // An operator replaying work wants it to run: lift the terminations it was given up for.
        const thresholds = this.#recovery?.thresholds;
        if (!thresholds) return;
        for (const entry of entries) {
          if (entry.error.code === 'MOCRA_ERR_MODULE_TERMINATED' && entry.module !== undefined) {
            thresholds.reset({ module: entry.module });
          }
          if (entry.error.code === 'MOCRA_ERR_TASK_TERMINATED') {
            const runId = runIdOf(entry.payload);
            if (runId !== undefined) thresholds.reset({ task: runId });
          }
        }
      },
    });
    this.#stall =
      options.stallMs === false
        ? undefined
        : new ProgressWatchdog({
            stallMs: options.stallMs ?? 120_000,
            pending: options.pending,
            ...(options.clock === undefined ? {} : { clock: options.clock }),
            onStall: (report) =>
              this.#log.error(
                {
                  idleMs: report.idleMs,
                  pending: report.pending,
                  repeat: report.repeat,
                  code: report.error.code,
                },
                `${report.error.message}: the crawl is stuck (a queue backend that stopped delivering, a paused engine, a hung sink?)`,
              ),
          });
  }

  /** The handler of a stage, with the stage's deadline (unchanged when it has none). */
  guard<T, R>(
    stage: StageName,
    label: (item: T) => string,
    handle: (item: T, signal: AbortSignal) => Promise<R>,
  ): (item: T, signal: AbortSignal) => Promise<R> {
    const timeoutMs = this.#timeouts[stage] ?? 0;
    if (timeoutMs <= 0) return handle;
    // One coarse timer for the whole stage, not one per handler (this is the hot path).
    const deadlines = new DeadlineGroup({
      timeoutMs,
      ...(this.#clock === undefined ? {} : { clock: this.#clock }),
      onTimeout: (err) => {
        this.#timedOut.set(stage, (this.#timedOut.get(stage) ?? 0) + 1);
        this.#log.warn({ stage, timeoutMs, code: err.code }, err.message);
      },
    });
    return (item, signal) =>
      deadlines.run(
        (inner) => handle(item, inner),
        () => label(item),
        signal,
      );
  }

  start(): void {
    this.#stall?.start();
  }

  stop(): void {
    this.#stall?.stop();
  }

  /** A stage settled a message. */
  progress(): void {
    this.#stall?.progress();
  }

  /** Breaker states, open first (empty when the policy has none). */
  breakers(filter: { scope?: BreakerScope; state?: BreakerState } = {}): BreakerSnapshot[] {
    return this.#recovery?.breakers?.list(filter) ?? [];
  }

  /** The default policy, when the engine uses it (not when a custom `policy` was given). */
  get recoveryPolicy(): RecoveryPolicy | undefined {
    return this.#recovery;
  }

  stats(): PolicyStats {
    const thresholds = this.#recovery?.thresholds;
    const snapshot = thresholds?.snapshot();
    return {
      decisions: thresholds?.decisions() ?? {
        continue: 0,
        'retry-later': 0,
        skip: 0,
        'terminate-module': 0,
        'terminate-task': 0,
      },
      terminatedModules: snapshot?.terminatedModules ?? [],
      terminatedTasks: snapshot?.terminatedTasks ?? [],
      watchdogTimeouts: Object.fromEntries(this.#timedOut),
      stalls: this.#stall?.stalls ?? 0,
    };
  }
}

/**
 * The plain fields an error event carries for the policy, read off the live error: the kind (a
 * steering error wrapped by a middleware included), the HTTP status, the delay asked for.
 */
export function policyFieldsOf(error: MocraError): Pick<ErrorEvent, 'kind' | 'status' | 'retryAfterMs'> {
  const out: Pick<ErrorEvent, 'kind' | 'status' | 'retryAfterMs'> = { kind: classifyError(error) };
  const steering = steeringCause(error);
  if (steering instanceof RetryLaterError) out.retryAfterMs = steering.delayMs;
  const status = (error as { status?: unknown }).status;
  if (typeof status === 'number') out.status = status;
  const retryAfterMs = (error as { retryAfterMs?: unknown }).retryAfterMs;
  if (out.retryAfterMs === undefined && typeof retryAfterMs === 'number') out.retryAfterMs = retryAfterMs;
  return out;
}

function runIdOf(payload: unknown): string | undefined {
  const p = payload as { runId?: unknown; request?: { runId?: unknown } } | null | undefined;
  if (p === null || typeof p !== 'object') return undefined;
  const runId = p.request?.runId ?? p.runId;
  return typeof runId === 'string' ? runId : undefined;
}
