/**
 * Request fingerprints: the dedup key of a request and the first half of every item's
 * `itemId`. Two requests that fetch the same resource get the same fingerprint:
 *
 *   fingerprint = base64url(sha1( METHOD '\n' normalizedUrl '\n' body ))
 *
 * URL normalization (what "the same URL" means):
 *   - scheme and host lower-case (WHATWG URL parsing already does this and punycodes IDNs);
 *   - the default port dropped (http :80, https :443);
 *   - the fragment dropped (it never reaches the server), and an empty query (`/x?`);
 *   - an empty path becomes '/';
 *   - optionally, query parameters sorted by name (stable, so equal names keep their order)
 *     and parameters removed by name (tracking parameters such as utm_source). Parameters are
 *     moved or dropped as written, never re-encoded: `?q=a+b` and `?q=a%20b`, `?x=%2F` and
 *     `?x=/`, `?a` and `?a=` stay different URLs (a server may tell them apart).
 *
 * sha1 is used for speed and spread, not for security; a collision costs one skipped page.
 */
import { hash } from 'node:crypto';
import { InvalidUrlError } from '../errors.js';
import { PARSED_URL, type Request } from '../model/request.js';

export interface FingerprintOptions {
  /** Sort query parameters by name before hashing, so `?a=1&b=2` equals `?b=2&a=1`. @default false */
  sortQuery?: boolean;
  /** Query parameter names to drop before hashing (exact names, case-sensitive). @default [] */
  stripParams?: readonly string[];
}

/**
 * Parse `url` as an absolute http(s) URL, or throw InvalidUrlError. `base` resolves relative
 * URLs (a response URL for `cx.follow`).
 */
export function parseHttpUrl(url: string, base?: string): URL {
  let parsed: URL;
  try {
    parsed = base === undefined ? new URL(url) : new URL(url, base);
  } catch (err) {
    throw new InvalidUrlError(url, base === undefined ? 'not an absolute URL' : 'cannot be resolved', {
      cause: err,
    });
  }
  // Checked on href (one string the URL already holds) rather than through getters that slice
  // a new string per call: this runs for every link a crawl sees. http(s) URLs always have a
  // host (WHATWG parsing rejects them otherwise).
  const href = parsed.href;
  if (!href.startsWith('http://') && !href.startsWith('https://')) {
    throw new InvalidUrlError(
      url,
      `unsupported scheme '${parsed.protocol.slice(0, -1)}' (only http and https)`,
    );
  }
  return parsed;
}

/** The normalized form of an absolute http(s) URL (see the module comment). Throws InvalidUrlError. */
export function normalizeUrl(url: string | URL, options: FingerprintOptions = {}): string {
  return normalizeParsedUrl(typeof url === 'string' ? parseHttpUrl(url) : url, options);
}

/** Like {@link normalizeUrl}, for a URL already parsed (and checked). Does not modify `parsed`. */
export function normalizeParsedUrl(parsed: URL, options: FingerprintOptions = {}): string {
  return normalizeHref(parsed.href, options);
}

/** Like {@link normalizeUrl}, for the href of a URL already parsed (and checked). */
export function normalizeHref(href: string, options: FingerprintOptions = {}): string {
  // WHATWG URL already lower-cases scheme and host and drops default ports; the fragment is ours to drop.
  const hashAt = href.indexOf('#');
  let url = hashAt < 0 ? href : href.slice(0, hashAt);
  const queryAt = url.indexOf('?');
  if (queryAt < 0) return url;
  if (queryAt === url.length - 1) return url.slice(0, -1);
  if (options.sortQuery || (options.stripParams?.length ?? 0) > 0) {
    const query = rewriteQuery(url.slice(queryAt + 1), options);
    url = query === '' ? url.slice(0, queryAt) : `${url.slice(0, queryAt + 1)}${query}`;
  }
  return url;
}

/** Sorts and strips `a=b&c` parameters by their decoded names, keeping each one's bytes as written. */
function rewriteQuery(query: string, options: FingerprintOptions): string {
  let params = query.split('&').map((raw) => ({ raw, name: paramName(raw) }));
  const strip = options.stripParams;
  if (strip !== undefined && strip.length > 0) params = params.filter((p) => !strip.includes(p.name));
  // Array#sort is stable: parameters of one name keep their order.
  if (options.sortQuery) params.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return params.map((p) => p.raw).join('&');
}

/** A parameter's name as a form decoder reads it (`+` is a space, `%xx` decoded). */
function paramName(raw: string): string {
  const eq = raw.indexOf('=');
  const name = (eq < 0 ? raw : raw.slice(0, eq)).replaceAll('+', ' ');
  if (!name.includes('%')) return name;
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/**
 * The parsed URL of a request, parsed at most once: `cx.follow` leaves the URL it resolved on
 * the request, and admission and the downloader reuse it while `request.url` is unchanged.
 * Throws InvalidUrlError.
 */
export function requestUrl(request: Request): URL {
  const cached = request[PARSED_URL];
  if (cached !== undefined && typeof cached !== 'string' && cached.href === request.url) return cached;
  const parsed = parseHttpUrl(request.url);
  request[PARSED_URL] = parsed;
  return parsed;
}

/**
 * The serialized URL of a request, checked as {@link requestUrl} does; a link resolved without
 * the URL parser (its href cached as a string) is not parsed at all. Throws InvalidUrlError.
 */
export function requestHref(request: Request): string {
  const cached = request[PARSED_URL];
  if (cached !== undefined && (typeof cached === 'string' ? cached : cached.href) === request.url)
    return request.url;
  return requestUrl(request).href;
}

/** The fingerprint of a request: method, normalized URL and body (see the module comment). */
export function fingerprintRequest(request: Request, options: FingerprintOptions = {}): string {
  return fingerprintParts(request.method, normalizeUrl(request.url, options), request.body);
}

/** Fingerprint from parts already normalized (the frontier calls this with a URL it parsed once). */
export function fingerprintParts(
  method: string,
  normalizedUrl: string,
  body: string | Uint8Array | undefined,
): string {
  if (body === undefined || body.length === 0) return fingerprintOfHead(`${method}\n${normalizedUrl}`);
  if (typeof body === 'string') return hash('sha1', `${method}\n${normalizedUrl}\n${body}`, 'base64url');
  const head = Buffer.from(`${method}\n${normalizedUrl}\n`);
  return hash('sha1', Buffer.concat([head, body]), 'base64url');
}

/**
 * The fingerprint of a request without a body, from the text it hashes: `METHOD '\n'
 * normalizedUrl` (the frontier's FingerprintMemo keeps fingerprints by that text).
 */
export function fingerprintOfHead(head: string): string {
  return hash('sha1', head, 'base64url');
}
