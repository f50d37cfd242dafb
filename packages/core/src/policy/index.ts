export type { Backoff, BackoffStrategy } from './backoff.js';
export { BACKOFF_STRATEGIES, backoffDelayMs, parseRetryAfterMs } from './backoff.js';
export type {
  BreakerPermit,
  BreakerScope,
  BreakerSnapshot,
  BreakerState,
  BreakerTransition,
  CircuitBreakerOptions,
} from './circuit-breakers.js';
export { CircuitBreakers, createCircuitBreakers } from './circuit-breakers.js';
export type {
  ErrorThresholdsOptions,
  ThresholdDecision,
  ThresholdScope,
  ThresholdVerdict,
} from './error-thresholds.js';
export { createErrorThresholds, ErrorThresholds, THRESHOLD_DECISIONS } from './error-thresholds.js';
export type { FailureKind, PolicyStage } from './failure-kind.js';
export {
  classifyCode,
  classifyError,
  FAILURE_KINDS,
  isHostFailure,
  kindOfStatus,
  POLICY_STAGES,
  steeringCause,
} from './failure-kind.js';
export type { PolicyDecisionMessage, WatchdogTimeoutMessage } from './policy-channels.js';
export { POLICY_CHANNEL_NAMES, policyChannels } from './policy-channels.js';
export type { FailureDecision, FailureInput, PolicyResolverOptions, RuleContext } from './policy-resolver.js';
export { createPolicyResolver, PolicyResolver } from './policy-resolver.js';
export type { DeadLetterMode, FailureRule, PolicyOverride } from './policy-table.js';
export {
  DEAD_LETTER_MODES,
  DEFAULT_FAILURE_RULES,
  policyOverrideSchema,
  policyOverridesSchema,
} from './policy-table.js';
export type { ProgressWatchdogOptions, StallReport } from './progress-watchdog.js';
export { createProgressWatchdog, ProgressWatchdog } from './progress-watchdog.js';
export type { RecoveryPolicyOptions } from './recovery-policy.js';
export { createRecoveryPolicy, policyStage, RecoveryPolicy } from './recovery-policy.js';
export type { SimpleRetryPolicyOptions } from './simple-retry-policy.js';
export { createSimpleRetryPolicy, parseRetryAfter, SimpleRetryPolicy } from './simple-retry-policy.js';
export type { Admission, FailurePolicy, PolicyDecision, WorkScope } from './types.js';
export type { DeadlineGroupOptions, DeadlineOptions, HandlerWatchdogOptions } from './watchdog.js';
export { DeadlineGroup, HandlerWatchdog, runWithDeadline } from './watchdog.js';
