/**
 * ioredis plumbing shared by the Redis queue backend and the Redis coordination backend: load
 * the optional package, connect with a clear error, and run Lua scripts by SHA with a fallback
 * to EVAL when the server's script cache was flushed.
 */
import { createHash } from 'node:crypto';
import type { Redis, RedisOptions } from 'ioredis';
import { BackendUnavailableError, InvalidBackendUrlError, isMocraError } from '../errors.js';
import { importOptional } from '../optional-dependency.js';
import { publishConnection } from './channels.js';

export type RedisClient = Redis;

export interface RedisConnectOptions {
  /** `redis://[user:pass@]host:port[/db]` or `rediss://…`. */
  url: string;
  /** What needs the connection, for error messages ("the Redis queue backend"). */
  feature: string;
  /** Extra ioredis options (they win over the defaults used here). */
  redisOptions?: Record<string, unknown>;
}

/** Connect, or throw {@link BackendUnavailableError} (after stopping ioredis' reconnect loop). */
export async function connectRedis(options: RedisConnectOptions): Promise<RedisClient> {
  const { url, feature } = options;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidBackendUrlError(url, 'not a URL');
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new InvalidBackendUrlError(url, `expected redis:// or rediss://, got ${parsed.protocol}//`);
  }
  const mod = await importOptional<typeof import('ioredis')>('ioredis', feature);
  const redisOptions = {
    lazyConnect: true,
    // A command issued while disconnected waits for the reconnect, but not forever.
    maxRetriesPerRequest: 3,
    ...(options.redisOptions as RedisOptions | undefined),
    // Replies are parsed as RESP2-shaped arrays (field lists, XPENDING rows) everywhere here.
    replyMapping: 'legacy' as const,
  };
  const client = new mod.Redis(url, redisOptions);
  let lastError: unknown;
  // Without a listener ioredis prints every connection error; the errors reach callers instead.
  client.on('error', (err: unknown) => {
    lastError = err;
  });
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    throw new BackendUnavailableError(
      feature,
      `cannot connect to ${redact(parsed)}: ${describe(lastError ?? err)}`,
      {
        cause: lastError ?? err,
      },
    );
  }
  reportOutages(client, feature, redact(parsed), () => lastError);
  return client;
}

/**
 * Say when a live connection drops and when ioredis has it back (mocra:backend:connection):
 * meanwhile commands wait for the reconnect, so a crawl stalls — the user should see why.
 */
function reportOutages(client: RedisClient, backend: string, server: string, lastError: () => unknown): void {
  let lostAt: number | undefined;
  // 'reconnecting' comes only when ioredis will connect again: never after a deliberate quit().
  client.on('reconnecting', () => {
    if (lostAt !== undefined) return;
    lostAt = Date.now();
    publishConnection({ backend, server, state: 'lost', error: lastError() });
  });
  client.on('ready', () => {
    if (lostAt === undefined) return;
    const downMs = Date.now() - lostAt;
    lostAt = undefined;
    publishConnection({ backend, server, state: 'restored', downMs });
  });
}

/**
 * A Redis that restarts without persistence (or is flushed) comes back empty, and ioredis just
 * reconnects: nothing says that what the crawl kept there is gone. So `key` holds an epoch
 * marker, written once (the first process writes it, the others read it); after every reconnect
 * it is read again, and if it is missing or another, `onLost` is called (once). A restart that
 * kept the data (AOF, RDB) keeps the marker too. Resolves once the marker is read; if it cannot
 * be, throws {@link BackendUnavailableError} after closing the connection (nothing can go on).
 */
export async function watchEpoch(
  client: RedisClient,
  feature: string,
  key: string,
  onLost: () => void,
): Promise<void> {
  const mine = `${Date.now()}-${Math.random().toString(36).slice(2, 10)}`;
  let epoch: string | null;
  try {
    await client.set(key, mine, 'NX');
    epoch = await client.get(key);
  } catch (err) {
    client.disconnect();
    throw redisFailure(feature, 'writing the epoch marker', err);
  }
  let lost = false;
  client.on('ready', () => {
    if (lost) return;
    client.get(key).then(
      (now) => {
        if (now === epoch || lost) return;
        lost = true;
        onLost();
      },
      () => undefined, // asked again on the next reconnect; commands fail meanwhile anyway
    );
  });
}

/** ioredis defines a `…Buffer` variant of every command; its typings omit these two. */
interface EvalBufferCommands {
  evalshaBuffer(sha: string, numKeys: number, ...rest: (string | number | Buffer)[]): Promise<unknown>;
  evalBuffer(script: string, numKeys: number, ...rest: (string | number | Buffer)[]): Promise<unknown>;
}

/** A Lua script run by SHA (EVALSHA), loaded with EVAL the first time a server lacks it. */
export class LuaScript {
  readonly #lua: string;
  readonly #sha: string;
  readonly #keys: number;

  constructor(lua: string, numberOfKeys: number) {
    this.#lua = lua;
    this.#sha = createHash('sha1').update(lua).digest('hex');
    this.#keys = numberOfKeys;
  }

  /** Run with replies as Buffers (binary payloads stay intact; integers stay numbers). */
  async run(
    client: RedisClient,
    keys: readonly string[],
    args: readonly (string | number | Buffer)[],
  ): Promise<unknown> {
    if (keys.length !== this.#keys) throw new Error(`script expects ${this.#keys} keys, got ${keys.length}`);
    try {
      // evalshaBuffer rather than callBuffer('EVALSHA', …): the typed command also works with
      // ioredis' enableAutoPipelining (which sends `call` arguments as the command name).
      const c = client as unknown as EvalBufferCommands;
      return await c.evalshaBuffer(this.#sha, this.#keys, ...keys, ...args);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
        return (client as unknown as EvalBufferCommands).evalBuffer(this.#lua, this.#keys, ...keys, ...args);
      }
      throw err;
    }
  }
}

/** Wrap a non-mocra error from the client as {@link BackendUnavailableError}. */
export function redisFailure(feature: string, what: string, err: unknown): Error {
  if (isMocraError(err)) return err;
  return new BackendUnavailableError(feature, `${what} failed: ${describe(err)}`, { cause: err });
}

export function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A server URL without credentials, for messages. */
export function redactUrl(url: string): string {
  try {
    return redact(new URL(url));
  } catch {
    return 'the Redis server';
  }
}

function redact(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
}

/** Reply element → string (Lua replies arrive as Buffers with `run`). */
export function str(value: unknown): string {
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return String(value);
  return '';
}

/** Reply element → number. */
export function num(value: unknown): number {
  if (typeof value === 'number') return value;
  if (Buffer.isBuffer(value) || typeof value === 'string') return Number(str(value));
  return Number.NaN;
}
