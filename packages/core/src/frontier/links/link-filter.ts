/**
 * Which discovered links to keep: a scope (where the crawl may go) and include/exclude
 * patterns (globs or regular expressions). Compiled once per option set, then applied to every
 * link, so the per-link cost is a hostname compare and a few precompiled regex tests.
 *
 * Scopes, relative to a reference URL (the page the links are on, or a fixed `origin`):
 *
 * | scope         | keeps a link when…                                                               |
 * | ------------- | -------------------------------------------------------------------------------- |
 * | `same-host`   | its hostname equals the reference's (any scheme or port)                          |
 * | `same-domain` | its registrable domain equals the reference's (public-suffix aware: `a.example.co.uk` and `b.example.co.uk` match, `a.github.io` and `b.github.io` do not); IPs and single-label hosts compare whole |
 * | `prefix`      | its URL starts with one of `prefix` (default: the reference up to its last `/`)   |
 * | `any`         | always                                                                           |
 */
import { InvalidArgumentError } from '../../errors.js';
import { lazyRequire } from '../../optional-dependency.js';

export type LinkScope = 'same-host' | 'same-domain' | 'prefix' | 'any';
export const LINK_SCOPES: readonly LinkScope[] = ['same-host', 'same-domain', 'prefix', 'any'];

/**
 * A URL pattern. A string is a glob (picomatch syntax: `*` stops at `/`, `**` crosses it); a
 * glob that starts with `/` is matched against the path and query only (`/books/**`),
 * anything else against the whole URL (`https://*.example.com/**`). A RegExp is tested
 * against the whole URL.
 */
export type UrlPattern = string | RegExp;

export interface LinkFilterOptions {
  /** Where links may go. @default 'same-host' */
  scope?: LinkScope;
  /** URL prefixes for `scope: 'prefix'`. @default the reference URL up to its last '/' */
  prefix?: string | readonly string[];
  /** Keep only links matching at least one pattern. @default every link */
  include?: UrlPattern | readonly UrlPattern[];
  /** Drop links matching any pattern (checked after `include`). @default none */
  exclude?: UrlPattern | readonly UrlPattern[];
}

/** A compiled filter: `test(url, reference)` with both already parsed. */
export interface LinkFilter {
  readonly scope: LinkScope;
  test(url: URL, reference: URL): boolean;
  /**
   * `test` for an extracted link: a scope alone reads the link's `url` and `hostname`, and only
   * include/exclude patterns read `parsed` (which may parse it).
   */
  testLink(link: LinkView, reference: URL): boolean;
}

/** What `testLink` reads of a link (an `ExtractedLink` is one). */
export interface LinkView {
  /** Absolute http(s) URL without its fragment. */
  readonly url: string;
  readonly hostname: string;
  /** The URL parsed, fragment kept: what patterns are tested against. */
  readonly parsed: URL;
}

type Matcher = (url: URL) => boolean;

function toList<T>(value: T | readonly T[] | undefined): readonly T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? (value as readonly T[]) : [value as T];
}

/** Compile one pattern. Throws InvalidArgumentError for an empty or non-string/RegExp pattern. */
export function compileUrlPattern(pattern: UrlPattern): Matcher {
  if (pattern instanceof RegExp) {
    // A global/sticky regex keeps lastIndex between tests: use a stateless copy.
    const re =
      pattern.global || pattern.sticky
        ? new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''))
        : pattern;
    return (url) => re.test(url.href);
  }
  if (typeof pattern !== 'string' || pattern.trim() === '') {
    throw new InvalidArgumentError(`a URL pattern must be a glob string or a RegExp, got ${String(pattern)}`);
  }
  const glob = pattern.trim();
  const unbalanced = unbalancedIn(glob);
  if (unbalanced !== undefined) {
    throw new InvalidArgumentError(
      `invalid glob '${glob}': '${unbalanced}' is not closed (write \\${unbalanced} for the character itself, or /regex/ for a regular expression)`,
    );
  }
  let isMatch: (s: string) => boolean;
  try {
    isMatch = picomatch()(glob, { dot: true });
  } catch (err) {
    throw new InvalidArgumentError(`invalid glob '${glob}'`, { cause: err });
  }
  if (glob.startsWith('/')) return (url) => isMatch(url.pathname + url.search);
  return (url) => isMatch(url.href);
}

