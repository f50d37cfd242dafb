export { Fifo } from './fifo.js';
export { MinHeap } from './heap.js';
export type { MemoryQueueBackendOptions } from './memory-queue.js';
export { createMemoryQueueBackend, MemoryQueueBackend } from './memory-queue.js';
export type {
  ConsumeOptions,
  DeadLetter,
  DeadLetterFilter,
  DeadLetterQueue,
  Delivery,
  LeaseQueue,
  PublishMessage,
  QueueBackend,
  QueueBackendKind,
  QueueStats,
  TopicOptions,
} from './types.js';
export { DEFAULT_TOPIC_OPTIONS } from './types.js';
