/**
 * Which encoding a body is in, decided the way the HTML Standard's encoding sniffing algorithm
 * does ("determining the character encoding"), and decoding it:
 *
 * ```
 *  1. byte-order mark (UTF-8, UTF-16BE, UTF-16LE) ─────────────────────────────▶ 'bom'
 *  2. Content-Type `charset=` that names an encoding ──────────────────────────▶ 'header'
 *  3. HTML (or no Content-Type): the prescan for <meta charset> / <meta
 *     http-equiv=content-type content=…> / an XML declaration ─────────────────▶ 'meta'
 *     XML types: the XML declaration's encoding ──────────────────────────────▶ 'meta'
 *  4. HTML: the body is valid UTF-8 and not plain ASCII (the standard's
 *     optional autodetection, for UTF-8 only) ─────────────────────────────────▶ 'detected'
 *  5. HTML: windows-1252 (the standard's default for most locales; a pure-ASCII
 *     page decodes the same in it as in UTF-8); other types: UTF-8 ───────────▶ 'default'
 * ```
 *
 * The prescan is the standard's byte-for-byte (comments, attributes and quoting as a tokenizer
 * reads them; an unknown label is skipped and the search goes on). Its end condition is ours, as
 * the standard allows: always the first 1,024 bytes, then on while the document is still in its
 * `<head>` — up to the first tag that cannot appear there, or `PRESCAN_MAX` bytes — so a
 * `<meta charset>` after a long comment, script or style in the head is found too (what
 * browsers find when they re-parse; a declaration in the body past 1,024 bytes is not looked for).
 *
 * Labels are WHATWG Encoding labels (Node's `TextDecoder` table), compared after trimming ASCII
 * whitespace and ASCII case-folding; labels that name the `replacement` encoding decode to one
 * U+FFFD, as browsers do. Only labels that name an encoding are cached (there are about 220), so
 * the cache cannot grow with what pages declare.
 *
 * windows-1252 is decoded here, not by TextDecoder: Node 20's decoder maps 0x80–0x9F to C1
 * control characters (as ISO-8859-1 does) instead of € “ ” — … (the WHATWG table).
 */
import { isAscii, isUtf8 } from 'node:buffer';

export type CharsetSource = 'bom' | 'header' | 'meta' | 'detected' | 'default';

export interface DetectedCharset {
  /** The WHATWG encoding name, e.g. 'utf-8', 'windows-1252', 'shift_jis'. */
  charset: string;
  source: CharsetSource;
  /** Bytes of BOM to skip. */
  bomLength: number;
}

/** Bytes the prescan always reads (the standard's advice). */
const PRESCAN_ALWAYS = 1024;
/** Bytes past which the prescan stops even in a head that has not ended. */
const PRESCAN_MAX = 256 * 1024;
const HEADER_CHARSET = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i;
/** The longest WHATWG label is 19 characters; anything much longer names nothing. */
const MAX_LABEL = 40;

/** Labels of the `replacement` encoding (WHATWG Encoding), which Node's TextDecoder refuses. */
const REPLACEMENT_LABELS = new Set([
  'csiso2022kr',
  'hz-gb-2312',
  'iso-2022-cn',
  'iso-2022-cn-ext',
  'iso-2022-kr',
  'replacement',
]);

type Decoder = InstanceType<typeof TextDecoder>;

/** label (trimmed, lower-case) → encoding name; only labels that name an encoding. */
const labels = new Map<string, string>();
const decoders = new Map<string, Decoder>();
const fatalDecoders = new Map<string, Decoder>();

/**
 * The WHATWG encoding a label names ("get an encoding"), or undefined when it names none.
 * `'latin1'` → `'windows-1252'`, `' Shift_JIS '` → `'shift_jis'`, `'iso-2022-kr'` → `'replacement'`.
 */
export function normalizeCharset(label: string): string | undefined {
  const key = asciiLower(trimAsciiWhitespace(label));
  if (key === undefined || key === '' || key.length > MAX_LABEL) return undefined;
  const known = labels.get(key);
  if (known !== undefined) return known;
  let name: string | undefined;
  if (REPLACEMENT_LABELS.has(key)) name = 'replacement';
  else if (key === 'x-user-defined') name = 'x-user-defined';
  else {
    try {
      name = new TextDecoder(key).encoding;
    } catch {
      return undefined;
    }
  }
  labels.set(key, name);
  return name;
}

/** Labels remembered (for tests: it stays below the size of the WHATWG label table). */
export function cachedLabelCount(): number {
  return labels.size;
}

