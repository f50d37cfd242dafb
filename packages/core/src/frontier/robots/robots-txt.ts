/**
 * robots.txt parsed and matched the way RFC 9309 says, with the leniencies of Google's reference
 * parser where the RFC leaves room (site owners check their files against Google's):
 *
 * ```
 *  bytes ─▶ lines (LF, CR LF or CR; a leading UTF-8 BOM, whole or partial, skipped; a line is cut
 *           at 16,663 characters) ─▶ records `key: value` (comments cut at '#', the colon may be
 *           a space when the line has exactly two words, common misspellings of the keys accepted)
 *        ─▶ groups: user-agent lines followed by rules; only a rule after a user-agent line ends
 *           the run of user-agent lines, so a Sitemap or unknown line between them does not split
 *           a group; rules before the first user-agent line are ignored
 *        ─▶ for one product token: every group naming it, merged; else every `*` group; else none.
 *           A group that names the token but has no rules allows everything.
 * ```
 *
 * Matching (RFC 9309 §2.2.2–2.2.3): a rule's path is matched from the first octet of the URL's
 * path and query; `*` is any run of characters, `$` at the end anchors; the longest matching
 * pattern wins, and `allow` wins a tie. `/robots.txt` itself is always allowed. Both sides are
 * compared in one canonical form, so that `Disallow: /~joe/` blocks `/%7Ejoe/` and
 * `Disallow: /foo/bar/%62%61%7A` blocks `/foo/bar/baz`:
 *
 *   - `%xx` of an unreserved character (letters, digits, `-._~`) is decoded, any other `%xx` is
 *     kept with upper-case hex;
 *   - a character outside ASCII, a control, space, or one of `"<>\^`{|}` is percent-encoded
 *     (UTF-8);
 *   - `*` and `$` of the URL, and `$` inside a pattern, become `%2A` and `%24`, so that the
 *     pattern `/path/file-with-a-%2A.html` matches the URL `/path/file-with-a-*.html` (§2.2.3).
 *
 * Worst case: a pattern with wildcards is matched by a set of positions (no backtracking), so
 * matching costs at most pattern length × path length, whatever the file says.
 */

/** A `key: value` line of robots.txt. */
export interface RobotsRecord {
  /** 1-based line number. */
  line: number;
  key: RobotsKey;
  /** The key as written (for `unknown`). */
  rawKey: string;
  /** The value, trimmed, without comment. */
  value: string;
}

export type RobotsKey = 'user-agent' | 'allow' | 'disallow' | 'sitemap' | 'crawl-delay' | 'unknown';

/** What a product token may fetch from one robots.txt. */
export interface RobotsRules {
  /** May the product token fetch `url`? Only the path and query of the URL are looked at. */
  isAllowed(url: URL | string): boolean;
  /** Which groups applied: the token's own, the `*` groups, or none (everything allowed). */
  readonly group: 'agent' | 'global' | 'none';
  /** `Crawl-delay` of the groups that applied, in seconds (not part of RFC 9309). */
  readonly crawlDelaySeconds: number | undefined;
  /** Every `Sitemap:` URL, in file order, whatever group it stood in. */
  readonly sitemaps: readonly string[];
}

/** Lines are cut here (Google's limit: eight times the longest URL browsers accept). */
const MAX_LINE = 2083 * 8 - 1;

/** The records of a robots.txt body (bytes are read as UTF-8). */
export function parseRobotsRecords(body: string | Uint8Array): RobotsRecord[] {
  const text = typeof body === 'string' ? stripBomText(body) : decodeBody(body);
  const records: RobotsRecord[] = [];
  let line = 0;
  let start = 0;
  const n = text.length;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? text.charCodeAt(i) : 10;
    if (c !== 10 && c !== 13) continue;
    line++;
    const end = Math.min(i, start + MAX_LINE);
    const record = parseLine(text.slice(start, end), line);
    if (record) records.push(record);
    // CR LF is one line end.
    if (c === 13 && i + 1 < n && text.charCodeAt(i + 1) === 10) i++;
    start = i + 1;
  }
  return records;
}

