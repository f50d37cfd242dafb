/**
 * Sitemaps, streamed: a sitemap is read chunk by chunk (gunzipped on the fly when it is a gzip
 * file) and parsed with htmlparser2 in XML mode, and its URLs are handed out as they are
 * found — a 50 MB sitemap never sits in memory whole.
 *
 * ```
 *  readSitemap(url) ─▶ fetch ─▶ gzip magic? ─▶ gunzip ─▶ '<'? ─▶ XML: <urlset> ─▶ <url><loc> ─▶ yield
 *                                                   │                 <sitemapindex> ─▶ <sitemap><loc> ─▶ read that one too
 *                                                   └─ otherwise text: one URL a line ─▶ yield
 * ```
 *
 * Forms: `<urlset>`, `<sitemapindex>` (nested up to `maxDepth`), `.xml.gz` (detected by the
 * gzip magic bytes, whatever the Content-Type), plain text. Bounded: `maxBytes` per file
 * after decompression (50 MiB, the protocol's limit), `maxUrls` in all, `maxFiles` fetched;
 * each sitemap is read once (index loops end).
 */
import { pipeline, Readable } from 'node:stream';
import zlib from 'node:zlib';
import { Parser } from 'htmlparser2';
import { InvalidArgumentError, SitemapError } from '../../errors.js';
import {
  createResourceFetcher,
  type FetchedResource,
  type ResourceFetcher,
} from '../robots/resource-fetcher.js';

export interface SitemapEntry {
  /** Absolute http(s) URL of a page. */
  url: string;
  lastmod?: string;
  changefreq?: string;
  priority?: number;
  /** The sitemap file it was listed in. */
  sitemap: string;
}

export interface ReadSitemapOptions {
  /** How sitemaps are fetched. @default an undici GET with 5 redirects */
  fetch?: ResourceFetcher;
  /** Sitemap-index nesting followed (an index listing an index …). @default 3 */
  maxDepth?: number;
  /** Page URLs handed out in all; reading stops there. @default 10000000 */
  maxUrls?: number;
  /** Sitemap files fetched in all. @default 10000 */
  maxFiles?: number;
  /** Bytes of one file after decompression. @default 52428800 (50 MiB) */
  maxBytes?: number;
  signal?: AbortSignal;
  /**
   * Called with a sitemap that could not be read (the others are still read). Without it, the
   * first such error is thrown.
   */
  onError?: (error: SitemapError) => void;
}

interface Found {
  urls: SitemapEntry[];
  children: string[];
}

/** Every page URL listed by the sitemap at `url` (and by the sitemaps an index lists). */
export async function* readSitemap(
  url: string | readonly string[],
  options: ReadSitemapOptions = {},
): AsyncGenerator<SitemapEntry, void, undefined> {
  const fetch = options.fetch ?? createResourceFetcher();
  const maxDepth = options.maxDepth ?? 3;
  const maxUrls = options.maxUrls ?? 10_000_000;
  const maxFiles = options.maxFiles ?? 10_000;
  const maxBytes = options.maxBytes ?? 50 * 1024 * 1024;
  for (const [name, v] of [
    ['maxDepth', maxDepth],
    ['maxUrls', maxUrls],
    ['maxFiles', maxFiles],
    ['maxBytes', maxBytes],
  ] as const) {
    if (!(v >= 0)) throw new InvalidArgumentError(`readSitemap: ${name} must be ≥ 0, got ${v}`);
  }
  const seen = new Set<string>();
  let files = 0;
  let yielded = 0;
  // Depth-first over indexes, but files in the order they are listed.
  const stack: { url: string; depth: number }[] = [];
  for (const u of (typeof url === 'string' ? [url] : [...url]).reverse()) stack.push({ url: u, depth: 0 });
  while (stack.length > 0 && yielded < maxUrls) {
    const { url: current, depth } = stack.pop()!;
    if (seen.has(current)) continue;
    seen.add(current);
    if (files >= maxFiles) {
      report(
        options,
        new SitemapError(current, `not read: the limit of ${maxFiles} sitemap files was reached`),
      );
      break;
    }
    files++;
    const children: string[] = [];
    try {
      for await (const found of streamSitemap(current, fetch, maxBytes, options.signal)) {
        for (const entry of found.urls) {
          if (yielded >= maxUrls) break;
          yielded++;
          yield entry;
        }
        children.push(...found.children);
        if (yielded >= maxUrls) break;
      }
    } catch (err) {
      report(
        options,
        err instanceof SitemapError
          ? err
          : new SitemapError(current, err instanceof Error ? err.message : String(err), { cause: err }),
      );
      continue;
    }
    if (children.length > 0) {
      if (depth + 1 > maxDepth) {
        report(
          options,
          new SitemapError(current, `index nesting deeper than maxDepth ${maxDepth}; children skipped`),
        );
        continue;
      }
      for (let i = children.length - 1; i >= 0; i--) stack.push({ url: children[i]!, depth: depth + 1 });
    }
  }
}

function report(options: ReadSitemapOptions, error: SitemapError): void {
  if (options.onError) options.onError(error);
  else throw error;
}