/** Lower-cases ASCII letters; undefined for a string with a non-ASCII character (no label has one). */
function asciiLower(s: string): string | undefined {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return undefined;
  return s.toLowerCase();
}

function isAsciiWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d;
}

function trimAsciiWhitespace(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && isAsciiWhitespace(s.charCodeAt(start))) start++;
  while (end > start && isAsciiWhitespace(s.charCodeAt(end - 1))) end--;
  return s.slice(start, end);
}

export function detectCharset(body: Uint8Array, contentType: string | undefined): DetectedCharset {
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
    return { charset: 'utf-8', source: 'bom', bomLength: 3 };
  }
  if (body.length >= 2 && body[0] === 0xfe && body[1] === 0xff) {
    return { charset: 'utf-16be', source: 'bom', bomLength: 2 };
  }
  if (body.length >= 2 && body[0] === 0xff && body[1] === 0xfe) {
    return { charset: 'utf-16le', source: 'bom', bomLength: 2 };
  }
  if (contentType) {
    const m = HEADER_CHARSET.exec(contentType);
    const label = m?.[1] ?? m?.[2];
    const charset = label ? normalizeCharset(label) : undefined;
    if (charset) return { charset, source: 'header', bomLength: 0 };
  }
  const kind = documentKind(contentType);
  if (kind === 'html') {
    const found = prescan(body);
    if (found !== undefined) return { charset: found, source: 'meta', bomLength: 0 };
    if (!isAscii(body) && isUtf8(withoutCutSequence(body)))
      return { charset: 'utf-8', source: 'detected', bomLength: 0 };
    return { charset: 'windows-1252', source: 'default', bomLength: 0 };
  }
  if (kind === 'xml') {
    const found = xmlEncoding(body, Math.min(body.length, PRESCAN_ALWAYS));
    if (found !== undefined) return { charset: found, source: 'meta', bomLength: 0 };
  }
  return { charset: 'utf-8', source: 'default', bomLength: 0 };
}

function documentKind(contentType: string | undefined): 'html' | 'xml' | 'other' {
  if (!contentType) return 'html';
  const mime = contentType.split(';', 1)[0]!.trim().toLowerCase();
  if (mime === 'text/html' || mime === '') return 'html';
  if (mime.endsWith('+xml') || mime === 'text/xml' || mime === 'application/xml') return 'xml';
  return 'other';
}

/**
 * `body` without a UTF-8 sequence cut at its end (a body truncated at a size limit is still
 * UTF-8 if everything before the cut is).
 */
function withoutCutSequence(body: Uint8Array): Uint8Array {
  const n = body.length;
  for (let back = 1; back <= 3 && back <= n; back++) {
    const b = body[n - back]!;
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? body.subarray(0, n - back) : body;
  }
  return body;
}

// ── The prescan (HTML Standard, "prescan a byte stream to determine its encoding") ──────────

/** Thrown inside the prescan when it runs out of bytes or reaches its end condition. */
const STOP = Symbol('stop');

/** Elements that may stand in a <head>: past the first 1,024 bytes, any other tag ends the prescan. */
const HEAD_ELEMENTS = new Set([
  'html',
  'head',
  'base',
  'basefont',
  'bgsound',
  'link',
  'meta',
  'noframes',
  'noscript',
  'script',
  'style',
  'template',
  'title',
]);

function isSpace(b: number | undefined): boolean {
  return b === 0x09 || b === 0x0a || b === 0x0c || b === 0x0d || b === 0x20;
}

function lower(b: number): number {
  return b >= 0x41 && b <= 0x5a ? b + 0x20 : b;
}

/** The encoding a `<meta>` (or XML declaration) of `bytes` declares, or undefined. */
export function prescan(bytes: Uint8Array): string | undefined {
  const end = Math.min(bytes.length, PRESCAN_MAX);
  try {
    return scan(bytes, end);
  } catch (err) {
    if (err !== STOP) throw err;
    return xmlEncoding(bytes, end);
  }
}