function stripBomText(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** UTF-8, with a whole or partial BOM at the start skipped (a partial BOM is garbage, not a line). */
function decodeBody(bytes: Uint8Array): string {
  let skip = 0;
  const bom = [0xef, 0xbb, 0xbf];
  while (skip < 3 && bytes[skip] === bom[skip]) skip++;
  return Buffer.from(bytes.buffer, bytes.byteOffset + skip, bytes.length - skip).toString('utf8');
}

const WHITESPACE = /[ \t]/;

function parseLine(raw: string, line: number): RobotsRecord | undefined {
  const hash = raw.indexOf('#');
  const text = trimAscii(hash >= 0 ? raw.slice(0, hash) : raw);
  if (text === '') return undefined;
  let sep = text.indexOf(':');
  if (sep < 0) {
    // "Disallow /x": a space stands for the colon when the line has exactly two words.
    const space = text.search(WHITESPACE);
    if (space < 0) return undefined;
    const rest = trimAscii(text.slice(space));
    if (WHITESPACE.test(rest)) return undefined;
    sep = space;
  }
  const rawKey = trimAscii(text.slice(0, sep));
  if (rawKey === '') return undefined;
  return { line, key: keyOf(rawKey), rawKey, value: trimAscii(text.slice(sep + 1)) };
}

/** Trims ASCII whitespace only: `String#trim` would also eat a U+FEFF that makes a line garbage. */
function trimAscii(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && isAsciiSpace(s.charCodeAt(start))) start++;
  while (end > start && isAsciiSpace(s.charCodeAt(end - 1))) end--;
  return start === 0 && end === s.length ? s : s.slice(start, end);
}

function isAsciiSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13);
}

/** Keys compare as prefixes, case-insensitively, with the misspellings Google accepts. */
function keyOf(raw: string): RobotsKey {
  const k = raw.toLowerCase();
  if (k.startsWith('user-agent') || k.startsWith('useragent') || k.startsWith('user agent'))
    return 'user-agent';
  if (k.startsWith('allow')) return 'allow';
  if (
    k.startsWith('disallow') ||
    k.startsWith('dissallow') ||
    k.startsWith('dissalow') ||
    k.startsWith('disalow') ||
    k.startsWith('diasllow') ||
    k.startsWith('disallaw')
  )
    return 'disallow';
  if (k.startsWith('sitemap') || k.startsWith('site-map')) return 'sitemap';
  if (k.startsWith('crawl-delay') || k.startsWith('crawldelay')) return 'crawl-delay';
  return 'unknown';
}

/**
 * The product token of a user-agent value: its leading letters, `-` and `_` (`Foo Bar` and
 * `Foo/1.0` name `foo`), lower-case.
 */
export function productToken(value: string): string {
  let end = 0;
  while (end < value.length) {
    const c = value.charCodeAt(end) | 32;
    if (!((c >= 97 && c <= 122) || value[end] === '-' || value[end] === '_')) break;
    end++;
  }
  return value.slice(0, end).toLowerCase();
}

/** RFC 9309 §2.2.1: a product token is one or more of `a-zA-Z_-`. */
export function isValidProductToken(value: string): boolean {
  return value.length > 0 && productToken(value).length === value.length;
}

interface Group {
  agents: string[];
  global: boolean;
  rules: RobotsRecord[];
  crawlDelay: string | undefined;
  closed: boolean;
}

/**
 * The rules of `body` for the product token `token` (such as `mocra`, compared case-insensitively;
 * {@link productToken} takes one from a User-Agent string).
 */
