/**
 * A CSS selector subset that can be matched during a streaming (SAX) pass, so link extraction
 * never builds a DOM. Supported: type and universal selectors, `#id`, `.class`, attribute
 * selectors (`[a]`, `[a=v]`, `[a~=v]`, `[a|=v]`, `[a^=v]`, `[a$=v]`, `[a*=v]`, optional `i` flag),
 * the descendant (` `) and child (`>`) combinators, and selector lists (`a, area`). Anything
 * else (pseudo-classes, sibling combinators) makes {@link parseStreamSelector} return
 * undefined, and the caller falls back to a DOM.
 *
 * Matching goes right to left over the stack of open elements (what the SAX parser has
 * opened and not closed yet):
 *
 * ```
 *   selector  "ul.links > li a"        stack  html ▸ body ▸ ul.links ▸ li ▸ a   (a = current)
 *   compound   ul.links  >  li  ␠  a           match a, then li somewhere above a,
 *                                              then ul.links directly above that li
 * ```
 */

/** One open element as the matcher sees it. */
export interface ElementView {
  readonly name: string;
  readonly attribs: Readonly<Record<string, string>>;
}

type AttrOp = 'exists' | '=' | '~=' | '|=' | '^=' | '$=' | '*=';

interface AttrTest {
  name: string;
  op: AttrOp;
  value: string;
  ignoreCase: boolean;
}

interface Compound {
  tag: string | undefined; // undefined = any
  id: string | undefined;
  classes: string[];
  attrs: AttrTest[];
}

/** Compounds right to left; `combinators[i]` joins compounds[i] to compounds[i + 1] (its ancestor side). */
interface Complex {
  compounds: Compound[];
  combinators: ('descendant' | 'child')[];
}

export interface StreamSelector {
  /** The selector text it was parsed from. */
  readonly source: string;
  /** Whether matching needs the ancestors (a combinator is used). */
  readonly needsAncestors: boolean;
  /** Whether the element on top of `stack` matches. */
  matches(stack: readonly ElementView[]): boolean;
}

const IDENT = /^-?[_a-zA-Z\u00a0-\uffff][-_a-zA-Z0-9\u00a0-\uffff]*/;

/** Parse `source`, or return undefined when it uses something outside the streaming subset. */
export function parseStreamSelector(source: string): StreamSelector | undefined {
  const complexes: Complex[] = [];
  for (const part of splitTopLevel(source)) {
    const complex = parseComplex(part.trim());
    if (!complex) return undefined;
    complexes.push(complex);
  }
  if (complexes.length === 0) return undefined;
  const needsAncestors = complexes.some((c) => c.compounds.length > 1);
  return {
    source,
    needsAncestors,
    matches(stack) {
      for (const c of complexes) if (matchComplex(c, stack)) return true;
      return false;
    },
  };
}

