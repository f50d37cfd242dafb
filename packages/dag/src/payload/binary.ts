/**
 * Little-endian binary writer and reader shared by every envelope this package writes
 * (payloads, payload maps, node tasks). The reader never reads past its end: every read checks
 * the remaining length first and reports truncation as an {@link InvalidEnvelopeError}.
 */
import { InvalidEnvelopeError, InvalidPayloadError, UnsupportedEnvelopeVersionError } from '../errors.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export const MAX_U16 = 0xffff;
export const MAX_U32 = 0xffff_ffff;

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

export class BinaryWriter {
  #buf: Uint8Array;
  #view: DataView;
  #pos = 0;

  constructor(initialSize = 256) {
    this.#buf = new Uint8Array(initialSize);
    this.#view = new DataView(this.#buf.buffer);
  }

  #reserve(n: number): void {
    if (this.#pos + n <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < this.#pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.#buf.subarray(0, this.#pos));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }

  u8(value: number): this {
    this.#reserve(1);
    this.#view.setUint8(this.#pos, value);
    this.#pos += 1;
    return this;
  }

  u16(value: number): this {
    this.#reserve(2);
    this.#view.setUint16(this.#pos, value, true);
    this.#pos += 2;
    return this;
  }

  u32(value: number): this {
    this.#reserve(4);
    this.#view.setUint32(this.#pos, value, true);
    this.#pos += 4;
    return this;
  }

  f64(value: number): this {
    this.#reserve(8);
    this.#view.setFloat64(this.#pos, value, true);
    this.#pos += 8;
    return this;
  }

  raw(bytes: Uint8Array): this {
    this.#reserve(bytes.length);
    this.#buf.set(bytes, this.#pos);
    this.#pos += bytes.length;
    return this;
  }

  /** A string with a u16 byte-length prefix. `what` names the field in the error when it is too long. */
  str16(text: string, what: string): this {
    const bytes = utf8(text);
    if (bytes.length > MAX_U16) {
      throw new InvalidPayloadError(
        `${what} is ${bytes.length} bytes of UTF-8; the envelope allows at most ${MAX_U16}`,
      );
    }
    return this.u16(bytes.length).raw(bytes);
  }

  /** Bytes with a u32 length prefix. */
  bytes32(bytes: Uint8Array, what: string): this {
    if (bytes.length > MAX_U32) {
      throw new InvalidPayloadError(
        `${what} is ${bytes.length} bytes; the envelope allows at most ${MAX_U32}`,
      );
    }
    return this.u32(bytes.length).raw(bytes);
  }

  finish(): Uint8Array {
    return this.#buf.slice(0, this.#pos);
  }
}

export class BinaryReader {
  readonly #buf: Uint8Array;
  readonly #view: DataView;
  #pos = 0;

  constructor(bytes: Uint8Array) {
    this.#buf = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get remaining(): number {
    return this.#buf.length - this.#pos;
  }

  #need(n: number, what: string): void {
    if (this.#buf.length - this.#pos < n) {
      throw new InvalidEnvelopeError(
        'truncated',
        `needed ${n} byte(s) for ${what} at offset ${this.#pos}, only ${this.#buf.length - this.#pos} left`,
      );
    }
  }

  u8(what: string): number {
    this.#need(1, what);
    const v = this.#view.getUint8(this.#pos);
    this.#pos += 1;
    return v;
  }

  u16(what: string): number {
    this.#need(2, what);
    const v = this.#view.getUint16(this.#pos, true);
    this.#pos += 2;
    return v;
  }

  u32(what: string): number {
    this.#need(4, what);
    const v = this.#view.getUint32(this.#pos, true);
    this.#pos += 4;
    return v;
  }

  f64(what: string): number {
    this.#need(8, what);
    const v = this.#view.getFloat64(this.#pos, true);
    this.#pos += 8;
    return v;
  }

  /** A copy, so the result does not pin (or alias) the caller's buffer. */
  raw(n: number, what: string): Uint8Array {
    this.#need(n, what);
    const out = this.#buf.slice(this.#pos, this.#pos + n);
    this.#pos += n;
    return out;
  }

  text(n: number, what: string): string {
    this.#need(n, what);
    const view = this.#buf.subarray(this.#pos, this.#pos + n);
    this.#pos += n;
    try {
      return decoder.decode(view);
    } catch {
      throw new InvalidEnvelopeError('invalid-utf8', `${what} is not valid UTF-8`);
    }
  }

  str16(what: string): string {
    return this.text(this.u16(`${what} length`), what);
  }

  bytes32(what: string): Uint8Array {
    return this.raw(this.u32(`${what} length`), what);
  }

  /** Checks the 4-byte magic and the version byte that open every envelope. */
  header(magic: Uint8Array, version: number, what: string): void {
    if (this.#buf.length < magic.length) {
      throw new InvalidEnvelopeError('truncated', `${this.#buf.length} byte(s) cannot hold a ${what} header`);
    }
    for (let i = 0; i < magic.length; i++) {
      if (this.#buf[i] !== magic[i]) {
        throw new InvalidEnvelopeError(
          'bad-magic',
          `not a ${what}: the first bytes are not '${ascii(magic)}'`,
        );
      }
    }
    this.#pos = magic.length;
    const found = this.u8(`${what} version`);
    if (found !== version) throw new UnsupportedEnvelopeVersionError(found, version);
  }

  /** Every envelope is exactly one value: bytes after it are an error, not something to ignore. */
  end(what: string): void {
    if (this.remaining !== 0) {
      throw new InvalidEnvelopeError(
        'trailing-bytes',
        `${this.remaining} byte(s) after the end of the ${what}`,
      );
    }
  }
}

export function ascii(bytes: Uint8Array): string {
  return String.fromCharCode(...bytes);
}
