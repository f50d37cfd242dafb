/**
 * What every dead-letter queue does the same way, whatever holds the letters: filtering,
 * paging, and reading back a payload that may no longer decode.
 */
import { QueueDecodeError } from '../errors.js';
import type { QueueCodec } from './codec.js';
import type { DeadLetter, DeadLetterFilter } from './types.js';

/** Whether a dead letter passes a {@link DeadLetterFilter} (all given conditions must hold). */
export function matchesDeadLetterFilter(
  letter: Pick<DeadLetter, 'id' | 'reason' | 'deadLetteredAt'>,
  filter: DeadLetterFilter | undefined,
): boolean {
  if (!filter) return true;
  if (filter.ids && !filter.ids.includes(letter.id)) return false;
  if (filter.reasonIncludes !== undefined && !letter.reason.includes(filter.reasonIncludes)) return false;
  if (filter.since !== undefined && letter.deadLetteredAt < filter.since) return false;
  return true;
}

/**
 * One page of `DeadLetterQueue.list`: the letters that pass the filter, offset/limit (defaults
 * 0/100) over an oldest-first sequence, which is read only as far as the page needs.
 */
export async function pageOfLetters<TLetter extends Pick<DeadLetter, 'id' | 'reason' | 'deadLetteredAt'>>(
  letters: AsyncIterable<TLetter> | Iterable<TLetter>,
  options: { limit?: number; offset?: number; filter?: DeadLetterFilter } = {},
): Promise<TLetter[]> {
  const offset = options.offset ?? 0;
  const limit = options.limit ?? 100;
  const out: TLetter[] = [];
  let skipped = 0;
  for await (const letter of letters) {
    if (!matchesDeadLetterFilter(letter, options.filter)) continue;
    if (skipped < offset) {
      skipped++;
      continue;
    }
    if (out.length >= limit) break;
    out.push(letter);
  }
  return out;
}

/**
 * A dead letter's payload, decoded; when its bytes no longer decode (or were never a payload),
 * the bytes instead, base64 — a dead letter is always listed. No bytes at all: neither.
 */
export async function letterPayload<T>(
  codec: QueueCodec,
  bytes: Uint8Array | undefined,
  topic: string,
): Promise<{ payload: T | undefined; raw?: string }> {
  if (bytes === undefined) return { payload: undefined };
  try {
    return { payload: (await codec.decode(bytes, topic)) as T };
  } catch {
    return { payload: undefined, raw: Buffer.from(bytes).toString('base64') };
  }
}

/**
 * The user headers a broker carries as one JSON object of strings (`what` names the field in
 * errors). Values that are not strings are dropped.
 */
export function parseHeaderObject(text: string, topic: string, what: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new QueueDecodeError(topic, `${what} is not JSON: ${message}`, { cause: err });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new QueueDecodeError(topic, `${what} is not an object`);
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string') out[k] = v;
  return out;
}
