// Public entry of @mocra/core. Each folder names what it exports; this file lists them
// explicitly (no `export *`) so the public surface is reviewed, not accidental.

export type { Coordination, CoordinationKind, LockLease, Member } from './coordination/index.js';
export { importOptional } from './optional-dependency.js';
export type {
  ConsumeOptions,
  DeadLetter,
  DeadLetterFilter,
  DeadLetterQueue,
  Delivery,
  LeaseQueue,
  MemoryQueueBackendOptions,
  PublishMessage,
  QueueBackend,
  QueueBackendKind,
  QueueStats,
  TopicOptions,
} from './queue/index.js';
export { createMemoryQueueBackend, DEFAULT_TOPIC_OPTIONS, MemoryQueueBackend } from './queue/index.js';
