/**
 * Link extraction in one streaming pass over the HTML (htmlparser2's SAX parser): no DOM is
 * built, which is what keeps it on the fast path of a crawl. The pass collects raw `href`s,
 * the document's `<base href>`, the `<title>` and a page-level `<meta name="robots"
 * content="nofollow">`; links are resolved only at the end, because the first `<base href>`
 * applies to the whole document even to links written before it.
 *
 * By default it takes `<a href>`, `<area href>` and `<link rel="next|prev" href>`, reading
 * htmlparser2's tokenizer directly: text is never sliced into strings (except the title), and
 * only the few attributes that matter are read. That is what makes it cheaper per page than
 * htmlparser2's own `Parser` with an `onopentag` handler. A `selector` narrows the links down
 * (any selected element with an `href`) and runs on the `Parser` (it needs the element stack);
 * selectors outside the streaming subset (see `selector.ts`) are evaluated on a DOM instead
 * (cheerio, slower).
 */

import { Parser, QuoteType, Tokenizer } from 'htmlparser2';
import { InvalidArgumentError } from '../../errors.js';
import { lazyRequire } from '../../optional-dependency.js';
import { HrefResolver } from './href-resolver.js';
import { type ElementView, hasWord, parseStreamSelector, type StreamSelector } from './selector.js';

export interface ExtractLinksOptions {
  /** The URL the HTML was fetched from (the response's final URL); relative links resolve against it. */
  pageUrl: string;
  /**
   * CSS selector of the elements whose `href` to take. Type, `#id`, `.class`, attribute
   * selectors and the descendant/child combinators run in the streaming pass; anything else
   * parses a DOM.
   * @default 'a[href], area[href], link[rel~=next][href], link[rel~=prev][href]'
   */
  selector?: string;
  /** Collect each link's text (`<a>` only). @default false */
  withText?: boolean;
}

export interface ExtractedLink {
  /** Absolute http(s) URL, fragment removed. */
  url: string;
  /** The URL's hostname (scope checks read it without parsing `url`). */
  hostname: string;
  /**
   * The href resolved by the URL parser, fragment kept. Parsed on first read: the common links
   * are resolved without it (see `href-resolver.ts`).
   */
  readonly parsed: URL;
  /** Element name (`a`, `area`, `link`, …). */
  tag: string;
  /** The `rel` attribute, lower-case, if any. */
  rel: string | undefined;
  /** True when `rel` contains `nofollow`. */
  nofollow: boolean;
  /** The link's text, whitespace collapsed (with `withText`). */
  text?: string;
}

export interface ExtractedPage {
  links: ExtractedLink[];
  /** The URL links were resolved against (`<base href>` or the page URL). */
  baseUrl: string;
  /** `<title>` text, whitespace collapsed; undefined when the page has none. */
  title: string | undefined;
  /** `<meta name="robots">` (or `name="mocra"`) says `nofollow` or `none`. */
  nofollowPage: boolean;
  /** `href`s that could not be resolved to an http(s) URL (mailto:, javascript:, garbage). */
  skipped: number;
}

interface RawLink {
  href: string;
  tag: string;
  rel: string | undefined;
  text: string | undefined;
}

const DEFAULT_SELECTOR = 'a[href], area[href], link[rel~=next][href], link[rel~=prev][href]';
const selectorCache = new Map<string, StreamSelector | null>();

function compileSelector(source: string): StreamSelector | null {
  let compiled = selectorCache.get(source);
  if (compiled === undefined) {
    compiled = parseStreamSelector(source) ?? null;
    if (selectorCache.size > 256) selectorCache.clear();
    selectorCache.set(source, compiled);
  }
  return compiled;
}

