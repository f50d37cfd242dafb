/**
 * The process-local front of a shared (Redis / NATS KV) dedup set. "Seen" is monotone across
 * the cluster — once a fingerprint is in the shared set it stays there — so a fingerprint this
 * process has learned is seen can be answered locally from then on, with no round trip. In a
 * link graph most discovered links are duplicates, so this removes most remote lookups.
 *
 * One exception keeps crash recovery exact: the shared set answers "new" to the claim (the id
 * of the message being handled) that marked a fingerprint, so a redelivered message publishes
 * what it admitted before it died. A fingerprint this process marked new under a claim is
 * therefore kept with that claim, not in the known set, until the claim is released (its
 * message published what it admitted): asked again under the same claim it goes to the shared
 * set; asked under another claim it is one remote lookup that answers "seen".
 *
 * A claim marked by another process is unknown here: this process may have learned its
 * fingerprints as seen (met as links of other pages) before the dead worker's message reaches
 * it. A redelivered message's batch therefore skips the known set and asks the shared set for
 * every fingerprint — redeliveries are rare, so this costs little.
 *
 * ```
 *   known:  two FingerprintSets (typed arrays, 16 bytes a key; when the current one holds
 *           `capacity` keys the older one is dropped — a dropped key only costs a lookup)
 *   claims: claim → the fingerprints it marked new here, until released (at most
 *           MAX_HELD_CLAIMS; the oldest is forgotten beyond that, which only costs lookups)
 * ```
 *
 * The lookups are on the hot path (every discovered link): a typed-array probe on the key
 * decoded from the fingerprint, not a `Map` of hundreds of thousands of strings, which cost
 * ~1.4 µs a lookup and GC time in the distributed benchmark.
 */

import { KEY_BYTES, keyOf } from '../frontier/dedup/fingerprint-key.js';
import { FingerprintSet } from '../frontier/dedup/fingerprint-set.js';
import type { MarkSeenOptions } from '../frontier/dedup.js';

/** Claims held at once: a process handles at most a few hundred messages concurrently. */
const MAX_HELD_CLAIMS = 4096;

export class SeenCache {
  readonly #capacity: number;
  #current = new FingerprintSet();
  #previous = new FingerprintSet();
  readonly #claims = new Map<string, Set<string>>();
  readonly #bytes = new Uint8Array(KEY_BYTES);
  readonly #words = new Uint32Array(4);

  constructor(capacity: number) {
    this.#capacity = Math.max(0, Math.floor(capacity));
  }

  /** Known to be in the shared set (marked by anyone, under no claim this process holds). */
  has(fingerprint: string): boolean {
    if (this.#capacity === 0) return false;
    const w = this.#key(fingerprint);
    return this.#current.has(w[0]!, w[1]!, w[2]!, w[3]!) || this.#previous.has(w[0]!, w[1]!, w[2]!, w[3]!);
  }

  /** The fingerprints `claim` marked new here and has not released. */
  claimed(claim: string): ReadonlySet<string> | undefined {
    return this.#claims.get(claim);
  }

  /** The shared set answered for `fingerprint`: new under `claim`, or seen. */
  learn(fingerprint: string, newUnder: string | undefined): void {
    if (this.#capacity === 0) return;
    if (newUnder !== undefined) {
      let held = this.#claims.get(newUnder);
      if (held === undefined) {
        if (this.#claims.size >= MAX_HELD_CLAIMS) {
          this.#claims.delete(this.#claims.keys().next().value!);
        }
        held = new Set();
        this.#claims.set(newUnder, held);
      }
      held.add(fingerprint);
      return;
    }
    this.#remember(fingerprint);
  }

  /** `claim` published what it admitted: its fingerprints are plainly seen from now on. */
  release(claim: string): void {
    const held = this.#claims.get(claim);
    if (held === undefined) return;
    this.#claims.delete(claim);
    for (const fingerprint of held) this.#remember(fingerprint);
  }

  clear(): void {
    this.#current = new FingerprintSet();
    this.#previous = new FingerprintSet();
    this.#claims.clear();
  }

  #remember(fingerprint: string): void {
    if (this.#current.size >= this.#capacity) {
      this.#previous = this.#current;
      this.#current = new FingerprintSet();
    }
    const w = this.#key(fingerprint);
    this.#current.add(w[0]!, w[1]!, w[2]!, w[3]!);
  }

  #key(fingerprint: string): Uint32Array {
    keyOf(fingerprint, this.#bytes, 0, this.#words);
    return this.#words;
  }
}

/**
 * The batch logic shared by the remote deduplicators: answer what the cache knows, send each
 * remaining distinct fingerprint once to `remote`, and give repeated fingerprints of one batch
 * `false` after their first position (the Deduplicator contract).
 */
export async function markSeenThroughCache(
  fingerprints: readonly string[],
  { claim, redelivered = false }: MarkSeenOptions,
  cache: SeenCache,
  remote: (fingerprints: string[]) => Promise<boolean[]>,
): Promise<boolean[]> {
  const out = new Array<boolean>(fingerprints.length).fill(false);
  const firstAt = new Map<string, number>();
  const ask: string[] = [];
  const mine = claim === undefined ? undefined : cache.claimed(claim);
  for (let i = 0; i < fingerprints.length; i++) {
    const fp = fingerprints[i]!;
    if (firstAt.has(fp)) continue;
    firstAt.set(fp, i);
    if (redelivered || mine?.has(fp) || !cache.has(fp)) ask.push(fp);
  }
  if (ask.length > 0) {
    const fresh = await remote(ask);
    for (let j = 0; j < ask.length; j++) {
      const fp = ask[j]!;
      const isNew = fresh[j] === true;
      out[firstAt.get(fp)!] = isNew;
      cache.learn(fp, isNew ? claim : undefined);
    }
  }
  return out;
}