function scan(b: Uint8Array, end: number): string {
  let pos = 0;
  const at = (i: number): number => {
    if (i >= end) throw STOP;
    return b[i]!;
  };
  if (end >= 6) {
    if (b[0] === 0x3c && b[1] === 0 && b[2] === 0x3f && b[3] === 0 && b[4] === 0x78 && b[5] === 0)
      return 'utf-16le';
    if (b[0] === 0 && b[1] === 0x3c && b[2] === 0 && b[3] === 0x3f && b[4] === 0 && b[5] === 0x78)
      return 'utf-16be';
  }
  /** "Get an attribute": [name, value], or undefined when there is none; advances `pos`. */
  const getAttribute = (): [string, string] | undefined => {
    let c = at(pos);
    while (isSpace(c) || c === 0x2f) c = at(++pos);
    if (c === 0x3e) return undefined;
    let name = '';
    let value = '';
    for (;;) {
      if (c === 0x3d && name !== '') {
        pos++;
        break;
      }
      if (isSpace(c)) {
        while (isSpace(c)) c = at(++pos);
        if (c !== 0x3d) return [name, ''];
        pos++;
        break;
      }
      if (c === 0x2f || c === 0x3e) return [name, ''];
      name += String.fromCharCode(lower(c));
      c = at(++pos);
    }
    c = at(pos);
    while (isSpace(c)) c = at(++pos);
    if (c === 0x22 || c === 0x27) {
      const quote = c;
      for (;;) {
        c = at(++pos);
        if (c === quote) {
          pos++;
          return [name, value];
        }
        value += String.fromCharCode(lower(c));
      }
    }
    if (c === 0x3e) return [name, ''];
    for (;;) {
      value += String.fromCharCode(lower(c));
      c = at(++pos);
      if (isSpace(c) || c === 0x3e) return [name, value];
    }
  };

  for (; ; pos++) {
    if (at(pos) !== 0x3c) continue;
    const c1 = at(pos + 1);
    if (c1 === 0x21 && at(pos + 2) === 0x2d && at(pos + 3) === 0x2d) {
      // <!-- … -->: the two dashes may be those of "<!--" itself.
      pos += 2;
      while (!(at(pos) === 0x2d && at(pos + 1) === 0x2d && at(pos + 2) === 0x3e)) pos++;
      pos += 2;
      continue;
    }
    const isMeta =
      lower(c1) === 0x6d &&
      lower(at(pos + 2)) === 0x65 &&
      lower(at(pos + 3)) === 0x74 &&
      lower(at(pos + 4)) === 0x61 &&
      (isSpace(at(pos + 5)) || at(pos + 5) === 0x2f);
    if (isMeta) {
      pos += 5;
      const seen = new Set<string>();
      let gotPragma = false;
      let needPragma: boolean | undefined;
      let charset: string | null | undefined = null; // null: none yet; undefined: a label that names nothing
      for (let attr = getAttribute(); attr !== undefined; attr = getAttribute()) {
        const [name, value] = attr;
        if (seen.has(name)) continue;
        seen.add(name);
        if (name === 'http-equiv') {
          if (value === 'content-type') gotPragma = true;
        } else if (name === 'content') {
          const found = charsetFromMetaContent(value);
          if (found !== undefined && charset === null) {
            charset = found;
            needPragma = true;
          }
        } else if (name === 'charset') {
          charset = normalizeCharset(value);
          needPragma = false;
        }
      }
      if (needPragma === undefined || (needPragma && !gotPragma) || !charset) continue;
      if (charset === 'utf-16be' || charset === 'utf-16le') return 'utf-8';
      if (charset === 'x-user-defined') return 'windows-1252';
      return charset;
    }
    const slash = c1 === 0x2f ? 1 : 0;
    const first = lower(slash ? at(pos + 2) : c1);
    if (first >= 0x61 && first <= 0x7a) {
      const start = pos;
      pos += 1 + slash;
      let name = '';
      for (let c = at(pos); !isSpace(c) && c !== 0x3e; c = at(++pos))
        if (name.length < 16) name += String.fromCharCode(lower(c));
      endOfHead(start, name.endsWith('/') ? name.slice(0, -1) : name, slash === 1);
      while (getAttribute() !== undefined);
      continue;
    }
    if (c1 === 0x21 || c1 === 0x2f || c1 === 0x3f) {
      pos++;
      while (at(pos) !== 0x3e) pos++;
    }
  }
}

/** The end condition past the first 1,024 bytes: a tag that closes the head or cannot be in it. */
function endOfHead(start: number, name: string, isEnd = false): void {
  if (start < PRESCAN_ALWAYS) return;
  if (isEnd ? name === 'head' || name === 'body' || name === 'html' : !HEAD_ELEMENTS.has(name)) throw STOP;
}

