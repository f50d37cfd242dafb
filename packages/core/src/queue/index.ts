// The Redis, NATS, Kafka and LevelDB backends are listed by their subpath entries
// (src/entries/), not here: the root imports this file, and would load their code with it.
export type { ConnectionEvent, DeadLetterEvent } from './channels.js';
export { connectionChannel, deadLetterChannel, poisonChannel } from './channels.js';
export type { QueueCodec, QueueCodecFormat, QueueCodecOptions } from './codec.js';
export { createQueueCodec } from './codec.js';
export type { CreateQueueBackendOptions } from './create-queue-backend.js';
export { createQueueBackend, QUEUE_URL_SCHEMES } from './create-queue-backend.js';
export { Fifo } from './fifo.js';
export { hash32, partitionOf } from './hash.js';
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
