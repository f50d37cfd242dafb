/**
 * Small, fast, stable string hashes. Stable across processes and versions: partition numbers
 * and rendezvous owners computed by different workers must agree.
 */

/** 32-bit FNV-1a over the UTF-16 code units of `text`, finished with murmur3's fmix32 for spread. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The partition (0 … count-1) of a key. */
export function partitionOf(key: string, count: number): number {
  return hash32(key) % count;
}