/** Extract the links of an HTML document (see the module comment). Never throws on bad HTML. */
export function extractLinks(html: string, options: ExtractLinksOptions): ExtractedPage {
  const selectorSource = options.selector ?? DEFAULT_SELECTOR;
  if (typeof selectorSource !== 'string' || selectorSource.trim() === '') {
    throw new InvalidArgumentError(`link selector must be a non-empty string, got ${String(selectorSource)}`);
  }
  let page: URL;
  try {
    page = new URL(options.pageUrl);
  } catch (err) {
    throw new InvalidArgumentError(`pageUrl '${options.pageUrl}' is not an absolute URL`, { cause: err });
  }
  const stream = selectorSource === DEFAULT_SELECTOR ? null : compileSelector(selectorSource);
  const withText = options.withText === true;
  const scan =
    selectorSource === DEFAULT_SELECTOR
      ? scanDefault(html, withText)
      : stream === null
        ? scanWithDom(html, selectorSource, withText)
        : scanStreaming(html, stream, withText);
  let base = page;
  if (scan.baseHref !== undefined) {
    try {
      const b = new URL(scan.baseHref, page);
      if (b.protocol === 'http:' || b.protocol === 'https:') base = b;
    } catch {
      // An unusable <base href> is ignored, as browsers do.
    }
  }
  const links: ExtractedLink[] = [];
  const resolver = new HrefResolver(base);
  let skipped = 0;
  for (const raw of scan.links) {
    const nofollow = raw.rel !== undefined && hasWord(raw.rel, 'nofollow');
    const h = trimC0(raw.href);
    const fast = h === '' ? undefined : resolver.resolve(h);
    let link: Link;
    if (fast !== undefined) {
      link = new Link(fast, resolver.hostname, undefined, h, base, raw, nofollow);
    } else {
      const parsed = resolveTrimmed(h, base);
      if (parsed === undefined) {
        skipped++;
        continue;
      }
      const href = parsed.href;
      // Not `parsed.hash`: it is '' for an empty fragment, and the href still ends with '#'.
      const hashAt = href.indexOf('#');
      link = new Link(
        hashAt < 0 ? href : href.slice(0, hashAt),
        parsed.hostname,
        parsed,
        h,
        base,
        raw,
        nofollow,
      );
    }
    if (raw.text !== undefined) link.text = raw.text;
    links.push(link);
  }
  return { links, baseUrl: base.href, title: scan.title, nofollowPage: scan.nofollowPage, skipped };
}

/** An extracted link whose URL object is made only when someone reads it. */
class Link implements ExtractedLink {
  readonly url: string;
  readonly hostname: string;
  readonly tag: string;
  readonly rel: string | undefined;
  readonly nofollow: boolean;
  declare text?: string;
  #parsed: URL | undefined;
  readonly #href: string;
  readonly #base: URL;

  constructor(
    url: string,
    hostname: string,
    parsed: URL | undefined,
    href: string,
    base: URL,
    raw: RawLink,
    nofollow: boolean,
  ) {
    this.url = url;
    this.hostname = hostname;
    this.tag = raw.tag;
    this.rel = raw.rel;
    this.nofollow = nofollow;
    this.#parsed = parsed;
    this.#href = href;
    this.#base = base;
  }

  get parsed(): URL {
    this.#parsed ??= new URL(this.#href, this.#base);
    return this.#parsed;
  }
}

/**
 * Resolve an href to an absolute http(s) URL, or undefined. Only what the URL parser strips is
 * trimmed (C0 controls and spaces): a no-break space or an ideographic space around an href is
 * part of it, as in browsers, and comes out percent-encoded. An href that is only a fragment
 * (`#top`) points into the page itself and is not a link to follow.
 */
export function resolveHref(href: string, base: URL): URL | undefined {
  return resolveTrimmed(trimC0(href), base);
}

function resolveTrimmed(h: string, base: URL): URL | undefined {
  if (h === '' || h.charCodeAt(0) === 35 /* # */) return undefined;
  // Cheap rejections before the URL parser: schemes that are never crawlable.
  const colon = h.indexOf(':');
  if (colon > 0 && colon < 12) {
    const scheme = h.slice(0, colon).toLowerCase();
    if (scheme !== 'http' && scheme !== 'https' && /^[a-z][a-z0-9+.-]*$/.test(scheme)) return undefined;
  }
  let url: URL;
  try {
    url = new URL(h, base);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.hostname === '') return undefined;
  return url;
}

/** Strips leading and trailing C0 controls and spaces (U+0000–U+0020), as the URL parser does. */
function trimC0(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && s.charCodeAt(start) <= 0x20) start++;
  while (end > start && s.charCodeAt(end - 1) <= 0x20) end--;
  return start === 0 && end === s.length ? s : s.slice(start, end);
}

interface ScanResult {
  links: RawLink[];
  baseHref: string | undefined;
  title: string | undefined;
  nofollowPage: boolean;
}

/**
 * Longest title or link text kept, in UTF-16 code units after whitespace is collapsed; a longer
 * one is cut there and ends with {@link TRUNCATED_MARKER}. A page's text goes into records, logs
 * and queues, so one hostile page must not put megabytes in each.
 */
export const MAX_TEXT_CHARS = 1024;
/** What a cut title or link text ends with. */
export const TRUNCATED_MARKER = '…[truncated]';
/** Raw text gathered before collapsing: enough for any page whose collapsed text fits. */
const RAW_TEXT_LIMIT = MAX_TEXT_CHARS * 8;

