/**
 * Pages in legacy encodings, and pages that declare their encoding only in the body. Node can
 * decode Shift_JIS (full ICU) but not encode it, so that encoder is built by inverting Node's
 * decoder once, lazily. windows-1252 uses the WHATWG table below instead: Node 20's
 * `TextDecoder('windows-1252')` decodes 0x80–0x9F as C1 controls, like ISO-8859-1 (a Node bug
 * that crawlers decoding these pages must also work around). The samples are written for this
 * package.
 */
import { htmlPage } from '../content/html.js';

export type CharsetPageName =
  | 'utf-8'
  | 'latin1'
  | 'windows-1252'
  | 'shift_jis'
  | 'meta'
  | 'meta-shift_jis'
  | 'bom'
  | 'bom-conflict'
  | 'invalid-utf8';

export interface CharsetPage {
  /** `/charset/<name>`. */
  path: string;
  /** The Content-Type header sent. */
  contentType: string;
  /** Where the encoding is declared: `header`, `meta`, `bom`. */
  declaredIn: 'header' | 'meta' | 'bom';
  /** The WHATWG encoding a correct decoder uses for the bytes. */
  encoding: 'utf-8' | 'windows-1252' | 'shift_jis';
  /** The text of `<p class="sample">` after correct decoding. */
  sample: string;
}

export const LATIN1_SAMPLE =
  'Fixture café: crème brûlée, naïve façade, Ærø, señor, Größe, £5 for ½ a déjà vu.';
export const CP1252_SAMPLE = '“Smart quotes” cost €5 — or ‘less’… Œuvre™, naïve café.';
export const SJIS_SAMPLE = '日本語のページです。こんにちは、世界！カタカナ：テスト。';
export const UTF8_SAMPLE = 'UTF-8 page: café, 日本語, €, Ωμέγα, emoji-free.';
export const INVALID_UTF8_SAMPLE = 'Before the bad bytes ';

export const CHARSET_PAGES: Readonly<Record<CharsetPageName, CharsetPage>> = {
  'utf-8': {
    path: '/charset/utf-8',
    contentType: 'text/html; charset=utf-8',
    declaredIn: 'header',
    encoding: 'utf-8',
    sample: UTF8_SAMPLE,
  },
  latin1: {
    path: '/charset/latin1',
    contentType: 'text/html; charset=ISO-8859-1',
    declaredIn: 'header',
    encoding: 'windows-1252',
    sample: LATIN1_SAMPLE,
  },
  'windows-1252': {
    path: '/charset/windows-1252',
    contentType: 'text/html; charset=windows-1252',
    declaredIn: 'header',
    encoding: 'windows-1252',
    sample: CP1252_SAMPLE,
  },
  shift_jis: {
    path: '/charset/shift_jis',
    contentType: 'text/html; charset=Shift_JIS',
    declaredIn: 'header',
    encoding: 'shift_jis',
    sample: SJIS_SAMPLE,
  },
  meta: {
    path: '/charset/meta',
    contentType: 'text/html',
    declaredIn: 'meta',
    encoding: 'windows-1252',
    sample: CP1252_SAMPLE,
  },
  'meta-shift_jis': {
    path: '/charset/meta-shift_jis',
    contentType: 'text/html',
    declaredIn: 'meta',
    encoding: 'shift_jis',
    sample: SJIS_SAMPLE,
  },
  bom: {
    path: '/charset/bom',
    contentType: 'text/html',
    declaredIn: 'bom',
    encoding: 'utf-8',
    sample: UTF8_SAMPLE,
  },
  'bom-conflict': {
    path: '/charset/bom-conflict',
    contentType: 'text/html; charset=ISO-8859-1',
    declaredIn: 'bom',
    encoding: 'utf-8',
    sample: UTF8_SAMPLE,
  },
  'invalid-utf8': {
    path: '/charset/invalid-utf8',
    contentType: 'text/html; charset=utf-8',
    declaredIn: 'header',
    encoding: 'utf-8',
    sample: `${INVALID_UTF8_SAMPLE}\ufffd\ufffd and after.`,
  },
};

/**
 * windows-1252 bytes 0x80–0x9F as the WHATWG Encoding Standard maps them (index 0 = 0x80).
 * The five bytes the code page leaves undefined map to the C1 control of the same number.
 */
