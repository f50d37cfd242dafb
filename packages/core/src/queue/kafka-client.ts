/**
 * The part of the kafkajs API the Kafka queue backend uses, as structural types. A kafkajs
 * `Kafka` instance satisfies them; so does the `FakeKafkaBroker` the tests run against when no
 * broker is available. Keeping the surface this small is deliberate: everything listed here is
 * something the fake has to model faithfully.
 */

export type KafkaHeaderValue = Buffer | string | (Buffer | string)[] | undefined;

export interface KafkaOutgoingMessage {
  key?: Buffer | string | null;
  value: Buffer | string | null;
  partition?: number;
  headers?: Record<string, Buffer | string>;
}

export interface KafkaIncomingMessage {
  key: Buffer | null;
  value: Buffer | null;
  offset: string;
  timestamp: string;
  headers?: Record<string, KafkaHeaderValue>;
}

export interface KafkaBatchLike {
  topic: string;
  partition: number;
  highWatermark: string;
  messages: KafkaIncomingMessage[];
}

export interface KafkaEachBatchPayloadLike {
  batch: KafkaBatchLike;
  resolveOffset(offset: string): void;
  heartbeat(): Promise<void>;
  /** Pause the batch's partition; returns a function that resumes it. */
  pause(): () => void;
  isRunning(): boolean;
  isStale(): boolean;
}

export interface KafkaGroupJoinEventLike {
  payload: { memberAssignment: Record<string, number[]> };
}

export interface KafkaCrashEventLike {
  payload: { error: Error; restart: boolean };
}

export interface KafkaProducerLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  send(record: { topic: string; messages: KafkaOutgoingMessage[]; acks?: number }): Promise<unknown>;
}

export interface KafkaConsumerLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void>;
  run(config: {
    autoCommit?: boolean;
    eachBatchAutoResolve?: boolean;
    partitionsConsumedConcurrently?: number;
    eachBatch: (payload: KafkaEachBatchPayloadLike) => Promise<void>;
  }): Promise<void>;
  commitOffsets(offsets: { topic: string; partition: number; offset: string }[]): Promise<void>;
  stop(): Promise<void>;
  on(eventName: 'consumer.group_join', listener: (event: KafkaGroupJoinEventLike) => void): unknown;
  on(eventName: 'consumer.crash', listener: (event: KafkaCrashEventLike) => void): unknown;
}

export interface KafkaAdminLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  createTopics(options: {
    topics: { topic: string; numPartitions?: number; replicationFactor?: number }[];
    waitForLeaders?: boolean;
  }): Promise<boolean>;
  fetchTopicOffsets(
    topic: string,
  ): Promise<{ partition: number; offset: string; high: string; low: string }[]>;
  fetchOffsets(options: {
    groupId: string;
    topics?: string[];
  }): Promise<{ topic: string; partitions: { partition: number; offset: string }[] }[]>;
  deleteGroups(groupIds: string[]): Promise<unknown>;
}

export interface KafkaLike {
  producer(config?: { allowAutoTopicCreation?: boolean; idempotent?: boolean }): KafkaProducerLike;
  consumer(config: {
    groupId: string;
    sessionTimeout?: number;
    heartbeatInterval?: number;
    rebalanceTimeout?: number;
    maxWaitTimeInMs?: number;
    allowAutoTopicCreation?: boolean;
  }): KafkaConsumerLike;
  admin(): KafkaAdminLike;
}
