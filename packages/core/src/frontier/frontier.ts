/**
 * The frontier's admission step: every request a `generate` produces passes here on its way
 * to the `request` topic. In one place it
 *
 *   1. validates the URL (absolute http/https; else InvalidUrlError, reported, crawl goes on),
 *   2. computes the fingerprint (normalized URL + method + body, `fingerprint.ts`; those of URLs
 *      met recently are remembered, `fingerprint-memo.ts`),
 *   3. drops requests deeper than `maxDepth`,
 *   4. drops duplicates (the `Deduplicator`; `skipDedup` requests bypass it),
 *   5. drops what exceeds `maxPages` (counted on admissions, so retries never use budget).
 *
 * Retries do not come through here: the error stage republishes the admitted request as is.
 *
 * A request is marked seen before it is published. So that a process killed between the two
 * does not lose it on a persistent queue, the engine passes the id of the message being handled
 * as the `claim`: the redelivered message re-admits what it had claimed (distributed
 * deduplicators implement this; see docs/deployment.md). In memory nothing survives a kill.
 */
import type { MocraError } from '../errors.js';
import { PARSED_URL, type Request } from '../model/request.js';
import { TieredDeduplicator } from './dedup/tiered-deduplicator.js';
import type { Deduplicator } from './dedup.js';
import { type FingerprintOptions, normalizeHref, requestHref } from './fingerprint.js';
import { FingerprintMemo } from './fingerprint-memo.js';
import { type DownloadGate, OPEN_GATE } from './gate.js';

export interface FrontierOptions {
  /** How URLs are normalized for fingerprints (query sorting, stripped parameters). */
  fingerprint?: FingerprintOptions;
  /** Drop requests whose fingerprint was seen before. @default true */
  dedup?: boolean;
  /**
   * Where seen fingerprints are kept. @default a TieredDeduplicator: exact and in memory up to
   * 1M fingerprints (16–43 bytes each), then a Bloom filter in front of a temporary LevelDB set
   */
  deduplicator?: Deduplicator;
  /** Requests deeper than this (seeds are depth 0) are dropped. @default Infinity */
  maxDepth?: number;
  /** At most this many requests are admitted over the run (retries do not count). @default Infinity */
  maxPages?: number;
  /** Politeness gate in front of the downloader. @default OPEN_GATE */
  gate?: DownloadGate;
}

export interface AdmitOptions {
  /** The queue message whose handler admits these requests (see MarkSeenOptions.claim). */
  claim?: string;
  /** That message was delivered before (see MarkSeenOptions.redelivered). @default false */
  redelivered?: boolean;
}

export interface AdmissionResult {
  /** In input order, each with `fingerprint` set. */
  admitted: Request[];
  /** Requests whose URL was unusable, with the typed error to report. */
  invalid: { request: Request; error: MocraError }[];
}

export interface FrontierStats {
  admitted: number;
  duplicates: number;
  overDepth: number;
  overLimit: number;
  invalid: number;
}

export class Frontier {
  readonly gate: DownloadGate;
  readonly #fingerprint: FingerprintOptions;
  readonly #dedup: boolean;
  readonly #seen: Deduplicator;
  readonly #maxDepth: number;
  readonly #maxPages: number;
  readonly #stats: FrontierStats = { admitted: 0, duplicates: 0, overDepth: 0, overLimit: 0, invalid: 0 };
  readonly #fingerprints = new FingerprintMemo();

  constructor(options: FrontierOptions = {}) {
    this.gate = options.gate ?? OPEN_GATE;
    this.#fingerprint = options.fingerprint ?? {};
    this.#dedup = options.dedup ?? true;
    this.#seen = options.deduplicator ?? new TieredDeduplicator();
    this.#maxDepth = options.maxDepth ?? Number.POSITIVE_INFINITY;
    this.#maxPages = options.maxPages ?? Number.POSITIVE_INFINITY;
  }

  stats(): Readonly<FrontierStats> {
    return this.#stats;
  }

  /**
   * Admit requests (see the module comment). Order is kept. The answer comes at once when the
   * dedup set answers at once (the in-memory set does): a page's links then go from its parse
   * to the queue without a wait in between, during which other pages' work would run and the
   * links would outlive a young-generation GC or two (and be promoted to the old one).
   */
  admit(
    requests: readonly Request[],
    options: AdmitOptions = {},
  ): AdmissionResult | Promise<AdmissionResult> {
    const candidates: Request[] = [];
    const invalid: AdmissionResult['invalid'] = [];
    // The dedup keys, in candidates' order (skipping `skipDedup` ones), gathered in the same pass.
    const keys: string[] | undefined = this.#dedup ? [] : undefined;
    for (const request of requests) {
      try {
        const href = requestHref(request);
        if (request.depth > this.#maxDepth) {
          this.#stats.overDepth++;
          continue;
        }
        const fingerprint = this.#fingerprints.fingerprint(
          request.method,
          normalizeHref(href, this.#fingerprint),
          request.body,
        );
        request.fingerprint = fingerprint;
        // The parsed URL is not kept while the request waits in the queue: ~250 bytes a request,
        // and the queue's in-memory head holds up to 50,000 of them. The downloader parses again.
        request[PARSED_URL] = undefined;
        candidates.push(request);
        if (keys !== undefined && !request.skipDedup) keys.push(request.dedupKey ?? fingerprint);
      } catch (err) {
        this.#stats.invalid++;
        invalid.push({ request, error: err as MocraError });
      }
    }
    if (keys === undefined || keys.length === 0) return this.#count(candidates, invalid, undefined);
    let answer: readonly boolean[] | Promise<readonly boolean[]>;
    try {
      answer =
        options.claim === undefined
          ? this.#seen.markSeen(keys)
          : this.#seen.markSeen(keys, { claim: options.claim, redelivered: options.redelivered ?? false });
    } catch (err) {
      return Promise.reject(err);
    }
    if (answer instanceof Promise) return answer.then((fresh) => this.#count(candidates, invalid, fresh));
    return this.#count(candidates, invalid, answer);
  }

  /** The candidates the dedup set found fresh, under the page limit; the rest counted. */
  #count(
    candidates: readonly Request[],
    invalid: AdmissionResult['invalid'],
    fresh: readonly boolean[] | undefined,
  ): AdmissionResult {
    const admitted: Request[] = [];
    let k = 0;
    for (const request of candidates) {
      if (fresh !== undefined && !request.skipDedup && !fresh[k++]) {
        this.#stats.duplicates++;
        continue;
      }
      if (this.#stats.admitted >= this.#maxPages) {
        this.#stats.overLimit++;
        continue;
      }
      this.#stats.admitted++;
      admitted.push(request);
    }
    return { admitted, invalid };
  }

  /** The handler that admitted under `claim` published its requests (see Deduplicator.releaseClaim). */
  releaseClaim(claim: string): void {
    this.#seen.releaseClaim?.(claim);
  }

  async close(): Promise<void> {
    await this.#seen.close();
  }
}

export function createFrontier(options: FrontierOptions = {}): Frontier {
  return new Frontier(options);
}
