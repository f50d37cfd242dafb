/**
 * Topic naming and option checks shared by the queue backends that talk to a server. Names end
 * up in Redis keys, NATS subjects and stream names, and Kafka topic names, so they are held to
 * the one character set all three accept.
 */
import { InvalidArgumentError, QueueClosedError } from '../errors.js';
import { DEFAULT_TOPIC_OPTIONS, type TopicOptions } from './types.js';

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Throws unless `name` is 1–64 characters of `[A-Za-z0-9_-]`. */
export function assertQueueName(what: 'namespace' | 'topic', name: string): void {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new InvalidArgumentError(
      `${what} '${String(name)}' must be 1–64 characters of A–Z, a–z, 0–9, '_' or '-' (it becomes part of broker names)`,
    );
  }
}

/** Topic options with the defaults filled in, checked. */
export function resolveTopicOptions(
  name: string,
  defaults: TopicOptions | undefined,
  options: TopicOptions | undefined,
): Required<TopicOptions> {
  const merged = { ...DEFAULT_TOPIC_OPTIONS, ...defined(defaults), ...defined(options) };
  if (!Number.isInteger(merged.maxDeliveries) || merged.maxDeliveries < 1) {
    throw new InvalidArgumentError(
      `topic '${name}': maxDeliveries must be an integer ≥ 1, got ${merged.maxDeliveries}`,
    );
  }
  if (!(merged.leaseMs > 0 && Number.isFinite(merged.leaseMs))) {
    throw new InvalidArgumentError(
      `topic '${name}': leaseMs must be a finite number > 0, got ${merged.leaseMs}`,
    );
  }
  if (!(merged.capacity >= 1)) {
    throw new InvalidArgumentError(`topic '${name}': capacity must be ≥ 1, got ${merged.capacity}`);
  }
  return merged;
}

function defined<T extends object>(o: T | undefined): Partial<T> {
  if (!o) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Backends without native priorities keep three lanes per topic and read them highest first:
 * priority > 0 → `high`, 0 → `normal`, < 0 → `low`. The exact priority travels with the
 * message (`Delivery.priority`), but order inside a lane is publish order, not priority order.
 */
export const PRIORITY_LANES = ['high', 'normal', 'low'] as const;
export type PriorityLane = (typeof PRIORITY_LANES)[number];

export function laneOf(priority: number): PriorityLane {
  return priority > 0 ? 'high' : priority < 0 ? 'low' : 'normal';
}

/** Checks one message before it is encoded; returns its priority. */
export function checkPublish(
  topic: string,
  priority: number | undefined,
  delayMs: number | undefined,
): number {
  const p = priority ?? 0;
  if (!Number.isFinite(p))
    throw new InvalidArgumentError(`topic '${topic}': priority must be finite, got ${p}`);
  if (delayMs !== undefined && !(delayMs >= 0 && Number.isFinite(delayMs))) {
    throw new InvalidArgumentError(`topic '${topic}': delayMs must be a finite number ≥ 0, got ${delayMs}`);
  }
  return p;
}

/** Checks a consume call; returns the batch size. */
export function checkConsume(topic: string, max: number): number {
  const n = Math.floor(max);
  if (!(n >= 1)) throw new InvalidArgumentError(`topic '${topic}': consume max must be ≥ 1, got ${max}`);
  return n;
}

/**
 * The topics of one backend: the same name returns the same topic, a closed backend opens no
 * more, and `close` hands every topic over once.
 */
export class TopicRegistry<TTopic> {
  readonly #topics = new Map<string, TTopic>();
  readonly #defaults: TopicOptions | undefined;
  readonly #create: (name: string, options: Required<TopicOptions>) => TTopic;
  /** Broker backends hold names to the character set of their keys, subjects and topics. */
  readonly #brokerNames: boolean;
  #closed = false;

  constructor(
    defaults: TopicOptions | undefined,
    create: (name: string, options: Required<TopicOptions>) => TTopic,
    options: { brokerNames?: boolean } = {},
  ) {
    this.#defaults = defaults;
    this.#create = create;
    this.#brokerNames = options.brokerNames ?? true;
  }

  get closed(): boolean {
    return this.#closed;
  }

  get(name: string, options?: TopicOptions): TTopic {
    if (this.#closed) throw new QueueClosedError(name);
    let topic = this.#topics.get(name);
    if (!topic) {
      if (this.#brokerNames) assertQueueName('topic', name);
      topic = this.#create(name, resolveTopicOptions(name, this.#defaults, options));
      this.#topics.set(name, topic);
    }
    return topic;
  }

  values(): IterableIterator<TTopic> {
    return this.#topics.values();
  }

  /** Marks the backend closed; the topics to close, or undefined when it was closed already. */
  close(): TTopic[] | undefined {
    if (this.#closed) return undefined;
    this.#closed = true;
    return [...this.#topics.values()];
  }
}
