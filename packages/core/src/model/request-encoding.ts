/**
 * The request helpers (Scrapy's JsonRequest / FormRequest, Crawlee's payload): `json`, `form`,
 * `params` and `cookies` given to `new Request(url, init)`, `cx.follow(url, init)` or a seed are
 * encoded once, into the URL, the body and the headers — the request carries no second copy, so
 * what is queued, fingerprinted and sent is what the user sees on `request.url`/`body`/`headers`.
 */
import { InvalidArgumentError } from '../errors.js';

/** A query or form value: repeated keys come from arrays (`{ tag: ['a', 'b'] }` → `tag=a&tag=b`). */
export type FieldValue = string | number | boolean | readonly (string | number | boolean)[];

export interface RequestEncodingInit {
  /** Sent as the JSON body, with `content-type: application/json` (unless set); the method defaults to POST. */
  json?: unknown;
  /** Sent as an `application/x-www-form-urlencoded` body (unless a content-type is set); the method defaults to POST. */
  form?: Readonly<Record<string, FieldValue>>;
  /** Appended to the URL's query string (after what it has). */
  params?: Readonly<Record<string, FieldValue>>;
  /** Sent in the `cookie` header (`a=1; b=2`), after a cookie header the request already has. */
  cookies?: Readonly<Record<string, string>>;
}

/** What the helpers produce: the URL, the body, and headers and a method to apply. */
export interface EncodedRequestParts {
  url: string;
  body: string | undefined;
  /** POST when `json` or `form` gave the body and no method was chosen. */
  method: string | undefined;
  headers: Record<string, string>;
}

// RFC 6265: a cookie name is a token; a value has no CTLs, whitespace, DQUOTE, comma, semicolon or backslash.
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const COOKIE_VALUE = /^[\x21\x23-\x2B\x2D-\x3A\x3C-\x5B\x5D-\x7E]*$/;

/** The key under which `headers` has `name` (any case), or undefined. */
function headerKey(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  return Object.keys(headers).find((k) => k.toLowerCase() === name);
}

function appendFields(
  target: URLSearchParams,
  fields: Readonly<Record<string, FieldValue>>,
  what: string,
): void {
  if (fields === null || typeof fields !== 'object' || Array.isArray(fields)) {
    throw new InvalidArgumentError(`${what} must be an object of field values`);
  }
  for (const [key, value] of Object.entries(fields)) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
        throw new InvalidArgumentError(
          `${what}.${key} must be a string, number, boolean or an array of them`,
        );
      }
      target.append(key, String(v));
    }
  }
}

/** Whether an init uses any helper (the constructor's fast path skips the rest). */
export function usesEncoding(init: RequestEncodingInit): boolean {
  return (
    init.json !== undefined ||
    init.form !== undefined ||
    init.params !== undefined ||
    init.cookies !== undefined
  );
}

/** Encodes the helpers of `init` onto `url` and `headers`. Throws InvalidArgumentError for unusable input. */
export function encodeRequestParts(
  url: string,
  headers: Readonly<Record<string, string>>,
  init: RequestEncodingInit & { body?: unknown; method?: string | undefined },
): EncodedRequestParts {
  const bodies = [
    init.body !== undefined && 'body',
    init.json !== undefined && 'json',
    init.form !== undefined && 'form',
  ].filter(Boolean);
  if (bodies.length > 1)
    throw new InvalidArgumentError(`a request takes one of body, json and form, not ${bodies.join(' and ')}`);
  const out: EncodedRequestParts = { url, body: undefined, method: undefined, headers: {} };
  if (init.params !== undefined) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new InvalidArgumentError(`params need an absolute URL, got ${JSON.stringify(url)}`);
    }
    appendFields(parsed.searchParams, init.params, 'params');
    out.url = parsed.href;
  }
  if (init.json !== undefined) {
    const text = JSON.stringify(init.json);
    if (text === undefined)
      throw new InvalidArgumentError('json must be a JSON value (not a function or a symbol)');
    out.body = text;
    if (headerKey(headers, 'content-type') === undefined) out.headers['content-type'] = 'application/json';
  }
  if (init.form !== undefined) {
    const fields = new URLSearchParams();
    appendFields(fields, init.form, 'form');
    out.body = fields.toString();
    if (headerKey(headers, 'content-type') === undefined)
      out.headers['content-type'] = 'application/x-www-form-urlencoded';
  }
  if ((init.json !== undefined || init.form !== undefined) && init.method === undefined) out.method = 'POST';
  if (init.cookies !== undefined) {
    if (init.cookies === null || typeof init.cookies !== 'object')
      throw new InvalidArgumentError('cookies must be an object of name → value');
    const pairs: string[] = [];
    for (const [name, value] of Object.entries(init.cookies)) {
      if (!COOKIE_NAME.test(name))
        throw new InvalidArgumentError(`cookie name ${JSON.stringify(name)} is not a valid token`);
      if (typeof value !== 'string' || !COOKIE_VALUE.test(value)) {
        throw new InvalidArgumentError(
          `cookie ${name}: the value must be a string without spaces, quotes, commas, semicolons or backslashes (encode it first)`,
        );
      }
      pairs.push(`${name}=${value}`);
    }
    const existing = headerKey(headers, 'cookie');
    const name = existing ?? 'cookie';
    const before = existing === undefined ? '' : headers[existing]!;
    if (pairs.length > 0)
      out.headers[name] = before === '' ? pairs.join('; ') : `${before}; ${pairs.join('; ')}`;
  }
  return out;
}
