/**
 * Coordination on Redis. Every comparison against time happens inside Redis (PX expiry, the
 * server's `TIME` in scripts), so members' clocks may disagree without breaking leases.
 *
 * ```
 *  {prefix}{ns}:kv:{key}                 string, SET … PX for a TTL; CAS is a Lua script
 *  {prefix}{ns}:{lock:{name}}            hash owner/token, PX = the lease
 *  {prefix}{ns}:{lock:{name}}:fence      counter; INCR in the same script that takes the lock,
 *                                        so tokens strictly increase across holders and lapses
 *  {prefix}{ns}:{members}                zset member id → expiry (server ms)
 *  {prefix}{ns}:{members}:{id}           hash data (addr, meta) / seen, PX = member TTL
 *  {prefix}{ns}:epoch                    string, written once: missing after a reconnect means
 *                                        the server came back empty (CoordinationDataLostError)
 * ```
 */
import { hostname } from 'node:os';
import { CoordinationClosedError, CoordinationDataLostError, InvalidArgumentError } from '../errors.js';
import { publishConnection } from '../queue/channels.js';
import {
  connectRedis,
  LuaScript,
  num,
  type RedisClient,
  redactUrl,
  redisFailure,
  str,
  watchEpoch,
} from '../queue/redis-connection.js';
import type { Coordination, LockLease, Member } from './types.js';

export interface RedisCoordinationOptions {
  /** @default 'redis://127.0.0.1:6379' */
  url?: string;
  /** Keeps clusters sharing one Redis apart. @default 'mocra' */
  namespace?: string;
  /** Prefix of every key. @default 'mocra:coord:' */
  keyPrefix?: string;
  /** This member's id. @default `${hostname}-${pid}-${random}` */
  nodeId?: string;
  /** A member silent for this long is no longer live. @default 10000 */
  memberTtlMs?: number;
  /** How often a joined member sends its heartbeat. @default memberTtlMs / 3 */
  heartbeatMs?: number;
  /** Extra ioredis options, passed through. */
  redisOptions?: Record<string, unknown>;
}

const FEATURE = 'the Redis coordination backend';

const NOW = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

// KEYS: key · ARGV: hasExpected expected hasNext next ttlMs
const CAS = new LuaScript(
  `
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if cur ~= ARGV[2] then return 0 end
elseif cur then
  return 0
end
if ARGV[3] == '1' then
  if tonumber(ARGV[5]) > 0 then redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
  else redis.call('SET', KEYS[1], ARGV[4]) end
else
  redis.call('DEL', KEYS[1])
end
return 1
`,
  1,
);

// KEYS: lock fence · ARGV: owner ttlMs → {token, expiresAt} or nil
const ACQUIRE = new LuaScript(
  `${NOW}
local holder = redis.call('HGET', KEYS[1], 'owner')
if holder and holder ~= ARGV[1] then return false end
local token = redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {token, now_ms() + tonumber(ARGV[2])}
`,
  2,
);

// KEYS: lock · ARGV: owner token ttlMs → expiresAt or nil
const RENEW = new LuaScript(
  `${NOW}
local v = redis.call('HMGET', KEYS[1], 'owner', 'token')
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return now_ms() + tonumber(ARGV[3])
`,
  1,
);

// KEYS: lock · ARGV: owner token → 1 released / 0 not ours
const RELEASE = new LuaScript(
  `
local v = redis.call('HMGET', KEYS[1], 'owner', 'token')
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`,
  1,
);

// KEYS: members member · ARGV: id ttlMs data
const HEARTBEAT = new LuaScript(
  `${NOW}
local now = now_ms()
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[2], 'data', ARGV[3], 'seen', now)
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return now
`,
  2,
);

// KEYS: members · ARGV: member key prefix → {{id, data, seen}, …} of live members
const MEMBERS = new LuaScript(
  `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local h = redis.call('HMGET', ARGV[1] .. id, 'data', 'seen')
  out[#out + 1] = {id, h[1] or '{}', h[2] or '0'}
end
return out
`,
  1,
);

/** The Redis coordination backend. */
export interface RedisCoordination extends Coordination {
  readonly kind: 'redis';
  /**
   * Stop heartbeats and close the connection. `leave: false` keeps the membership record until
   * it expires, which is what a crashed process looks like to the others.
   */
  close(options?: { leave?: boolean }): Promise<void>;
}

