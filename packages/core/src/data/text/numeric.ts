/**
 * `toNumeric`: the number in a scraped string — "1,299.00 €", "¥1.2万", "(3.5%)", "2.4K",
 * "一千二百", "两万五" — or `null` when there is none.
 *
 *   text ─▶ normalise (full-width digits, spaces, minus signs)
 *        ─▶ sign (leading -, −, parentheses, 负)
 *        ─▶ strip currency symbols and ISO codes
 *        ─▶ percent / per mille, K/M/B suffix
 *        ─▶ CJK numerals and units (十百千万亿兆, 两, 点) or Western digits with separators
 */

export interface ToNumericOptions {
  /**
   * The decimal separator when the text alone cannot tell: `1.299` is 1.299 with `'.'` and 1299
   * with `','`; `1,5` is 1.5 with `','`. Text that has both separators always uses the last one
   * as the decimal point, so `1.299,00` and `1,299.00` need no option.
   * @default '.'
   */
  decimalSeparator?: '.' | ',';
  /**
   * What a percent sign does: `'fraction'` gives 0.12 for "12%", `'number'` gives 12.
   * @default 'fraction'
   */
  percent?: 'fraction' | 'number';
}

const CJK_DIGITS: Record<string, number> = {
  零: 0,
  〇: 0,
  一: 1,
  壹: 1,
  二: 2,
  贰: 2,
  貳: 2,
  两: 2,
  兩: 2,
  三: 3,
  叁: 3,
  參: 3,
  四: 4,
  肆: 4,
  五: 5,
  伍: 5,
  六: 6,
  陆: 6,
  陸: 6,
  七: 7,
  柒: 7,
  八: 8,
  捌: 8,
  九: 9,
  玖: 9,
};
const CJK_SMALL_UNITS: Record<string, number> = { 十: 10, 拾: 10, 百: 100, 佰: 100, 千: 1000, 仟: 1000 };
const CJK_BIG_UNITS: Record<string, number> = { 万: 1e4, 萬: 1e4, 亿: 1e8, 億: 1e8, 兆: 1e12 };
const CJK_CLASS = `${Object.keys(CJK_DIGITS).join('')}${Object.keys(CJK_SMALL_UNITS).join('')}${Object.keys(CJK_BIG_UNITS).join('')}`;
const CJK_CHARS = new RegExp(`[${CJK_CLASS}]`);
const CJK_RUN = new RegExp(`[\\d.${CJK_CLASS}点點]*[\\d${CJK_CLASS}][\\d.${CJK_CLASS}点點]*`, 'gu');

// Currency symbols, and words that sit beside prices on Chinese and Japanese pages.
const CURRENCY =
  /[$€£¥￥₹₩₽₺₫₴₦₱฿₪₡₲₵₸₭₮﷼¢]|US\$|HK\$|NT\$|A\$|C\$|R\$|S\$|人民币|元|圆|円|块|塊|美元|欧元|日元|港元|港币|韩元/g;
const ISO_CODE = /(^|[^A-Za-z])[A-Z]{3}(?=$|[^A-Za-z])/g;
const SUFFIXES: Record<string, number> = { k: 1e3, m: 1e6, mm: 1e6, mn: 1e6, b: 1e9, bn: 1e9, t: 1e12 };

/** The number in `input`, or `null` when it holds none. Numbers pass through (NaN gives null). */
export function toNumeric(input: unknown, options: ToNumericOptions = {}): number | null {
  if (typeof input === 'number') return Number.isFinite(input) ? input : null;
  if (typeof input === 'bigint') return Number(input);
  if (typeof input !== 'string') return null;
  let text = normalise(input);
  if (text === '') return null;

  let negative = false;
  if (/^\(.*\)$/.test(text)) {
    negative = true;
    text = text.slice(1, -1).trim();
  }
  text = text.replace(CURRENCY, ' ').replace(ISO_CODE, '$1 ').trim();
  if (/^[-负]/.test(text)) {
    negative = !negative;
    text = text.slice(1).trim();
  } else if (text.startsWith('+')) {
    text = text.slice(1).trim();
  }
  text = text.replace(/\s+/g, ' ');

  let scale = 1;
  if (/%$/.test(text)) {
    if ((options.percent ?? 'fraction') === 'fraction') scale = 0.01;
    text = text.slice(0, -1).trim();
  } else if (/‰$/.test(text)) {
    scale = 0.001;
    text = text.slice(0, -1).trim();
  }

  let value: number | null;
  if (CJK_CHARS.test(text)) {
    value = parseCjk(text, options);
  } else {
    // Lower-case 'm' is left alone: "5 m" is more often metres than millions.
    const suffix = /^(.*?\d)\s*(k|K|M|MM|mn|Mn|B|bn|Bn|T)$/.exec(text);
    if (suffix) {
      const base = parseWestern(suffix[1]!, options);
      value = base === null ? null : base * SUFFIXES[suffix[2]!.toLowerCase()]!;
    } else {
      value = parseWestern(text, options);
    }
  }
  if (value === null) return null;
  const out = round(value * scale);
  return negative ? -out : out;
}

/** Full-width forms to ASCII, every kind of space to one space, Unicode minus to '-'. */
function normalise(text: string): string {
  return text
    .replace(/[\uFF01-\uFF5E]/g, (c) => String.fromCharCode(c.charCodeAt(0) - 0xfee0))
    .replace(/[\u00A0\u2000-\u200B\u202F\u205F\u3000]/g, ' ')
    .replace(/[\u2212\u2012\u2013\uFE63]/g, '-')
    .trim();
}

