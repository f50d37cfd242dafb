/**
 * Compression bombs built without compressing anything per request. A raw-deflate segment of
 * 1 MiB of zeros ends on a full flush, which leaves the stream byte-aligned with an empty
 * history; so the same ~1 KB segment can be repeated any number of times, and a gigabyte of
 * zeros is ~1 MB on the wire, streamed with backpressure and never held in memory.
 *
 *   gzip:    10-byte header | segment × k | tail segment | 03 00 (final empty block) | CRC32 | ISIZE
 *   deflate: 78 DA          | segment × k | tail segment | 03 00                      | Adler-32
 */
import { Readable } from 'node:stream';
import { constants, deflateRawSync } from 'node:zlib';
import { crc32OfZeros } from './crc32.js';

const SEGMENT_BYTES = 1 << 20;
let segment: Buffer | undefined;

function zerosSegment(length: number): Buffer {
  return deflateRawSync(Buffer.alloc(length), { level: 9, finishFlush: constants.Z_FULL_FLUSH });
}

function fullSegment(): Buffer {
  segment ??= zerosSegment(SEGMENT_BYTES);
  return segment;
}

const FINAL_BLOCK = Buffer.from([0x03, 0x00]);
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff]);
const ZLIB_HEADER = Buffer.from([0x78, 0xda]);

export type BombFormat = 'gzip' | 'deflate';

export interface Bomb {
  /** Bytes on the wire. */
  wireBytes: number;
  /** Bytes after decompression (all zeros). */
  inflatedBytes: number;
  stream(): Readable;
}

export function bomb(format: BombFormat, inflatedBytes: number): Bomb {
  const full = fullSegment();
  const count = Math.floor(inflatedBytes / SEGMENT_BYTES);
  const rest = inflatedBytes % SEGMENT_BYTES;
  const tail = rest > 0 ? zerosSegment(rest) : Buffer.alloc(0);
  let trailer: Buffer;
  if (format === 'gzip') {
    trailer = Buffer.alloc(8);
    trailer.writeUInt32LE(crc32OfZeros(inflatedBytes), 0);
    trailer.writeUInt32LE(inflatedBytes % 0x1_0000_0000, 4);
  } else {
    // Adler-32 of n zeros: a stays 1, b grows by 1 per byte.
    trailer = Buffer.alloc(4);
    trailer.writeUInt32BE((((inflatedBytes % 65521) << 16) | 1) >>> 0, 0);
  }
  const header = format === 'gzip' ? GZIP_HEADER : ZLIB_HEADER;
  const wireBytes = header.length + count * full.length + tail.length + FINAL_BLOCK.length + trailer.length;
  function* parts(): Generator<Buffer> {
    yield header;
    for (let i = 0; i < count; i++) yield full;
    if (tail.length > 0) yield tail;
    yield FINAL_BLOCK;
    yield trailer;
  }
  return { wireBytes, inflatedBytes, stream: () => Readable.from(parts(), { objectMode: false }) };
}
