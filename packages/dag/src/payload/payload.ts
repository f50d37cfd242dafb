/**
 * The value that flows along DAG edges: bytes, a content type, an optional content encoding and
 * string metadata. Bytes (not JS objects) so that a payload means the same thing after it has
 * crossed a process boundary, been checkpointed, or been cached by an idempotency store.
 */
import { InvalidPayloadError } from '../errors.js';
import { utf8 } from './binary.js';

export interface Payload {
  readonly bytes: Uint8Array;
  /** A media type, e.g. `application/json`. */
  readonly contentType: string;
  /** A content encoding applied to `bytes` (e.g. `gzip`), if any. */
  readonly encoding?: string;
  readonly metadata: Readonly<Record<string, string>>;
}

export interface PayloadOptions {
  /** @default 'application/octet-stream' */
  contentType?: string;
  /** A content encoding applied to the bytes, e.g. `gzip`. @default undefined (none) */
  encoding?: string;
  /** String key/value pairs that travel with the bytes. @default {} */
  metadata?: Readonly<Record<string, string>>;
}

export const OCTET_STREAM = 'application/octet-stream';
export const JSON_CONTENT_TYPE = 'application/json';
export const TEXT_CONTENT_TYPE = 'text/plain; charset=utf-8';

const NO_METADATA: Readonly<Record<string, string>> = Object.freeze({});

/** A shared, frozen empty payload: what a node returns when it has nothing to pass on. */
export const EMPTY_PAYLOAD: Payload = Object.freeze({
  bytes: new Uint8Array(0),
  contentType: OCTET_STREAM,
  metadata: NO_METADATA,
});

/** Builds a payload, checking its fields (a payload may come from untrusted code or the wire). */
export function createPayload(bytes: Uint8Array, options: PayloadOptions = {}): Payload {
  if (!(bytes instanceof Uint8Array)) {
    throw new InvalidPayloadError(`payload bytes must be a Uint8Array, got ${typeof bytes}`);
  }
  const contentType = options.contentType ?? OCTET_STREAM;
  if (typeof contentType !== 'string' || contentType.length === 0) {
    throw new InvalidPayloadError('payload contentType must be a non-empty string');
  }
  if (
    options.encoding !== undefined &&
    (typeof options.encoding !== 'string' || options.encoding.length === 0)
  ) {
    throw new InvalidPayloadError('payload encoding must be a non-empty string when given');
  }
  const metadata = copyMetadata(options.metadata);
  return Object.freeze({
    bytes,
    contentType,
    ...(options.encoding === undefined ? {} : { encoding: options.encoding }),
    metadata,
  });
}

/** A payload holding `value` as JSON (`application/json`). */
export function jsonPayload(
  value: unknown,
  options: Omit<PayloadOptions, 'contentType' | 'encoding'> = {},
): Payload {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (cause) {
    throw new InvalidPayloadError('value cannot be serialized as JSON', { cause });
  }
  if (text === undefined) throw new InvalidPayloadError(`a ${typeof value} cannot be serialized as JSON`);
  return createPayload(utf8(text), { ...options, contentType: JSON_CONTENT_TYPE });
}

/** A payload holding `text` as UTF-8 (`text/plain; charset=utf-8` unless told otherwise). */
export function textPayload(text: string, options: Omit<PayloadOptions, 'encoding'> = {}): Payload {
  return createPayload(utf8(text), { ...options, contentType: options.contentType ?? TEXT_CONTENT_TYPE });
}

/** True for `application/json` and any `+json` media type, with or without parameters. */
export function isJsonContentType(contentType: string): boolean {
  const base = (contentType.split(';', 1)[0] ?? '').trim().toLowerCase();
  return base === JSON_CONTENT_TYPE || base.endsWith('+json');
}

const strictDecoder = new TextDecoder('utf-8', { fatal: true });

/** The payload's bytes as UTF-8 text. Throws {@link InvalidPayloadError} on encoded or non-UTF-8 bytes. */
export function readText(payload: Payload): string {
  if (payload.encoding !== undefined) {
    throw new InvalidPayloadError(
      `payload is ${payload.encoding}-encoded; decode it before reading it as text`,
    );
  }
  try {
    return strictDecoder.decode(payload.bytes);
  } catch (cause) {
    throw new InvalidPayloadError('payload bytes are not valid UTF-8', { cause });
  }
}

/**
 * The payload's JSON value. Throws {@link InvalidPayloadError} when the content type is not JSON
 * or the bytes do not parse. The type parameter is a cast: validate untrusted shapes yourself.
 */
export function readJson<T = unknown>(payload: Payload): T {
  if (!isJsonContentType(payload.contentType)) {
    throw new InvalidPayloadError(`payload content type is '${payload.contentType}', not JSON`);
  }
  const text = readText(payload);
  try {
    return JSON.parse(text) as T;
  } catch (cause) {
    throw new InvalidPayloadError('payload is not valid JSON', { cause });
  }
}

/** Whether `value` has the shape of a {@link Payload}. */
export function isPayload(value: unknown): value is Payload {
  if (typeof value !== 'object' || value === null) return false;
  const p = value as Partial<Payload>;
  return (
    p.bytes instanceof Uint8Array &&
    typeof p.contentType === 'string' &&
    typeof p.metadata === 'object' &&
    p.metadata !== null &&
    (p.encoding === undefined || typeof p.encoding === 'string')
  );
}

function copyMetadata(
  metadata: Readonly<Record<string, string>> | undefined,
): Readonly<Record<string, string>> {
  if (metadata === undefined) return NO_METADATA;
  if (typeof metadata !== 'object' || metadata === null) {
    throw new InvalidPayloadError('payload metadata must be an object of strings');
  }
  // A null-prototype copy: keys like `__proto__` stay plain data, and later edits to the
  // caller's object do not change a payload that may already be checkpointed.
  const out: Record<string, string> = Object.create(null);
  for (const key of Object.keys(metadata)) {
    const value = metadata[key];
    if (typeof value !== 'string') {
      throw new InvalidPayloadError(`payload metadata '${key}' must be a string, got ${typeof value}`);
    }
    out[key] = value;
  }
  return Object.freeze(out);
}
