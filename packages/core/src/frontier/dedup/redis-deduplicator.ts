/**
 * A dedup set shared by every worker of a crawl, in Redis: a URL is admitted once across the
 * cluster. Exact (no false positives), compact, one round trip per admission batch.
 *
 * ```
 *  {prefix}{ns:scope}:meta        hash   buckets = N (fixed by the first worker, read by the rest)
 *  {prefix}{ns:scope}:count       string distinct fingerprints marked (size())
 *  {prefix}{ns:scope}:b:{0…N-1}   hash   16-byte key → ''      (the set, in N buckets)
 *  {prefix}{ns:scope}:c:{claim}   hash   16-byte key → ''      (what one message marked; PX claimTtlMs)
 * ```
 *
 * Why buckets of hashes: Redis 7.0 keeps a small hash as a listpack (≤ `hash-max-listpack-
 * entries`, 512 by default) at about 20 bytes per 16-byte key, where one big set costs about 70.
 * With N buckets the set stays compact up to about N × 512 keys (4096 buckets ≈ 2M URLs,
 * ≈ 40 MB); past that the buckets turn into hash tables one by one — still exact, about 3×
 * the memory. Size N for the crawl with `buckets` (`expectedUrls / 256` keeps headroom).
 *
 * Claims close the crash gap between "marked seen" and "published": the admitting message's id
 * is the claim; a fingerprint marked under a claim is answered "new" again to the same claim
 * (its message was redelivered because the handler died), and "seen" to anyone else. The engine
 * releases a claim once the admitted requests are published, so only claims of handlers in
 * flight (or killed) stay; those expire after `claimTtlMs`.
 *
 * Every key shares one hash tag, so the script runs on one shard of a Redis Cluster.
 */
import { createHash } from 'node:crypto';
import { markSeenThroughCache, SeenCache } from '../../distributed/seen-cache.js';
import { InvalidArgumentError } from '../../errors.js';
import {
  connectRedis,
  LuaScript,
  num,
  type RedisClient,
  redisFailure,
} from '../../queue/redis-connection.js';
import { assertQueueName } from '../../queue/topic-options.js';
import type { Deduplicator, MarkSeenOptions } from '../dedup.js';

export interface RedisDeduplicatorOptions {
  /** Used when no `client` is given. @default 'redis://127.0.0.1:6379' */
  url?: string;
  /** A connection to share (not closed by `close()`). */
  client?: RedisClient;
  /** Keeps crawls sharing one Redis apart. @default 'mocra' */
  namespace?: string;
  /** One set per scope inside the namespace (the engine uses the run id). @default 'default' */
  scope?: string;
  /** Prefix of every key. @default 'mocra:dedup:' */
  keyPrefix?: string;
  /**
   * Buckets of the set (see the module comment); the first worker of a scope fixes it, later
   * workers use the stored value whatever they pass.
   * @default 4096
   */
  buckets?: number;
  /** How long a claim can re-admit what it marked (longer than a lease plus a redelivery). @default 600000 */
  claimTtlMs?: number;
  /** Fingerprints remembered in this process to skip round trips (0 turns it off). @default 100000 */
  localCacheSize?: number;
  /** Extra ioredis options, passed through. */
  redisOptions?: Record<string, unknown>;
}

const FEATURE = 'the Redis deduplicator';

// KEYS: base claim · ARGV: claimTtlMs hasClaim [bucket key]×n → {isNew…}
const MARK = new LuaScript(
  `
local base, claim = KEYS[1], KEYS[2]
local has_claim = ARGV[2] == '1'
local out, added = {}, 0
for i = 3, #ARGV, 2 do
  local k = ARGV[i + 1]
  if redis.call('HSETNX', base .. ':b:' .. ARGV[i], k, '') == 1 then
    added = added + 1
    out[#out + 1] = 1
    if has_claim then redis.call('HSET', claim, k, '') end
  elseif has_claim and redis.call('HEXISTS', claim, k) == 1 then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if added > 0 then
  redis.call('INCRBY', base .. ':count', added)
  if has_claim then redis.call('PEXPIRE', claim, ARGV[1]) end
end
return out
`,
  2,
);

// KEYS: meta · ARGV: buckets → the stored bucket count
const LAYOUT = new LuaScript(
  `
redis.call('HSETNX', KEYS[1], 'buckets', ARGV[1])
return tonumber(redis.call('HGET', KEYS[1], 'buckets'))
`,
  1,
);

/** A fingerprint (or any dedup key) as 16 uniformly spread bytes. */
export function dedupKeyBytes(fingerprint: string): Buffer {
  if (fingerprint.length === 27 && /^[A-Za-z0-9_-]{27}$/.test(fingerprint)) {
    return Buffer.from(fingerprint, 'base64url').subarray(0, 16);
  }
  return createHash('sha1').update(fingerprint).digest().subarray(0, 16);
}

