/**
 * The dedup set of the frontier: which request fingerprints have been admitted already.
 * The in-memory one holds every fingerprint in a Set (27-char strings); the frontier work
 * adds a bounded-memory one (a small in-memory layer in front of LevelDB) and the
 * distributed work a shared one (Redis / NATS KV) behind this same interface.
 */

/** How a batch is marked (distributed deduplicators read it; in-process ones may ignore it). */
export interface MarkSeenOptions {
  /**
   * Who is admitting: the id of the queue message whose handler produced these requests. A
   * fingerprint first marked under a claim counts as new again when the same claim marks it
   * once more (the message was redelivered because its handler died between marking and
   * publishing), so that crash loses nothing; anyone else still sees it as seen.
   */
  claim?: string;
  /**
   * The claim's message was delivered before, so an earlier handler (perhaps in a process that
   * died) may have marked fingerprints under it: a deduplicator that answers from a local cache
   * asks the shared set again for this batch, since what it remembers as seen may be exactly
   * what that claim marked.
   */
  redelivered?: boolean;
}

export interface Deduplicator {
  /**
   * Mark every fingerprint as seen and say, for each, whether it was new. A fingerprint that
   * appears twice in one call is new only at its first position. May answer synchronously
   * (the in-memory set does, to keep the per-page path free of extra promises).
   */
  markSeen(
    fingerprints: readonly string[],
    options?: MarkSeenOptions,
  ): readonly boolean[] | Promise<readonly boolean[]>;
  /**
   * The message that claimed published what it admitted: its claim can be forgotten (a later
   * redelivery then finds its fingerprints seen instead of publishing them again). Optional;
   * best effort — a claim not released only expires.
   */
  releaseClaim?(claim: string): void;
  /** Distinct fingerprints seen so far. */
  size(): number | Promise<number>;
  close(): Promise<void>;
}

export class MemoryDeduplicator implements Deduplicator {
  readonly #seen = new Set<string>();

  markSeen(fingerprints: readonly string[]): boolean[] {
    const out = new Array<boolean>(fingerprints.length);
    for (let i = 0; i < fingerprints.length; i++) {
      const fp = fingerprints[i]!;
      const fresh = !this.#seen.has(fp);
      if (fresh) this.#seen.add(fp);
      out[i] = fresh;
    }
    return out;
  }

  size(): number {
    return this.#seen.size;
  }

  async close(): Promise<void> {
    this.#seen.clear();
  }
}

export function createMemoryDeduplicator(): Deduplicator {
  return new MemoryDeduplicator();
}