const CLOSERS: Record<string, string> = { '[': ']', '{': '}', '(': ')' };

/**
 * The first bracket of a glob left open (unescaped). picomatch would take `[` as itself and
 * `a{` as a pattern that matches nothing, so a typo would silently keep or drop every link.
 */
function unbalancedIn(glob: string): string | undefined {
  const open: string[] = [];
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '\\') {
      i++;
      continue;
    }
    if (c in CLOSERS) {
      // Inside a character class only its own closing bracket counts.
      if (open.at(-1) === '[') continue;
      open.push(c);
    } else if (open.length > 0 && c === CLOSERS[open.at(-1)!]) {
      open.pop();
    }
  }
  return open[0];
}

const domainCache = new Map<string, string>();
// The public suffix list is large once loaded, and only the same-domain scope needs it.
const tldts = lazyRequire<typeof import('tldts')>('tldts');
/** Loaded with the first glob pattern (most link scopes have none). */
const picomatch = lazyRequire<typeof import('picomatch')>('picomatch');

/** The registrable domain of a hostname (public-suffix aware), or the hostname itself for IPs and single labels. */
export function registrableDomain(hostname: string): string {
  let domain = domainCache.get(hostname);
  if (domain === undefined) {
    domain = tldts().getDomain(hostname, { allowPrivateDomains: true }) ?? hostname;
    if (domainCache.size >= 10_000) domainCache.clear();
    domainCache.set(hostname, domain);
  }
  return domain;
}

/** The default prefix of a reference URL: everything up to its path's last '/', no query. */
export function defaultPrefix(reference: URL): string {
  const path = reference.pathname;
  return `${reference.origin}${path.slice(0, path.lastIndexOf('/') + 1)}`;
}

export function createLinkFilter(options: LinkFilterOptions = {}): LinkFilter {
  const scope = options.scope ?? 'same-host';
  if (!LINK_SCOPES.includes(scope)) {
    throw new InvalidArgumentError(`scope must be one of ${LINK_SCOPES.join(', ')}, got '${String(scope)}'`);
  }
  const prefixes = toList(options.prefix).map((p) => {
    if (typeof p !== 'string' || p === '')
      throw new InvalidArgumentError(`a scope prefix must be a non-empty string`);
    // Normalize the prefix the way URLs are normalized, so 'HTTP://Example.com/a' works.
    try {
      const u = new URL(p);
      u.hash = '';
      return u.href;
    } catch {
      throw new InvalidArgumentError(`scope prefix '${p}' is not an absolute URL`);
    }
  });
  const include = toList(options.include).map(compileUrlPattern);
  const exclude = toList(options.exclude).map(compileUrlPattern);

  // The scope reads a hostname and an href without its fragment: no prefix holds a '#' (they
  // are normalized without one), so cutting the fragment never changes a prefix test.
  let inScope: (hostname: string, href: string, reference: URL) => boolean;
  switch (scope) {
    case 'same-host':
      inScope = (hostname, _href, ref) => hostname === ref.hostname;
      break;
    case 'same-domain':
      inScope = (hostname, _href, ref) =>
        hostname === ref.hostname || registrableDomain(hostname) === registrableDomain(ref.hostname);
      break;
    case 'prefix':
      inScope =
        prefixes.length > 0
          ? (_hostname, href) => {
              for (const p of prefixes) if (href.startsWith(p)) return true;
              return false;
            }
          : (_hostname, href, ref) => href.startsWith(defaultPrefix(ref));
      break;
    case 'any':
      inScope = () => true;
      break;
  }
  const matches = (url: URL): boolean => {
    if (include.length > 0) {
      let ok = false;
      for (const m of include) {
        if (m(url)) {
          ok = true;
          break;
        }
      }
      if (!ok) return false;
    }
    for (const m of exclude) if (m(url)) return false;
    return true;
  };
  const patterns = include.length > 0 || exclude.length > 0;
  return {
    scope,
    test: (url, reference) => inScope(url.hostname, url.href, reference) && matches(url),
    testLink: (link, reference) =>
      inScope(link.hostname, link.url, reference) && (!patterns || matches(link.parsed)),
  };
}
