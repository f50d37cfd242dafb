/**
 * Which charset a body is in, the way browsers decide (WHATWG "encoding sniffing", reduced):
 *
 *   1. a byte-order mark (UTF-8, UTF-16LE/BE) wins over everything;
 *   2. then `charset=` of the Content-Type header;
 *   3. then, for HTML (or an unknown type), `<meta charset>` / `<meta http-equiv content>` in
 *      the first 1024 bytes;
 *   4. else UTF-8.
 *
 * Labels go through `TextDecoder` (Node's full ICU): 'latin1' and 'iso-8859-1' mean
 * windows-1252, Shift_JIS, EUC-JP, GBK… work. An unknown label is skipped, not an error.
 *
 * windows-1252 is decoded here, not by TextDecoder: Node 20's decoder maps 0x80–0x9F to C1
 * control characters (as ISO-8859-1 does) instead of € “ ” — … (the WHATWG table).
 */

export type CharsetSource = 'bom' | 'header' | 'meta' | 'default';

export interface DetectedCharset {
  /** The WHATWG encoding name, e.g. 'utf-8', 'windows-1252', 'shift_jis'. */
  charset: string;
  source: CharsetSource;
  /** Bytes of BOM to skip. */
  bomLength: number;
}

const PRESCAN_BYTES = 1024;
const META_CHARSET = /<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)/i;
const HEADER_CHARSET = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i;

type Decoder = InstanceType<typeof TextDecoder>;

const decoders = new Map<string, Decoder | null>();
const fatalDecoders = new Map<string, Decoder>();

/** The canonical encoding name for a label, or undefined when TextDecoder does not know it. */
export function normalizeCharset(label: string): string | undefined {
  return decoderFor(label)?.encoding;
}

function decoderFor(label: string): Decoder | undefined {
  const key = label.trim().toLowerCase();
  let decoder = decoders.get(key);
  if (decoder === undefined) {
    try {
      decoder = new TextDecoder(key);
    } catch {
      decoder = null;
    }
    decoders.set(key, decoder);
  }
  return decoder ?? undefined;
}

export function detectCharset(body: Uint8Array, contentType: string | undefined): DetectedCharset {
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
    return { charset: 'utf-8', source: 'bom', bomLength: 3 };
  }
  if (body.length >= 2 && body[0] === 0xff && body[1] === 0xfe) {
    return { charset: 'utf-16le', source: 'bom', bomLength: 2 };
  }
  if (body.length >= 2 && body[0] === 0xfe && body[1] === 0xff) {
    return { charset: 'utf-16be', source: 'bom', bomLength: 2 };
  }
  if (contentType) {
    const m = HEADER_CHARSET.exec(contentType);
    const label = m?.[1] ?? m?.[2];
    const charset = label ? normalizeCharset(label) : undefined;
    if (charset) return { charset, source: 'header', bomLength: 0 };
  }
  if (isHtmlLike(contentType)) {
    const head = Buffer.from(body.buffer, body.byteOffset, Math.min(body.length, PRESCAN_BYTES)).toString(
      'latin1',
    );
    const m = META_CHARSET.exec(head);
    let charset = m?.[1] ? normalizeCharset(m[1]) : undefined;
    // A page cannot really be UTF-16 if its <meta> was readable as ASCII (WHATWG rule).
    if (charset === 'utf-16le' || charset === 'utf-16be') charset = 'utf-8';
    if (charset) return { charset, source: 'meta', bomLength: 0 };
  }
  return { charset: 'utf-8', source: 'default', bomLength: 0 };
}

function isHtmlLike(contentType: string | undefined): boolean {
  if (!contentType) return true;
  const mime = contentType.split(';', 1)[0]!.trim().toLowerCase();
  return mime === 'text/html' || mime === 'application/xhtml+xml' || mime === '';
}

/**
 * Decode `body` in `charset`. Lossy by default (invalid bytes become U+FFFD, as browsers do);
 * with `fatal` an invalid byte throws a TypeError for the caller to wrap.
 */
export function decodeText(body: Uint8Array, charset: string, bomLength: number, fatal = false): string {
  const bytes = bomLength > 0 ? body.subarray(bomLength) : body;
  if (fatal) {
    let decoder = fatalDecoders.get(charset);
    if (!decoder) {
      decoder = new TextDecoder(charset, { fatal: true, ignoreBOM: true });
      fatalDecoders.set(charset, decoder);
    }
    return decoder.decode(bytes);
  }
  if (charset === 'windows-1252') return decodeWindows1252(bytes);
  // Buffer's UTF-8 decoder is faster than TextDecoder for the common case.
  if (charset === 'utf-8') return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('utf8');
  return (decoderFor(charset) ?? decoderFor('utf-8')!).decode(bytes);
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
