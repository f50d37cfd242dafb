/**
 * The NATS backends: the JetStream queue and the KV-backed shared dedup set. The NATS clients
 * load on the first connect; `createQueueBackend('nats://…')` at the root reaches the queue
 * without this import.
 *
 * @module @mocra/core/nats
 */
export type { NatsDeduplicatorOptions } from '../frontier/dedup/nats-deduplicator.js';
export {
  createNatsDeduplicator,
  NatsDeduplicator,
  natsDedupBucket,
} from '../frontier/dedup/nats-deduplicator.js';
export type { NatsQueueBackend, NatsQueueBackendOptions, NatsTopicNames } from '../queue/nats-queue.js';
export { createNatsQueueBackend } from '../queue/nats-queue.js';
