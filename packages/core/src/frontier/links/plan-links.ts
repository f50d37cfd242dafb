/**
 * `enqueueLinks` without the engine: from a page's HTML to the list of requests to follow.
 *
 * ```
 *  html ─▶ extract (one SAX pass) ─▶ nofollow? ─▶ scope ─▶ include ─▶ exclude ─▶ depth ─▶ transform ─▶ targets
 * ```
 *
 * The engine turns every target into a follow-up request (`cx.enqueueLinks`); the CLI uses
 * the same plan for its page records (title, link count). Duplicates are not removed here:
 * the frontier's dedup does that for every source of requests alike.
 */
import { InvalidArgumentError } from '../../errors.js';
import type { RequestInit } from '../../model/request.js';
import { type ExtractedLink, extractLinks } from './extract-links.js';
import { createLinkFilter, type LinkFilter, type LinkFilterOptions } from './link-filter.js';

/** One link about to become a request; `transform` may change any field. */
export interface LinkCandidate {
  /** Absolute http(s) URL. */
  url: string;
  /** Depth the request will have (the page's depth + 1). */
  depth: number;
  /** The element it came from (`a`, `area`, `link`, …) and its `rel`. */
  tag: string;
  rel: string | undefined;
  /** Link text (`<a>` only; collected when `transform` is set). */
  text: string | undefined;
  /** Stored as `request.meta.label`. */
  label: string | undefined;
  /** Node whose `parse` receives the response (default: the current node). */
  node: string | undefined;
  /** Extra request fields (priority, headers, meta…). */
  request: RequestInit;
  /** `url`, parsed; ignored once a transform changes `url`. */
  parsed: URL | undefined;
}

export interface PlanLinksOptions extends LinkFilterOptions {
  /** See `ExtractLinksOptions.selector`. @default `a[href], area[href], link[rel~=next|prev][href]` */
  selector?: string;
  /**
   * Skip links marked `rel="nofollow"`, and every link of a page whose `<meta name="robots">`
   * says `nofollow` (or `none`).
   * @default false
   */
  respectNofollow?: boolean;
  /** Links whose depth would exceed this are dropped. @default Infinity */
  maxDepth?: number;
  /** The reference URL of the scope. @default the URL the page was requested at (before redirects) */
  origin?: string;
  /** `request.meta.label` of every link (a router label). */
  label?: string;
  /** Node that parses the responses of these links. @default the current node */
  node?: string;
  /** Fields every request gets (priority, headers, meta…). */
  request?: RequestInit;
  /**
   * Called for every link that passed the filters. Return the candidate (changed or not) or a
   * new one to keep it, a falsy value to skip it.
   */
  transform?: (link: LinkCandidate) => LinkCandidate | false | null | undefined;
  /** At most this many links are taken from one page (after filtering). @default Infinity */
  limit?: number;
}

export interface PageInput {
  /** The page's final URL: relative links resolve against it. */
  url: string;
  /**
   * The URL the page was requested at, before redirects: the scope's reference when no `origin`
   * is given. A redirect to another host must not carry the crawl there: its links are judged
   * against where the crawl asked to go, not where the server sent it.
   * @default `url`
   */
  requestedUrl?: string;
  html: string;
  /** The page's depth (seeds are 0). */
  depth: number;
}

export interface LinkPlan {
  targets: LinkCandidate[];
  /** Links found on the page (http(s) links, before filtering). */
  found: number;
  /** `<title>` of the page. */
  title: string | undefined;
  /** Links dropped by nofollow, scope/include/exclude, depth, the transform or the limit. */
  dropped: { nofollow: number; filtered: number; depth: number; transform: number; limit: number };
}

/** A reusable planner: options are checked and compiled once. */
export interface LinkPlanner {
  plan(page: PageInput): LinkPlan;
}

/**
 * Compiled filters by option values: `cx.enqueueLinks({ include: '/books/**' })` passes a new
 * object on every page, and compiling globs per page would cost more than extracting the links.
 */
const filterCache = new Map<string, LinkFilter>();

function patternKey(p: unknown): unknown {
  if (p instanceof RegExp) return { re: p.source, flags: p.flags };
  if (Array.isArray(p)) return p.map(patternKey);
  return p;
}

const defaultFilter = createLinkFilter({});

function cachedFilter(options: PlanLinksOptions): LinkFilter {
  if (
    options.scope === undefined &&
    options.prefix === undefined &&
    options.include === undefined &&
    options.exclude === undefined
  ) {
    return defaultFilter;
  }
  const key = JSON.stringify([
    options.scope,
    options.prefix,
    patternKey(options.include),
    patternKey(options.exclude),
  ]);
  let filter = filterCache.get(key);
  if (!filter) {
    filter = createLinkFilter(options);
    if (filterCache.size >= 256) filterCache.clear();
    filterCache.set(key, filter);
  }
  return filter;
}

