/**
 * `@mocra/dag`'s {@link IdempotencyStore} in the coordination KV: singleflight by idempotency
 * key across every node of the cluster, and a cache of finished results.
 *
 * ```
 *  {prefix}{key}  '{"s":"claimed","owner","until"}'   TTL = the claim's TTL
 *                 '{"s":"done","output"}'             TTL = resultTtlMs (output: payload envelope, base64)
 *
 *  begin:  absent ─CAS─▶ claimed (mine)   claimed (other, live) ─▶ busy   done ─▶ cache hit
 *          claimed (lapsed by `until`) ─CAS─▶ claimed (mine)
 * ```
 *
 * A claim lapses when its key's TTL runs out on the backend, or when `until` has passed on this
 * store's clock, whichever comes first (so a crashed owner never blocks a key for longer than its
 * TTL, and tests can move time with a manual clock). Waiters in this process are woken at once by
 * `complete` and `abandon`; waiters elsewhere notice within `pollMs`.
 */
import { type Clock, type IdempotencyBegin, type IdempotencyStore, systemClock } from '@mocra/dag';
import type { Coordination } from '../coordination/types.js';
import { InvalidArgumentError } from '../errors.js';
import { parseRecord, payloadFromText, payloadToText, updateKey } from './kv-update.js';

export interface CoordinationIdempotencyStoreOptions {
  /** Prefix of the keys. @default 'dag:idem:' */
  prefix?: string;
  /** How long a finished key stays a cache hit. @default unlimited */
  resultTtlMs?: number;
  /** How often a waiter reads the key again for changes made by other nodes. @default 100 */
  pollMs?: number;
  /** Time for claim deadlines. @default the system clock */
  clock?: Clock;
}

type Entry =
  | { readonly s: 'claimed'; readonly owner: string; readonly until: number }
  | { readonly s: 'done'; readonly output: string };

function readEntry(text: string | undefined): Entry | undefined {
  const rec = parseRecord(text);
  if (rec?.s === 'claimed' && typeof rec.owner === 'string' && typeof rec.until === 'number')
    return { s: 'claimed', owner: rec.owner, until: rec.until };
  if (rec?.s === 'done' && typeof rec.output === 'string') return { s: 'done', output: rec.output };
  return undefined;
}

export function createCoordinationIdempotencyStore(
  coordination: Coordination,
  options: CoordinationIdempotencyStoreOptions = {},
): IdempotencyStore {
  const prefix = options.prefix ?? 'dag:idem:';
  const clock = options.clock ?? systemClock;
  const pollMs = options.pollMs ?? 100;
  const resultTtl = options.resultTtlMs === undefined ? {} : { ttlMs: options.resultTtlMs };
  if (!(pollMs > 0)) throw new InvalidArgumentError(`pollMs must be > 0, got ${pollMs}`);
  /** Wake-ups for waiters in this process, by key. */
  const local = new Map<string, Set<() => void>>();
  const wake = (key: string) => {
    for (const w of local.get(key) ?? []) w();
  };
  const live = (entry: Entry | undefined): Entry | undefined =>
    entry?.s === 'claimed' && entry.until <= clock.now() ? undefined : entry;

  return {
    async begin(key, owner, claimTtlMs): Promise<IdempotencyBegin> {
      if (!(claimTtlMs > 0)) throw new InvalidArgumentError(`claimTtlMs must be > 0, got ${claimTtlMs}`);
      const claim = JSON.stringify({ s: 'claimed', owner, until: clock.now() + claimTtlMs });
      return updateKey<IdempotencyBegin>(coordination, `${prefix}${key}`, (current) => {
        const entry = live(readEntry(current));
        if (entry?.s === 'done') return { result: { status: 'done', output: payloadFromText(entry.output) } };
        if (entry?.s === 'claimed' && entry.owner !== owner) return { result: { status: 'busy' } };
        return { write: claim, ttlMs: Math.ceil(claimTtlMs), result: { status: 'claimed' } };
      });
    },

    async complete(key, owner, output) {
      const done = JSON.stringify({ s: 'done', output: payloadToText(output) });
      await updateKey(coordination, `${prefix}${key}`, (current) => {
        const entry = live(readEntry(current));
        // A lapsed claim still records the result: the work was done, and the output of
        // idempotent work is the same whoever did it. Someone else's live claim is left alone.
        if (entry?.s === 'done' || (entry?.s === 'claimed' && entry.owner !== owner))
          return { result: undefined };
        return { write: done, ...resultTtl, result: undefined };
      });
      wake(key);
    },

    async abandon(key, owner) {
      await updateKey(coordination, `${prefix}${key}`, (current) => {
        const entry = readEntry(current);
        if (entry?.s === 'claimed' && entry.owner === owner) return { write: undefined, result: undefined };
        return { result: undefined };
      });
      wake(key);
    },

    async wait(key, signal) {
      // Registered before the first read, so a wake-up between the read and the sleep is not lost.
      let poke: (() => void) | undefined;
      let dirty = false;
      const waiter = () => {
        dirty = true;
        poke?.();
      };
      let set = local.get(key);
      if (set === undefined) {
        set = new Set();
        local.set(key, set);
      }
      set.add(waiter);
      try {
        for (;;) {
          if (signal.aborted) return undefined;
          dirty = false;
          const entry = readEntry(await coordination.get(`${prefix}${key}`));
          if (entry === undefined) return undefined;
          if (entry.s === 'done') return payloadFromText(entry.output);
          const left = entry.until - clock.now();
          if (left <= 0) return undefined; // the claim lapsed: the caller may claim it
          if (dirty) continue;
          await new Promise<void>((resolve) => {
            const lapse = clock.setTimeout(done, left);
            const poll = setTimeout(done, pollMs);
            function done() {
              lapse.cancel();
              clearTimeout(poll);
              signal.removeEventListener('abort', done);
              poke = undefined;
              resolve();
            }
            poke = done;
            signal.addEventListener('abort', done, { once: true });
            if (signal.aborted || dirty) done();
          });
        }
      } finally {
        set.delete(waiter);
        if (set.size === 0 && local.get(key) === set) local.delete(key);
      }
    },
  };
}
