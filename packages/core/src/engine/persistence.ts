/**
 * Crash-safe single-node runs (`persist: dir`): everything a resumed run needs lives under one
 * directory, each part in its own LevelDB store (LevelDB allows one store per directory):
 *
 * ```
 *  <dir>/lock      held open for the whole run (lockPersistDir): a second process is refused
 *                  before it opens anything, its output files included
 *  <dir>/queue     the stage topics (LevelQueueBackend, persistent): every message not acked,
 *                  delayed retries with their due time and attempt count, every topic's DLQ
 *  <dir>/dedup     the frontier's seen set (TieredDeduplicator): what was admitted is never
 *                  admitted again
 *  <dir>/journal   this file's RecoveryJournal: dedup claims and the pages already parsed
 * ```
 *
 * Why the journal. The queue is at-least-once and the stages are not atomic with each other,
 * so a SIGKILL can land between two writes of different stores. The journal closes the two
 * windows that would otherwise break the promises of a resumed run:
 *
 *  1. marked seen, not yet published: a generate's requests are marked seen in `dedup` and then
 *     published to `queue`. Killed between the two, the redelivered task would find them seen and
 *     they would be lost. So each admitting message records what it marks, under its message id
 *     (the *claim*), before marking; a redelivery of the same message re-admits what it
 *     claimed; the claim is dropped once the requests are published.
 *  2. parsed, request not yet acked: the download stage acks its request after publishing the
 *     response, while the parse stage may already have parsed that response and written its
 *     items. Killed in between, the request would be delivered again and the page fetched a
 *     second time although it was done. So the parse stage records the request's fingerprint
 *     as *parsed* before it writes any item, and the download stage skips (acks) a first
 *     delivery of a request that is already parsed: its response is still on the response
 *     topic (being parsed or parsed), so nothing is lost by not fetching it again. Retries and
 *     replays (they carry the attempt / replay header) are not skipped: they are meant to fetch.
 */
import path from 'node:path';
import { StoreFailedError, StoreLockedError } from '../errors.js';
import type { Deduplicator, MarkSeenOptions } from '../frontier/dedup.js';
import { fingerprintRequest } from '../frontier/fingerprint.js';
import type { Request } from '../model/request.js';
import { type OpenedStore, openStore } from '../queue/leveldb-store.js';

const CLAIM = 'c:';
const PARSED = 'p:';
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);

/** The sub-directories of a persist directory. */
export function persistPaths(dir: string): { lock: string; queue: string; dedup: string; journal: string } {
  return {
    lock: path.join(dir, 'lock'),
    queue: path.join(dir, 'queue'),
    dedup: path.join(dir, 'dedup'),
    journal: path.join(dir, 'journal'),
  };
}

/** A persist directory held by this process; `release()` lets the next process have it. */
export interface PersistLock {
  readonly dir: string;
  release(): Promise<void>;
}

/**
 * Take a persist directory for this process, or fail with StoreLockedError (naming `dir`) when
 * another process has it. The lock is LevelDB's own on `<dir>/lock`: the OS drops it when the
 * process dies, even by SIGKILL, so a crashed run never leaves a stale lock behind. Take it
 * before opening anything that the run writes — the queue and dedup stores only refuse on
 * first use, and an output file opened before them would already be truncated or appended to.
 */
export async function lockPersistDir(dir: string): Promise<PersistLock> {
  let store: OpenedStore;
  try {
    store = await openStore({ dir: persistPaths(dir).lock });
  } catch (err) {
    if (err instanceof StoreLockedError) throw new StoreLockedError(path.resolve(dir), { cause: err });
    throw err;
  }
  return { dir: path.resolve(dir), release: () => store.close() };
}

export class RecoveryJournal {
  readonly dir: string;
  #store: Promise<OpenedStore> | undefined;
  #closed = false;

  constructor(dir: string) {
    this.dir = dir;
  }

