export type { BreakerState } from './circuit-breaker.js';
export type { Backoff, CircuitBreakerPolicy, NodePolicy, RetryPolicy } from './types.js';
