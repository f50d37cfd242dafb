/**
 * Payload codec for the queue backends that cross a process boundary (Redis, NATS, Kafka). The
 * memory backend passes payloads by reference and never encodes.
 *
 * Wire format of one encoded payload:
 *
 * ```
 *   byte 0     byte 1                       bytes 2…
 *  ┌──────┬─────────────────────────────┬───────────────────────────────┐
 *  │ 0x6d │ flags: low nibble = format  │ body (gzip-compressed when    │
 *  │ 'm'  │   1 json · 2 msgpack        │ flag 0x10 is set)             │
 *  │      │ 0x10 = gzip                 │                               │
 *  └──────┴─────────────────────────────┴───────────────────────────────┘
 * ```
 *
 * Decoding auto-detects: a framed payload is read by its flags whatever this codec's own format
 * is (so producers and consumers can switch formats one at a time); a bare gzip stream
 * (`1f 8b`) is inflated and decoded again; bare JSON text (`{`, `[`, `"`) is parsed, so a
 * foreign producer can publish plain JSON. Anything else is poison: {@link QueueDecodeError},
 * and the backend moves it to the dead-letter queue instead of handing it to a worker.
 */
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { Options as PackrOptions } from 'msgpackr';
import { InvalidArgumentError, QueueDecodeError, QueueEncodeError } from '../errors.js';
import { lazyRequire } from '../optional-dependency.js';

export type QueueCodecFormat = 'json' | 'msgpack';

export interface QueueCodecOptions {
  /**
   * How payloads are written. msgpack keeps `Uint8Array`/`Buffer` (response bodies) and `Date`
   * intact and is smaller; json is readable with any tool.
   * @default 'msgpack'
   */
  format?: QueueCodecFormat;
  /**
   * Encoded payloads at least this large are gzip-compressed (kept only when that makes them
   * smaller). 0 turns compression off.
   * @default 16384
   */
  compressThresholdBytes?: number;
  /**
   * The largest payload a decode will produce after decompression. A bigger one (a compression
   * bomb) is treated as poison and dead-lettered.
   * @default 67108864 (64 MiB)
   */
  maxDecodedBytes?: number;
}

export interface QueueCodec {
  readonly format: QueueCodecFormat;
  /** Encode for `topic` (named in errors). Throws {@link QueueEncodeError}. */
  encode(value: unknown, topic: string): Promise<Buffer>;
  /** Decode bytes read from `topic`. Throws {@link QueueDecodeError} for poison. */
  decode(bytes: Uint8Array, topic: string): Promise<unknown>;
}

export const CODEC_MAGIC = 0x6d;
const FORMAT_JSON = 1;
const FORMAT_MSGPACK = 2;
const FLAG_GZIP = 0x10;
const KNOWN_FLAGS = 0x1f;

const gzip = promisify(zlib.gzip);
const gunzip = promisify(zlib.gunzip) as (buf: Uint8Array, options: zlib.ZlibOptions) => Promise<Buffer>;

const msgpackr = lazyRequire<typeof import('msgpackr')>('msgpackr');

/** A msgpackr encoder and decoder. */
export interface LazyPackr {
  pack(value: unknown): Buffer;
  unpack(bytes: Uint8Array): unknown;
}

/**
 * A msgpackr `Packr` made on its first pack or unpack: msgpackr (and its native decoder) loads
 * when a queue first encodes a message, not when mocra is imported.
 */
export function lazyPackr(options: PackrOptions): LazyPackr {
  let packr: import('msgpackr').Packr | undefined;
  const made = () => {
    packr ??= new (msgpackr().Packr)(options);
    return packr;
  };
  return {
    pack: (value) => made().pack(value),
    unpack: (bytes) => made().unpack(bytes),
  };
}

// Plain maps, no record extension: the bytes stay readable by any msgpack implementation.
const packr = lazyPackr({ useRecords: false, mapsAsObjects: true });

