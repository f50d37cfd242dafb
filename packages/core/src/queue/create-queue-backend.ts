/**
 * One entry point from a URL (a config value, an environment variable) to a queue backend.
 *
 * | URL                                   | backend                                  |
 * | ------------------------------------- | ---------------------------------------- |
 * | `memory://`                           | in-process (the default, no services)    |
 * | `redis://[user:pass@]host:6379[/db]`  | Redis Streams (`rediss://` for TLS)      |
 * | `nats://host:4222[,nats://host2:4222]`| NATS JetStream                           |
 * | `kafka://host:9092[,host2:9092]`      | Kafka                                    |
 */
import { InvalidBackendUrlError } from '../errors.js';
import type { QueueCodecOptions } from './codec.js';
import type { KafkaQueueBackendOptions } from './kafka-queue.js';
import { createMemoryQueueBackend } from './memory-queue.js';
import type { NatsQueueBackendOptions } from './nats-queue.js';
import type { RedisQueueBackendOptions } from './redis-queue.js';
import type { QueueBackend, TopicOptions } from './types.js';

type Common = 'namespace' | 'topicDefaults' | 'codec' | 'maxPayloadBytes' | 'pollMs';

export interface CreateQueueBackendOptions {
  /** Prefix of every topic, key, stream and group the backend creates. @default 'mocra' */
  namespace?: string;
  /** Defaults for every topic; per-topic options override them. */
  topicDefaults?: TopicOptions;
  /** Payload codec of the backends that encode (all but memory). */
  codec?: QueueCodecOptions;
  /** Largest encoded payload `publish` accepts. @default per backend (Redis 16 MiB, NATS server limit, Kafka 1 MB) */
  maxPayloadBytes?: number;
  /** Poll interval of waiting consumers and blocked publishers. @default 250 */
  pollMs?: number;
  /** Options only the Redis backend reads. */
  redis?: Omit<RedisQueueBackendOptions, Common | 'url'>;
  /** Options only the NATS backend reads. */
  nats?: Omit<NatsQueueBackendOptions, Common | 'servers'>;
  /** Options only the Kafka backend reads. */
  kafka?: Omit<KafkaQueueBackendOptions, Common | 'brokers'>;
}

export const QUEUE_URL_SCHEMES = ['memory', 'redis', 'rediss', 'nats', 'kafka'] as const;

/**
 * Create (and connect) the queue backend a URL names. Bad URLs throw InvalidBackendUrlError.
 * A remote backend's module is imported here, on first use, so that a program on `memory://`
 * never loads the Redis, NATS or Kafka code (they are the subpaths `@mocra/core/redis` …).
 */
export async function createQueueBackend(
  url: string,
  options: CreateQueueBackendOptions = {},
): Promise<QueueBackend> {
  if (typeof url !== 'string' || url.trim() === '') {
    throw new InvalidBackendUrlError(String(url), `expected one of ${schemes()}`);
  }
  const text = url.trim();
  const match = /^([a-z][a-z0-9+.-]*):(?:\/\/)?(.*)$/i.exec(text);
  if (!match) throw new InvalidBackendUrlError(text, `no scheme; expected one of ${schemes()}`);
  const scheme = match[1]!.toLowerCase();
  const rest = match[2]!;
  const common = {
    ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
    ...(options.topicDefaults === undefined ? {} : { topicDefaults: options.topicDefaults }),
  };
  const remote = {
    ...common,
    ...(options.codec === undefined ? {} : { codec: options.codec }),
    ...(options.maxPayloadBytes === undefined ? {} : { maxPayloadBytes: options.maxPayloadBytes }),
    ...(options.pollMs === undefined ? {} : { pollMs: options.pollMs }),
  };
  switch (scheme) {
    case 'memory':
      if (rest.replace(/\/+$/, '') !== '') {
        throw new InvalidBackendUrlError(text, "memory:// takes no host or path (write 'memory://')");
      }
      return createMemoryQueueBackend(common);
    case 'redis':
    case 'rediss':
      if (rest === '' || rest.startsWith('/')) throw new InvalidBackendUrlError(text, 'no host');
      return (await import('./redis-queue.js')).createRedisQueueBackend({
        ...options.redis,
        ...remote,
        url: text,
      });
    case 'nats': {
      const servers = text.split(',').map((s) => s.trim());
      for (const s of servers) {
        if (!/^(nats:\/\/)?[^/:,\s]+:\d+\/?$/i.test(s) && !/^nats:\/\/[^/\s]+$/i.test(s)) {
          throw new InvalidBackendUrlError(text, `'${s}' is not nats://host:port`);
        }
      }
      return (await import('./nats-queue.js')).createNatsQueueBackend({
        ...options.nats,
        ...remote,
        servers,
      });
    }
    case 'kafka': {
      const brokers = rest
        .replace(/\/+$/, '')
        .split(',')
        .map((s) => s.trim());
      for (const b of brokers) {
        if (!/^[\w.-]+:\d{1,5}$/.test(b)) throw new InvalidBackendUrlError(text, `'${b}' is not host:port`);
      }
      return (await import('./kafka-queue.js')).createKafkaQueueBackend({
        ...options.kafka,
        ...remote,
        brokers,
      });
    }
    default:
      throw new InvalidBackendUrlError(text, `unknown scheme '${scheme}:'; expected one of ${schemes()}`);
  }
}

function schemes(): string {
  return QUEUE_URL_SCHEMES.map((s) => `${s}://`).join(', ');
}
