/**
 * The cluster-wide {@link HostBudget}: the slots and start times of every host kept in Redis, so
 * N workers together never run more than `maxConcurrency` requests at once against a host, never
 * start two closer than its gap, and all respect a host's 429/503 backoff once any of them saw
 * it. It replaces the in-process `LocalHostBudget` under the per-process `HostScheduler`
 * (frontier/politeness), which keeps deciding the rules (delay, jitter, Crawl-delay,
 * autothrottle, backoff lengths); this only enforces them, cluster-wide.
 *
 * ```
 *  {prefix}{ns:host}:leases    zset   lease id → expiry (server ms)       concurrency
 *  {prefix}{ns:host}:next      string earliest next start (server ms)     gap between starts
 *  {prefix}{ns:host}:blocked   string blocked until (server ms)           429/503 backoff
 * ```
 *
 * - A slot is a lease with an expiry. A worker that dies holding slots does not leak them: they
 *   lapse after `leaseTtlMs`. A live worker renews the leases it holds every third of the TTL,
 *   so a long download keeps its slot.
 * - Every decision is one Lua script on the server's clock (`TIME`), so the check-and-take is
 *   atomic and workers' clocks do not matter; times given to and returned from the interface
 *   are this process's epoch ms, converted by offset.
 * - The scheduler waits for a release when every slot is taken; a slot freed by another worker
 *   is noticed by polling (`retryAt` = now + `pollMs`), a local release at once.
 */
import { randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '../errors.js';
import type {
  AcquirePolicy,
  AcquireResult,
  HostBudget,
  HostBudgetState,
} from '../frontier/politeness/host-budget.js';
import { connectRedis, LuaScript, num, type RedisClient, redisFailure } from '../queue/redis-connection.js';
import { assertQueueName } from '../queue/topic-options.js';

export interface RedisHostBudgetOptions {
  /** Used when no `client` is given. @default 'redis://127.0.0.1:6379' */
  url?: string;
  /** A connection to share (not closed by `close()`). */
  client?: RedisClient;
  /** Keeps crawls sharing one Redis apart. @default 'mocra' */
  namespace?: string;
  /** Prefix of every key. @default 'mocra:budget:' */
  keyPrefix?: string;
  /** A slot not renewed for this long returns to the pool (a dead worker's slots). @default 60000 */
  leaseTtlMs?: number;
  /** While every slot of a host is taken, the scheduler asks again this often. @default 50 */
  pollMs?: number;
  /** Failures of the background lease renewal and of releases. */
  onError?: (error: unknown) => void;
  /** Extra ioredis options, passed through. */
  redisOptions?: Record<string, unknown>;
}

const FEATURE = 'the Redis host budget';

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

// KEYS: leases next blocked · ARGV: leaseId ttlMs maxConcurrency gapMs → {granted, waitMs, serverNow}
// waitMs: -1 = wait for a free slot
const ACQUIRE = new LuaScript(
  `${NOW}
local ttl, maxc, gap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local blocked = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
if now < blocked then return {0, blocked - now, now} end
local nxt = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if now < nxt then return {0, nxt - now, now} end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= maxc then return {0, -1, now} end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 2)
if gap > 0 then redis.call('SET', KEYS[2], string.format('%d', now + gap), 'PX', string.format('%d', gap + 1000)) end
return {1, 0, now}
`,
  3,
);

// KEYS: leases · ARGV: ttlMs id… — renew the leases still held (XX: a lapsed one stays gone)
const RENEW = new LuaScript(
  `${NOW}
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return 1
`,
  1,
);

// KEYS: blocked · ARGV: forMs — never shortens a block
const BLOCK = new LuaScript(
  `${NOW}
local untilMs = now + tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if untilMs > cur then redis.call('SET', KEYS[1], string.format('%d', untilMs), 'PX', ARGV[1]) end
return 1
`,
  1,
);

// KEYS: leases next blocked → {active, next, blocked, now}
const STATE = new LuaScript(
  `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return {redis.call('ZCARD', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0') or 0,
  tonumber(redis.call('GET', KEYS[3]) or '0') or 0, now}
`,
  3,
);

export async function createRedisHostBudget(options: RedisHostBudgetOptions = {}): Promise<RedisHostBudget> {
  const namespace = options.namespace ?? 'mocra';
  assertQueueName('namespace', namespace);
  const leaseTtlMs = options.leaseTtlMs ?? 60_000;
  if (!(Number.isInteger(leaseTtlMs) && leaseTtlMs >= 100)) {
    throw new InvalidArgumentError(`leaseTtlMs must be an integer ≥ 100, got ${leaseTtlMs}`);
  }
  const pollMs = options.pollMs ?? 50;
  if (!(pollMs > 0)) throw new InvalidArgumentError(`pollMs must be > 0, got ${pollMs}`);
  const owns = options.client === undefined;
  const client =
    options.client ??
    (await connectRedis({
      url: options.url ?? 'redis://127.0.0.1:6379',
      feature: FEATURE,
      ...(options.redisOptions ? { redisOptions: options.redisOptions } : {}),
    }));
  return new RedisHostBudget(client, owns, {
    prefix: options.keyPrefix ?? 'mocra:budget:',
    namespace,
    leaseTtlMs,
    pollMs,
    onError: options.onError ?? (() => {}),
  });
}

export class RedisHostBudget implements HostBudget {
  readonly leaseTtlMs: number;
  readonly pollMs: number;
  readonly #client: RedisClient;
  readonly #owns: boolean;
  readonly #prefix: string;
  readonly #namespace: string;
  readonly #onError: (error: unknown) => void;
  /** Unique per process, so lease ids of two workers never collide. */
  readonly #instance = randomBytes(6).toString('hex');
  #seq = 0;
  /** Lease ids this process holds, per host (slots of one host are interchangeable). */
  readonly #held = new Map<string, string[]>();
  readonly #renewTimer: NodeJS.Timeout;
  #closed = false;

  constructor(
    client: RedisClient,
    owns: boolean,
    o: {
      prefix: string;
      namespace: string;
      leaseTtlMs: number;
      pollMs: number;
      onError: (e: unknown) => void;
    },
  ) {
    this.#client = client;
    this.#owns = owns;
    this.#prefix = o.prefix;
    this.#namespace = o.namespace;
    this.leaseTtlMs = o.leaseTtlMs;
    this.pollMs = o.pollMs;
    this.#onError = o.onError;
    this.#renewTimer = setInterval(() => this.#renew(), Math.max(30, Math.floor(o.leaseTtlMs / 3)));
    this.#renewTimer.unref();
  }

  /** Slots this process holds now. */
  get held(): number {
    let n = 0;
    for (const ids of this.#held.values()) n += ids.length;
    return n;
  }

  /** The keys of one host (for operators and cleanup). */
  keysOf(host: string): { leases: string; next: string; blocked: string } {
    const base = `${this.#prefix}{${this.#namespace}:${host}}`;
    return { leases: `${base}:leases`, next: `${base}:next`, blocked: `${base}:blocked` };
  }

  async tryAcquire(host: string, policy: AcquirePolicy, now: number): Promise<AcquireResult> {
    if (!(Number.isInteger(policy.maxConcurrency) && policy.maxConcurrency >= 1)) {
      throw new InvalidArgumentError(`maxConcurrency must be an integer ≥ 1, got ${policy.maxConcurrency}`);
    }
    const id = `${this.#instance}:${++this.#seq}`;
    const keys = this.keysOf(host);
    let reply: unknown;
    try {
      reply = await ACQUIRE.run(
        this.#client,
        [keys.leases, keys.next, keys.blocked],
        [id, this.leaseTtlMs, policy.maxConcurrency, Math.max(0, Math.ceil(policy.gapMs))],
      );
    } catch (err) {
      throw redisFailure(FEATURE, `acquiring a slot of '${host}'`, err);
    }
    const [granted, waitMs] = (reply as unknown[]).map(num) as [number, number];
    if (granted === 1) {
      const ids = this.#held.get(host);
      if (ids) ids.push(id);
      else this.#held.set(host, [id]);
      return { ok: true };
    }
    return { ok: false, retryAt: now + (waitMs < 0 ? this.pollMs : Math.max(1, waitMs)) };
  }

  async release(host: string): Promise<void> {
    const ids = this.#held.get(host);
    const id = ids?.pop();
    if (ids?.length === 0) this.#held.delete(host);
    if (id === undefined) return;
    try {
      await this.#client.zrem(this.keysOf(host).leases, id);
    } catch (err) {
      // Not fatal: the slot lapses after leaseTtlMs.
      this.#onError(redisFailure(FEATURE, `releasing a slot of '${host}'`, err));
    }
  }

  async blockUntil(host: string, until: number): Promise<void> {
    const forMs = Math.ceil(until - Date.now());
    if (forMs <= 0) return;
    try {
      await BLOCK.run(this.#client, [this.keysOf(host).blocked], [forMs]);
    } catch (err) {
      this.#onError(redisFailure(FEATURE, `blocking '${host}'`, err));
    }
  }

  async state(host: string): Promise<HostBudgetState | undefined> {
    const keys = this.keysOf(host);
    const r = ((await STATE.run(this.#client, [keys.leases, keys.next, keys.blocked], [])) as unknown[]).map(
      num,
    );
    const [active = 0, next = 0, blocked = 0, serverNow = 0] = r;
    const offset = Date.now() - serverNow;
    return {
      host,
      active,
      nextStart: next === 0 ? 0 : next + offset,
      blockedUntil: blocked === 0 ? 0 : blocked + offset,
    };
  }

  /** Stop renewing and close the connection (held slots lapse after the TTL). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#renewTimer);
    if (this.#owns) await this.#client.quit().catch(() => this.#client.disconnect());
  }

  #renew(): void {
    if (this.#held.size === 0 || this.#closed) return;
    for (const [host, ids] of this.#held) {
      if (ids.length === 0) continue;
      RENEW.run(this.#client, [this.keysOf(host).leases], [this.leaseTtlMs, ...ids]).catch((err: unknown) =>
        this.#onError(redisFailure(FEATURE, `renewing slots of '${host}'`, err)),
      );
    }
  }
}
