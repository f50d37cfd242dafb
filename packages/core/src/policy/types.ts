import type { MocraError } from '../errors.js';
import type { ErrorEvent, StageName } from '../model/events.js';
import type { Response } from '../model/response.js';

/** What happens to a failed piece of work. */
export type PolicyDecision =
  /** Republish the payload to its topic after `delayMs`. */
  | { action: 'retry'; delayMs: number; reason?: string }
  /** Give up: the error event goes to the dead-letter queue of the `error` topic. */
  | { action: 'dead-letter'; reason: string }
  /** Give up without keeping the work (`dlq = never`): counted and logged only. */
  | { action: 'drop'; reason: string }
  /** Give up and stop the engine cleanly (a CriticalError); the event is dead-lettered too. */
  | { action: 'stop'; reason: string };

/** Which work is about to run or just ran, as far as failure handling cares. */
export interface WorkScope {
  module?: string | undefined;
  /** The task (one run of the module). */
  runId?: string | undefined;
  url?: string | undefined;
  /** The URL's host (`host:port`, lower case); derived from `url` when absent. */
  host?: string | undefined;
  /** The request's fingerprint (the request's identity for per-request counts). */
  fingerprint?: string | undefined;
  /**
   * Earlier failed runs of this work (0: it never ran). Unknown when absent, taken as tried: an
   * exhausted breaker gives up only work that was tried.
   */
  attempt?: number | undefined;
}

/**
 * The answer of {@link FailurePolicy.admit}: run the work, put it back for `deferMs` without
 * counting a failure (a circuit breaker is open), or fail it with `error` (its module or task
 * was terminated, or its host looks down for good), which then takes the error path.
 */
export type Admission = undefined | { deferMs: number; reason: string } | { error: MocraError };

/**
 * The seam between the engine and failure handling. The engine asks it:
 *   - `admit`, before a download and before a parse (optional);
 *   - `retryStatus` in the download stage, for every response: a retryable status (429, 503…)
 *     while retries remain becomes an HttpStatusError instead of reaching parse;
 *   - `succeeded`, after a download that got a response and after a finished parse (optional);
 *   - `released`, when admitted work did not run after all (optional);
 *   - `decide` in the error stage, for every failure.
 * `RecoveryPolicy` (resolver + thresholds + breakers) is the default; `SimpleRetryPolicy` is the
 * minimal one.
 */
export interface FailurePolicy {
  decide(event: ErrorEvent): PolicyDecision;
  /** `retriesSoFar`: how many times this request has already been retried (0 on the first download). */
  retryStatus(response: Response, retriesSoFar: number): boolean;
  admit?(stage: StageName, work: WorkScope): Admission;
  /** `status`: the response status, for a download. */
  succeeded?(stage: StageName, work: WorkScope & { status?: number }): void;
  /** Admitted work did not run after all (the politeness gate deferred or dropped it). */
  released?(stage: StageName, work: WorkScope): void;
}