export function createLinkPlanner(options: PlanLinksOptions = {}): LinkPlanner {
  const filter: LinkFilter = cachedFilter(options);
  const maxDepth = options.maxDepth ?? Number.POSITIVE_INFINITY;
  if (!(maxDepth >= 0)) throw new InvalidArgumentError(`maxDepth must be ≥ 0, got ${options.maxDepth}`);
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  if (!(limit >= 0)) throw new InvalidArgumentError(`limit must be ≥ 0, got ${options.limit}`);
  if (options.transform !== undefined && typeof options.transform !== 'function') {
    throw new InvalidArgumentError('transform must be a function');
  }
  let origin: URL | undefined;
  if (options.origin !== undefined) {
    try {
      origin = new URL(options.origin);
    } catch (err) {
      throw new InvalidArgumentError(`origin '${options.origin}' is not an absolute URL`, { cause: err });
    }
  }
  const respectNofollow = options.respectNofollow === true;
  const transform = options.transform;
  const extractOptions = {
    ...(options.selector === undefined ? {} : { selector: options.selector }),
    withText: transform !== undefined,
  };

  return {
    plan(page: PageInput): LinkPlan {
      const extracted = extractLinks(page.html, { pageUrl: page.url, ...extractOptions });
      const dropped = { nofollow: 0, filtered: 0, depth: 0, transform: 0, limit: 0 };
      const found = extracted.links.length;
      const targets: LinkCandidate[] = [];
      if (respectNofollow && extracted.nofollowPage) {
        dropped.nofollow = found;
        return { targets, found, title: extracted.title, dropped };
      }
      const depth = page.depth + 1;
      const reference = origin ?? new URL(page.requestedUrl ?? page.url);
      for (const link of extracted.links) {
        if (respectNofollow && link.nofollow) {
          dropped.nofollow++;
          continue;
        }
        if (!filter.testLink(link, reference)) {
          dropped.filtered++;
          continue;
        }
        if (depth > maxDepth) {
          dropped.depth++;
          continue;
        }
        let candidate: LinkCandidate | false | null | undefined = toCandidate(
          link,
          depth,
          options,
          transform !== undefined,
        );
        if (transform) {
          candidate = transform(candidate);
          if (!candidate) {
            dropped.transform++;
            continue;
          }
          if (typeof candidate.url !== 'string' || !/^https?:\/\//i.test(candidate.url)) {
            dropped.transform++;
            continue;
          }
          if (checkedUrlOf(candidate) === undefined) candidate.parsed = undefined;
        }
        if (targets.length >= limit) {
          dropped.limit++;
          continue;
        }
        targets.push(candidate);
      }
      return { targets, found, title: extracted.title, dropped };
    },
  };
}

const NO_FIELDS: RequestInit = Object.freeze({});

/**
 * A link about to become a request. `parsed` is made on first read (most links are resolved
 * without the URL parser); until then the engine takes `url` as already checked, which
 * {@link checkedUrlOf} answers without parsing.
 */
class Candidate implements LinkCandidate {
  url: string;
  depth: number;
  tag: string;
  rel: string | undefined;
  text: string | undefined;
  label: string | undefined;
  node: string | undefined;
  request: RequestInit;
  /** The link it came from, while `parsed` has not been read or set. */
  #link: ExtractedLink | undefined;
  #parsed: URL | undefined;

  constructor(link: ExtractedLink, depth: number, options: PlanLinksOptions, copy: boolean) {
    this.url = link.url;
    this.depth = depth;
    this.tag = link.tag;
    this.rel = link.rel;
    this.text = link.text;
    this.label = options.label;
    this.node = options.node;
    this.request = options.request
      ? copy
        ? { ...options.request }
        : options.request
      : copy
        ? {}
        : NO_FIELDS;
    this.#link = link;
    this.#parsed = undefined;
  }

  get parsed(): URL | undefined {
    const link = this.#link;
    if (link !== undefined) {
      this.#link = undefined;
      // The link's URL keeps its fragment; it stands for `url` only when it has none.
      const parsed = link.parsed;
      this.#parsed = parsed.href === link.url ? parsed : undefined;
    }
    return this.#parsed;
  }

  set parsed(value: URL | undefined) {
    this.#link = undefined;
    this.#parsed = value;
  }

  /** `url`, when it is still the serialized URL the link resolved to. */
  static checked(candidate: Candidate): string | URL | undefined {
    const link = candidate.#link;
    if (link !== undefined) return link.url === candidate.url ? link.url : undefined;
    const parsed = candidate.#parsed;
    return parsed !== undefined && parsed.href === candidate.url ? parsed : undefined;
  }
}

/**
 * What the engine may cache as a target's checked URL (the `PARSED_URL` slot of its request):
 * its `url` as a string when the planner resolved it and nothing changed it since, a URL object
 * when one was parsed, undefined when `url` must be parsed again.
 */
export function checkedUrlOf(target: LinkCandidate): string | URL | undefined {
  if (target instanceof Candidate) return Candidate.checked(target);
  const parsed = target.parsed;
  return parsed !== undefined && parsed.href === target.url ? parsed : undefined;
}

/** A candidate; its `request` is a copy only when a transform may change it. */
function toCandidate(
  link: ExtractedLink,
  depth: number,
  options: PlanLinksOptions,
  copy: boolean,
): LinkCandidate {
  return new Candidate(link, depth, options, copy);
}

/**
 * The planner of an options object, reused while the same object is passed again (a spider that
 * keeps its options in a constant, `cx.enqueueLinks()` with none): compiled once, not per page.
 */
const plannerCache = new WeakMap<PlanLinksOptions, LinkPlanner>();
const defaultPlanner = createLinkPlanner({});

export function linkPlannerFor(options: PlanLinksOptions | undefined): LinkPlanner {
  if (options === undefined) return defaultPlanner;
  let planner = plannerCache.get(options);
  if (!planner) {
    planner = createLinkPlanner(options);
    plannerCache.set(options, planner);
  }
  return planner;
}

/** One-shot form of {@link createLinkPlanner}. */
export function planLinks(page: PageInput, options: PlanLinksOptions = {}): LinkPlan {
  return createLinkPlanner(options).plan(page);
}
