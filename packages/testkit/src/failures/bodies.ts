/** Bodies used by the failure endpoints: exact-size HTML, a streamed huge page, a small PNG. */
import { Readable } from 'node:stream';
import { deflateSync } from 'node:zlib';
import { fillerParagraphs, fillerParts } from '../content/text.js';
import { type FixtureSiteOptions, resolveFixtureOptions } from '../site/options.js';
import { crc32 } from './crc32.js';

const PADDED_HEAD =
  '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Padded page</title>\n</head>\n<body>\n<main class="padded">\n';
const PADDED_TAIL = '</main>\n</body>\n</html>\n';

/** An ASCII HTML page of exactly `bytes` bytes (or just its markup when that is longer). */
export function paddedHtml(seed: number, bytes: number): string {
  const parts = [PADDED_HEAD];
  const fill = bytes - PADDED_HEAD.length - PADDED_TAIL.length;
  if (fill > 0) fillerParts(seed, 0, fill, parts);
  parts.push(PADDED_TAIL);
  return parts.join('');
}

/**
 * The page `/compressed/<encoding>?bytes=N` decodes to (also the body of `/trickle` and, cut
 * short, of `/truncated` and `/drop/mid-body`): exactly `bytes` bytes of ASCII HTML.
 */
export function paddedPage(bytes: number, options: FixtureSiteOptions = {}): string {
  return paddedHtml(resolveFixtureOptions(options).seed, bytes);
}

const blocks = new Map<number, Buffer>();

/** About 64 KiB of paragraphs, built once per seed and reused by every huge response. */
function hugeBlock(seed: number): Buffer {
  let block = blocks.get(seed);
  if (block === undefined) {
    const pool = fillerParagraphs(seed).join('');
    block = Buffer.from(pool.repeat(Math.ceil(65_536 / pool.length)));
    if (blocks.size >= 8) blocks.delete(blocks.keys().next().value as number);
    blocks.set(seed, block);
  }
  return block;
}

const HUGE_HEAD =
  '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Huge page</title>\n</head>\n<body>\n';
const HUGE_TAIL = '</body>\n</html>\n';

/** Exactly `bytes` bytes of HTML, generated as it is read (memory use is one shared 64 KiB block). */
export function hugeHtmlStream(seed: number, bytes: number): Readable {
  const block = hugeBlock(seed);
  function* parts(): Generator<Buffer> {
    const head = Buffer.from(HUGE_HEAD);
    const tail = Buffer.from(HUGE_TAIL);
    if (bytes < head.length + tail.length) {
      yield Buffer.concat([head, tail]).subarray(0, bytes);
      return;
    }
    yield head;
    let left = bytes - head.length - tail.length;
    while (left > 0) {
      const n = Math.min(left, block.length);
      yield n === block.length ? block : block.subarray(0, n);
      left -= n;
    }
    yield tail;
  }
  return Readable.from(parts(), { objectMode: false });
}

function pngChunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length, 0);
  const typed = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typed), 0);
  return Buffer.concat([len, typed, crc]);
}

let png: Buffer | undefined;

/** A valid 8×8 RGB PNG (a checkerboard), for "image served as text/html". */
export function smallPng(): Buffer {
  if (png !== undefined) return png;
  const size = 8;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type: RGB
  const raw = Buffer.alloc(size * (1 + size * 3));
  for (let y = 0; y < size; y++) {
    raw[y * (1 + size * 3)] = 0; // filter: none
    for (let x = 0; x < size; x++) {
      const v = (x + y) % 2 === 0 ? 0x20 : 0xe0;
      raw.fill(v, y * (1 + size * 3) + 1 + x * 3, y * (1 + size * 3) + 4 + x * 3);
    }
  }
  png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(raw)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
  return png;
}