/** `gathered` + `piece`, never past the raw limit. */
function gather(gathered: string, piece: string): string {
  const room = RAW_TEXT_LIMIT - gathered.length;
  if (room <= 0) return gathered;
  return gathered + (piece.length > room ? piece.slice(0, room) : piece);
}

function collapse(text: string): string {
  const collapsed = text.replace(/\s+/g, ' ').trim();
  if (collapsed.length <= MAX_TEXT_CHARS && text.length < RAW_TEXT_LIMIT) return collapsed;
  let end = Math.min(collapsed.length, MAX_TEXT_CHARS);
  // Never split a surrogate pair.
  const last = collapsed.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${collapsed.slice(0, end)}${TRUNCATED_MARKER}`;
}

function isRobotsNofollow(attribs: Record<string, string>): boolean {
  const name = attribs.name?.toLowerCase();
  if (name !== 'robots' && name !== 'mocra') return false;
  const content = attribs.content?.toLowerCase() ?? '';
  return /(^|[\s,])(nofollow|none)($|[\s,])/.test(content);
}

// Tag and attribute names the default scan reads (anything else is skipped unread).
const TAG_A = 1;
const TAG_AREA = 2;
const TAG_LINK = 3;
const TAG_BASE = 4;
const TAG_META = 5;
const TAG_TITLE = 6;
const TAG_CODES: Readonly<Record<string, number>> = {
  a: TAG_A,
  area: TAG_AREA,
  link: TAG_LINK,
  base: TAG_BASE,
  meta: TAG_META,
  title: TAG_TITLE,
};
const ATTR_HREF = 1;
const ATTR_REL = 2;
const ATTR_NAME = 3;
const ATTR_CONTENT = 4;
const ATTR_CODES: Readonly<Record<string, number>> = {
  href: ATTR_HREF,
  rel: ATTR_REL,
  name: ATTR_NAME,
  content: ATTR_CONTENT,
};
const TAG_NAMES = ['', 'a', 'area', 'link', 'base', 'meta', 'title'];

/** TAG_* of the tag name html[start, end), without allocating for the (many) other tags. */
function tagCode(html: string, start: number, end: number): number {
  const len = end - start;
  if (len === 1) return (html.charCodeAt(start) | 32) === 97 /* a */ ? TAG_A : 0;
  if (len !== 4 && len !== 5) return 0;
  const first = html.charCodeAt(start) | 32;
  // a(rea) l(ink) b(ase) m(eta) t(itle)
  if (first !== 97 && first !== 108 && first !== 98 && first !== 109 && first !== 116) return 0;
  return TAG_CODES[html.slice(start, end).toLowerCase()] ?? 0;
}

const noop = (): void => {};

/**
 * Character references, decoded by htmlparser2's own tokenizer, for the few strings that need
 * it. The scan below runs its tokenizer with `decodeEntities: false`: the tokenizer then skips
 * text and attribute values with a tight search for the next `<` or quote instead of stepping
 * through its state machine a character at a time — most of a page is text, and most of the
 * scan's time was that. The strings the scan keeps (the attributes it reads, the title, link
 * text) are decoded afterwards, when they contain an `&`, by tokenizing them again in the same
 * context (`<a x="…">`, `<title>…</title>`): the same decoder, the same legacy rules (an
 * attribute's `&amp=` stays as written, a text's does not), the same result as decoding in the
 * scan itself.
 */
let decodeSource = '';
let decoded = '';
const entityDecoder = new Tokenizer(
  { decodeEntities: true },
  {
    onattribdata(start, end) {
      decoded += decodeSource.slice(start, end);
    },
    onattribentity(codepoint) {
      decoded += String.fromCodePoint(codepoint);
    },
    ontext(start, end) {
      decoded += decodeSource.slice(start, end);
    },
    ontextentity(codepoint) {
      decoded += String.fromCodePoint(codepoint);
    },
    onattribname: noop,
    onattribend: noop,
    onopentagname: noop,
    onopentagend: noop,
    onselfclosingtag: noop,
    onclosetag: noop,
    oncdata: noop,
    oncomment: noop,
    ondeclaration: noop,
    onprocessinginstruction: noop,
    onend: noop,
  },
);

function decodeIn(wrapped: string): string {
  decodeSource = wrapped;
  decoded = '';
  entityDecoder.reset();
  entityDecoder.write(wrapped);
  entityDecoder.end();
  const out = decoded;
  decodeSource = '';
  decoded = '';
  return out;
}

/** An attribute value as written (between its quotes, if any), with its references decoded. */
function decodeAttribute(raw: string, quote: QuoteType): string {
  if (!raw.includes('&')) return raw;
  const q = quote === QuoteType.Double ? '"' : quote === QuoteType.Single ? "'" : '';
  return decodeIn(`<a x=${q}${raw}${q}>`);
}

/** Text between tags as written, with its references decoded (as in text or in `<title>`). */
function decodeText(raw: string): string {
  if (!raw.includes('&')) return raw;
  // `<title>` holds no tags, so the text reads the same inside it; a `</title` cannot be in a piece of text.
  return decodeIn(`<title>${raw}</title>`);
}

/** Tags whose content the tokenizer passes through as raw text, references not decoded. */
const RAW_TEXT_TAGS = new Set(['script', 'style', 'xmp', 'iframe', 'noembed', 'noframes', 'plaintext']);

/** The default selector on the bare tokenizer (see the module comment). */
function scanDefault(html: string, withText: boolean): ScanResult {
  const links: RawLink[] = [];
  let baseHref: string | undefined;
  let title: string | undefined;
  let nofollowPage = false;
  let tag = 0; // TAG_* of the open tag being read, 0 = not interesting
  let attr = 0; // ATTR_* of the attribute being read
  let value = '';
  let href: string | undefined;
  let rel: string | undefined;
  let metaName: string | undefined;
  let metaContent: string | undefined;
  let inTitle = false;
  let titleText = '';
  let capturing: RawLink | undefined;
  let captured = '';
  // Inside <script>, <style>, …: text as written (only read while capturing a link's text).
  let rawText = false;

  const finishOpenTag = (): void => {
    switch (tag) {
      case TAG_A:
      case TAG_AREA:
      case TAG_LINK: {
        if (href === undefined) break;
        if (tag === TAG_LINK && !(rel !== undefined && (hasWord(rel, 'next') || hasWord(rel, 'prev')))) break;
        const link: RawLink = { href, tag: TAG_NAMES[tag]!, rel, text: undefined };
        links.push(link);
        if (withText && tag === TAG_A) {
          // An <a> inside an open <a> closes it (what an HTML parser does).
          if (capturing) capturing.text = collapse(captured);
          capturing = link;
          captured = '';
        }
        break;
      }
      case TAG_BASE:
        if (baseHref === undefined && href !== undefined) baseHref = href;
        break;
      case TAG_META:
        if (!nofollowPage && metaName !== undefined) {
          const attribs: Record<string, string> = { name: metaName };
          if (metaContent !== undefined) attribs.content = metaContent;
          nofollowPage = isRobotsNofollow(attribs);
        }
        break;
      case TAG_TITLE:
        if (title === undefined && !inTitle) {
          inTitle = true;
          titleText = '';
        }
        break;
    }
    tag = 0;
  };

  const tokenizer = new Tokenizer(
    { decodeEntities: false },
    {
      onopentagname(start, end) {
        tag = tagCode(html, start, end);
        if (capturing !== undefined && tag === 0 && end - start >= 3 && end - start <= 9) {
          rawText ||= RAW_TEXT_TAGS.has(html.slice(start, end).toLowerCase());
        }
        href = undefined;
        rel = undefined;
        metaName = undefined;
        metaContent = undefined;
      },
      onattribname(start, end) {
        attr =
          tag !== 0 && end - start <= 7 && end - start >= 3
            ? (ATTR_CODES[html.slice(start, end).toLowerCase()] ?? 0)
            : 0;
        value = '';
      },
      onattribdata(start, end) {
        if (attr !== 0) value += html.slice(start, end);
      },
      // Not called: references are decoded by decodeAttribute.
      onattribentity: noop,
      onattribend(quote) {
        if (attr !== 0) value = decodeAttribute(value, quote);
        // Duplicate attributes: the first one wins, as in browsers.
        switch (attr) {
          case ATTR_HREF:
            href ??= value;
            break;
          case ATTR_REL:
            rel ??= value.toLowerCase();
            break;
          case ATTR_NAME:
            metaName ??= value;
            break;
          case ATTR_CONTENT:
            metaContent ??= value;
            break;
        }
        attr = 0;
      },
      onopentagend: finishOpenTag,
      onselfclosingtag: finishOpenTag,
      onclosetag(start, end) {
        const len = end - start;
        // A raw-text element ends only at its own end tag: the first end tag seen is it.
        rawText = false;
        if (len === 5 && inTitle && html.slice(start, end).toLowerCase() === 'title') {
          inTitle = false;
          title = collapse(titleText);
        } else if (len === 1 && capturing && (html.charCodeAt(start) | 32) === 97 /* a */) {
          capturing.text = collapse(captured);
          capturing = undefined;
        }
      },
      ontext(start, end) {
        if (inTitle) titleText = gather(titleText, decodeText(html.slice(start, end)));
        if (capturing) {
          const piece = html.slice(start, end);
          captured = gather(captured, rawText ? piece : decodeText(piece));
        }
      },
      // Not called: references are decoded by decodeText / decodeAttribute.
      ontextentity: noop,
      oncdata() {},
      oncomment() {},
      ondeclaration() {},
      onprocessinginstruction() {},
      onend() {},
    },
  );
  tokenizer.write(html);
  tokenizer.end();
  if (capturing) (capturing as RawLink).text = collapse(captured);
  if (inTitle) title = collapse(titleText);
  return { links, baseHref, title, nofollowPage };
}

function scanStreaming(html: string, selector: StreamSelector, withText: boolean): ScanResult {
  const links: RawLink[] = [];
  let baseHref: string | undefined;
  let title: string | undefined;
  let inTitle = false;
  let titleText = '';
  let nofollowPage = false;
  // Text capture of the link being read (anchors do not nest in valid HTML).
  let capturing: RawLink | undefined;
  let captured = '';
  const stack: ElementView[] | undefined = selector?.needsAncestors ? [] : undefined;

  const parser = new Parser(
    {
      onopentag(name, attribs) {
        if (stack) stack.push({ name, attribs });
        switch (name) {
          case 'base':
            if (baseHref === undefined && attribs.href !== undefined) baseHref = attribs.href;
            break;
          case 'title':
            if (title === undefined) {
              inTitle = true;
              titleText = '';
            }
            break;
          case 'meta':
            if (!nofollowPage && isRobotsNofollow(attribs)) nofollowPage = true;
            break;
        }
        const href = attribs.href;
        if (href === undefined) return;
        if (!selector.matches(stack ?? [{ name, attribs }])) return;
        const link: RawLink = {
          href,
          tag: name,
          rel: attribs.rel?.toLowerCase(),
          text: undefined,
        };
        links.push(link);
        if (withText && name === 'a') {
          capturing = link;
          captured = '';
        }
      },
      ontext(text) {
        if (inTitle) titleText = gather(titleText, text);
        if (capturing) captured = gather(captured, text);
      },
      onclosetag(name) {
        if (stack) stack.pop();
        if (name === 'title' && inTitle) {
          inTitle = false;
          title = collapse(titleText);
        } else if (name === 'a' && capturing) {
          capturing.text = collapse(captured);
          capturing = undefined;
        }
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  if (capturing) capturing.text = collapse(captured);
  if (inTitle) title = collapse(titleText);
  return { links, baseHref, title, nofollowPage };
}

// ── DOM fallback for selectors outside the streaming subset ───────────────────────

interface DomNode {
  attribs?: Record<string, string>;
  name?: string;
}
interface DomSelection {
  toArray(): DomNode[];
  text(): string;
  attr(name: string): string | undefined;
  first(): DomSelection;
}
type DomApi = ((selector: string | DomNode) => DomSelection) & Record<string, unknown>;

const cheerio = lazyRequire<{ load: (html: string) => DomApi }>('cheerio/slim');

function scanWithDom(html: string, selector: string, withText: boolean): ScanResult {
  const $ = cheerio().load(html);
  let selection: DomNode[];
  try {
    selection = $(selector).toArray();
  } catch (err) {
    throw new InvalidArgumentError(`invalid link selector '${selector}'`, { cause: err });
  }
  const links: RawLink[] = [];
  for (const el of selection) {
    const href = el.attribs?.href;
    if (href === undefined) continue;
    const link: RawLink = {
      href,
      tag: (el.name ?? '').toLowerCase(),
      rel: el.attribs?.rel?.toLowerCase(),
      text: undefined,
    };
    if (withText) link.text = collapse($(el).text());
    links.push(link);
  }
  const titleEl = $('title').first();
  const titleText = titleEl.toArray().length > 0 ? collapse(titleEl.text()) : undefined;
  let nofollowPage = false;
  for (const meta of $('meta').toArray())
    if (meta.attribs && isRobotsNofollow(meta.attribs)) nofollowPage = true;
  return {
    links,
    baseHref: $('base[href]').first().attr('href'),
    title: titleText,
    nofollowPage,
  };
}
