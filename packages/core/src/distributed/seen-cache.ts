/**
 * The process-local front of a shared (Redis / NATS KV) dedup set. "Seen" is monotone across
 * the cluster — once a fingerprint is in the shared set it stays there — so a fingerprint this
 * process has learned is seen can be answered locally from then on, with no round trip. In a
 * link graph most discovered links are duplicates, so this removes most remote lookups.
 *
 * One exception keeps crash recovery exact: a fingerprint this process marked itself under a
 * claim (the id of the message being handled) is sent to the shared set again when the same
 * claim asks, since the shared set answers "new" to its own claimant.
 *
 * Bounded: two generations of at most `capacity` entries each; when the current one is full the
 * older one is dropped (a dropped entry only costs a remote lookup later).
 */
export class SeenCache {
  readonly #capacity: number;
  #current = new Map<string, string>();
  #previous = new Map<string, string>();

  constructor(capacity: number) {
    this.#capacity = Math.max(0, Math.floor(capacity));
  }

  /** The claim that marked the fingerprint here ('' when someone else did), or undefined if unknown. */
  get(fingerprint: string): string | undefined {
    return this.#current.get(fingerprint) ?? this.#previous.get(fingerprint);
  }

  set(fingerprint: string, claim: string): void {
    if (this.#capacity === 0) return;
    if (this.#current.size >= this.#capacity) {
      this.#previous = this.#current;
      this.#current = new Map();
    }
    this.#current.set(fingerprint, claim);
  }

  clear(): void {
    this.#current.clear();
    this.#previous.clear();
  }
}

/**
 * The batch logic shared by the remote deduplicators: answer what the cache knows, send each
 * remaining distinct fingerprint once to `remote`, and give repeated fingerprints of one batch
 * `false` after their first position (the Deduplicator contract).
 */
export async function markSeenThroughCache(
  fingerprints: readonly string[],
  claim: string | undefined,
  cache: SeenCache,
  remote: (fingerprints: string[]) => Promise<boolean[]>,
): Promise<boolean[]> {
  const out = new Array<boolean>(fingerprints.length).fill(false);
  const firstAt = new Map<string, number>();
  const ask: string[] = [];
  for (let i = 0; i < fingerprints.length; i++) {
    const fp = fingerprints[i]!;
    if (firstAt.has(fp)) continue;
    firstAt.set(fp, i);
    const known = cache.get(fp);
    if (known === undefined || (claim !== undefined && known === claim)) ask.push(fp);
  }
  if (ask.length > 0) {
    const fresh = await remote(ask);
    for (let j = 0; j < ask.length; j++) {
      const fp = ask[j]!;
      const isNew = fresh[j] === true;
      out[firstAt.get(fp)!] = isNew;
      cache.set(fp, isNew && claim !== undefined ? claim : '');
    }
  }
  return out;
}
