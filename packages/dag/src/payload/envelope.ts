/**
 * Versioned binary envelopes for payloads. This is the wire and storage form of a payload:
 * what a remote dispatcher sends, what a run-state store keeps, what an idempotency store caches.
 *
 * Payload envelope, version 1 (all integers little-endian):
 *
 * ```
 *  0      4  magic "MDAG"
 *  4      1  version = 1
 *  5      2  content-type length (u16)  ─┐
 *  7      2  encoding length (u16, 0 = none)
 *  9      2  metadata entry count (u16)
 * 11      4  data length (u32)           ─┘ the header fixes every length up front
 * 15      …  content type (UTF-8)
 *         …  encoding (UTF-8)
 *         …  metadata, sorted by key: key length (u16), value length (u32), key, value
 *         …  data
 * ```
 *
 * Metadata is sorted so that equal payloads encode to equal bytes. Decoding rejects a wrong
 * magic, an unknown version, truncation, trailing bytes, invalid UTF-8 and duplicate keys.
 *
 * Payload map ("MDGM", version 1) — named payloads, e.g. a checkpoint's outputs:
 *
 * ```
 *  0  4  magic "MDGM" · 4  1  version = 1 · 5  4  entry count (u32)
 *  then per entry, sorted by name: name length (u16), name, envelope length (u32), payload envelope
 * ```
 */
import { InvalidEnvelopeError, InvalidPayloadError } from '../errors.js';
import { BinaryReader, BinaryWriter, MAX_U16, MAX_U32, utf8 } from './binary.js';
import { createPayload, type Payload } from './payload.js';

export const PAYLOAD_ENVELOPE_VERSION = 1;
export const PAYLOAD_MAP_VERSION = 1;
const PAYLOAD_MAGIC = utf8('MDAG');
const MAP_MAGIC = utf8('MDGM');

/** Writes a payload into `w` without the envelope header (shared by the containers). */
export function writePayloadBody(w: BinaryWriter, payload: Payload): void {
  const contentType = utf8(payload.contentType);
  const encoding = utf8(payload.encoding ?? '');
  const keys = Object.keys(payload.metadata).sort();
  if (contentType.length > MAX_U16)
    throw new InvalidPayloadError('payload contentType is longer than 65535 bytes');
  if (encoding.length > MAX_U16) throw new InvalidPayloadError('payload encoding is longer than 65535 bytes');
  if (keys.length > MAX_U16) throw new InvalidPayloadError('payload has more than 65535 metadata entries');
  if (payload.bytes.length > MAX_U32) throw new InvalidPayloadError('payload is larger than 4 GiB');
  w.u16(contentType.length).u16(encoding.length).u16(keys.length).u32(payload.bytes.length);
  w.raw(contentType).raw(encoding);
  for (const key of keys) {
    const k = utf8(key);
    const v = utf8(payload.metadata[key] as string);
    if (k.length > MAX_U16)
      throw new InvalidPayloadError(`payload metadata key '${key.slice(0, 40)}…' is too long`);
    if (v.length > MAX_U32) throw new InvalidPayloadError(`payload metadata '${key}' is too long`);
    w.u16(k.length).u32(v.length).raw(k).raw(v);
  }
  w.raw(payload.bytes);
}

export function readPayloadBody(r: BinaryReader): Payload {
  const ctLen = r.u16('content-type length');
  const encLen = r.u16('encoding length');
  const metaCount = r.u16('metadata count');
  const dataLen = r.u32('data length');
  const contentType = r.text(ctLen, 'content type');
  if (contentType.length === 0) throw new InvalidEnvelopeError('invalid-field', 'content type is empty');
  const encoding = encLen === 0 ? undefined : r.text(encLen, 'encoding');
  const metadata: Record<string, string> = Object.create(null);
  let previous: string | undefined;
  for (let i = 0; i < metaCount; i++) {
    const kLen = r.u16('metadata key length');
    const vLen = r.u32('metadata value length');
    const key = r.text(kLen, 'metadata key');
    const value = r.text(vLen, 'metadata value');
    if (key === previous || Object.hasOwn(metadata, key)) {
      throw new InvalidEnvelopeError('duplicate-key', `metadata key '${key}' appears twice`);
    }
    previous = key;
    metadata[key] = value;
  }
  const bytes = r.raw(dataLen, 'payload data');
  return createPayload(bytes, {
    contentType,
    ...(encoding === undefined ? {} : { encoding }),
    metadata,
  });
}

/** The payload as a self-describing byte string (see the layout at the top of this file). */
export function encodePayload(payload: Payload): Uint8Array {
  const w = new BinaryWriter(32 + payload.bytes.length);
  w.raw(PAYLOAD_MAGIC).u8(PAYLOAD_ENVELOPE_VERSION);
  writePayloadBody(w, payload);
  return w.finish();
}

/** Reads one payload envelope; the bytes must hold exactly one envelope. */
export function decodePayload(bytes: Uint8Array): Payload {
  if (!(bytes instanceof Uint8Array))
    throw new InvalidEnvelopeError('invalid-field', 'envelope must be a Uint8Array');
  const r = new BinaryReader(bytes);
  r.header(PAYLOAD_MAGIC, PAYLOAD_ENVELOPE_VERSION, 'payload envelope');
  const payload = readPayloadBody(r);
  r.end('payload envelope');
  return payload;
}

export function writePayloadEntries(w: BinaryWriter, entries: Iterable<readonly [string, Payload]>): void {
  const sorted = [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  w.u32(sorted.length);
  let previous: string | undefined;
  for (const [name, payload] of sorted) {
    if (name === previous) throw new InvalidPayloadError(`payload name '${name}' appears twice`);
    previous = name;
    w.str16(name, `payload name '${name.slice(0, 40)}'`);
    const inner = encodePayload(payload);
    w.bytes32(inner, `payload '${name}'`);
  }
}

export function readPayloadEntries(r: BinaryReader): Map<string, Payload> {
  const count = r.u32('entry count');
  const out = new Map<string, Payload>();
  for (let i = 0; i < count; i++) {
    const name = r.str16('payload name');
    if (out.has(name))
      throw new InvalidEnvelopeError('duplicate-key', `payload name '${name}' appears twice`);
    out.set(name, decodePayload(r.bytes32(`payload '${name}'`)));
  }
  return out;
}

/** Named payloads (a checkpoint's outputs, a node's upstream) as one byte string. */
export function encodePayloadMap(entries: Iterable<readonly [string, Payload]>): Uint8Array {
  const w = new BinaryWriter();
  w.raw(MAP_MAGIC).u8(PAYLOAD_MAP_VERSION);
  writePayloadEntries(w, entries);
  return w.finish();
}

export function decodePayloadMap(bytes: Uint8Array): Map<string, Payload> {
  if (!(bytes instanceof Uint8Array))
    throw new InvalidEnvelopeError('invalid-field', 'envelope must be a Uint8Array');
  const r = new BinaryReader(bytes);
  r.header(MAP_MAGIC, PAYLOAD_MAP_VERSION, 'payload map');
  const out = readPayloadEntries(r);
  r.end('payload map');
  return out;
}