/** One sitemap file: fetch, gunzip if needed, parse; yields what each chunk revealed. */
async function* streamSitemap(
  url: string,
  fetch: ResourceFetcher,
  maxBytes: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<Found> {
  let res: FetchedResource;
  try {
    res = await fetch(url, signal ? { signal } : {});
  } catch (err) {
    throw new SitemapError(url, `fetch failed: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
      retryable: true,
    });
  }
  if (res.status < 200 || res.status >= 300) {
    await res.discard().catch(() => {});
    throw new SitemapError(url, `HTTP ${res.status}`, { retryable: res.status >= 500 || res.status === 429 });
  }
  const parser = new SitemapParser(res.url);
  const decoder = new TextDecoder('utf-8');
  let total = 0;
  for await (const chunk of decompressed(res)) {
    total += chunk.length;
    if (total > maxBytes) {
      await res.discard().catch(() => {});
      throw new SitemapError(url, `larger than maxBytes ${maxBytes} after decompression`);
    }
    parser.write(decoder.decode(chunk, { stream: true }));
    const found = parser.take();
    if (found.urls.length > 0 || found.children.length > 0) yield found;
  }
  parser.write(decoder.decode());
  parser.end();
  const rest = parser.take();
  if (rest.urls.length > 0 || rest.children.length > 0) yield rest;
}

/** The body, gunzipped when it starts with the gzip magic bytes (1f 8b). */
async function* decompressed(res: FetchedResource): AsyncGenerator<Uint8Array> {
  const it = res.body[Symbol.asyncIterator]();
  let first = await it.next();
  while (!first.done && first.value.length === 0) first = await it.next();
  if (first.done) return;
  const head = first.value;
  const rest: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator]: () => it,
  };
  if (!(head[0] === 0x1f && head[1] === 0x8b)) {
    yield head;
    yield* rest;
    return;
  }
  const source = Readable.from(
    (async function* () {
      yield head;
      yield* rest;
    })(),
  );
  const gunzip = zlib.createGunzip();
  pipeline(source, gunzip, () => {});
  try {
    for await (const chunk of gunzip) yield chunk as Uint8Array;
  } catch (err) {
    throw new SitemapError(res.url, `bad gzip: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
}

/**
 * Streaming parser of one sitemap file, XML or text (decided by its first non-blank
 * character). Feed text with `write`, collect with `take`.
 */
export class SitemapParser {
  readonly #source: string;
  #mode: 'unknown' | 'xml' | 'text' = 'unknown';
  #xml: Parser | undefined;
  #textRest = '';
  #urls: SitemapEntry[] = [];
  #children: string[] = [];
  // XML state
  #path: string[] = [];
  #text = '';
  #current: { loc?: string; lastmod?: string; changefreq?: string; priority?: string } | undefined;

  constructor(sourceUrl: string) {
    this.#source = sourceUrl;
  }

  write(text: string): void {
    if (this.#mode === 'unknown') {
      const trimmed = text.replace(/^\uFEFF/, '').trimStart();
      if (trimmed === '') return;
      this.#mode = trimmed.startsWith('<') ? 'xml' : 'text';
    }
    if (this.#mode === 'xml') this.#xmlParser().write(text);
    else this.#writeText(text);
  }

  end(): void {
    if (this.#mode === 'xml') this.#xmlParser().end();
    else if (this.#mode === 'text') {
      this.#line(this.#textRest);
      this.#textRest = '';
    }
  }

  /** URLs and child sitemaps found since the last call. */
  take(): Found {
    const out = { urls: this.#urls, children: this.#children };
    this.#urls = [];
    this.#children = [];
    return out;
  }

  #writeText(text: string): void {
    const all = this.#textRest + text;
    const lines = all.split(/\r?\n/);
    this.#textRest = lines.pop() ?? '';
    for (const line of lines) this.#line(line);
  }

  #line(line: string): void {
    const url = absoluteHttp(line.trim());
    if (url !== undefined) this.#urls.push({ url, sitemap: this.#source });
  }

  #xmlParser(): Parser {
    this.#xml ??= new Parser(
      {
        onopentag: (name) => {
          const local = localName(name);
          this.#path.push(local);
          this.#text = '';
          if (local === 'url' || local === 'sitemap') this.#current = {};
        },
        ontext: (text) => {
          this.#text += text;
        },
        onclosetag: (name) => {
          const local = localName(name);
          this.#path.pop();
          const parent = this.#path[this.#path.length - 1];
          const value = this.#text.trim();
          this.#text = '';
          const current = this.#current;
          if ((parent === 'url' || parent === 'sitemap') && current) {
            if (local === 'loc') current.loc = value;
            else if (local === 'lastmod') current.lastmod = value;
            else if (local === 'changefreq') current.changefreq = value;
            else if (local === 'priority') current.priority = value;
          } else if (local === 'url' && current) {
            const url = absoluteHttp(current.loc ?? '');
            if (url !== undefined) {
              const entry: SitemapEntry = { url, sitemap: this.#source };
              if (current.lastmod) entry.lastmod = current.lastmod;
              if (current.changefreq) entry.changefreq = current.changefreq;
              const p = current.priority === undefined ? Number.NaN : Number(current.priority);
              if (Number.isFinite(p)) entry.priority = p;
              this.#urls.push(entry);
            }
            this.#current = undefined;
          } else if (local === 'sitemap' && current) {
            const url = absoluteHttp(current.loc ?? '');
            if (url !== undefined) this.#children.push(url);
            this.#current = undefined;
          }
        },
      },
      { xmlMode: true, decodeEntities: true },
    );
    return this.#xml;
  }
}

function localName(name: string): string {
  const i = name.indexOf(':');
  return (i >= 0 ? name.slice(i + 1) : name).toLowerCase();
}

function absoluteHttp(text: string): string | undefined {
  if (text === '' || !/^https?:\/\//i.test(text)) return undefined;
  try {
    const u = new URL(text);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}
