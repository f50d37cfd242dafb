/**
 * The Kafka queue backend. kafkajs loads on the first connect; `createQueueBackend('kafka://…')`
 * at the root reaches it without this import.
 *
 * @module @mocra/core/kafka
 */
export type {
  KafkaAdminLike,
  KafkaConsumerLike,
  KafkaLike,
  KafkaProducerLike,
} from '../queue/kafka-client.js';
export type { KafkaQueueBackend, KafkaQueueBackendOptions, KafkaTopicNames } from '../queue/kafka-queue.js';
export { createKafkaQueueBackend } from '../queue/kafka-queue.js';
