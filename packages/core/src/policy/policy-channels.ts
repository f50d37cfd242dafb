/**
 * Diagnostics channels of the failure-handling units. Metrics and the dashboard subscribe here;
 * nothing is built when nobody listens (`hasSubscribers` is checked first).
 *
 * ```
 *  mocra:policy:decision   every resolver decision and every threshold decision
 *  mocra:policy:breaker    every circuit-breaker state change
 *  mocra:policy:watchdog   a handler ran past its deadline and was aborted
 *  mocra:policy:stall      no progress while work was pending
 * ```
 */
import diagnostics_channel from 'node:diagnostics_channel';
import type { BreakerTransition } from './circuit-breakers.js';
import type { ThresholdVerdict } from './error-thresholds.js';
import type { FailureDecision, FailureInput } from './policy-resolver.js';
import type { StallReport } from './progress-watchdog.js';

export const POLICY_CHANNEL_NAMES = {
  decision: 'mocra:policy:decision',
  breaker: 'mocra:policy:breaker',
  watchdog: 'mocra:policy:watchdog',
  stall: 'mocra:policy:stall',
} as const;

/** `mocra:policy:decision` — what the resolver or the thresholds decided about one failure. */
export type PolicyDecisionMessage =
  | { source: 'resolver'; failure: FailureInput; decision: FailureDecision }
  | { source: 'thresholds'; verdict: ThresholdVerdict };

/** `mocra:policy:watchdog` — a handler did not finish within `timeoutMs` and was aborted. */
export interface WatchdogTimeoutMessage {
  label: string;
  timeoutMs: number;
  at: number;
}

export const policyChannels = {
  decision: diagnostics_channel.channel(POLICY_CHANNEL_NAMES.decision),
  breaker: diagnostics_channel.channel(POLICY_CHANNEL_NAMES.breaker),
  watchdog: diagnostics_channel.channel(POLICY_CHANNEL_NAMES.watchdog),
  stall: diagnostics_channel.channel(POLICY_CHANNEL_NAMES.stall),
} as const;

export type { BreakerTransition, StallReport };