export async function createRedisDeduplicator(
  options: RedisDeduplicatorOptions = {},
): Promise<RedisDeduplicator> {
  const namespace = options.namespace ?? 'mocra';
  const scope = options.scope ?? 'default';
  assertQueueName('namespace', namespace);
  if (typeof scope !== 'string' || scope === '' || /[{}\s]/.test(scope) || scope.length > 200) {
    throw new InvalidArgumentError(
      `scope '${String(scope)}' must be 1–200 characters without braces or spaces`,
    );
  }
  const buckets = options.buckets ?? 4096;
  if (!Number.isInteger(buckets) || buckets < 1 || buckets > 1 << 20) {
    throw new InvalidArgumentError(`buckets must be an integer in 1…1048576, got ${buckets}`);
  }
  const claimTtlMs = options.claimTtlMs ?? 600_000;
  if (!(Number.isInteger(claimTtlMs) && claimTtlMs >= 1000)) {
    throw new InvalidArgumentError(`claimTtlMs must be an integer ≥ 1000, got ${claimTtlMs}`);
  }
  const owns = options.client === undefined;
  const client =
    options.client ??
    (await connectRedis({
      url: options.url ?? 'redis://127.0.0.1:6379',
      feature: FEATURE,
      ...(options.redisOptions ? { redisOptions: options.redisOptions } : {}),
    }));
  const base = `${options.keyPrefix ?? 'mocra:dedup:'}{${namespace}:${scope}}`;
  let stored: number;
  try {
    stored = num(await LAYOUT.run(client, [`${base}:meta`], [buckets]));
  } catch (err) {
    if (owns) client.disconnect();
    throw redisFailure(FEATURE, 'reading the layout', err);
  }
  return new RedisDeduplicator(client, owns, base, stored, claimTtlMs, options.localCacheSize ?? 100_000);
}

export class RedisDeduplicator implements Deduplicator {
  /** Buckets in use (as stored by the first worker of the scope). */
  readonly buckets: number;
  /** The key every other key of this set starts with (for operators and cleanup). */
  readonly keyBase: string;
  readonly #client: RedisClient;
  readonly #owns: boolean;
  readonly #claimTtlMs: number;
  readonly #cache: SeenCache;
  readonly #released: string[] = [];
  #releaseTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(
    client: RedisClient,
    owns: boolean,
    base: string,
    buckets: number,
    claimTtlMs: number,
    cacheSize: number,
  ) {
    this.#client = client;
    this.#owns = owns;
    this.keyBase = base;
    this.buckets = buckets;
    this.#claimTtlMs = claimTtlMs;
    this.#cache = new SeenCache(cacheSize);
  }

  markSeen(fingerprints: readonly string[], options: MarkSeenOptions = {}): Promise<boolean[]> {
    const claim = options.claim;
    return markSeenThroughCache(fingerprints, options, this.#cache, (ask) => this.#mark(ask, claim));
  }

  async #mark(fingerprints: string[], claim: string | undefined): Promise<boolean[]> {
    const args: (string | number | Buffer)[] = [this.#claimTtlMs, claim === undefined ? '0' : '1'];
    for (const fp of fingerprints) {
      const key = dedupKeyBytes(fp);
      args.push(key.readUInt32LE(0) % this.buckets, key);
    }
    const claimKey = `${this.keyBase}:c:${claim ?? ''}`;
    let reply: unknown;
    try {
      reply = await MARK.run(this.#client, [this.keyBase, claimKey], args);
    } catch (err) {
      throw redisFailure(FEATURE, 'marking fingerprints', err);
    }
    return (reply as unknown[]).map((v) => num(v) === 1);
  }

  /**
   * Forget a claim once its message published what it admitted. Not awaited, and batched: one
   * UNLINK per 20 ms for every claim released meanwhile (an unreleased claim only expires).
   */
  releaseClaim(claim: string): void {
    if (this.#closed) return;
    this.#cache.release(claim);
    this.#released.push(`${this.keyBase}:c:${claim}`);
    this.#releaseTimer ??= setTimeout(() => this.#flushReleased(), 20);
  }

  #flushReleased(): void {
    this.#releaseTimer = undefined;
    const keys = this.#released.splice(0);
    if (keys.length > 0) this.#client.unlink(...keys).catch(() => undefined);
  }

  async size(): Promise<number> {
    try {
      return Number((await this.#client.get(`${this.keyBase}:count`)) ?? 0);
    } catch (err) {
      throw redisFailure(FEATURE, 'reading the size', err);
    }
  }

  /** Delete every key of this set (the set is empty afterwards; other workers see that too). */
  async destroy(): Promise<void> {
    let cursor = '0';
    const pattern = `${this.keyBase.replace(/[*?[\]\\]/g, '\\$&')}:*`;
    do {
      const [next, keys] = await this.#client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      if (keys.length > 0) await this.#client.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
    this.#cache.clear();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#releaseTimer) clearTimeout(this.#releaseTimer);
    const released = this.#released.splice(0);
    if (released.length > 0) await this.#client.unlink(...released).catch(() => undefined);
    this.#closed = true;
    this.#cache.clear();
    if (this.#owns) await this.#client.quit().catch(() => this.#client.disconnect());
  }
}
