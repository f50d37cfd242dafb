/**
 * Key layout of the LevelDB queue. Every key starts with one kind byte and the topic name
 * (UTF-8, then a 0 byte), so each kind of each topic is one contiguous, ordered range:
 *
 * ```
 *   'm' topic 0  prio(8)  seq(8)   → record   ready or leased message of a priority lane; seq order = FIFO
 *   't' topic 0  seq(8)            → record   delayed message (its readyAt is in the record)
 *   'a' topic 0  seq(8)            → attempt  deliveries so far of the leased message `seq` (u32)
 *   'd' topic 0  seq(8)            → letter   dead-letter entry
 *   's' topic 0                    → next seq (u64), so ids are never reused across restarts
 * ```
 *
 * `prio(8)` is the priority as a float64 whose bytes sort in numeric order (sign bit flipped
 * for positives, all bits flipped for negatives); lanes are read one at a time, so only
 * uniqueness matters, but the order keeps dumps readable. `seq(8)` is big-endian.
 */

export type KeyKind = 'm' | 't' | 'a' | 'd' | 's';

const encoder = new TextEncoder();

export function topicPrefix(kind: KeyKind, topic: string): Uint8Array {
  const name = encoder.encode(topic);
  const out = new Uint8Array(name.length + 2);
  out[0] = kind.charCodeAt(0);
  out.set(name, 1);
  out[name.length + 1] = 0;
  return out;
}

/** The key just after every key that starts with `prefix` (an exclusive upper bound). */
export function prefixEnd(prefix: Uint8Array): Uint8Array {
  const out = new Uint8Array(prefix);
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i]! < 0xff) {
      out[i]!++;
      return out.subarray(0, i + 1);
    }
  }
  return new Uint8Array([0xff, 0xff, 0xff, 0xff]);
}

export function priorityCode(priority: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setFloat64(0, priority);
  if ((out[0]! & 0x80) === 0) out[0]! |= 0x80;
  else for (let i = 0; i < 8; i++) out[i] = ~out[i]! & 0xff;
  return out;
}

export function priorityOf(code: Uint8Array, offset: number): number {
  // A copy with its own buffer (Buffer#slice would share the pool and DataView would read at 0).
  const b = new Uint8Array(8);
  b.set(code.subarray(offset, offset + 8));
  if ((b[0]! & 0x80) !== 0) b[0]! &= 0x7f;
  else for (let i = 0; i < 8; i++) b[i] = ~b[i]! & 0xff;
  return new DataView(b.buffer).getFloat64(0);
}

// Byte by byte rather than through a DataView: these run for every spilled record, and a
// DataView per call was a tenth of the main thread's time in a frontier of a million requests.
export function writeSeq(out: Uint8Array, offset: number, seq: number): void {
  const hi = Math.floor(seq / 0x1_0000_0000);
  const lo = seq >>> 0;
  out[offset] = hi >>> 24;
  out[offset + 1] = hi >>> 16;
  out[offset + 2] = hi >>> 8;
  out[offset + 3] = hi;
  out[offset + 4] = lo >>> 24;
  out[offset + 5] = lo >>> 16;
  out[offset + 6] = lo >>> 8;
  out[offset + 7] = lo;
}

export function readSeq(key: Uint8Array, offset: number): number {
  const hi =
    ((key[offset]! << 24) | (key[offset + 1]! << 16) | (key[offset + 2]! << 8) | key[offset + 3]!) >>> 0;
  const lo =
    ((key[offset + 4]! << 24) | (key[offset + 5]! << 16) | (key[offset + 6]! << 8) | key[offset + 7]!) >>> 0;
  return hi * 0x1_0000_0000 + lo;
}

/** prefix + (prio code) + seq. */
export function composeKey(prefix: Uint8Array, prio: Uint8Array | undefined, seq: number): Uint8Array {
  const p = prio?.length ?? 0;
  const out = new Uint8Array(prefix.length + p + 8);
  out.set(prefix, 0);
  if (prio) out.set(prio, prefix.length);
  writeSeq(out, prefix.length + p, seq);
  return out;
}

/**
 * Keys of write operations, carved out of shared blocks. A key given to the native batch is
 * copied at `put`, so it only has to outlive that call; one array per key would be one native
 * backing store per record (the binding materializes a small array's buffer) — a thousand per
 * spilled page, freed only when their wrappers are collected. A block is never reused: once
 * full, the next one is new, and the old one goes with the last of its keys.
 */
export class KeyArena {
  #block = new Uint8Array(0);
  #used = 0;

  compose(prefix: Uint8Array, prio: Uint8Array | undefined, seq: number): Uint8Array {
    const p = prio?.length ?? 0;
    const length = prefix.length + p + 8;
    if (this.#used + length > this.#block.length) {
      this.#block = new Uint8Array(Math.max(ARENA_BYTES, length));
      this.#used = 0;
    }
    const out = this.#block.subarray(this.#used, this.#used + length);
    this.#used += length;
    out.set(prefix, 0);
    if (prio) out.set(prio, prefix.length);
    writeSeq(out, prefix.length + p, seq);
    return out;
  }
}

const ARENA_BYTES = 64 * 1024;
