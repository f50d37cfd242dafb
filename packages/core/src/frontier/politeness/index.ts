export type {
  AcquirePolicy,
  AcquireResult,
  HostBudget,
  HostBudgetState,
  LocalHostBudgetOptions,
} from './host-budget.js';
export { LocalHostBudget } from './host-budget.js';
export type {
  AutoThrottleOptions,
  BackoffMessage,
  HostBackoffOptions,
  HostOutcome,
  HostSchedulerOptions,
  HostSnapshot,
  RobotsGuard,
  RobotsVerdict,
} from './host-scheduler.js';
export { backoffChannel, createHostScheduler, HostScheduler } from './host-scheduler.js';