export function compileRobotsTxt(body: string | Uint8Array, token: string): RobotsRules {
  const records = parseRobotsRecords(body);
  const wanted = token.toLowerCase();
  const groups: Group[] = [];
  const sitemaps: string[] = [];
  let current: Group | undefined;
  for (const r of records) {
    switch (r.key) {
      case 'user-agent':
        if (current === undefined || current.closed) {
          current = { agents: [], global: false, rules: [], crawlDelay: undefined, closed: false };
          groups.push(current);
        }
        // '*' alone, or followed by a space and anything, is the global group.
        if (r.value[0] === '*' && (r.value.length === 1 || /\s/.test(r.value[1]!))) current.global = true;
        else current.agents.push(productToken(r.value));
        break;
      case 'allow':
      case 'disallow':
        if (current === undefined) break;
        current.rules.push(r);
        current.closed = true;
        break;
      case 'crawl-delay':
        if (current !== undefined) current.crawlDelay ??= r.value;
        break;
      case 'sitemap':
        if (r.value !== '') sitemaps.push(r.value);
        break;
      case 'unknown':
        break;
    }
  }
  let chosen = wanted === '' ? [] : groups.filter((g) => g.agents.includes(wanted));
  let group: RobotsRules['group'] = 'agent';
  if (chosen.length === 0) {
    chosen = groups.filter((g) => g.global);
    group = chosen.length > 0 ? 'global' : 'none';
  }
  const rules: CompiledRule[] = [];
  let crawlDelaySeconds: number | undefined;
  for (const g of chosen) {
    for (const r of g.rules) addRule(rules, r.key === 'allow', r.value);
    if (crawlDelaySeconds === undefined && g.crawlDelay !== undefined) {
      const d = Number(g.crawlDelay);
      if (g.crawlDelay !== '' && Number.isFinite(d) && d >= 0) crawlDelaySeconds = d;
    }
  }
  // Longest pattern first, allow before disallow at equal length: the first match decides.
  rules.sort((a, b) => b.priority - a.priority || Number(b.allow) - Number(a.allow));
  return {
    group,
    crawlDelaySeconds,
    sitemaps,
    isAllowed(url) {
      const path = canonicalPath(pathAndQuery(url));
      if (path === '/robots.txt') return true;
      for (const rule of rules) if (rule.matches(path)) return rule.allow;
      return true;
    },
  };
}

interface CompiledRule {
  allow: boolean;
  /** Length of the canonical pattern (RFC 9309: "the match that has the most octets"). */
  priority: number;
  matches(path: string): boolean;
}

function addRule(rules: CompiledRule[], allow: boolean, value: string): void {
  // An empty pattern matches nothing (`Disallow:` allows everything).
  if (value === '') return;
  const pattern = canonicalPattern(value);
  rules.push({ allow, priority: pattern.length, matches: matcherOf(pattern) });
  // Google's reading of `Allow: /dir/index.html`: the directory itself is allowed too.
  if (allow) {
    const slash = pattern.lastIndexOf('/');
    if (slash >= 0 && pattern.startsWith('/index.htm', slash)) {
      const dir = `${pattern.slice(0, slash + 1)}$`;
      rules.push({ allow, priority: dir.length, matches: matcherOf(dir) });
    }
  }
}

function matcherOf(pattern: string): (path: string) => boolean {
  const anchored = pattern.endsWith('$');
  const body = anchored ? pattern.slice(0, -1) : pattern;
  if (!body.includes('*')) return anchored ? (p) => p === body : (p) => p.startsWith(body);
  return (path) => wildcardMatch(path, pattern);
}

/**
 * Google's matcher: `positions` holds, in order, every prefix length of `path` that the pattern
 * read so far can match; `*` opens every later position. No backtracking, so no pattern is slow:
 * at most pattern length × path length steps, in two buffers reused for the whole match.
 */
function wildcardMatch(path: string, pattern: string): boolean {
  const n = path.length;
  let positions = new Int32Array(n + 1);
  let next = new Int32Array(n + 1);
  let count = 1; // positions[0] = 0
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern.charCodeAt(i);
    if (c === 36 /* $ */ && i === pattern.length - 1) return positions[count - 1] === n;
    if (c === 42 /* * */) {
      const from = positions[0]!;
      count = n - from + 1;
      for (let k = 0; k < count; k++) positions[k] = from + k;
      continue;
    }
    let kept = 0;
    for (let k = 0; k < count; k++) {
      const p = positions[k]!;
      if (p < n && path.charCodeAt(p) === c) next[kept++] = p + 1;
    }
    if (kept === 0) return false;
    [positions, next] = [next, positions];
    count = kept;
  }
  return true;
}