/** Split on commas outside brackets and quotes. */
function splitTopLevel(source: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote = '';
  let start = 0;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i]!;
    if (quote) {
      if (ch === quote) quote = '';
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '[') depth++;
    else if (ch === ']') depth--;
    else if (ch === ',' && depth === 0) {
      parts.push(source.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(source.slice(start));
  return parts;
}

function parseComplex(text: string): Complex | undefined {
  if (text === '') return undefined;
  const compounds: Compound[] = [];
  const combinators: ('descendant' | 'child')[] = [];
  let rest = text;
  let pending: 'descendant' | 'child' | undefined;
  while (rest.length > 0) {
    const parsed = parseCompound(rest);
    if (!parsed) return undefined;
    if (compounds.length > 0) combinators.push(pending ?? 'descendant');
    compounds.push(parsed.compound);
    rest = parsed.rest;
    const ws = /^\s*/.exec(rest)![0];
    rest = rest.slice(ws.length);
    if (rest.startsWith('>')) {
      pending = 'child';
      rest = rest.slice(1).trimStart();
      if (rest === '') return undefined;
    } else if (rest.startsWith('+') || rest.startsWith('~')) {
      return undefined;
    } else if (ws.length > 0 || rest === '') {
      pending = 'descendant';
    } else {
      return undefined; // e.g. ':' pseudo-classes
    }
  }
  compounds.reverse();
  combinators.reverse();
  return { compounds, combinators };
}

function parseCompound(text: string): { compound: Compound; rest: string } | undefined {
  const compound: Compound = { tag: undefined, id: undefined, classes: [], attrs: [] };
  let rest = text;
  let any = false;
  if (rest.startsWith('*')) {
    rest = rest.slice(1);
    any = true;
  } else {
    const m = IDENT.exec(rest);
    if (m) {
      compound.tag = m[0].toLowerCase();
      rest = rest.slice(m[0].length);
      any = true;
    }
  }
  for (;;) {
    const ch = rest[0];
    if (ch === '#' || ch === '.') {
      const m = IDENT.exec(rest.slice(1));
      if (!m) return undefined;
      if (ch === '#') compound.id = m[0];
      else compound.classes.push(m[0]);
      rest = rest.slice(1 + m[0].length);
      any = true;
    } else if (ch === '[') {
      const m =
        /^\[\s*([-_a-zA-Z0-9:]+)\s*(?:([~|^$*]?=)\s*(?:"([^"]*)"|'([^']*)'|([^\s\]]+))\s*(i|s)?\s*)?\]/.exec(
          rest,
        );
      if (!m) return undefined;
      const op = (m[2] as AttrOp | undefined) ?? 'exists';
      const ignoreCase = m[6] === 'i';
      const value = m[3] ?? m[4] ?? m[5] ?? '';
      compound.attrs.push({
        name: m[1]!.toLowerCase(),
        op,
        value: ignoreCase ? value.toLowerCase() : value,
        ignoreCase,
      });
      rest = rest.slice(m[0].length);
      any = true;
    } else {
      break;
    }
  }
  return any ? { compound, rest } : undefined;
}

function matchCompound(c: Compound, el: ElementView): boolean {
  if (c.tag !== undefined && c.tag !== el.name) return false;
  const a = el.attribs;
  if (c.id !== undefined && a.id !== c.id) return false;
  if (c.classes.length > 0) {
    const cls = a.class;
    if (cls === undefined) return false;
    for (const name of c.classes) if (!hasWord(cls, name)) return false;
  }
  for (const t of c.attrs) {
    const raw = a[t.name];
    if (raw === undefined) return false;
    if (t.op === 'exists') continue;
    const v = t.ignoreCase ? raw.toLowerCase() : raw;
    switch (t.op) {
      case '=':
        if (v !== t.value) return false;
        break;
      case '~=':
        if (!hasWord(v, t.value)) return false;
        break;
      case '|=':
        if (v !== t.value && !v.startsWith(`${t.value}-`)) return false;
        break;
      case '^=':
        if (t.value === '' || !v.startsWith(t.value)) return false;
        break;
      case '$=':
        if (t.value === '' || !v.endsWith(t.value)) return false;
        break;
      case '*=':
        if (t.value === '' || !v.includes(t.value)) return false;
        break;
    }
  }
  return true;
}

/** Whether the whitespace-separated list `list` contains `word`. */
export function hasWord(list: string, word: string): boolean {
  if (word === '') return false;
  let from = 0;
  for (;;) {
    const i = list.indexOf(word, from);
    if (i < 0) return false;
    const before = i === 0 || isSpace(list.charCodeAt(i - 1));
    const end = i + word.length;
    const after = end === list.length || isSpace(list.charCodeAt(end));
    if (before && after) return true;
    from = i + 1;
  }
}

function isSpace(code: number): boolean {
  return code === 32 || code === 9 || code === 10 || code === 12 || code === 13;
}

function matchComplex(c: Complex, stack: readonly ElementView[]): boolean {
  const top = stack.length - 1;
  if (top < 0 || !matchCompound(c.compounds[0]!, stack[top]!)) return false;
  return matchFrom(c, 1, stack, top - 1);
}

/** Match compounds[k…] against stack[0…pos] (right to left), with backtracking for descendants. */
function matchFrom(c: Complex, k: number, stack: readonly ElementView[], pos: number): boolean {
  if (k === c.compounds.length) return true;
  const compound = c.compounds[k]!;
  if (c.combinators[k - 1] === 'child') {
    return pos >= 0 && matchCompound(compound, stack[pos]!) && matchFrom(c, k + 1, stack, pos - 1);
  }
  for (let p = pos; p >= 0; p--) {
    if (matchCompound(compound, stack[p]!) && matchFrom(c, k + 1, stack, p - 1)) return true;
  }
  return false;
}
