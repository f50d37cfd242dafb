export { DagScheduler, runDag } from './scheduler.js';
export type {
  DagReport,
  DagRunOptions,
  DagSchedulerOptions,
  FencingOptions,
  IdempotencyOptions,
  NodeResult,
  RunGuardOptions,
  RunStateOptions,
} from './types.js';