/** HTML Standard, "get an XML encoding": `<?xml … encoding="x"` at the very start. */
function xmlEncoding(b: Uint8Array, end: number): string | undefined {
  if (!(b[0] === 0x3c && b[1] === 0x3f && b[2] === 0x78 && b[3] === 0x6d && b[4] === 0x6c)) return undefined;
  const text = Buffer.from(b.buffer, b.byteOffset, end).toString('latin1');
  const close = text.indexOf('>', 5);
  if (close < 0) return undefined;
  let i = text.indexOf('encoding', 5);
  if (i < 0 || i + 8 > close) return undefined;
  i += 8;
  while (i < text.length && text.charCodeAt(i) <= 0x20) i++;
  if (text[i] !== '=') return undefined;
  i++;
  while (i < text.length && text.charCodeAt(i) <= 0x20) i++;
  const quote = text[i];
  if (quote !== '"' && quote !== "'") return undefined;
  const stop = text.indexOf(quote, i + 1);
  if (stop < 0) return undefined;
  const label = text.slice(i + 1, stop);
  for (let k = 0; k < label.length; k++) if (label.charCodeAt(k) <= 0x20) return undefined;
  const charset = normalizeCharset(label);
  return charset === 'utf-16be' || charset === 'utf-16le' ? 'utf-8' : charset;
}

/**
 * HTML Standard, "algorithm for extracting a character encoding from a meta element": the
 * `charset=` of a `content` attribute value (already lower-case).
 */
export function charsetFromMetaContent(s: string): string | undefined {
  let from = 0;
  for (;;) {
    const i = s.indexOf('charset', from);
    if (i < 0) return undefined;
    let p = i + 7;
    while (p < s.length && isAsciiWhitespace(s.charCodeAt(p))) p++;
    if (s[p] !== '=') {
      from = p;
      continue;
    }
    p++;
    while (p < s.length && isAsciiWhitespace(s.charCodeAt(p))) p++;
    const c = s[p];
    if (c === undefined) return undefined;
    if (c === '"' || c === "'") {
      const close = s.indexOf(c, p + 1);
      return close < 0 ? undefined : normalizeCharset(s.slice(p + 1, close));
    }
    let e = p;
    while (e < s.length && !isAsciiWhitespace(s.charCodeAt(e)) && s[e] !== ';') e++;
    return normalizeCharset(s.slice(p, e));
  }
}

// ── Decoding ────────────────────────────────────────────────────────────────────────────────

/**
 * Decode `body` in `charset`. Lossy by default (invalid bytes become U+FFFD, as browsers do);
 * with `fatal` an invalid byte throws a TypeError for the caller to wrap.
 */
export function decodeText(body: Uint8Array, charset: string, bomLength: number, fatal = false): string {
  const bytes = bomLength > 0 ? body.subarray(bomLength) : body;
  // Known names pass straight through the label table (a Map hit); an unknown one decodes as UTF-8.
  const name = normalizeCharset(charset) ?? 'utf-8';
  if (name === 'replacement') {
    if (bytes.length === 0) return '';
    if (fatal) throw new TypeError('the replacement encoding decodes nothing');
    return '\ufffd';
  }
  if (name === 'x-user-defined') return decodeUserDefined(bytes);
  if (fatal) {
    let decoder = fatalDecoders.get(name);
    if (!decoder) {
      decoder = new TextDecoder(name, { fatal: true, ignoreBOM: true });
      fatalDecoders.set(name, decoder);
    }
    return decoder.decode(bytes);
  }
  if (name === 'windows-1252') return decodeWindows1252(bytes);
  // Buffer's UTF-8 decoder is faster than TextDecoder for the common case.
  if (name === 'utf-8') return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('utf8');
  let decoder = decoders.get(name);
  if (!decoder) {
    decoder = new TextDecoder(name);
    decoders.set(name, decoder);
  }
  return decoder.decode(bytes);
}

/** WHATWG index-windows-1252 for 0x80–0x9F (the rest of the range is ISO-8859-1). */
const CP1252_HIGH =
  '\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f' +
  '\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178';
const C1 = /[\u0080-\u009f]/g;
const HAS_C1 = /[\u0080-\u009f]/;

function decodeWindows1252(bytes: Uint8Array): string {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1');
  return HAS_C1.test(text) ? text.replace(C1, (c) => CP1252_HIGH[c.charCodeAt(0) - 0x80]!) : text;
}

/** WHATWG x-user-defined: ASCII as is, 0x80–0xFF to U+F780–U+F7FF. */
function decodeUserDefined(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += String.fromCharCode(b < 0x80 ? b : 0xf700 + b);
  return out;
}
