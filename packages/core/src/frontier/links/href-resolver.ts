/**
 * Link resolution against one base URL without the URL parser for the hrefs most pages are
 * made of: a path on the page's own origin (`/p/1.html`, `http://host/p/1.html` written out in
 * full) or relative to the page's directory (`next.html`, `sub/x.html`), written with characters
 * the WHATWG serializer leaves as they are. Their serialization is then a concatenation:
 *
 *   base: http://host:8080/dir/page.html        (no user or password)
 *   '/p/1.html?x=1#top'      → http://host:8080/p/1.html?x=1
 *   'next.html'              → http://host:8080/dir/next.html
 *   'http://host:8080/a'     → http://host:8080/a          (the base's origin, byte for byte)
 *
 * Anything else answers `undefined` and goes to `new URL`: another host or scheme (`//x/`,
 * `mailto:`, `HTTP://host/`), a query or fragment alone, dot segments (`.`, `..`, `%2e`), a
 * backslash, whitespace or a control inside the href, non-ASCII, or a character some set of the
 * serializer percent-encodes or that differs between its versions (`"<>^`{|}[]` and `'` in a
 * query). The differential test against `new URL` is what holds this file to the standard.
 */

/** Path characters the serializer never rewrites: unreserved, sub-delims, `:`, `@`, `%`. */
const PATH_SAFE = new Uint8Array(128);
for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@%")
  PATH_SAFE[c.charCodeAt(0)] = 1;
/** The same in a query, plus `/` and `?`, minus `'` (percent-encoded in a special URL's query). */
const QUERY_SAFE = PATH_SAFE.slice();
QUERY_SAFE[39 /* ' */] = 0;
QUERY_SAFE[47 /* / */] = 1;
QUERY_SAFE[63 /* ? */] = 1;

const SLASH = 47;
const QUESTION = 63;
const HASH = 35;
const DOT = 46;
const PERCENT = 37;
const COLON = 58;

export class HrefResolver {
  /** `scheme://host[:port]` of the base, or undefined when it carries credentials (never fast). */
  readonly #origin: string | undefined;
  /** The base's path up to and including its last `/`. */
  readonly #directory: string;
  /** The hostname of every URL this resolver builds itself (the base's). */
  readonly hostname: string;

  constructor(base: URL) {
    this.hostname = base.hostname;
    this.#origin =
      base.username === '' && base.password === '' ? `${base.protocol}//${base.host}` : undefined;
    const path = base.pathname;
    this.#directory = path.slice(0, path.lastIndexOf('/') + 1);
  }

  /**
   * The serialized absolute URL of `href` (already trimmed of C0 controls and spaces) without its
   * fragment, when the fast path applies; otherwise undefined (resolve with `new URL`).
   */
  resolve(href: string): string | undefined {
    const origin = this.#origin;
    // An empty href is the page itself, which the parser resolves with its query: not ours.
    if (origin === undefined || href === '') return undefined;
    const first = href.charCodeAt(0);
    if (first === SLASH) {
      const second = href.charCodeAt(1);
      if (second === SLASH || second === 92 /* \ */) return undefined;
      const end = safeEnd(href, 0, false);
      return end < 0 ? undefined : origin + href.slice(0, end);
    }
    if (href.startsWith(origin) && href.charCodeAt(origin.length) === SLASH) {
      const end = safeEnd(href, origin.length, false);
      return end < 0 ? undefined : href.slice(0, end);
    }
    if (first === QUESTION || first === HASH) return undefined;
    const end = safeEnd(href, 0, true);
    return end < 0 ? undefined : origin + this.#directory + href.slice(0, end);
  }
}

/**
 * Where the path and query of `s` starting at `from` end (at `#` or the end), or -1 when a
 * character or a dot segment needs the URL parser. `relative`: the href is a relative path,
 * whose first segment must hold no `:` (it would read as a scheme).
 */
function safeEnd(s: string, from: number, relative: boolean): number {
  const length = s.length;
  let segment = from; // start of the current path segment
  let inQuery = false;
  let firstSegment = relative;
  for (let i = from; i < length; i++) {
    const c = s.charCodeAt(i);
    if (c === HASH) {
      if (!inQuery && isDotSegment(s, segment, i)) return -1;
      return i;
    }
    if (c >= 128) return -1;
    if (inQuery) {
      if (QUERY_SAFE[c] === 0) return -1;
      continue;
    }
    if (c === SLASH || c === QUESTION) {
      if (isDotSegment(s, segment, i)) return -1;
      firstSegment = false;
      segment = i + 1;
      if (c === QUESTION) inQuery = true;
      continue;
    }
    if (PATH_SAFE[c] === 0) return -1;
    if (c === PERCENT && s.charCodeAt(i + 1) === 50 /* 2 */ && (s.charCodeAt(i + 2) | 32) === 101 /* e */)
      return -1;
    if (c === COLON && firstSegment) return -1;
  }
  if (!inQuery && isDotSegment(s, segment, length)) return -1;
  return length;
}

/** Whether s[start, end) is `.` or `..` (their percent-encoded forms are rejected earlier). */
function isDotSegment(s: string, start: number, end: number): boolean {
  const n = end - start;
  if (n === 1) return s.charCodeAt(start) === DOT;
  return n === 2 && s.charCodeAt(start) === DOT && s.charCodeAt(start + 1) === DOT;
}