/**
 * The path, params and query of a URL, without the fragment, always starting with `/` (what
 * robots.txt rules are matched against). Strings without a scheme are read the way Google's
 * parser reads them (`example.com/a` has the path `/a`).
 */
export function pathAndQuery(url: URL | string): string {
  const s = typeof url === 'string' ? url : url.href;
  const searchStart = s.startsWith('//') ? 2 : 0;
  const earlyPath = firstOf(s, searchStart);
  let protocolEnd = s.indexOf('://', searchStart);
  if (protocolEnd < 0 || (earlyPath >= 0 && earlyPath < protocolEnd)) protocolEnd = searchStart;
  else protocolEnd += 3;
  const pathStart = firstOf(s, protocolEnd);
  if (pathStart < 0) return '/';
  const hash = s.indexOf('#', searchStart);
  if (hash >= 0 && hash < pathStart) return '/';
  const path = s.slice(pathStart, hash < 0 ? s.length : hash);
  return path.startsWith('/') ? path : `/${path}`;
}

/** Index of the first `/`, `?` or `;` at or after `from`, or -1. */
function firstOf(s: string, from: number): number {
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 47 || c === 63 || c === 59) return i;
  }
  return -1;
}

/** Per ASCII code: 1 = unreserved (RFC 3986), 2 = allowed nowhere in a URI, 3 = `%`, `*` or `$`. */
const KIND = new Uint8Array(128);
for (const ch of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~')
  KIND[ch.charCodeAt(0)] = 1;
for (let c = 0; c <= 0x20; c++) KIND[c] = 2;
for (const ch of '"<>\\^`{|}\x7f') KIND[ch.charCodeAt(0)] = 2;
for (const ch of '%*$') KIND[ch.charCodeAt(0)] = 3;

/** Whether `s` is not yet in canonical form (most paths are, and skip the rewrite). */
function needsWork(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80 || KIND[c]! >= 2) return true;
  }
  return false;
}
const hex = (b: number) => `%${b < 16 ? '0' : ''}${b.toString(16).toUpperCase()}`;

/** The canonical form of a URL path and query (see the module comment). */
export function canonicalPath(path: string): string {
  return needsWork(path) ? canonicalize(path, false) : path;
}

/** The canonical form of a rule's pattern: like a path, but `*` and a final `$` keep their meaning. */
export function canonicalPattern(pattern: string): string {
  return needsWork(pattern) ? canonicalize(pattern, true) : pattern;
}

function canonicalize(s: string, isPattern: boolean): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    const c = s.charCodeAt(i);
    if (c === 37 /* % */ && isHexPair(s, i + 1)) {
      const byte = Number.parseInt(s.slice(i + 1, i + 3), 16);
      out += byte < 0x80 && KIND[byte] === 1 ? String.fromCharCode(byte) : hex(byte);
      i += 2;
    } else if (c === 42 /* * */) {
      out += isPattern ? '*' : '%2A';
    } else if (c === 36 /* $ */) {
      out += isPattern && i === s.length - 1 ? '$' : '%24';
    } else if (c >= 0x80) {
      // A whole code point (a surrogate pair is one), as UTF-8.
      const cp = s.codePointAt(i)!;
      if (cp > 0xffff) i++;
      for (const b of Buffer.from(String.fromCodePoint(cp), 'utf8')) out += hex(b);
    } else if (KIND[c] === 2) {
      out += hex(c);
    } else {
      out += ch;
    }
  }
  return out;
}

function isHexPair(s: string, at: number): boolean {
  return at + 1 < s.length && isHex(s.charCodeAt(at)) && isHex(s.charCodeAt(at + 1));
}

function isHex(c: number): boolean {
  return (c >= 48 && c <= 57) || ((c | 32) >= 97 && (c | 32) <= 102);
}
