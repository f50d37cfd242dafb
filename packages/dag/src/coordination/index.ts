export type { MemoryFencingStore } from './memory-fencing-store.js';
export { createMemoryFencingStore } from './memory-fencing-store.js';
export type {
  MemoryIdempotencyStore,
  MemoryIdempotencyStoreOptions,
} from './memory-idempotency-store.js';
export { createMemoryIdempotencyStore } from './memory-idempotency-store.js';
export type { MemoryRunGuard, MemoryRunGuardOptions } from './memory-run-guard.js';
export { createMemoryRunGuard } from './memory-run-guard.js';
export type { MemoryRunStateStore } from './memory-run-state-store.js';
export { createMemoryRunStateStore } from './memory-run-state-store.js';
export type {
  CheckpointEntry,
  FencedCommit,
  FencingStore,
  IdempotencyBegin,
  IdempotencyStore,
  RunCheckpoint,
  RunGuard,
  RunGuardLease,
  RunStateStore,
} from './types.js';
