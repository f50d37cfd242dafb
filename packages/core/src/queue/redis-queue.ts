/**
 * The Redis Streams queue backend (ioredis, Redis ≥ 6.2).
 *
 * Keys of one topic share a hash tag, so every script touches one slot:
 *
 * ```
 *  {prefix}{ns:topic}:high    stream   ┐ priority lanes, read high → normal → low;
 *  {prefix}{ns:topic}:normal  stream   │ one consumer group 'workers' on each; a process is
 *  {prefix}{ns:topic}:low     stream   ┘ one consumer (its PEL entries are its leases)
 *  {prefix}{ns:topic}:delayed zset     message id → due time (nack with delay, publish delayMs)
 *  {prefix}{ns:topic}:delayed-data hash message id → msgpack of the entry's fields
 *  {prefix}{ns:topic}:dlq     stream   dead letters (fields of the message + reason, time)
 * ```
 *
 * An entry's fields: `i` message id, `p` payload (codec bytes), `k` key, `r` priority, `h`
 * headers (JSON), `t` first publish (server ms), `a` deliveries before this entry existed (a
 * nack re-adds the message as a new entry and carries the count over). attempt = `a` + the
 * PEL delivery counter of the entry.
 *
 * A lease is a PEL entry: `take` (one Lua script) promotes due delayed entries, claims entries
 * idle longer than the topic's `leaseMs` (XAUTOCLAIM — a dead or stuck worker's leases) and
 * dead-letters those already delivered `maxDeliveries` times, then reads new entries
 * (XREADGROUP). ack/nack/extend check in Lua that the PEL entry is still ours with the delivery
 * count we saw, so a stale delivery (its lease lapsed and someone else took it) is refused.
 * Acked entries are deleted (XACK + XDEL), so the stream length counts only live messages and
 * capacity can be checked exactly inside the publish script.
 */
import { hostname } from 'node:os';
import {
  InvalidArgumentError,
  LeaseExpiredError,
  PayloadTooLargeError,
  QueueClosedError,
  QueueDataLostError,
  QueueDecodeError,
} from '../errors.js';
import { publishBackpressure, publishConnection, publishDeadLetter, publishPoison } from './channels.js';
import { createQueueCodec, type QueueCodec, type QueueCodecOptions } from './codec.js';
import {
  letterPayload,
  matchesDeadLetterFilter,
  pageOfLetters,
  parseHeaderObject,
} from './dead-letter-filter.js';
import { LeaseKeeper } from './lease-keeper.js';
import {
  connectRedis,
  describe,
  LuaScript,
  num,
  type RedisClient,
  redactUrl,
  redisFailure,
  str,
  watchEpoch,
} from './redis-connection.js';
import { createIdGenerator, sleep } from './timing.js';
import { assertQueueName, checkConsume, checkPublish, TopicRegistry } from './topic-options.js';
import type {
  ConsumeOptions,
  DeadLetter,
  DeadLetterFilter,
  DeadLetterQueue,
  Delivery,
  LeaseQueue,
  PublishMessage,
  QueueBackend,
  QueueStats,
  TopicOptions,
} from './types.js';

export interface RedisQueueBackendOptions {
  /** @default 'redis://127.0.0.1:6379' */
  url?: string;
  /** Prefix of topic names; two crawls on one Redis keep apart by namespace. @default 'mocra' */
  namespace?: string;
  /** Prefix of every key this backend writes. @default 'mocra:q:' */
  keyPrefix?: string;
  /** Defaults for every topic; per-topic options override them. */
  topicDefaults?: TopicOptions;
  /** How payloads are encoded and compressed. */
  codec?: QueueCodecOptions;
  /**
   * Largest encoded (after compression) payload accepted by `publish`; a bigger one is refused
   * with PayloadTooLargeError before anything of its batch is written.
   * @default 16777216 (16 MiB)
   */
  maxPayloadBytes?: number;
  /**
   * How often a waiting consumer re-checks delayed messages and lapsed leases (new messages wake
   * it at once), and how often a publisher blocked by `capacity` re-checks for room.
   * @default 250
   */
  pollMs?: number;
  /** This process's consumer name in the groups. @default `${hostname}-${pid}-${random}` */
  consumerName?: string;
  /** Extra ioredis options, passed through. */
  redisOptions?: Record<string, unknown>;
}

const FEATURE = 'the Redis queue backend';
const GROUP = 'workers';
/** Messages per publish script call: bounds how long one script holds the server. */
const PUBLISH_CHUNK = 500;

// ── Lua ────────────────────────────────────────────────────────────────────────

const PRELUDE = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function field(f, name)
  for i = 1, #f, 2 do if f[i] == name then return f[i + 1] end end
  return nil
