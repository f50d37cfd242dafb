/**
 * CRC-32 (the gzip and PNG one, reflected polynomial 0xEDB88320). Node 20's zlib has no crc32(),
 * and the compression bomb needs the CRC of a gigabyte of zeros without feeding it through.
 */

const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(data: Uint8Array, previous = 0): number {
  let c = (previous ^ 0xffffffff) >>> 0;
  for (let i = 0; i < data.length; i++) c = TABLE[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// Feeding a zero byte into the CRC register is a linear map over GF(2); as a 32×32 bit matrix
// (column j = image of bit j) it can be raised to the n-th power in log2(n) squarings.
type Matrix = Uint32Array;

function times(m: Matrix, v: number): number {
  let r = 0;
  let x = v >>> 0;
  for (let j = 0; x !== 0; j++, x >>>= 1) if (x & 1) r ^= m[j]!;
  return r >>> 0;
}

/** The matrix of "apply b, then a". */
function compose(a: Matrix, b: Matrix): Matrix {
  const r = new Uint32Array(32);
  for (let j = 0; j < 32; j++) r[j] = times(a, b[j]!);
  return r;
}

const ZERO_BYTE: Matrix = (() => {
  const m = new Uint32Array(32);
  for (let j = 0; j < 32; j++) {
    const v = (1 << j) >>> 0;
    m[j] = (TABLE[v & 0xff]! ^ (v >>> 8)) >>> 0;
  }
  return m;
})();

/** CRC-32 of `length` zero bytes, in O(log length). */
export function crc32OfZeros(length: number): number {
  let result: Matrix | undefined;
  let base = ZERO_BYTE;
  let n = length;
  while (n > 0) {
    if (n % 2 === 1) result = result === undefined ? base : compose(base, result);
    n = Math.floor(n / 2);
    if (n > 0) base = compose(base, base);
  }
  const register = result === undefined ? 0xffffffff : times(result, 0xffffffff);
  return (register ^ 0xffffffff) >>> 0;
}