  /** Opened on first use (LevelDB open is asynchronous; the engine's constructor is not). */
  #db(): Promise<OpenedStore> {
    if (this.#closed) return Promise.reject(new StoreFailedError(this.dir, 'use after close'));
    this.#store ??= openStore({ dir: this.dir });
    return this.#store;
  }

  /** Fingerprints claimed by a message (empty when it claimed nothing or released its claim). */
  async claimed(claim: string): Promise<string[]> {
    const { db } = await this.#db();
    const value = await db.get(key(CLAIM, claim));
    return value === undefined ? [] : (JSON.parse(decoder.decode(value)) as string[]);
  }

  async claim(claim: string, fingerprints: readonly string[]): Promise<void> {
    const { db } = await this.#db();
    await db.put(key(CLAIM, claim), encoder.encode(JSON.stringify(fingerprints)));
  }

  async release(claim: string): Promise<void> {
    const { db } = await this.#db();
    await db.del(key(CLAIM, claim));
  }

  async markParsed(request: Request): Promise<void> {
    const { db } = await this.#db();
    await db.put(key(PARSED, pageKeyOf(request)), EMPTY);
  }

  async parsed(request: Request): Promise<boolean> {
    const { db } = await this.#db();
    return (await db.get(key(PARSED, pageKeyOf(request)))) !== undefined;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const store = await this.#store?.catch(() => undefined);
    await store?.close();
  }
}

/**
 * A deduplicator that honours claims (window 1 above) on top of one that does not: before the
 * inner set marks a batch, the batch is recorded under the claim; a fingerprint the inner set
 * reports as seen is new again when this claim recorded it.
 */
export class ClaimingDeduplicator implements Deduplicator {
  readonly #inner: Deduplicator;
  readonly #journal: RecoveryJournal;
  /** Releases in flight, so a release never overtakes the claim it undoes. */
  readonly #pending = new Map<string, Promise<void>>();

  constructor(inner: Deduplicator, journal: RecoveryJournal) {
    this.#inner = inner;
    this.#journal = journal;
  }

  async markSeen(
    fingerprints: readonly string[],
    options: MarkSeenOptions = {},
  ): Promise<readonly boolean[]> {
    const claim = options.claim;
    if (claim === undefined) return await this.#inner.markSeen(fingerprints);
    await this.#pending.get(claim);
    const before = new Set(await this.#journal.claimed(claim));
    const all = new Set(before);
    for (const fp of fingerprints) all.add(fp);
    if (all.size !== before.size) await this.#journal.claim(claim, [...all]);
    const fresh = await this.#inner.markSeen(fingerprints);
    const out = fresh.slice();
    const repeated = new Set<string>();
    for (let i = 0; i < fingerprints.length; i++) {
      const fp = fingerprints[i]!;
      if (!out[i] && before.has(fp) && !repeated.has(fp)) out[i] = true;
      repeated.add(fp);
    }
    return out;
  }

  releaseClaim(claim: string): void {
    const done = this.#journal
      .release(claim)
      .catch(() => {
        // Best effort (see Deduplicator.releaseClaim): an unreleased claim only re-admits on a
        // redelivery of its message, which cannot come once the message is acked.
      })
      .finally(() => {
        if (this.#pending.get(claim) === done) this.#pending.delete(claim);
      });
    this.#pending.set(claim, done);
  }

  size(): number | Promise<number> {
    return this.#inner.size();
  }

  async close(): Promise<void> {
    await Promise.all(this.#pending.values());
    await this.#inner.close();
  }
}

/**
 * Which page a request is, as dedup sees it: its `dedupKey` when it has one (a user who keys
 * the same URL twice means two fetches), else its fingerprint.
 */
export function pageKeyOf(request: Request): string {
  return request.dedupKey ?? request.fingerprint ?? fingerprintRequest(request);
}

function key(prefix: string, id: string): Uint8Array {
  return encoder.encode(prefix + id);
}
