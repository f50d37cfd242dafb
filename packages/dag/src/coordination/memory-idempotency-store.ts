import { InvalidOptionsError } from '../errors.js';
import { decodePayload, encodePayload } from '../payload/envelope.js';
import type { Payload } from '../payload/payload.js';
import { type Clock, type ClockTimer, systemClock } from '../time/clock.js';
import type { IdempotencyBegin, IdempotencyStore } from './types.js';

export interface MemoryIdempotencyStoreOptions {
  /** @default systemClock */
  clock?: Clock;
  /** How long a finished key stays a cache hit. @default Infinity */
  resultTtlMs?: number;
}

export interface MemoryIdempotencyStore extends IdempotencyStore {
  /** Keys with a live claim or a cached result. */
  readonly size: number;
}

type Entry =
  | {
      state: 'claimed';
      owner: string;
      expiresAt: number;
      waiters: Set<(p: Payload | undefined) => void>;
      timer: ClockTimer;
    }
  | { state: 'done'; envelope: Uint8Array; expiresAt: number };

/** An idempotency store for one process, shared by every scheduler and run that is given it. */
export function createMemoryIdempotencyStore(
  options: MemoryIdempotencyStoreOptions = {},
): MemoryIdempotencyStore {
  const clock = options.clock ?? systemClock;
  const resultTtlMs = options.resultTtlMs ?? Number.POSITIVE_INFINITY;
  if (!(resultTtlMs > 0))
    throw new InvalidOptionsError('resultTtlMs', `must be a positive number, got ${resultTtlMs}`);
  const entries = new Map<string, Entry>();

  const current = (key: string): Entry | undefined => {
    const entry = entries.get(key);
    if (entry !== undefined && entry.expiresAt <= clock.now()) {
      drop(key, entry);
      return undefined;
    }
    return entry;
  };
  const drop = (key: string, entry: Entry) => {
    if (entries.get(key) === entry) entries.delete(key);
    if (entry.state === 'claimed') {
      entry.timer.cancel();
      for (const wake of entry.waiters) wake(undefined);
      entry.waiters.clear();
    }
  };

  return {
    async begin(key, owner, claimTtlMs): Promise<IdempotencyBegin> {
      if (!(claimTtlMs > 0))
        throw new InvalidOptionsError('claimTtlMs', `must be a positive number, got ${claimTtlMs}`);
      const entry = current(key);
      if (entry?.state === 'done') return { status: 'done', output: decodePayload(entry.envelope) };
      if (entry?.state === 'claimed' && entry.owner !== owner) return { status: 'busy' };
      if (entry !== undefined) drop(key, entry);
      const claim: Entry = {
        state: 'claimed',
        owner,
        expiresAt: clock.now() + claimTtlMs,
        waiters: new Set(),
        // Wake waiters when the claim lapses, so they can claim the key themselves.
        timer: clock.setTimeout(() => drop(key, claim), claimTtlMs),
      };
      entries.set(key, claim);
      return { status: 'claimed' };
    },
    async complete(key, owner, output) {
      const entry = current(key);
      // A lapsed or foreign claim still records the result: the work was done, and the output of
      // idempotent work is the same whoever did it.
      const envelope = encodePayload(output);
      if (entry?.state === 'claimed' && entry.owner === owner) {
        entry.timer.cancel();
        entries.set(key, { state: 'done', envelope, expiresAt: clock.now() + resultTtlMs });
        for (const wake of entry.waiters) wake(decodePayload(envelope));
        return;
      }
      if (entry === undefined)
        entries.set(key, { state: 'done', envelope, expiresAt: clock.now() + resultTtlMs });
    },
    async abandon(key, owner) {
      const entry = current(key);
      if (entry?.state === 'claimed' && entry.owner === owner) drop(key, entry);
    },
    wait(key, signal) {
      const entry = current(key);
      if (entry === undefined) return Promise.resolve(undefined);
      if (entry.state === 'done') return Promise.resolve(decodePayload(entry.envelope));
      if (signal.aborted) return Promise.resolve(undefined);
      return new Promise((resolve) => {
        const wake = (output: Payload | undefined) => {
          signal.removeEventListener('abort', onAbort);
          resolve(output);
        };
        const onAbort = () => {
          entry.waiters.delete(wake);
          resolve(undefined);
        };
        entry.waiters.add(wake);
        signal.addEventListener('abort', onAbort, { once: true });
      });
    },
    get size() {
      return entries.size;
    },
  };
}
