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
 * each sitemap is read once (index loops end); a `<loc>` or text line longer than `MAX_LOC`
 * is skipped without being kept. A file that breaks a bound costs that file, not the others.
 *
 * Where a sitemap's URLs may point (sitemaps.org, "Sitemap file location"): under the sitemap's
 * own location — its scheme, host, port and directory — so a sitemap on one host can never seed
 * another host. A sitemap listed by an index may also list what the index may (an index lists
 * only sitemaps of its own origin). A sitemap that an origin's robots.txt lists on that origin
 * covers the whole origin (robots.txt speaks for the site's root); one hosted on another origin
 * covers the listing origin only with `crossSubmits` (the protocol's cross-submits). URLs outside
 * are skipped, and `onError` hears of it once per file.
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
   * first such error is thrown. Also told (never thrown) of URLs skipped for being outside a
   * sitemap's location.
   */
  onError?: (error: SitemapError) => void;
  /**
   * The origin whose robots.txt listed these sitemaps (`discoverSitemaps`): a listed sitemap on
   * that origin may list any of its URLs.
   */
  listedBy?: string;
  /**
   * Let a sitemap hosted on another origin than `listedBy` list URLs of `listedBy` (the
   * protocol's cross-submits through robots.txt).
   * @default false
   */
  crossSubmits?: boolean;
}

/** Longest `<loc>` or text line read (the protocol caps URLs at 2,048 characters). */
export const MAX_LOC = 8192;

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
  // Depth-first over indexes, but files in the order they are listed. `scope`: the URL prefixes
  // the file's entries must start with.
  const stack: { url: string; depth: number; scope: string[] }[] = [];
  for (const u of (typeof url === 'string' ? [url] : [...url]).reverse())
    stack.push({ url: u, depth: 0, scope: topScope(u, options) });
  while (stack.length > 0 && yielded < maxUrls) {
    const { url: current, depth, scope } = stack.pop()!;
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
    let outside = 0;
    let example = '';
    try {
      for await (const found of streamSitemap(current, fetch, maxBytes, options.signal)) {
        for (const entry of found.urls) {
          if (yielded >= maxUrls) break;
          if (!inScope(entry.url, scope)) {
            if (outside++ === 0) example = entry.url;
            continue;
          }
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
    } finally {
      if (outside > 0)
        options.onError?.(
          new SitemapError(
            current,
            `${outside} URL(s) outside the sitemap's location (${scope.join(', ')}) skipped, e.g. ${example}`,
          ),
        );
    }
    if (children.length > 0) {
      if (depth + 1 > maxDepth) {
        report(
          options,
          new SitemapError(current, `index nesting deeper than maxDepth ${maxDepth}; children skipped`),
        );
        continue;
      }
      const origin = new URL(current).origin;
      const foreign = children.filter((c) => new URL(c).origin !== origin);
      if (foreign.length > 0)
        options.onError?.(
          new SitemapError(
            current,
            `${foreign.length} sitemap(s) of another origin skipped, e.g. ${foreign[0]}`,
          ),
        );
      for (let i = children.length - 1; i >= 0; i--) {
        const child = children[i]!;
        if (new URL(child).origin !== origin) continue;
        stack.push({ url: child, depth: depth + 1, scope: [directoryOf(child), ...scope] });
      }
    }
  }
}

/** The prefixes a sitemap given to readSitemap may list (see the module comment). */
function topScope(url: string, options: ReadSitemapOptions): string[] {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [];
  }
  const scope = [directoryOf(parsed.href)];
  if (options.listedBy !== undefined) {
    const listedBy = new URL(options.listedBy).origin;
    if (parsed.origin === listedBy || options.crossSubmits === true) scope.push(`${listedBy}/`);
  }
  return scope;
}

/** `scheme://host[:port]/dir/` of a URL: where its sitemap's entries may point. */
function directoryOf(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname.slice(0, u.pathname.lastIndexOf('/') + 1)}`;
}

function inScope(url: string, scope: readonly string[]): boolean {
  for (const prefix of scope) if (url.startsWith(prefix)) return true;
  return false;
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
  #lineTooLong = false;
  #urls: SitemapEntry[] = [];
  #children: string[] = [];
  // XML state
  #path: string[] = [];
  #text = '';
  /** The text of the element being read passed MAX_LOC: its value is dropped. */
  #textTooLong = false;
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
    else if (this.#mode === 'text') this.#endLine();
  }

  /** URLs and child sitemaps found since the last call. */
  take(): Found {
    const out = { urls: this.#urls, children: this.#children };
    this.#urls = [];
    this.#children = [];
    return out;
  }

  /** Lines split in the new text only: a long line costs its length once, not once per chunk. */
  #writeText(text: string): void {
    let start = 0;
    for (;;) {
      const nl = text.indexOf('\n', start);
      this.#appendLine(nl < 0 ? text.slice(start) : text.slice(start, nl));
      if (nl < 0) return;
      this.#endLine();
      start = nl + 1;
    }
  }

  #appendLine(part: string): void {
    if (this.#lineTooLong || part === '') return;
    if (this.#textRest.length + part.length > MAX_LOC) {
      this.#lineTooLong = true;
      this.#textRest = '';
      return;
    }
    this.#textRest += part;
  }

  #endLine(): void {
    if (!this.#lineTooLong) this.#line(this.#textRest);
    this.#textRest = '';
    this.#lineTooLong = false;
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
          this.#textTooLong = false;
          if (local === 'url' || local === 'sitemap') this.#current = {};
        },
        ontext: (text) => {
          if (this.#textTooLong) return;
          if (this.#text.length + text.length > MAX_LOC) {
            this.#textTooLong = true;
            this.#text = '';
          } else this.#text += text;
        },
        onclosetag: (name) => {
          const local = localName(name);
          this.#path.pop();
          const parent = this.#path[this.#path.length - 1];
          const value = this.#textTooLong ? '' : this.#text.trim();
          this.#text = '';
          this.#textTooLong = false;
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