export function createQueueCodec(options: QueueCodecOptions = {}): QueueCodec {
  const format = options.format ?? 'msgpack';
  if (format !== 'json' && format !== 'msgpack') {
    throw new InvalidArgumentError(`codec format must be 'json' or 'msgpack', got '${String(format)}'`);
  }
  const threshold = options.compressThresholdBytes ?? 16_384;
  const maxDecoded = options.maxDecodedBytes ?? 64 * 1024 * 1024;
  if (!(threshold >= 0))
    throw new InvalidArgumentError(`compressThresholdBytes must be ≥ 0, got ${threshold}`);
  if (!(maxDecoded > 0)) throw new InvalidArgumentError(`maxDecodedBytes must be > 0, got ${maxDecoded}`);

  return {
    format,
    async encode(value: unknown, topic: string): Promise<Buffer> {
      let body: Buffer;
      try {
        body = format === 'json' ? encodeJson(value) : packr.pack(value);
      } catch (err) {
        throw new QueueEncodeError(topic, err instanceof Error ? err.message : String(err), { cause: err });
      }
      let flags = format === 'json' ? FORMAT_JSON : FORMAT_MSGPACK;
      if (threshold > 0 && body.length >= threshold) {
        const compressed = await gzip(body);
        if (compressed.length < body.length) {
          body = compressed;
          flags |= FLAG_GZIP;
        }
      }
      const out = Buffer.allocUnsafe(body.length + 2);
      out[0] = CODEC_MAGIC;
      out[1] = flags;
      body.copy(out, 2);
      return out;
    },
    decode(bytes: Uint8Array, topic: string): Promise<unknown> {
      return decodeAny(bytes, topic, maxDecoded, true);
    },
  };
}

function encodeJson(value: unknown): Buffer {
  const text = JSON.stringify(value);
  // JSON.stringify(undefined | function | symbol) returns undefined instead of throwing.
  if (text === undefined) throw new TypeError(`${typeof value} is not JSON-serializable`);
  return Buffer.from(text, 'utf8');
}

async function decodeAny(
  bytes: Uint8Array,
  topic: string,
  maxDecoded: number,
  allowBareGzip: boolean,
): Promise<unknown> {
  if (bytes.length === 0) throw new QueueDecodeError(topic, 'empty payload');
  if (bytes.length > maxDecoded) {
    throw new QueueDecodeError(
      topic,
      `payload of ${bytes.length} bytes exceeds maxDecodedBytes ${maxDecoded}`,
    );
  }
  const first = bytes[0]!;
  if (first === CODEC_MAGIC) {
    if (bytes.length < 2) throw new QueueDecodeError(topic, 'truncated header');
    const flags = bytes[1]!;
    if ((flags & ~KNOWN_FLAGS) !== 0)
      throw new QueueDecodeError(topic, `unknown flags 0x${flags.toString(16)}`);
    let body: Uint8Array = bytes.subarray(2);
    if (flags & FLAG_GZIP) body = await inflate(body, topic, maxDecoded);
    const fmt = flags & 0x0f;
    if (fmt === FORMAT_JSON) return parseJson(body, topic);
    if (fmt === FORMAT_MSGPACK) {
      try {
        return packr.unpack(body);
      } catch (err) {
        throw new QueueDecodeError(topic, `invalid msgpack: ${describe(err)}`, { cause: err });
      }
    }
    throw new QueueDecodeError(topic, `unknown format ${fmt}`);
  }
  if (allowBareGzip && first === 0x1f && bytes[1] === 0x8b) {
    return decodeAny(await inflate(bytes, topic, maxDecoded), topic, maxDecoded, false);
  }
  if (first === 0x7b /* { */ || first === 0x5b /* [ */ || first === 0x22 /* " */)
    return parseJson(bytes, topic);
  throw new QueueDecodeError(
    topic,
    `unrecognised payload (first byte 0x${first.toString(16).padStart(2, '0')})`,
  );
}

async function inflate(body: Uint8Array, topic: string, maxDecoded: number): Promise<Buffer> {
  try {
    return await gunzip(body, { maxOutputLength: maxDecoded });
  } catch (err) {
    throw new QueueDecodeError(topic, `gzip: ${describe(err)}`, { cause: err });
  }
}

function parseJson(body: Uint8Array, topic: string): unknown {
  try {
    return JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch (err) {
    throw new QueueDecodeError(topic, `invalid JSON: ${describe(err)}`, { cause: err });
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
