export type { SimpleRetryPolicyOptions } from './simple-retry-policy.js';
export { createSimpleRetryPolicy, parseRetryAfter, SimpleRetryPolicy } from './simple-retry-policy.js';
export type { FailurePolicy, PolicyDecision } from './types.js';
