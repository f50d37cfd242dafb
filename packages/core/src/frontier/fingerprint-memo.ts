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
 *   current full: it becomes previous, and the old previous is dropped
 * ```
 *
 * The answer is always what `fingerprintParts` computes for the same parts: the key is the
 * exact text the fingerprint hashes. Memory stays bounded by two generations of keys.
 */
import { fingerprintOfHead, fingerprintParts } from './fingerprint.js';

/** Keys per generation (a key and its fingerprint take ~150 bytes). */
const DEFAULT_ENTRIES = 8_192;

export class FingerprintMemo {
  readonly #entries: number;
  #current = new Map<string, string>();
  #previous = new Map<string, string>();

  constructor(entries = DEFAULT_ENTRIES) {
    this.#entries = entries;
  }

  /** `fingerprintParts(method, normalizedUrl, body)`, from the memo when it has it. */
  fingerprint(method: string, normalizedUrl: string, body: string | Uint8Array | undefined): string {
    if (body !== undefined && body.length > 0) return fingerprintParts(method, normalizedUrl, body);
    const head = `${method}\n${normalizedUrl}`;
    const known = this.#current.get(head) ?? this.#previous.get(head);
    if (known !== undefined) return known;
    const fingerprint = fingerprintOfHead(head);
    // Only a key the hash has read is kept: reading it made V8 copy the text into one flat
    // string, so the key does not hold on to the page's HTML that the link was sliced from.
    if (this.#current.size >= this.#entries) {
      this.#previous = this.#current;
      this.#current = new Map();
    }
    this.#current.set(head, fingerprint);
    return fingerprint;
  }
}
