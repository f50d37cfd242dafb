/**
 * A response cache for development (Scrapy's HTTPCACHE): while a spider is being written, each
 * page is fetched once and replayed from disk on later runs, so parse code can be changed and
 * run again without touching the site. Entries are keyed by the request fingerprint (method,
 * URL, body — what dedup compares), one JSON file each:
 *
 * ```
 *   <dir>/<fp[0..2]>/<fp>.json   { storedAt, response: { url, status, headers, body, … } }
 * ```
 *
 * An entry older than `ttlMs` is fetched again and replaced. Only requests with a fingerprint
 * (every request the frontier admitted) are cached. Writes go to a temporary file renamed into
 * place, so a run killed mid-write never leaves a torn entry.
 */
import fs from 'node:fs';
import path from 'node:path';
import { InvalidArgumentError } from '../errors.js';
import type { Request } from '../model/request.js';
import { Response, type ResponseData } from '../model/response.js';

export interface HttpCacheOptions {
  /** Directory of the entries (created when missing). */
  dir: string;
  /** How long an entry is replayed, in ms (0: forever). @default 0 */
  ttlMs?: number;
  /** Which statuses are stored. @default every status below 500 */
  statuses?: (status: number) => boolean;
}

export interface HttpCacheStats {
  hits: number;
  misses: number;
  stored: number;
}

export class HttpCache {
  readonly dir: string;
  readonly ttlMs: number;
  readonly #statuses: (status: number) => boolean;
  readonly #stats: HttpCacheStats = { hits: 0, misses: 0, stored: 0 };

  constructor(options: HttpCacheOptions) {
    if (typeof options?.dir !== 'string' || options.dir === '') {
      throw new InvalidArgumentError('httpCache: dir must be a non-empty path');
    }
    const ttl = options.ttlMs ?? 0;
    if (!Number.isInteger(ttl) || ttl < 0)
      throw new InvalidArgumentError('httpCache: ttlMs must be an integer ≥ 0');
    this.dir = path.resolve(options.dir);
    this.ttlMs = ttl;
    this.#statuses = options.statuses ?? ((s) => s < 500);
    fs.mkdirSync(this.dir, { recursive: true });
  }

  stats(): HttpCacheStats {
    return { ...this.#stats };
  }

  /** The stored response for the request (fresh), with the request as its own; else undefined. */
  get(request: Request, now = Date.now()): Response | undefined {
    const file = this.#fileOf(request);
    if (file === undefined) return undefined;
    let entry: { storedAt: number; response: ResponseData };
    try {
      entry = JSON.parse(fs.readFileSync(file, 'utf8')) as typeof entry;
    } catch {
      this.#stats.misses++;
      return undefined; // missing, or unreadable: fetched again and rewritten
    }
    if (this.ttlMs > 0 && now - entry.storedAt > this.ttlMs) {
      this.#stats.misses++;
      return undefined;
    }
    this.#stats.hits++;
    const stored = Response.from({ ...entry.response, request: request.toJSON() });
    return new Response({
      url: stored.url,
      status: stored.status,
      headers: stored.headers,
      body: stored.body,
      request,
      redirects: stored.redirects,
      durationMs: 0,
    });
  }

  /** Stores a response (when its status is cached). */
  set(request: Request, response: Response, now = Date.now()): void {
    const file = this.#fileOf(request);
    if (file === undefined || !this.#statuses(response.status)) return;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const temp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(temp, JSON.stringify({ storedAt: now, response: response.toJSON() }));
    fs.renameSync(temp, file);
    this.#stats.stored++;
  }

  #fileOf(request: Request): string | undefined {
    const fp = request.fingerprint;
    if (fp === undefined || !/^[\w-]+$/.test(fp)) return undefined;
    return path.join(this.dir, fp.slice(0, 2), `${fp}.json`);
  }
}

export function createHttpCache(options: HttpCacheOptions): HttpCache {
  return new HttpCache(options);
}
