/**
 * `parseDate`: the moment a scraped string names — "3 hours ago", "yesterday 14:30",
 * "2024年3月5日", "5 Mar 2024", "03/05/2024", "vor 3 Stunden", an ISO string or a Unix
 * timestamp — read in a time zone, or `null` when the text names none.
 *
 * Natural-language parsing is chrono-node's (loaded on the first call). What it does not do is
 * added here: IANA zone names ("Asia/Shanghai", with the zone's offset on that day, DST
 * included), Unix timestamps in seconds or milliseconds, and midnight for a text that names a
 * day but no time (chrono would say noon).
 */
import type * as Chrono from 'chrono-node';
import { InvalidArgumentError } from '../../errors.js';
import { lazyRequire } from '../../optional-dependency.js';

const chrono = lazyRequire<typeof Chrono>('chrono-node');

/** Languages chrono-node reads. `'en'` reads 03/05 as March 5; `'en-GB'` as 3 May. */
export type DateLocale =
  | 'en'
  | 'en-GB'
  | 'zh'
  | 'zh-Hant'
  | 'ja'
  | 'de'
  | 'fr'
  | 'es'
  | 'it'
  | 'nl'
  | 'pt'
  | 'ru'
  | 'sv'
  | 'uk';

export interface ParseDateOptions {
  /** "Now" for relative texts ("3 hours ago", "yesterday"). @default new Date() */
  reference?: Date;
  /**
   * The zone a text without an offset is read in: an IANA name (`'Asia/Shanghai'`), an
   * abbreviation chrono knows (`'JST'`, `'CET'`) or minutes east of UTC (`480`). A text with
   * its own offset or zone ("…+09:00", "… PST") keeps it.
   * @default 'UTC'
   */
  timezone?: string | number;
  /**
   * The language of the text. Without one, English is tried, then Chinese when the text has
   * CJK characters.
   */
  locale?: DateLocale;
  /** Read an ambiguous date ("Friday", "March 5") as the next one after `reference`. @default false */
  forwardDate?: boolean;
}

/** The date `text` names, or `null`. */
export function parseDate(text: unknown, options: ParseDateOptions = {}): Date | null {
  if (text instanceof Date) return Number.isNaN(text.getTime()) ? null : text;
  if (typeof text === 'number') return fromTimestamp(text);
  if (typeof text !== 'string') return null;
  const trimmed = text.trim();
  if (trimmed === '') return null;
  if (/^\d{10}(\d{3})?(\.\d+)?$/.test(trimmed)) return fromTimestamp(Number(trimmed));

  const reference = options.reference ?? new Date();
  const zone = options.timezone ?? 'UTC';
  // A zone's offset depends on the date (DST): read once with the offset at the reference,
  // then again if the moment found lies at another offset.
  let offset = offsetMinutes(zone, reference);
  let found = parseWith(trimmed, reference, offset, options);
  if (found !== null && typeof zone === 'string' && isIana(zone)) {
    const second = offsetMinutes(zone, found);
    if (second !== offset) {
      offset = second;
      found = parseWith(trimmed, reference, offset, options);
    }
  }
  return found;
}

function parseWith(text: string, instant: Date, timezone: number, options: ParseDateOptions): Date | null {
  const parsers = parsersFor(text, options.locale);
  for (const parser of parsers) {
    const result = parser.parse(
      text,
      { instant, timezone },
      { forwardDate: options.forwardDate ?? false },
    )[0];
    if (!result) continue;
    // The parsed components are chrono's ParsingComponents, which has imply(); the public type omits it.
    const start = result.start as Chrono.ParsedComponents & {
      imply(component: Chrono.Component, value: number): unknown;
    };
    if (!start.isCertain('hour')) {
      start.imply('hour', 0);
      start.imply('minute', 0);
      start.imply('second', 0);
      start.imply('millisecond', 0);
    }
    return start.date();
  }
  return null;
}

function parsersFor(text: string, locale: DateLocale | undefined): Chrono.Chrono[] {
  const c = chrono();
  switch (locale) {
    case undefined:
      return /[\u3040-\u30ff\u3400-\u9fff]/.test(text)
        ? [c.zh.hans.casual, c.zh.hant.casual, c.ja.casual]
        : [c.casual];
    case 'en':
      return [c.casual];
    case 'en-GB':
      return [c.en.GB];
    case 'zh':
      return [c.zh.hans.casual];
    case 'zh-Hant':
      return [c.zh.hant.casual];
    default: {
      const parser = (c as unknown as Record<string, { casual?: Chrono.Chrono } | undefined>)[locale]?.casual;
      if (!parser) throw new InvalidArgumentError(`parseDate: unknown locale '${String(locale)}'`);
      return [parser];
    }
  }
}

function fromTimestamp(n: number): Date | null {
  if (!Number.isFinite(n)) return null;
  // Ten digits are seconds (until the year 2286), thirteen are milliseconds.
  return new Date(Math.abs(n) < 1e11 ? n * 1000 : n);
}

function isIana(zone: string): boolean {
  return zone.includes('/') || zone === 'UTC';
}

const zoneFormats = new Map<string, Intl.DateTimeFormat>();

/** Minutes east of UTC of `zone` at `at`; chrono abbreviations pass through as names. */
function offsetMinutes(zone: string | number, at: Date): number {
  if (typeof zone === 'number') return zone;
  if (!isIana(zone)) return abbreviationOffset(zone, at);
  let format = zoneFormats.get(zone);
  if (!format) {
    try {
      format = new Intl.DateTimeFormat('en-US', {
        timeZone: zone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch (err) {
      throw new InvalidArgumentError(`parseDate: unknown time zone '${zone}'`, { cause: err });
    }
    zoneFormats.set(zone, format);
  }
  const parts = Object.fromEntries(format.formatToParts(at).map((p) => [p.type, p.value]));
  const asUtc = Date.UTC(
    Number(parts.year),
    Number(parts.month) - 1,
    Number(parts.day),
    Number(parts.hour),
    Number(parts.minute),
    Number(parts.second),
  );
  return Math.round((asUtc - Math.floor(at.getTime() / 1000) * 1000) / 60_000);
}

/** An abbreviation ('JST', 'CET'): chrono knows its offset; a name it does not know is refused. */
function abbreviationOffset(zone: string, at: Date): number {
  const c = chrono();
  const probe = '2000-01-01 00:00';
  const inZone = c.parseDate(probe, { instant: at, timezone: zone });
  const inUtc = c.parseDate(probe, { instant: at, timezone: 0 });
  const offset = inZone && inUtc ? Math.round((inUtc.getTime() - inZone.getTime()) / 60_000) : 0;
  if (offset === 0 && !/^(UTC|GMT|Z|UT|WET|GMT0)$/i.test(zone)) {
    throw new InvalidArgumentError(
      `parseDate: unknown time zone '${zone}' (use an IANA name like 'Asia/Tokyo')`,
    );
  }
  return offset;
}