export async function createRedisCoordination(
  options: RedisCoordinationOptions = {},
): Promise<RedisCoordination> {
  const url = options.url ?? 'redis://127.0.0.1:6379';
  const client = await connectRedis({
    url,
    feature: FEATURE,
    ...(options.redisOptions ? { redisOptions: options.redisOptions } : {}),
  });
  const coordination = new RedisCoordinationClient(client, options);
  await coordination.watchEpoch(url);
  return coordination;
}

export class RedisCoordinationClient implements RedisCoordination {
  readonly kind = 'redis' as const;
  readonly nodeId: string;
  readonly #client: RedisClient;
  readonly #base: string;
  readonly #memberTtlMs: number;
  readonly #heartbeatMs: number;
  #heartbeat: NodeJS.Timeout | undefined;
  #joined: string | undefined;
  #closed = false;
  #lost: CoordinationDataLostError | undefined;

  constructor(client: RedisClient, options: RedisCoordinationOptions = {}) {
    this.#client = client;
    this.nodeId = options.nodeId ?? `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    this.#base = `${options.keyPrefix ?? 'mocra:coord:'}${options.namespace ?? 'mocra'}:`;
    this.#memberTtlMs = options.memberTtlMs ?? 10_000;
    this.#heartbeatMs = options.heartbeatMs ?? Math.max(1, Math.floor(this.#memberTtlMs / 3));
    if (!(this.#memberTtlMs > 0))
      throw new InvalidArgumentError(`memberTtlMs must be > 0, got ${this.#memberTtlMs}`);
  }

  /**
   * A server that came back empty has lost the run's markers (seeded, done), its locks and
   * fencing counters: a run that goes on would wait forever for an end it cannot see, or hand out
   * fencing tokens again from 1. Once the epoch marker is gone after a reconnect (see
   * watchEpoch), every call fails with CoordinationDataLostError and the run stops on it.
   */
  watchEpoch(url: string): Promise<void> {
    return watchEpoch(this.#client, FEATURE, `${this.#base}epoch`, () => {
      if (this.#closed) return;
      this.#lost = new CoordinationDataLostError(FEATURE, redactUrl(url));
      publishConnection({ backend: FEATURE, server: redactUrl(url), state: 'emptied', error: this.#lost });
    });
  }

  /** The ioredis client (exposed for tests and for sharing the connection). */
  get client(): RedisClient {
    return this.#client;
  }

  #kv(key: string): string {
    return `${this.#base}kv:${key}`;
  }
  #lock(name: string): [string, string] {
    const lock = `${this.#base}{lock:${name}}`;
    return [lock, `${lock}:fence`];
  }
  #members(): string {
    return `${this.#base}{members}`;
  }