end
local function set_field(f, name, value)
  for i = 1, #f, 2 do if f[i] == name then f[i + 1] = value; return end end
  f[#f + 1] = name; f[#f + 1] = value
end
local function lane_of(f)
  local p = tonumber(field(f, 'r') or '0') or 0
  if p > 0 then return 1 elseif p < 0 then return 3 else return 2 end
end
local function dead_letter(dlq, f, sid, reason, attempts, now)
  local out = {}
  for i = 1, #f, 2 do
    local k = f[i]
    if k ~= 'a' and k ~= 'x' and k ~= 'd' then out[#out + 1] = k; out[#out + 1] = f[i + 1] end
  end
  if not field(f, 'i') then out[#out + 1] = 'i'; out[#out + 1] = sid end
  out[#out + 1] = 'a'; out[#out + 1] = string.format('%d', attempts)
  out[#out + 1] = 'x'; out[#out + 1] = reason
  out[#out + 1] = 'd'; out[#out + 1] = string.format('%d', now)
  return redis.call('XADD', dlq, '*', unpack(out))
end
local function owned(stream, group, sid, consumer, deliveries)
  local p = redis.call('XPENDING', stream, group, sid, sid, 1)
  local e = p[1]
  return e ~= nil and e[2] == consumer and tonumber(e[4]) == tonumber(deliveries)
end
local function delay_or_add(lanes, delayed, data, f, sid, due)
  if due then
    local id = field(f, 'i') or sid
    redis.call('HSET', data, id, cmsgpack.pack(f))
    redis.call('ZADD', delayed, string.format('%d', due), id)
  else
    redis.call('XADD', lanes[lane_of(f)], '*', unpack(f))
  end
end
`;

// KEYS: high normal low delayed data · ARGV: capacity n [id prio hasKey key headers payload delay]×n
const PUBLISH = new LuaScript(
  `${PRELUDE}
local capacity = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local size = redis.call('XLEN', KEYS[1]) + redis.call('XLEN', KEYS[2]) + redis.call('XLEN', KEYS[3])
  + redis.call('ZCARD', KEYS[4])
if size + math.min(n, capacity) > capacity then return size end
local now = now_ms()
local lanes = {KEYS[1], KEYS[2], KEYS[3]}
for i = 0, n - 1 do
  local b = 3 + i * 7
  local f = {'i', ARGV[b], 'r', ARGV[b + 1], 't', string.format('%d', now), 'a', '0', 'p', ARGV[b + 5]}
  if ARGV[b + 2] == '1' then f[#f + 1] = 'k'; f[#f + 1] = ARGV[b + 3] end
  if ARGV[b + 4] ~= '' then f[#f + 1] = 'h'; f[#f + 1] = ARGV[b + 4] end
  local delay = tonumber(ARGV[b + 6])
  delay_or_add(lanes, KEYS[4], KEYS[5], f, ARGV[b], delay > 0 and (now + delay) or nil)
end
return -1
`,
  5,
);

// KEYS: high normal low delayed data dlq · ARGV: group consumer max minIdle maxDeliveries
const TAKE = new LuaScript(
  `${PRELUDE}
local now = now_ms()
local lanes = {KEYS[1], KEYS[2], KEYS[3]}
local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 512)
for _, id in ipairs(due) do
  local packed = redis.call('HGET', KEYS[5], id)
  if packed then
    local f = cmsgpack.unpack(packed)
    redis.call('XADD', lanes[lane_of(f)], '*', unpack(f))
  end
  redis.call('HDEL', KEYS[5], id)
  redis.call('ZREM', KEYS[4], id)
end
local out, dead = {}, {}
local remaining = tonumber(ARGV[3])
local maxd = tonumber(ARGV[5])
for lane = 1, 3 do
  if remaining <= 0 then break end
  -- An empty lane (acked entries are deleted, so XLEN counts ready and leased ones) has
  -- nothing to claim or read: one cheap call instead of two scans.
  if redis.call('XLEN', lanes[lane]) > 0 then
    local claimed = redis.call('XAUTOCLAIM', lanes[lane], ARGV[1], ARGV[2], ARGV[4], '0-0', 'COUNT', remaining)
    for _, e in ipairs(claimed[2]) do
      local sid, f = e[1], e[2]
      if f then
        local p = redis.call('XPENDING', lanes[lane], ARGV[1], sid, sid, 1)
        local deliveries = tonumber(p[1][4])
        local attempt = (tonumber(field(f, 'a') or '0') or 0) + deliveries
        if attempt > maxd then
          dead_letter(KEYS[6], f, sid, 'lease expired (after ' .. (attempt - 1) .. ' deliveries)', attempt - 1, now)
          redis.call('XACK', lanes[lane], ARGV[1], sid)
          redis.call('XDEL', lanes[lane], sid)
          dead[#dead + 1] = {field(f, 'i') or sid, attempt - 1}
        else
          out[#out + 1] = {lane, sid, deliveries, f}
          remaining = remaining - 1
        end
      end
    end
    if remaining > 0 then
      local fresh = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', remaining, 'STREAMS', lanes[lane], '>')
      if fresh then
        for _, e in ipairs(fresh[1][2]) do
          out[#out + 1] = {lane, e[1], 1, e[2]}
          remaining = remaining - 1
        end
      end
    end
  end
end
local last = {}
if #out == 0 then
  for lane = 1, 3 do
    last[lane] = '$'
    local info = redis.call('XINFO', 'STREAM', lanes[lane])
    for i = 1, #info, 2 do if info[i] == 'last-generated-id' then last[lane] = info[i + 1] end end
  end
end
return {out, last, dead}
`,
  6,
);

// KEYS: lane · ARGV: group sid consumer deliveries
const ACK = new LuaScript(
  `${PRELUDE}
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
`,
  1,
);

// KEYS: high normal low · ARGV: group consumer [lane sid deliveries]×n → {1|0 …}
// The acks of one event-loop turn in one script: each is checked and applied as ACK does.
const ACK_MANY = new LuaScript(
  `${PRELUDE}
local out = {}
for i = 3, #ARGV, 3 do
  local lane, sid = KEYS[tonumber(ARGV[i])], ARGV[i + 1]
  if owned(lane, ARGV[1], sid, ARGV[2], ARGV[i + 2]) then
    redis.call('XACK', lane, ARGV[1], sid)
    redis.call('XDEL', lane, sid)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`,
  3,
);

// KEYS: lane · ARGV: group sid consumer deliveries
const EXTEND = new LuaScript(
  `${PRELUDE}
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
return 1
`,
  1,
);

// KEYS: lane · ARGV: group sid consumer deliveries idleMs — hand a lease back: make it claimable now
const RELEASE = new LuaScript(
  `${PRELUDE}
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', ARGV[5], 'JUSTID')
return 1
`,
  1,
);

// KEYS: lane high normal low delayed data dlq · ARGV: group sid consumer deliveries delayMs maxDeliveries reason dead
const NACK = new LuaScript(
  `${PRELUDE}
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then return {0} end
local r = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
local f = r[1][2]
local attempt = (tonumber(field(f, 'a') or '0') or 0) + tonumber(ARGV[4])
local now = now_ms()
local result
if ARGV[8] == '1' then
  dead_letter(KEYS[7], f, ARGV[2], ARGV[7], attempt, now)
  result = 2
elseif attempt >= tonumber(ARGV[6]) then
  dead_letter(KEYS[7], f, ARGV[2], ARGV[7] .. ' (after ' .. attempt .. ' deliveries)', attempt, now)
  result = 2
else
  set_field(f, 'a', string.format('%d', attempt))
  local delay = tonumber(ARGV[5])
  delay_or_add({KEYS[2], KEYS[3], KEYS[4]}, KEYS[5], KEYS[6], f, ARGV[2], delay > 0 and (now + delay) or nil)
  result = 1
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return {result, attempt}
`,
  7,
);

// KEYS: dlq high normal low · ARGV: dlq entry id
const REPLAY = new LuaScript(
  `${PRELUDE}
local r = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #r == 0 then return 0 end
local f, out = r[1][2], {}
for i = 1, #f, 2 do
  local k = f[i]
  if k ~= 'x' and k ~= 'd' and k ~= 'a' then out[#out + 1] = k; out[#out + 1] = f[i + 1] end
end
out[#out + 1] = 'a'; out[#out + 1] = '0'
redis.call('XADD', KEYS[1 + lane_of(out)], '*', unpack(out))
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
`,
  4,
);

// KEYS: high normal low delayed dlq · ARGV: group
const STATS = new LuaScript(
  `
local ready, inflight = 0, 0
for lane = 1, 3 do
  local len = redis.call('XLEN', KEYS[lane])
  local pending = tonumber(redis.call('XPENDING', KEYS[lane], ARGV[1])[1])
  ready = ready + len - pending
  inflight = inflight + pending
end
return {ready, inflight, redis.call('ZCARD', KEYS[4]), redis.call('XLEN', KEYS[5])}
`,
  5,
);

// KEYS: high normal low · ARGV: group consumer — forget this consumer where it holds nothing.
const FORGET_CONSUMER = new LuaScript(
  `
for lane = 1, 3 do
  local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[lane], ARGV[1])
  if ok then
    for _, c in ipairs(consumers) do
      local name, pending
      for i = 1, #c, 2 do
        if c[i] == 'name' then name = c[i + 1] elseif c[i] == 'pending' then pending = c[i + 1] end
      end
      if name == ARGV[2] and pending == 0 then redis.call('XGROUP', 'DELCONSUMER', KEYS[lane], ARGV[1], name) end
    end
  end
end
return 1
`,
  3,
);

// ── backend ────────────────────────────────────────────────────────────────────

/** What the Redis backend offers beyond {@link QueueBackend}. */
export interface RedisQueueBackend extends QueueBackend {
  readonly kind: 'redis';
  /** This process's consumer name in every topic's group. */
  readonly consumerName: string;
  /** The Redis keys of one topic. */
  keysOf(topic: string): RedisTopicKeys;
}

export async function createRedisQueueBackend(
  options: RedisQueueBackendOptions = {},
): Promise<RedisQueueBackend> {
  const namespace = options.namespace ?? 'mocra';
  assertQueueName('namespace', namespace);
  const maxPayloadBytes = options.maxPayloadBytes ?? 16 * 1024 * 1024;
  if (!(maxPayloadBytes > 0))
    throw new InvalidArgumentError(`maxPayloadBytes must be > 0, got ${maxPayloadBytes}`);
  const codec = createQueueCodec(options.codec);
  const url = options.url ?? 'redis://127.0.0.1:6379';
  const client = await connectRedis({
    url,
    feature: FEATURE,
    ...(options.redisOptions ? { redisOptions: options.redisOptions } : {}),
  });
  const backend = new RedisStreamsBackend(client, namespace, codec, maxPayloadBytes, options);
  await backend.watchEpoch(url);
  return backend;
}

export class RedisStreamsBackend implements RedisQueueBackend {
  readonly kind = 'redis' as const;
  readonly namespace: string;
  /** This process's consumer name in every topic's group. */
  readonly consumerName: string;
  readonly #client: RedisClient;
  readonly #codec: QueueCodec;
  readonly #maxPayloadBytes: number;
  readonly #pollMs: number;
  readonly #keyPrefix: string;
  readonly #topics: TopicRegistry<RedisQueue<unknown>>;
  /** Connections for blocking XREAD waits: one per concurrent waiting consume. */
  readonly #idleBlockers: RedisClient[] = [];
  readonly #allBlockers = new Set<RedisClient>();
  readonly nextId = createIdGenerator();
  #lost: QueueDataLostError | undefined;

  constructor(
    client: RedisClient,
    namespace: string,
    codec: QueueCodec,
    maxPayloadBytes: number,
    options: RedisQueueBackendOptions,
  ) {
    this.#client = client;
    this.namespace = namespace;
    this.#codec = codec;
    this.#maxPayloadBytes = maxPayloadBytes;
    this.#pollMs = options.pollMs ?? 250;
    this.#keyPrefix = options.keyPrefix ?? 'mocra:q:';
    this.consumerName =
      options.consumerName ?? `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
    this.#topics = new TopicRegistry(
      options.topicDefaults,
      (name, resolved) => new RedisQueue(this, name, resolved),
    );
  }

  get closed(): boolean {
    return this.#topics.closed;
  }

  /**
   * Without its data (a restart without persistence, a flush) the workers would wait forever on
   * empty topics or end as if the crawl were done: once the namespace's epoch marker is gone
   * after a reconnect (see watchEpoch), the backend refuses all further work with
   * QueueDataLostError, and the engine stops on it.
   */
  watchEpoch(url: string): Promise<void> {
    return watchEpoch(this.#client, FEATURE, `${this.#keyPrefix}{${this.namespace}}:epoch`, () => {
      if (this.closed) return;
      this.#lost = new QueueDataLostError(FEATURE, redactUrl(url));
      publishConnection({ backend: FEATURE, server: redactUrl(url), state: 'emptied', error: this.#lost });
    });
  }

  /** Throws once the server came back without this crawl's data (see watchEpoch). */
  assertIntact(): void {
    if (this.#lost) throw this.#lost;
  }

  get client(): RedisClient {
    return this.#client;
  }
  get codec(): QueueCodec {
    return this.#codec;
  }
  get maxPayloadBytes(): number {
    return this.#maxPayloadBytes;
  }
  get pollMs(): number {
    return this.#pollMs;
  }

  /** The keys of one topic (exposed for tests and operators). */
  keysOf(topic: string): RedisTopicKeys {
    const base = `${this.#keyPrefix}{${this.namespace}:${topic}}`;
    return {
      high: `${base}:high`,
      normal: `${base}:normal`,
      low: `${base}:low`,
      delayed: `${base}:delayed`,
      delayedData: `${base}:delayed-data`,
      dlq: `${base}:dlq`,
    };
  }

  topic<T>(name: string, options?: TopicOptions): LeaseQueue<T> {
    return this.#topics.get(name, options) as LeaseQueue<T>;
  }

  async close(): Promise<void> {
    const topics = this.#topics.close();
    if (!topics) return;
    // Blocked XREADs end with their connections.
    for (const blocker of this.#allBlockers) blocker.disconnect();
    this.#allBlockers.clear();
    this.#idleBlockers.length = 0;
    // Unsettled leases go back at once (another process claims them on its next consume)
    // instead of waiting out their lease; then this consumer leaves the groups if it holds nothing.
    await Promise.all(topics.map((t) => t.close().catch(() => {})));
    await Promise.all(topics.map((t) => t.forgetConsumer().catch(() => {})));
    await this.#client.quit().catch(() => this.#client.disconnect());
  }

  async borrowBlocker(): Promise<RedisClient> {
    const idle = this.#idleBlockers.pop();
    if (idle) return idle;
    const blocker = this.#client.duplicate();
    blocker.on('error', () => {});
    this.#allBlockers.add(blocker);
    return blocker;
  }

  returnBlocker(blocker: RedisClient): void {
    if (this.closed || !this.#allBlockers.has(blocker)) {
      blocker.disconnect();
      return;
    }
    this.#idleBlockers.push(blocker);
  }
}

export interface RedisTopicKeys {
  high: string;
  normal: string;
  low: string;
  delayed: string;
  delayedData: string;
  dlq: string;
}

interface PendingAck {
  lane: number;
  streamId: string;
  deliveries: number;
  resolve(ok: boolean): void;
  reject(err: unknown): void;
}

interface TakenEntry {
  lane: number;
  streamId: string;
  deliveries: number;
  fields: Map<string, Buffer>;
}

class RedisQueue<T> implements LeaseQueue<T> {
  readonly name: string;
  readonly options: Readonly<Required<TopicOptions>>;
  readonly deadLetters: DeadLetterQueue<T>;
  readonly keys: RedisTopicKeys;
  readonly #backend: RedisStreamsBackend;
  readonly #lanes: readonly string[];
  #ready: Promise<void> | undefined;
  readonly #waits = new Set<() => void>();
  readonly #deliveries = new Set<RedisDelivery<T>>();
  /** Acks waiting for the end of this event-loop turn (sent together by #flushAcks). */
  #acks: PendingAck[] = [];

  constructor(backend: RedisStreamsBackend, name: string, options: Required<TopicOptions>) {
    this.#backend = backend;
    this.name = name;
    this.options = Object.freeze(options);
    this.keys = backend.keysOf(name);
    this.#lanes = [this.keys.high, this.keys.normal, this.keys.low];
    this.deadLetters = new RedisDeadLetters<T>(this, backend);
  }

  get backend(): RedisStreamsBackend {
    return this.#backend;
  }

  /** Create the consumer group on each lane once (MKSTREAM; an existing group is fine). */
  ensureReady(): Promise<void> {
    if (!this.#ready) {
      const client = this.#backend.client;
      this.#ready = Promise.all(
        this.#lanes.map((lane) =>
          client.xgroup('CREATE', lane, GROUP, '0', 'MKSTREAM').catch((err: unknown) => {
            if (!(err instanceof Error && err.message.includes('BUSYGROUP'))) throw err;
          }),
        ),
      ).then(
        () => {},
        (err: unknown) => {
          this.#ready = undefined;
          throw redisFailure(FEATURE, `creating the consumer group of '${this.name}'`, err);
        },
      );
    }
    return this.#ready;
  }

  #checkOpen(): void {
    if (this.#backend.closed) throw new QueueClosedError(this.name);
    this.#backend.assertIntact();
  }

  async publish(messages: readonly PublishMessage<T>[]): Promise<void> {
    this.#checkOpen();
    if (messages.length === 0) return;
    const backend = this.#backend;
    // Encode and size-check the whole batch first: a refused batch writes nothing.
    const encoded = await Promise.all(
      messages.map(async (m) => {
        const priority = checkPublish(this.name, m.priority, m.delayMs);
        const payload = await backend.codec.encode(m.payload, this.name);
        if (payload.length > backend.maxPayloadBytes) {
          throw new PayloadTooLargeError(this.name, payload.length, backend.maxPayloadBytes);
        }
        const headers = m.headers && Object.keys(m.headers).length > 0 ? JSON.stringify(m.headers) : '';
        return [
          backend.nextId(),
          String(priority),
          m.key === undefined ? '0' : '1',
          m.key ?? '',
          headers,
          payload,
          String(Math.max(0, Math.ceil(m.delayMs ?? 0))),
        ] as const;
      }),
    );
    await this.ensureReady();
    const keys = [this.keys.high, this.keys.normal, this.keys.low, this.keys.delayed, this.keys.delayedData];
    for (let start = 0; start < encoded.length; start += PUBLISH_CHUNK) {
      const chunk = encoded.slice(start, start + PUBLISH_CHUNK);
      const args: (string | Buffer | number)[] = [this.options.capacity, chunk.length];
      for (const m of chunk) args.push(...m);
      // Backpressure: the script refuses (returns the current size) while the batch does not fit.
      let waited = false;
      for (;;) {
        this.#checkOpen();
        let result: unknown;
        try {
          result = await PUBLISH.run(backend.client, keys, args);
        } catch (err) {
          throw redisFailure(FEATURE, `publish to '${this.name}'`, err);
        }
        if (num(result) < 0) break;
        if (!waited) publishBackpressure({ backend: 'redis', topic: this.name, queue: this });
        waited = true;
        await this.#pause(backend.pollMs);
      }
    }
  }

  async consume(options: ConsumeOptions): Promise<Delivery<T>[]> {
    if (this.#backend.closed) return [];
    const max = checkConsume(this.name, options.max);
    const leaseMs = options.leaseMs ?? this.options.leaseMs;
    const waitMs = options.waitMs ?? 1000;
    const signal = options.signal;
    const deadline = Date.now() + waitMs;
    this.#backend.assertIntact();
    await this.ensureReady();
    for (;;) {
      if (this.#backend.closed) return [];
      this.#backend.assertIntact();
      const { deliveries, lastIds } = await this.#take(max, leaseMs);
      if (deliveries.length > 0) return deliveries;
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted || this.#backend.closed) return [];
      await this.#waitForNews(lastIds, Math.min(left, this.#backend.pollMs), signal);
    }
  }

  async #take(max: number, leaseMs: number): Promise<{ deliveries: Delivery<T>[]; lastIds: string[] }> {
    const backend = this.#backend;
    let reply: unknown;
    try {
      reply = await TAKE.run(
        backend.client,
        [
          this.keys.high,
          this.keys.normal,
          this.keys.low,
          this.keys.delayed,
          this.keys.delayedData,
          this.keys.dlq,
        ],
        [GROUP, backend.consumerName, max, Math.ceil(this.options.leaseMs), this.options.maxDeliveries],
      );
    } catch (err) {
      if (backend.closed) return { deliveries: [], lastIds: [] };
      throw redisFailure(FEATURE, `consume from '${this.name}'`, err);
    }
    const [rawEntries, rawLast, rawDead] = reply as [unknown[], unknown[], unknown[]];
    for (const d of rawDead as [Buffer, number][]) {
      publishDeadLetter({
        backend: 'redis',
        topic: this.name,
        messageId: str(d[0]),
        reason: 'lease expired',
        attempts: num(d[1]),
      });
    }
    const takenAt = Date.now();
    const out: Delivery<T>[] = [];
    for (const raw of rawEntries as [number, Buffer, number, Buffer[]][]) {
      const entry: TakenEntry = {
        lane: num(raw[0]),
        streamId: str(raw[1]),
        deliveries: num(raw[2]),
        fields: toFieldMap(raw[3]),
      };
      const delivery = await this.#toDelivery(entry, takenAt, leaseMs);
      if (delivery) out.push(delivery);
    }
    return { deliveries: out, lastIds: (rawLast as unknown[]).map(str) };
  }

  async #toDelivery(entry: TakenEntry, takenAt: number, leaseMs: number): Promise<Delivery<T> | undefined> {
    const f = entry.fields;
    const messageId = f.has('i') ? str(f.get('i')) : entry.streamId;
    let payload: T;
    let headers: Record<string, string>;
    try {
      const bytes = f.get('p');
      if (!bytes) throw new QueueDecodeError(this.name, 'the entry has no payload field');
      headers = parseHeaders(f.get('h'), this.name);
      payload = (await this.#backend.codec.decode(bytes, this.name)) as T;
    } catch (err) {
      // Poison: straight to the DLQ, never to a worker, never back into the stream.
      publishPoison({ backend: 'redis', topic: this.name, messageId, error: err });
      await this.runNack(entry.lane, entry.streamId, entry.deliveries, 0, `poison: ${describe(err)}`, true);
      return undefined;
    }
    const base = Number(str(f.get('a')) || '0') || 0;
    const delivery = new RedisDelivery<T>(this, {
      id: messageId,
      streamId: entry.streamId,
      lane: entry.lane,
      deliveries: entry.deliveries,
      payload,
      key: f.has('k') ? str(f.get('k')) : undefined,
      priority: Number(str(f.get('r')) || '0') || 0,
      attempt: base + entry.deliveries,
      publishedAt: Number(str(f.get('t'))) || 0,
      headers,
      takenAt,
      leaseMs,
    });
    this.#deliveries.add(delivery);
    return delivery;
  }

  /** Block (on a pooled connection) until a lane gets a new entry, `ms` pass, or abort/close. */
  async #waitForNews(lastIds: string[], ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (lastIds.length !== 3) {
      await this.#pause(ms, signal);
      return;
    }
    const blocker = await this.#backend.borrowBlocker();
    let wake: () => void = () => {};
    const interrupted = new Promise<void>((resolve) => {
      wake = resolve;
    });
    this.#waits.add(wake);
    signal?.addEventListener('abort', wake, { once: true });
    const read = blocker
      .xread('COUNT', 1, 'BLOCK', Math.max(1, Math.floor(ms)), 'STREAMS', ...this.#lanes, ...lastIds)
      .then(
        () => this.#backend.returnBlocker(blocker),
        () => blocker.disconnect(),
      );
    await Promise.race([read, interrupted]);
    this.#waits.delete(wake);
    signal?.removeEventListener('abort', wake);
  }

  #pause(ms: number, signal?: AbortSignal): Promise<void> {
    let wake: () => void = () => {};
    const interrupted = new Promise<void>((resolve) => {
      wake = resolve;
    });
    this.#waits.add(wake);
    return Promise.race([sleep(ms, signal), interrupted]).finally(() => this.#waits.delete(wake));
  }

  async stats(): Promise<QueueStats> {
    this.#checkOpen();
    await this.ensureReady();
    try {
      const r = (await STATS.run(
        this.#backend.client,
        [this.keys.high, this.keys.normal, this.keys.low, this.keys.delayed, this.keys.dlq],
        [GROUP],
      )) as unknown[];
      return { ready: num(r[0]), inflight: num(r[1]), delayed: num(r[2]), deadLettered: num(r[3]) };
    } catch (err) {
      throw redisFailure(FEATURE, `stats of '${this.name}'`, err);
    }
  }

  async close(): Promise<void> {
    for (const wake of this.#waits) wake();
    this.#waits.clear();
    const held = [...this.#deliveries];
    this.#deliveries.clear();
    for (const d of held) d.stopKeeper();
    await Promise.all(
      held.map((d) =>
        RELEASE.run(
          this.#backend.client,
          [this.laneKey(d.lane)],
          [GROUP, d.streamId, this.#backend.consumerName, d.deliveries, Math.ceil(this.options.leaseMs) + 1],
        ).catch(() => {}),
      ),
    );
  }

  /**
   * Ack once this event-loop turn ends, together with every other ack of the turn: one script
   * (and one reply to parse) for all of them instead of one each. Resolves with whether the
   * lease was still ours.
   */
  ackSoon(lane: number, streamId: string, deliveries: number): Promise<boolean> {
    this.#checkOpen();
    return new Promise<boolean>((resolve, reject) => {
      if (this.#acks.push({ lane, streamId, deliveries, resolve, reject }) === 1) {
        setImmediate(() => void this.#flushAcks());
      }
    });
  }

  async #flushAcks(): Promise<void> {
    const batch = this.#acks;
    this.#acks = [];
    if (batch.length === 0) return;
    try {
      this.#checkOpen();
      if (batch.length === 1) {
        const a = batch[0]!;
        a.resolve(await this.runOwned('ack', a.lane, a.streamId, a.deliveries));
        return;
      }
      const args: (string | number)[] = [GROUP, this.#backend.consumerName];
      for (const a of batch) args.push(a.lane, a.streamId, a.deliveries);
      let reply: unknown;
      try {
        reply = await ACK_MANY.run(this.#backend.client, this.#lanes, args);
      } catch (err) {
        this.#checkOpen();
        throw redisFailure(FEATURE, `ack on '${this.name}'`, err);
      }
      const results = reply as unknown[];
      for (let i = 0; i < batch.length; i++) batch[i]!.resolve(num(results[i]) === 1);
    } catch (err) {
      for (const a of batch) a.reject(err);
    }
  }

  forget(delivery: RedisDelivery<T>): void {
    this.#deliveries.delete(delivery);
  }

  forgetConsumer(): Promise<unknown> {
    return FORGET_CONSUMER.run(this.#backend.client, this.#lanes, [GROUP, this.#backend.consumerName]);
  }

  // ── settle scripts (called by RedisDelivery) ─────────────────────────────────

  laneKey(lane: number): string {
    return this.#lanes[lane - 1]!;
  }

  async runOwned(
    script: 'ack' | 'extend',
    lane: number,
    streamId: string,
    deliveries: number,
  ): Promise<boolean> {
    this.#checkOpen();
    try {
      const r = await (script === 'ack' ? ACK : EXTEND).run(
        this.#backend.client,
        [this.laneKey(lane)],
        [GROUP, streamId, this.#backend.consumerName, deliveries],
      );
      return num(r) === 1;
    } catch (err) {
      this.#checkOpen();
      throw redisFailure(FEATURE, `${script} on '${this.name}'`, err);
    }
  }

  /** Returns 0 (not ours any more), 1 (back in the topic) or 2 (dead-lettered), and the attempt. */
  async runNack(
    lane: number,
    streamId: string,
    deliveries: number,
    delayMs: number,
    reason: string,
    dead: boolean,
  ): Promise<[number, number]> {
    this.#checkOpen();
    try {
      const r = (await NACK.run(
        this.#backend.client,
        [
          this.laneKey(lane),
          this.keys.high,
          this.keys.normal,
          this.keys.low,
          this.keys.delayed,
          this.keys.delayedData,
          this.keys.dlq,
        ],
        [
          GROUP,
          streamId,
          this.#backend.consumerName,
          deliveries,
          Math.max(0, Math.ceil(delayMs)),
          this.options.maxDeliveries,
          reason,
          dead ? '1' : '0',
        ],
      )) as unknown[];
      return [num(r[0]), num(r[1] ?? 0)];
    } catch (err) {
      this.#checkOpen();
      throw redisFailure(FEATURE, `nack on '${this.name}'`, err);
    }
  }

  async replayEntry(dlqId: string): Promise<boolean> {
    const r = await REPLAY.run(
      this.#backend.client,
      [this.keys.dlq, this.keys.high, this.keys.normal, this.keys.low],
      [dlqId],
    );
    return num(r) === 1;
  }
}

interface DeliveryInit<T> {
  id: string;
  streamId: string;
  lane: number;
  deliveries: number;
  payload: T;
  key: string | undefined;
  priority: number;
  attempt: number;
  publishedAt: number;
  headers: Record<string, string>;
  takenAt: number;
  leaseMs: number;
}

class RedisDelivery<T> implements Delivery<T> {
  readonly id: string;
  readonly topic: string;
  readonly payload: T;
  readonly key: string | undefined;
  readonly priority: number;
  readonly attempt: number;
  readonly publishedAt: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly #queue: RedisQueue<T>;
  readonly #streamId: string;
  readonly #lane: number;
  readonly #deliveries: number;
  readonly #keeper: LeaseKeeper;
  #leaseDeadline: number;

  constructor(queue: RedisQueue<T>, init: DeliveryInit<T>) {
    this.#queue = queue;
    this.id = init.id;
    this.topic = queue.name;
    this.payload = init.payload;
    this.key = init.key;
    this.priority = init.priority;
    this.attempt = init.attempt;
    this.publishedAt = init.publishedAt;
    this.headers = init.headers;
    this.#streamId = init.streamId;
    this.#lane = init.lane;
    this.#deliveries = init.deliveries;
    this.#leaseDeadline = init.takenAt + init.leaseMs;
    this.#keeper = new LeaseKeeper(
      queue.options.leaseMs,
      async () => {
        if (!(await queue.runOwned('extend', this.#lane, this.#streamId, this.#deliveries))) {
          throw new LeaseExpiredError(queue.name, this.id);
        }
      },
      () => {},
    );
    this.#keeper.arm(init.takenAt, this.#leaseDeadline);
  }

  get leaseDeadline(): number {
    return this.#leaseDeadline;
  }

  /** Where the lease lives: lane number, stream entry id and PEL delivery count. */
  get lane(): number {
    return this.#lane;
  }
  get streamId(): string {
    return this.#streamId;
  }
  get deliveries(): number {
    return this.#deliveries;
  }

  stopKeeper(): void {
    this.#keeper.stop();
  }

  #settled(): void {
    this.#keeper.stop();
    this.#queue.forget(this);
  }

  async ack(): Promise<void> {
    const ok = await this.#queue.ackSoon(this.#lane, this.#streamId, this.#deliveries);
    this.#settled();
    if (!ok) throw new LeaseExpiredError(this.topic, this.id);
  }

  async nack(options: { delayMs?: number; reason?: string } = {}): Promise<void> {
    await this.#nack(options.delayMs ?? 0, options.reason ?? 'nack', false);
  }

  async deadLetter(reason: string): Promise<void> {
    await this.#nack(0, reason, true);
  }

  async #nack(delayMs: number, reason: string, dead: boolean): Promise<void> {
    const [result, attempts] = await this.#queue.runNack(
      this.#lane,
      this.#streamId,
      this.#deliveries,
      delayMs,
      reason,
      dead,
    );
    this.#settled();
    if (result === 0) throw new LeaseExpiredError(this.topic, this.id);
    if (result === 2)
      publishDeadLetter({ backend: 'redis', topic: this.topic, messageId: this.id, reason, attempts });
  }

  async extendLease(ms?: number): Promise<void> {
    const length = ms ?? this.#queue.options.leaseMs;
    const at = Date.now();
    if (!(await this.#queue.runOwned('extend', this.#lane, this.#streamId, this.#deliveries))) {
      this.#settled();
      throw new LeaseExpiredError(this.topic, this.id);
    }
    this.#leaseDeadline = at + length;
    this.#keeper.arm(at, this.#leaseDeadline);
  }
}

class RedisDeadLetters<T> implements DeadLetterQueue<T> {
  readonly #queue: RedisQueue<T>;
  readonly #backend: RedisStreamsBackend;

  constructor(queue: RedisQueue<T>, backend: RedisStreamsBackend) {
    this.#queue = queue;
    this.#backend = backend;
  }

  /** Every entry, oldest first, read in pages of 200. */
  async *#entries(): AsyncGenerator<DeadLetter<T>> {
    const client = this.#backend.client;
    let start = '-';
    for (;;) {
      let page: [Buffer, Buffer[]][];
      try {
        page = (await client.xrangeBuffer(this.#queue.keys.dlq, start, '+', 'COUNT', 200)) as [
          Buffer,
          Buffer[],
        ][];
      } catch (err) {
        throw redisFailure(FEATURE, `reading the DLQ of '${this.#queue.name}'`, err);
      }
      for (const [id, fields] of page) yield await this.#toLetter(str(id), toFieldMap(fields));
      if (page.length < 200) return;
      start = `(${str(page[page.length - 1]![0])}`;
    }
  }

  async #toLetter(id: string, f: Map<string, Buffer>): Promise<DeadLetter<T>> {
    const { payload, raw } = await letterPayload<T>(this.#backend.codec, f.get('p'), this.#queue.name);
    let headers: Record<string, string> = {};
    try {
      headers = parseHeaders(f.get('h'), this.#queue.name);
    } catch {
      // A DLQ entry with broken headers is still listed; its headers are just unknown.
    }
    return {
      id,
      topic: this.#queue.name,
      messageId: str(f.get('i')) || id,
      payload,
      ...(raw === undefined ? {} : { raw }),
      key: f.has('k') ? str(f.get('k')) : undefined,
      priority: Number(str(f.get('r')) || '0') || 0,
      headers,
      reason: str(f.get('x')),
      attempts: Number(str(f.get('a'))) || 0,
      publishedAt: Number(str(f.get('t'))) || 0,
      deadLetteredAt: Number(str(f.get('d'))) || 0,
    };
  }

  async #matching(filter: DeadLetterFilter | undefined): Promise<DeadLetter<T>[]> {
    const out: DeadLetter<T>[] = [];
    for await (const letter of this.#entries()) if (matchesDeadLetterFilter(letter, filter)) out.push(letter);
    return out;
  }

  async list(
    options: { limit?: number; offset?: number; filter?: DeadLetterFilter } = {},
  ): Promise<DeadLetter<T>[]> {
    return pageOfLetters(this.#entries(), options);
  }

  async get(id: string): Promise<DeadLetter<T> | undefined> {
    if (!/^\d+-\d+$/.test(id)) return undefined;
    const page = (await this.#backend.client.xrangeBuffer(this.#queue.keys.dlq, id, id)) as [
      Buffer,
      Buffer[],
    ][];
    const first = page[0];
    return first ? this.#toLetter(str(first[0]), toFieldMap(first[1])) : undefined;
  }

  async replay(filter?: DeadLetterFilter): Promise<number> {
    await this.#queue.ensureReady();
    let n = 0;
    for (const letter of await this.#matching(filter)) if (await this.#queue.replayEntry(letter.id)) n++;
    return n;
  }

  async purge(filter?: DeadLetterFilter): Promise<number> {
    const ids = (await this.#matching(filter)).map((l) => l.id);
    let n = 0;
    for (let i = 0; i < ids.length; i += 500) {
      n += await this.#backend.client.xdel(this.#queue.keys.dlq, ...ids.slice(i, i + 500));
    }
    return n;
  }

  async size(): Promise<number> {
    return this.#backend.client.xlen(this.#queue.keys.dlq);
  }
}

function toFieldMap(flat: readonly Buffer[]): Map<string, Buffer> {
  const map = new Map<string, Buffer>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(str(flat[i]), flat[i + 1]!);
  return map;
}

function parseHeaders(raw: Buffer | undefined, topic: string): Record<string, string> {
  if (!raw || raw.length === 0) return {};
  return parseHeaderObject(raw.toString('utf8'), topic, 'headers');
}
