/**
 * The in-memory queue backend: the default for a single process with no services, and the
 * reference implementation of the queue contract (`./types.ts`). Each topic is a
 * {@link LeaseTable} with no storage behind it.
 *
 * Payloads are passed by reference (no encoding): this is the hot path of a single-node crawl.
 * A producer must not mutate a payload after publishing it.
 */
import { LeaseTable } from './lease-table.js';
import { TopicRegistry } from './topic-options.js';
import type { LeaseQueue, QueueBackend, TopicOptions } from './types.js';

export interface MemoryQueueBackendOptions {
  /** Prefix of topic names (keeps two engines in one process apart). @default 'mocra' */
  namespace?: string;
  /** Defaults for every topic; per-topic options override them. */
  topicDefaults?: TopicOptions;
  /** Clock (epoch ms). Tests pass a fake one together with fake timers. @default Date.now */
  now?: () => number;
}

export function createMemoryQueueBackend(options: MemoryQueueBackendOptions = {}): QueueBackend {
  return new MemoryQueueBackend(options);
}

export class MemoryQueueBackend implements QueueBackend {
  readonly kind = 'memory' as const;
  readonly namespace: string;
  readonly #topics: TopicRegistry<LeaseTable<unknown>>;

  constructor(options: MemoryQueueBackendOptions = {}) {
    this.namespace = options.namespace ?? 'mocra';
    const now = options.now ?? Date.now;
    this.#topics = new TopicRegistry(
      options.topicDefaults,
      (name, resolved) => new LeaseTable<unknown>({ name, options: resolved, now }),
      { brokerNames: false },
    );
  }

  topic<T>(name: string, options?: TopicOptions): LeaseQueue<T> {
    return this.#topics.get(name, options) as LeaseQueue<T>;
  }

  async close(): Promise<void> {
    for (const topic of this.#topics.close() ?? []) topic.close();
  }
}
