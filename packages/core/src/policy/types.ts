import type { ErrorEvent } from '../model/events.js';
import type { Response } from '../model/response.js';

/** What happens to a failed piece of work. */
export type PolicyDecision =
  /** Republish the payload to its topic after `delayMs`. */
  | { action: 'retry'; delayMs: number }
  /** Give up: the error event goes to the dead-letter queue of the `error` topic. */
  | { action: 'dead-letter'; reason: string }
  /** Give up and stop the engine cleanly (a CriticalError); the event is dead-lettered too. */
  | { action: 'stop'; reason: string };

/**
 * The seam between the engine and failure handling. The engine asks it twice:
 *   - `retryStatus` in the download stage, for every response: a retryable status (429, 503…)
 *     while retries remain becomes an HttpStatusError instead of reaching parse;
 *   - `decide` in the error stage, for every failure.
 * `SimpleRetryPolicy` is the one there is; the error-recovery work replaces it with a resolver
 * keyed by error kind and stage (thresholds, breakers, DLQ modes) behind this interface.
 */
export interface FailurePolicy {
  decide(event: ErrorEvent): PolicyDecision;
  /** `retriesSoFar`: how many times this request has already been retried (0 on the first download). */
  retryStatus(response: Response, retriesSoFar: number): boolean;
}
