/**
 * Fingerprints of recently seen requests without a body, so that a URL the frontier meets again
 * (a site's navigation on every page, links back to pages already crawled) is not hashed again:
 * most links a crawl finds are of that kind, and the hash is most of what admitting one costs.
 *
 * ```
 *   'GET\nhttp://host/p/1.html' ─▶ current ── hit ──▶ fingerprint
 *                                    │ miss
 *                                    ▼
 *                                 previous ── hit ──▶ fingerprint
 *                                    │ miss
 *                                    ▼
 *                                 sha1 (fingerprint.ts) ──▶ stored in current ──▶ fingerprint
 *
 *   current full: it becomes previous, and the old previous is dropped — unless a previous
 *   generation was there to answer from and fewer than one lookup in eight of the generation's
 *   size was answered from memory: then both are dropped and the memo rests (hashes without
 *   remembering) for eight generations' worth of misses before it starts over
 * ```
 *
 * The answer is always what `fingerprintParts` computes for the same parts: the key is the
 * exact text the fingerprint hashes. Memory stays bounded by two generations of keys, and a crawl
 * whose links are nearly all new (a frontier of a million distinct URLs) holds none of it most
 * of the time: there the memo would only be heap that V8 sizes the next collection by.
 */
import { fingerprintOfHead, fingerprintParts } from './fingerprint.js';

/** Keys per generation (a key and its fingerprint take ~150 bytes). */
const DEFAULT_ENTRIES = 8_192;

export class FingerprintMemo {
  readonly #entries: number;
  #current = new Map<string, string>();
  #previous = new Map<string, string>();
  /** Lookups answered from memory since the current generation began. */
  #hits = 0;
  /** Misses left to hash without remembering (see the module comment). */
  #resting = 0;

  constructor(entries = DEFAULT_ENTRIES) {
    this.#entries = entries;
  }

  /** `fingerprintParts(method, normalizedUrl, body)`, from the memo when it has it. */
  fingerprint(method: string, normalizedUrl: string, body: string | Uint8Array | undefined): string {
    if (body !== undefined && body.length > 0) return fingerprintParts(method, normalizedUrl, body);
    const head = `${method}\n${normalizedUrl}`;
    const known = this.#current.get(head) ?? this.#previous.get(head);
    if (known !== undefined) {
      this.#hits++;
      return known;
    }
    const fingerprint = fingerprintOfHead(head);
    if (this.#resting > 0) {
      this.#resting--;
      return fingerprint;
    }
    // Only a key the hash has read is kept: reading it made V8 copy the text into one flat
    // string, so the key does not hold on to the page's HTML that the link was sliced from.
    if (this.#current.size >= this.#entries) {
      // The first generation after a start or a rest had nothing to be answered from: not judged.
      if (this.#previous.size > 0 && this.#hits * 8 < this.#entries) {
        this.#previous = new Map();
        this.#current = new Map();
        this.#resting = this.#entries * 8;
      } else {
        this.#previous = this.#current;
        this.#current = new Map();
      }
      this.#hits = 0;
      if (this.#resting > 0) return fingerprint;
    }
    this.#current.set(head, fingerprint);
    return fingerprint;
  }

  /** Keys held now (both generations). */
  get size(): number {
    return this.#current.size + this.#previous.size;
  }
}