export const WINDOWS_1252_HIGH = '€\u0081‚ƒ„…†‡ˆ‰Š‹Œ\u008dŽ\u008f\u0090‘’“”•–—˜™š›œ\u009džŸ';

const encoders = new Map<string, Map<string, number>>();

/** char → byte(s) of a legacy encoding. */
function encoderFor(encoding: 'windows-1252' | 'shift_jis'): Map<string, number> {
  let map = encoders.get(encoding);
  if (map !== undefined) return map;
  map = new Map();
  if (encoding === 'windows-1252') {
    for (let b = 0; b < 256; b++) {
      map.set(b >= 0x80 && b < 0xa0 ? WINDOWS_1252_HIGH[b - 0x80]! : String.fromCharCode(b), b);
    }
    encoders.set(encoding, map);
    return map;
  }
  // Shift_JIS: decode every one- and two-byte sequence once and invert.
  const decoder = new TextDecoder(encoding, { fatal: true });
  const tryDecode = (bytes: Uint8Array): string | undefined => {
    try {
      return decoder.decode(bytes);
    } catch {
      return undefined;
    }
  };
  for (let b = 0; b < 256; b++) {
    const ch = tryDecode(Uint8Array.of(b));
    if (ch !== undefined && ch.length === 1 && !map.has(ch)) map.set(ch, b);
  }
  for (let lead = 0x81; lead <= 0xfc; lead++) {
    if (lead > 0x9f && lead < 0xe0) continue;
    for (let trail = 0x40; trail <= 0xfc; trail++) {
      if (trail === 0x7f) continue;
      const ch = tryDecode(Uint8Array.of(lead, trail));
      if (ch !== undefined && ch.length === 1 && !map.has(ch)) map.set(ch, (lead << 8) | trail);
    }
  }
  encoders.set(encoding, map);
  return map;
}

/** Encodes text in windows-1252 or Shift_JIS. Throws on a character the encoding lacks (a bug here). */
export function encodeLegacy(text: string, encoding: 'windows-1252' | 'shift_jis'): Buffer {
  const map = encoderFor(encoding);
  const out: number[] = [];
  for (const ch of text) {
    const code = map.get(ch);
    if (code === undefined) throw new Error(`${JSON.stringify(ch)} has no ${encoding} encoding`);
    if (code > 0xff) out.push(code >> 8, code & 0xff);
    else out.push(code);
  }
  return Buffer.from(out);
}

function doc(sample: string, head: string): string {
  return htmlPage(
    'Charset sample',
    `<main class="charset"><h1>Charset sample</h1>\n<p class="sample">${sample}</p>\n</main>`,
    head,
  ).replace('<meta charset="utf-8">\n', '');
}

/** The exact bytes served for a charset page. */
export function charsetPageBytes(name: CharsetPageName): Buffer {
  switch (name) {
    case 'utf-8':
      return Buffer.from(doc(UTF8_SAMPLE, ''));
    case 'latin1':
      return Buffer.from(doc(LATIN1_SAMPLE, ''), 'latin1');
    case 'windows-1252':
      return encodeLegacy(doc(CP1252_SAMPLE, ''), 'windows-1252');
    case 'shift_jis':
      return encodeLegacy(doc(SJIS_SAMPLE, ''), 'shift_jis');
    case 'meta':
      return encodeLegacy(doc(CP1252_SAMPLE, '<meta charset="windows-1252">\n'), 'windows-1252');
    case 'meta-shift_jis':
      return encodeLegacy(
        doc(SJIS_SAMPLE, '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">\n'),
        'shift_jis',
      );
    case 'bom':
    case 'bom-conflict':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(doc(UTF8_SAMPLE, ''))]);
    case 'invalid-utf8': {
      const [before, after] = doc(`${INVALID_UTF8_SAMPLE}@@ and after.`, '').split('@@') as [string, string];
      // 0xFF and 0xFE never occur in UTF-8: a decoder yields one U+FFFD for each.
      return Buffer.concat([Buffer.from(before), Buffer.from([0xff, 0xfe]), Buffer.from(after)]);
    }
  }
}