/** Multiplying by 0.01 or 1e4 adds float noise (1.2 × 1e4 = 12000.000000000002); keep 12 digits. */
function round(value: number): number {
  return Number.isInteger(value) ? value : Number.parseFloat(value.toPrecision(15));
}

/**
 * Digits with thousands separators in either convention: `1,299.00`, `1.299,00`, `1 299,00`,
 * `1'299.00`, `12,5`. The last of '.' and ',' is the decimal point when both appear; a lone
 * separator repeated (`1,234,567`) or followed by exactly three digits after a comma is a
 * thousands separator; otherwise `decimalSeparator` decides.
 */
function parseWestern(text: string, options: ToNumericOptions): number | null {
  const m = /\d[\d.,' ]*/.exec(text);
  if (!m) return null;
  // Anything but the number itself (a unit, a word) may sit around it; a second number may not.
  const rest = (text.slice(0, m.index) + text.slice(m.index + m[0].length)).trim();
  if (/\d/.test(rest)) return null;
  let digits = m[0].trim().replace(/[' ]/g, '');
  const lastDot = digits.lastIndexOf('.');
  const lastComma = digits.lastIndexOf(',');
  let decimal: '.' | ',' | null;
  if (lastDot >= 0 && lastComma >= 0) decimal = lastDot > lastComma ? '.' : ',';
  else if (lastDot < 0 && lastComma < 0) decimal = null;
  else {
    const sep = lastDot >= 0 ? '.' : ',';
    const count = digits.split(sep).length - 1;
    const after = digits.length - digits.lastIndexOf(sep) - 1;
    if (count > 1) decimal = null;
    else if (options.decimalSeparator !== undefined) decimal = options.decimalSeparator === sep ? sep : null;
    else if (sep === ',') decimal = after === 3 ? null : ',';
    else decimal = '.';
  }
  const thousands = decimal === '.' ? ',' : decimal === ',' ? '.' : /[.,]/;
  digits = digits.split(thousands).join('');
  if (decimal === ',') digits = digits.replace(',', '.');
  if (!/^\d+(\.\d*)?$/.test(digits)) return null;
  return Number.parseFloat(digits);
}

/**
 * CJK numerals, alone or mixed with Arabic digits: 一千二百三十四, 十五, 两万五 (25000: a
 * trailing digit counts in the unit below the last one), 一亿二千万, 1.2万, 3千5百, 三点一四.
 */
function parseCjk(text: string, options: ToNumericOptions): number | null {
  // Words around the number (约1.2万人, 共三千件) are dropped; two numbers are not one.
  const runs = text.replace(/[,\s]/g, '').match(CJK_RUN) ?? [];
  if (runs.length !== 1) return null;
  const tokens = runs[0]!.match(/\d+(?:\.\d+)?|./gu) ?? [];
  let total = 0;
  let section = 0;
  let current: number | null = null;
  let currentIsSingleCjk = false;
  let lastUnit = 0;
  let lastBig = 0;
  let seen = false;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (/^\d/.test(t)) {
      const n = parseWestern(t, options);
      if (n === null) return null;
      current = n;
      currentIsSingleCjk = false;
      seen = true;
    } else if (t in CJK_DIGITS) {
      const d = CJK_DIGITS[t]!;
      seen = true;
      // Consecutive digits without units read digit by digit (二〇二四 = 2024).
      const continues: boolean = current !== null && !lastUnitJustSet(tokens, i);
      if (d === 0) {
        // 一百零五: a zero after a unit says the next digit is a plain unit digit.
        if (continues) current = (current ?? 0) * 10;
        lastUnit = 0;
        currentIsSingleCjk = false;
        continue;
      }
      currentIsSingleCjk = !continues;
      current = continues ? (current ?? 0) * 10 + d : d;
    } else if (t in CJK_SMALL_UNITS) {
      const u = CJK_SMALL_UNITS[t]!;
      section += (current ?? 1) * u;
      current = null;
      lastUnit = u;
      seen = true;
    } else if (t in CJK_BIG_UNITS) {
      const u = CJK_BIG_UNITS[t]!;
      section += current ?? 0;
      current = null;
      if (section === 0) total = (total || 1) * u;
      else if (total > 0 && u > lastBig) total = (total + section) * u;
      else total += section * u;
      section = 0;
      lastUnit = u;
      lastBig = Math.max(lastBig, u);
      seen = true;
    } else if (t === '点' || t === '點' || t === '.') {
      const frac = tokens
        .slice(i + 1)
        .map((d) => (d in CJK_DIGITS ? String(CJK_DIGITS[d]) : /^\d+$/.test(d) ? d : null));
      if (frac.some((d) => d === null)) return null;
      current = Number.parseFloat(`${current ?? 0}.${frac.join('')}`);
      currentIsSingleCjk = false;
      break;
    } else {
      return null; // a character that is not part of a number
    }
  }
  if (!seen) return null;
  if (current !== null && currentIsSingleCjk && lastUnit >= 10) current *= lastUnit / 10;
  return total + section + (current ?? 0);
}

/** True when the token before `i` was a unit, so a digit starts a new group. */
function lastUnitJustSet(tokens: readonly string[], i: number): boolean {
  const prev = tokens[i - 1];
  return prev !== undefined && (prev in CJK_SMALL_UNITS || prev in CJK_BIG_UNITS);
}
