/**
 * A dedup set shared by every worker of a crawl, in a NATS JetStream key-value bucket — the
 * deduplicator of the NATS deployment (no Redis needed for it).
 *
 * ```
 *  KV bucket  mocra-dedup-{ns}-{scope}      (history 1, file storage)
 *    key   = the fingerprint (27 base64url characters; other dedup keys are hashed to one)
 *    value = the claim that marked it ('' without one)
 * ```
 *
 * Marking is a put with "expected last sequence 0" per fingerprint: the server accepts the first
 * and refuses every later one, so exactly one worker sees a URL as new. The puts of a batch go
 * out together (one round trip of latency, not one per key). A refused put under a claim reads
 * the stored value: the same claim means "new again" (see MarkSeenOptions.claim).
 *
 * Space: one stored message per URL (about 100 bytes on disk with its subject), not memory.
 * `maxBytes` caps the bucket; past it JetStream drops the oldest keys, which are then forgotten
 * (those URLs could be fetched again) — leave it unset unless disk is the harder limit.
 */

import { createHash } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { markSeenThroughCache, SeenCache } from '../../distributed/seen-cache.js';
import { BackendUnavailableError, InvalidArgumentError, isMocraError } from '../../errors.js';
import { importOptional } from '../../optional-dependency.js';
import { assertQueueName } from '../../queue/topic-options.js';
import type { Deduplicator, MarkSeenOptions } from '../dedup.js';

export interface NatsDeduplicatorOptions {
  /** Used when no `connection` is given. @default 'nats://127.0.0.1:4222' */
  servers?: string | string[];
  /** A connection to share (not closed by `close()`). */
  connection?: NatsConnection;
  /** Keeps crawls sharing one server apart. @default 'mocra' */
  namespace?: string;
  /** One set per scope inside the namespace (the engine uses the run id). @default 'default' */
  scope?: string;
  /** Upper bound of the bucket in bytes (see the module comment). @default unlimited */
  maxBytes?: number;
  /** Where JetStream keeps the bucket. @default 'file' */
  storage?: 'file' | 'memory';
  /** Bucket replicas (clustered JetStream). @default 1 */
  replicas?: number;
  /** Fingerprints remembered in this process to skip round trips (0 turns it off). @default 100000 */
  localCacheSize?: number;
}

const FEATURE = 'the NATS KV deduplicator';
const WRONG_LAST_SEQUENCE = new Set([10071, 10164]);
const KEY = /^[A-Za-z0-9_-]{1,200}$/;

type TransportModule = typeof import('@nats-io/transport-node');
type KvModule = typeof import('@nats-io/kv');

/** The KV bucket name of a namespace and scope. */
export function natsDedupBucket(namespace: string, scope: string): string {
  const safeScope = /^[A-Za-z0-9_-]{1,64}$/.test(scope)
    ? scope
    : createHash('sha1')
        .update(scope)
        .digest('base64url')
        .replace(/[^A-Za-z0-9]/g, '')
        .slice(0, 24);
  return `mocra-dedup-${namespace}-${safeScope}`;
}

export async function createNatsDeduplicator(
  options: NatsDeduplicatorOptions = {},
): Promise<NatsDeduplicator> {
  const namespace = options.namespace ?? 'mocra';
  const scope = options.scope ?? 'default';
  assertQueueName('namespace', namespace);
  if (typeof scope !== 'string' || scope === '') {
    throw new InvalidArgumentError(`scope must be a non-empty string, got '${String(scope)}'`);
  }
  if (options.maxBytes !== undefined && !(Number.isInteger(options.maxBytes) && options.maxBytes > 0)) {
    throw new InvalidArgumentError(`maxBytes must be a positive integer, got ${options.maxBytes}`);
  }
  const kvModule = await importOptional<KvModule>('@nats-io/kv', FEATURE);
  let nc = options.connection;
  const owns = nc === undefined;
  if (!nc) {
    const transport = await importOptional<TransportModule>('@nats-io/transport-node', FEATURE);
    const servers = options.servers ?? 'nats://127.0.0.1:4222';
    try {
      nc = await transport.connect({ servers, name: `mocra-dedup-${namespace}` });
    } catch (err) {
      throw new BackendUnavailableError(FEATURE, `cannot connect to ${String(servers)}: ${describe(err)}`, {
        cause: err,
      });
    }
  }
  let kv: KV;
  try {
    kv = await new kvModule.Kvm(nc).create(natsDedupBucket(namespace, scope), {
      history: 1,
      storage: (options.storage ?? 'file') as never,
      replicas: options.replicas ?? 1,
      ...(options.maxBytes === undefined ? {} : { max_bytes: options.maxBytes }),
    });
  } catch (err) {
    if (owns) await nc.close().catch(() => {});
    throw new BackendUnavailableError(FEATURE, `cannot open the KV bucket: ${describe(err)}`, { cause: err });
  }
  return new NatsDeduplicator(nc, owns, kv, options.localCacheSize ?? 100_000);
}

export class NatsDeduplicator implements Deduplicator {
  readonly bucket: string;
  readonly #nc: NatsConnection;
  readonly #owns: boolean;
  readonly #kv: KV;
  readonly #cache: SeenCache;
  #closed = false;

  constructor(nc: NatsConnection, owns: boolean, kv: KV, cacheSize: number) {
    this.#nc = nc;
    this.#owns = owns;
    this.#kv = kv;
    this.bucket = (kv as KV & { bucket?: string }).bucket ?? '';
    this.#cache = new SeenCache(cacheSize);
  }

  markSeen(fingerprints: readonly string[], options: MarkSeenOptions = {}): Promise<boolean[]> {
    const claim = options.claim;
    return markSeenThroughCache(fingerprints, options, this.#cache, (ask) =>
      Promise.all(ask.map((fp) => this.#markOne(fp, claim))),
    );
  }

  async #markOne(fingerprint: string, claim: string | undefined): Promise<boolean> {
    const key = KEY.test(fingerprint)
      ? fingerprint
      : createHash('sha1').update(fingerprint).digest('base64url');
    try {
      await this.#kv.put(key, claim ?? '', { previousSeq: 0 });
      return true;
    } catch (err) {
      if (!WRONG_LAST_SEQUENCE.has((err as { code?: number }).code ?? -1)) {
        throw isMocraError(err)
          ? err
          : new BackendUnavailableError(FEATURE, `marking a fingerprint failed: ${describe(err)}`, {
              cause: err,
            });
      }
    }
    if (claim === undefined) return false;
    try {
      const entry = await this.#kv.get(key);
      return entry !== null && entry.operation === 'PUT' && entry.string() === claim;
    } catch (err) {
      throw new BackendUnavailableError(FEATURE, `reading a claim failed: ${describe(err)}`, { cause: err });
    }
  }

  /**
   * The claim's message published what it admitted: its fingerprints are answered locally from
   * now on. The stored claim stays in the bucket (a key's value is written once); it only
   * matters to a redelivery of that same message.
   */
  releaseClaim(claim: string): void {
    this.#cache.release(claim);
  }

  async size(): Promise<number> {
    try {
      return (await this.#kv.status()).values;
    } catch (err) {
      throw new BackendUnavailableError(FEATURE, `reading the size failed: ${describe(err)}`, { cause: err });
    }
  }

  /** Delete the bucket (the set is gone for every worker). */
  async destroy(): Promise<void> {
    await this.#kv.destroy();
    this.#cache.clear();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#cache.clear();
    if (this.#owns) await this.#nc.close().catch(() => {});
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
