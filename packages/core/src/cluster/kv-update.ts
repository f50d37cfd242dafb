/**
 * Read-modify-write of one coordination key by compare-and-set, for state that must change
 * atomically (a fencing head, a checkpoint head, an idempotency claim) on any backend.
 */
import { decodePayload, encodePayload, type Payload } from '@mocra/dag';
import type { Coordination } from '../coordination/types.js';
import { BackendUnavailableError } from '../errors.js';

/** What an update decides for the value it read. */
export type KeyUpdate<R> =
  /** Write `value` (undefined deletes) if the key still holds what was read; then resolve `result`. */
  | { readonly write: string | undefined; readonly ttlMs?: number; readonly result: R }
  /** Leave the key alone and resolve `result`. */
  | { readonly result: R };

/** Tries before giving up on a key many writers keep changing under us. */
const MAX_ATTEMPTS = 64;

/**
 * Apply `decide` to the current value of `key` and write its answer with compare-and-set,
 * reading again whenever another writer got there first. `decide` may throw to refuse.
 */
export async function updateKey<R>(
  coordination: Coordination,
  key: string,
  decide: (current: string | undefined) => KeyUpdate<R>,
): Promise<R> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await coordination.get(key);
    const update = decide(current);
    if (!('write' in update)) return update.result;
    if (update.write === current) return update.result;
    const swapped = await coordination.compareAndSet(
      key,
      current,
      update.write,
      update.ttlMs === undefined ? {} : { ttlMs: update.ttlMs },
    );
    if (swapped) return update.result;
  }
  throw new BackendUnavailableError(
    `the ${coordination.kind} coordination backend`,
    `key '${key}' kept changing under ${MAX_ATTEMPTS} compare-and-set attempts; try again later`,
  );
}

/** A payload as a KV string: its versioned envelope, base64. */
export function payloadToText(payload: Payload): string {
  return Buffer.from(encodePayload(payload)).toString('base64');
}

export function payloadFromText(text: string): Payload {
  return decodePayload(new Uint8Array(Buffer.from(text, 'base64')));
}

/** JSON.parse that answers undefined for anything that is not a JSON object. */
export function parseRecord(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
