/**
 * Where each key of a TOML document was written, so a config error can say `config.toml:12:3`.
 *
 * smol-toml gives positions for syntax errors only; values come back as plain objects. This is a
 * small scanner over the (already successfully parsed, hence valid) source that walks the same
 * structure — table headers, arrays of tables, dotted keys, inline tables and arrays — and records
 * the position of the first place each key path appears:
 *
 * ```
 *   [crawler]                      crawler                  → 1:2
 *   task_concurrency = 8           crawler.task_concurrency → 2:1
 *   [[tasks]]                      tasks, tasks[0]          → 3:3
 *   account = "a"                  tasks[0].account         → 4:1
 *   statuses = [401, 403]          ….statuses[1]            → the `403`
 * ```
 *
 * Strings (all four kinds) and comments are skipped properly, so a `[` or `=` inside them never
 * confuses it. Positions are 1-based; columns count UTF-16 code units.
 */

/** A 1-based line and column in a source text. */
export interface SourcePosition {
  line: number;
  column: number;
}

/** One segment of a key path: a table key or an array index. */
export type KeySegment = string | number;

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

/** `crawler.task_concurrency`, `tasks[1].account`, `modules."my module".x` → `modules["my module"].x`. */
export function formatKeyPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else {
      const key = String(segment);
      if (BARE_KEY.test(key)) out += out === '' ? key : `.${key}`;
      else out += `[${JSON.stringify(key)}]`;
    }
  }
  return out;
}

/** Positions of every key path in a TOML document, keyed by {@link formatKeyPath}. */
export class TomlKeyLocator {
  readonly #positions: Map<string, SourcePosition>;

  constructor(text: string) {
    this.#positions = scan(text);
  }

  /** Where `path` (or, failing that, its closest written ancestor) appears; undefined if nothing does. */
  find(path: readonly PropertyKey[]): SourcePosition | undefined {
    for (let n = path.length; n > 0; n--) {
      const found = this.#positions.get(formatKeyPath(path.slice(0, n)));
      if (found) return found;
    }
    return undefined;
  }