  #checkOpen(): void {
    if (this.#closed) throw new CoordinationClosedError('redis');
    if (this.#lost) throw this.#lost;
  }

  async #run<R>(what: string, fn: () => Promise<R>): Promise<R> {
    this.#checkOpen();
    try {
      return await fn();
    } catch (err) {
      if (this.#closed) throw new CoordinationClosedError('redis');
      throw redisFailure(FEATURE, what, err);
    }
  }

  async get(key: string): Promise<string | undefined> {
    return this.#run('get', async () => (await this.#client.get(this.#kv(key))) ?? undefined);
  }

  async set(key: string, value: string, options: { ttlMs?: number } = {}): Promise<void> {
    const ttl = options.ttlMs === undefined ? undefined : checkTtl(options.ttlMs);
    return this.#run('set', async () => {
      if (ttl === undefined) await this.#client.set(this.#kv(key), value);
      else await this.#client.set(this.#kv(key), value, 'PX', ttl);
    });
  }

  async delete(key: string): Promise<boolean> {
    return this.#run('delete', async () => (await this.#client.del(this.#kv(key))) > 0);
  }

  async compareAndSet(
    key: string,
    expected: string | undefined,
    next: string | undefined,
    options: { ttlMs?: number } = {},
  ): Promise<boolean> {
    const ttl = options.ttlMs === undefined ? 0 : checkTtl(options.ttlMs);
    return this.#run('compareAndSet', async () => {
      const r = await CAS.run(
        this.#client,
        [this.#kv(key)],
        [expected === undefined ? '0' : '1', expected ?? '', next === undefined ? '0' : '1', next ?? '', ttl],
      );
      return num(r) === 1;
    });
  }

  async increment(key: string, by = 1): Promise<number> {
    if (!Number.isSafeInteger(by))
      throw new InvalidArgumentError(`increment by must be a safe integer, got ${by}`);
    this.#checkOpen();
    try {
      return await this.#client.incrby(this.#kv(key), by);
    } catch (err) {
      if (err instanceof Error && /not an integer|out of range/.test(err.message)) {
        throw new InvalidArgumentError(`cannot increment '${key}': its value is not an integer`, {
          cause: err,
        });
      }
      throw redisFailure(FEATURE, 'increment', err);
    }
  }

  async acquireLock(
    name: string,
    options: { ttlMs: number; owner?: string },
  ): Promise<LockLease | undefined> {
    const ttl = checkTtl(options.ttlMs);
    const owner = options.owner ?? this.nodeId;
    return this.#run('acquireLock', async () => {
      const r = (await ACQUIRE.run(this.#client, this.#lock(name), [owner, ttl])) as unknown[] | null;
      if (!r) return undefined;
      return { name, owner, token: num(r[0]), expiresAt: num(r[1]) };
    });
  }

  async renewLock(lease: LockLease, ttlMs: number): Promise<LockLease | undefined> {
    const ttl = checkTtl(ttlMs);
    return this.#run('renewLock', async () => {
      const r = await RENEW.run(this.#client, [this.#lock(lease.name)[0]], [lease.owner, lease.token, ttl]);
      if (r === null || r === undefined) return undefined;
      return { name: lease.name, owner: lease.owner, token: lease.token, expiresAt: num(r) };
    });
  }

  async releaseLock(lease: LockLease): Promise<boolean> {
    return this.#run('releaseLock', async () => {
      const r = await RELEASE.run(this.#client, [this.#lock(lease.name)[0]], [lease.owner, lease.token]);
      return num(r) === 1;
    });
  }

  async join(member: { addr?: string; meta?: Record<string, string> } = {}): Promise<void> {
    this.#joined = JSON.stringify({
      ...(member.addr === undefined ? {} : { addr: member.addr }),
      meta: member.meta ?? {},
    });
    await this.#beat();
    if (!this.#heartbeat) {
      this.#heartbeat = setInterval(() => {
        // A failed beat is retried by the next one; the member expires only if they all fail.
        this.#beat().catch(() => {});
      }, this.#heartbeatMs);
      this.#heartbeat.unref();
    }
  }

  #beat(): Promise<unknown> {
    const data = this.#joined;
    if (data === undefined) return Promise.resolve();
    const members = this.#members();
    return this.#run('heartbeat', () =>
      HEARTBEAT.run(
        this.#client,
        [members, `${members}:${this.nodeId}`],
        [this.nodeId, this.#memberTtlMs, data],
      ),
    );
  }

  async leave(): Promise<void> {
    this.#stopHeartbeat();
    const members = this.#members();
    return this.#run('leave', async () => {
      await this.#client.zrem(members, this.nodeId);
      await this.#client.del(`${members}:${this.nodeId}`);
    });
  }

  async members(): Promise<Member[]> {
    const members = this.#members();
    return this.#run('members', async () => {
      const rows = (await MEMBERS.run(this.#client, [members], [`${members}:`])) as unknown[][];
      const out: Member[] = [];
      for (const row of rows) {
        let data: { addr?: unknown; meta?: unknown } = {};
        try {
          data = JSON.parse(str(row[1])) as typeof data;
        } catch {
          // A member record written by something else: list the id, skip the details.
        }
        const meta: Record<string, string> = {};
        if (data.meta && typeof data.meta === 'object') {
          for (const [k, v] of Object.entries(data.meta)) if (typeof v === 'string') meta[k] = v;
        }
        out.push({
          id: str(row[0]),
          ...(typeof data.addr === 'string' ? { addr: data.addr } : {}),
          meta,
          lastSeen: num(row[2]),
        });
      }
      return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    });
  }

  /**
   * Stop heartbeats and close the connection. `leave: false` keeps the membership record until
   * it expires, which is what a crashed process looks like to the others.
   */
  async close(options: { leave?: boolean } = {}): Promise<void> {
    if (this.#closed) return;
    if ((options.leave ?? true) && this.#joined !== undefined) await this.leave().catch(() => {});
    this.#stopHeartbeat();
    this.#closed = true;
    await this.#client.quit().catch(() => this.#client.disconnect());
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    this.#joined = undefined;
  }
}

function checkTtl(ttlMs: number): number {
  if (!(ttlMs > 0 && Number.isFinite(ttlMs))) {
    throw new InvalidArgumentError(`ttlMs must be a finite number > 0, got ${ttlMs}`);
  }
  return Math.ceil(ttlMs);
}
