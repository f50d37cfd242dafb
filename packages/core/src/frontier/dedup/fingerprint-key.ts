/**
 * Dedup keys as 128 bits. A request fingerprint is `base64url(sha1(…))`, 27 characters; its
 * first 16 bytes (with the last 4 folded in) are the key. Any other string (a user's
 * `dedupKey`) is hashed with sha1 first, so every key is 16 uniformly spread bytes:
 *
 * ```
 *   'Xk3…27 chars…' ──base64url──▶ 20 bytes b0…b19 ──▶ key = b0…b15, with b0…b3 ^= b16…b19
 *                                                        words w0 w1 w2 w3 (little-endian u32)
 *   w0 → hash-table slot · w1, w2 → Bloom probe positions · all 16 bytes → the LevelDB key
 * ```
 *
 * 128 random bits make an accidental collision between two of 10 billion keys about a 1 in
 * 10^17 event; a collision would cost one skipped page, never a crash.
 */
import { hash } from 'node:crypto';

/** Bytes of one key. */
export const KEY_BYTES = 16;

const DECODE = new Int8Array(128).fill(-1);
{
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let i = 0; i < alphabet.length; i++) DECODE[alphabet.charCodeAt(i)] = i;
}

const scratch = new Uint8Array(21);

/**
 * Write the 16-byte key of `fingerprint` into `out` at `offset` (as bytes), and return it as
 * four words in `words` (w0…w3).
 */
export function keyOf(fingerprint: string, out: Uint8Array, offset: number, words: Uint32Array): void {
  keyWordsOf(fingerprint, words);
  for (let i = 0; i < KEY_BYTES; i++) out[offset + i] = scratch[i]!;
}

/**
 * The key of `fingerprint` as four words only (w0…w3): what an in-memory table needs. Leaves
 * the key's bytes in `scratch` for {@link keyOf}. Allocates nothing for a fingerprint (every
 * link a crawl finds comes through here).
 */
export function keyWordsOf(fingerprint: string, words: Uint32Array): void {
  if (fingerprint.length !== 27 || !decode27(fingerprint)) {
    const digest = hash('sha1', fingerprint, 'buffer');
    for (let i = 0; i < 20; i++) scratch[i] = digest[i]!;
  }
  for (let i = 0; i < 4; i++) scratch[i]! ^= scratch[16 + i]!;
  words[0] = (scratch[0]! | (scratch[1]! << 8) | (scratch[2]! << 16) | (scratch[3]! << 24)) >>> 0;
  words[1] = (scratch[4]! | (scratch[5]! << 8) | (scratch[6]! << 16) | (scratch[7]! << 24)) >>> 0;
  words[2] = (scratch[8]! | (scratch[9]! << 8) | (scratch[10]! << 16) | (scratch[11]! << 24)) >>> 0;
  words[3] = (scratch[12]! | (scratch[13]! << 8) | (scratch[14]! << 16) | (scratch[15]! << 24)) >>> 0;
}

/** base64url-decode 27 characters into scratch[0…20); false on a character outside the alphabet. */
function decode27(s: string): boolean {
  let o = 0;
  let i = 0;
  // 6 groups of 4 characters = 18 bytes, then 3 characters = 2 bytes (+2 bits of padding).
  for (; i < 24; i += 4) {
    const a = sextet(s, i);
    const b = sextet(s, i + 1);
    const c = sextet(s, i + 2);
    const d = sextet(s, i + 3);
    if ((a | b | c | d) < 0) return false;
    const n = (a << 18) | (b << 12) | (c << 6) | d;
    scratch[o++] = (n >>> 16) & 0xff;
    scratch[o++] = (n >>> 8) & 0xff;
    scratch[o++] = n & 0xff;
  }
  const a = sextet(s, 24);
  const b = sextet(s, 25);
  const c = sextet(s, 26);
  // The last character carries 2 padding bits, zero in a canonical encoding: anything else is
  // not a fingerprint (and would otherwise collide with its canonical twin).
  if ((a | b | c) < 0 || (c & 3) !== 0) return false;
  const n = (a << 12) | (b << 6) | c;
  scratch[o++] = (n >>> 10) & 0xff;
  scratch[o++] = (n >>> 2) & 0xff;
  return true;
}

function sextet(s: string, i: number): number {
  const code = s.charCodeAt(i);
  return code < 128 ? DECODE[code]! : -1;
}