  /** Every recorded path (for tests and debugging). */
  paths(): string[] {
    return [...this.#positions.keys()];
  }
}

function scan(text: string): Map<string, SourcePosition> {
  const positions = new Map<string, SourcePosition>();
  const lineStarts = [0];
  for (let k = 0; k < text.length; k++) if (text.charCodeAt(k) === 10) lineStarts.push(k + 1);
  const positionAt = (offset: number): SourcePosition => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - lineStarts[lo]! + 1 };
  };
  const record = (path: readonly KeySegment[], offset: number) => {
    const key = formatKeyPath(path);
    if (!positions.has(key)) positions.set(key, positionAt(offset));
  };

  /** Current count (last index) of each array of tables, by formatted path. */
  const arrayTables = new Map<string, number>();
  let i = 0;
  let current: KeySegment[] = [];

  const peek = (s: string) => text.startsWith(s, i);
  const skipInline = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t')) i++;
  };
  const skipAll = () => {
    for (;;) {
      while (i < text.length && /[ \t\r\n]/.test(text[i]!)) i++;
      if (text[i] === '#') {
        while (i < text.length && text[i] !== '\n') i++;
        continue;
      }
      return;
    }
  };
  const readString = (): string => {
    if (peek('"""') || peek("'''")) {
      const quote = text[i]!;
      const fence = quote.repeat(3);
      i += 3;
      const start = i;
      for (;;) {
        if (i >= text.length) return text.slice(start);
        if (quote === '"' && text[i] === '\\') {
          i += 2;
          continue;
        }
        if (peek(fence)) {
          // Up to two quotes may sit right before the closing fence (`""""` ends with one quote in the string).
          let end = i + 3;
          while (end < text.length && text[end] === quote && end - i < 5) end++;
          const value = text.slice(start, end - 3);
          i = end;
          return value;
        }
        i++;
      }
    }
    const quote = text[i]!;
    i++;
    let value = '';
    while (i < text.length && text[i] !== quote && text[i] !== '\n') {
      if (quote === '"' && text[i] === '\\') {
        value += unescapeAt(text, i);
        i += escapeLength(text, i);
        continue;
      }
      value += text[i];
      i++;
    }
    i++;
    return value;
  };
  /** A (possibly dotted) key; each segment with the offset it starts at. */
  const readKey = (): { name: string; offset: number }[] => {
    const parts: { name: string; offset: number }[] = [];
    for (;;) {
      skipInline();
      const offset = i;
      let name: string;
      if (text[i] === '"' || text[i] === "'") name = readString();
      else {
        const start = i;
        while (i < text.length && /[A-Za-z0-9_-]/.test(text[i]!)) i++;
        name = text.slice(start, i);
        if (i === start) i++; // not valid TOML (the parser accepted it, so unreachable); never loop forever
      }
      parts.push({ name, offset });
      skipInline();
      if (text[i] === '.') {
        i++;
        continue;
      }
      return parts;
    }
  };
  /** Header keys resolved through arrays of tables: `[tasks.params]` after `[[tasks]]` is `tasks[n].params`. */
  const resolveHeader = (parts: { name: string; offset: number }[]): KeySegment[] => {
    const path: KeySegment[] = [];
    for (const part of parts) {
      path.push(part.name);
      record(path, part.offset);
      const index = arrayTables.get(formatKeyPath(path));
      if (index !== undefined) path.push(index);
    }
    return path;
  };
  const readValue = (path: KeySegment[]) => {
    const c = text[i];
    if (c === '"' || c === "'") {
      readString();
    } else if (c === '[') {
      i++;
      let index = 0;
      for (;;) {
        skipAll();
        if (i >= text.length) return;
        if (text[i] === ']') {
          i++;
          return;
        }
        const element = [...path, index];
        record(element, i);
        readValue(element);
        index++;
        skipAll();
        if (text[i] === ',') i++;
      }
    } else if (c === '{') {
      i++;
      for (;;) {
        skipAll();
        if (i >= text.length) return;
        if (text[i] === '}') {
          i++;
          return;
        }
        readKeyValue(path);
        skipAll();
        if (text[i] === ',') i++;
        else if (text[i] !== '}') i++; // unreachable for valid TOML; guarantees progress
      }
    } else {
      // number, boolean, date-time: up to the next delimiter (a date may contain one space)
      while (i < text.length && !/[,\]}\n\r#]/.test(text[i]!)) i++;
    }
  };
  const readKeyValue = (base: KeySegment[]) => {
    const parts = readKey();
    const path = [...base];
    for (const part of parts) {
      path.push(part.name);
      record(path, part.offset);
    }
    skipInline();
    if (text[i] === '=') i++;
    skipInline();
    readValue(path);
  };

  for (;;) {
    skipAll();
    if (i >= text.length) break;
    if (peek('[[')) {
      i += 2;
      const parts = readKey();
      const last = parts.pop()!;
      const parent = resolveHeader(parts);
      const arrayPath = [...parent, last.name];
      record(arrayPath, last.offset);
      const key = formatKeyPath(arrayPath);
      const index = (arrayTables.get(key) ?? -1) + 1;
      arrayTables.set(key, index);
      current = [...arrayPath, index];
      record(current, last.offset);
      skipInline();
      if (peek(']]')) i += 2;
    } else if (text[i] === '[') {
      i++;
      current = resolveHeader(readKey());
      skipInline();
      if (text[i] === ']') i++;
    } else {
      readKeyValue(current);
    }
  }
  return positions;
}

function escapeLength(text: string, at: number): number {
  const c = text[at + 1];
  if (c === 'u') return 6;
  if (c === 'U') return 10;
  if (c === 'x') return 4;
  return 2;
}

function unescapeAt(text: string, at: number): string {
  const c = text[at + 1];
  switch (c) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'e':
      return '\u001b';
    case 'u':
    case 'U':
    case 'x': {
      const digits = text.slice(at + 2, at + escapeLength(text, at));
      const code = Number.parseInt(digits, 16);
      return Number.isNaN(code) ? '' : String.fromCodePoint(code);
    }
    default:
      return c ?? '';
  }
}
