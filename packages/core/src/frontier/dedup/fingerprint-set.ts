/**
 * An exact set of 128-bit keys in one typed array: open addressing, linear probing, 4 words
 * per slot, all-zero = empty. 16 bytes per slot; the table grows by half once it is 3/4 full,
 * so its load stays between 1/2 and 3/4: 1M keys take 21–32 MB, none of it on the V8 heap's
 * object graph (a `Set<string>` of 27-character fingerprints costs ~80 bytes a key and GC
 * time). Growing by half rather than doubling also keeps the moment of growth small: the old
 * table is garbage only once the next full GC runs, and until then both are held.
 *
 * ```
 *   words: [ w0 w1 w2 w3 | w0 w1 w2 w3 | 0 0 0 0 | … ]   slot = ⌊w0 · capacity / 2³²⌋, then +1, +1, … (wrapping)
 * ```
 *
 * Keys are uniformly random (see fingerprint-key.ts), so w0 alone is a good hash, scaled to
 * any capacity (no power of two needed). A key that is all zeros (never produced in practice)
 * is stored with w3 = 1.
 */
const MIN_CAPACITY = 1024;
const TWO_32 = 2 ** 32;

/** The first slot of a key whose first word is `w0`, in a table of `capacity` slots. */
function home(w0: number, capacity: number): number {
  // w0 < 2^32 and capacity < 2^27 (the table's words must fit a typed array): the product is
  // exact in a double, and the quotient is below `capacity`.
  return Math.floor((w0 * capacity) / TWO_32);
}

export class FingerprintSet {
  #words: Uint32Array;
  #capacity: number;
  #size = 0;

  constructor(expected = 0) {
    let capacity = MIN_CAPACITY;
    while (capacity * 0.75 < expected) capacity = Math.ceil(capacity * 1.5);
    this.#words = new Uint32Array(capacity * 4);
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#size;
  }

  /** Bytes held by the table. */
  get byteLength(): number {
    return this.#words.byteLength;
  }

  /** Add the key; true when it was not there before. */
  add(w0: number, w1: number, w2: number, w3: number): boolean {
    if ((w0 | w1 | w2 | w3) === 0) w3 = 1;
    if (this.#size + 1 > this.#capacity * 0.75) this.#grow();
    const words = this.#words;
    const capacity = this.#capacity;
    let slot = home(w0 >>> 0, capacity);
    for (;;) {
      const i = slot << 2;
      const a = words[i]!;
      const b = words[i + 1]!;
      const c = words[i + 2]!;
      const d = words[i + 3]!;
      if ((a | b | c | d) === 0) {
        words[i] = w0;
        words[i + 1] = w1;
        words[i + 2] = w2;
        words[i + 3] = w3;
        this.#size++;
        return true;
      }
      if (a === w0 && b === w1 && c === w2 && d === w3) return false;
      if (++slot === capacity) slot = 0;
    }
  }

  has(w0: number, w1: number, w2: number, w3: number): boolean {
    if ((w0 | w1 | w2 | w3) === 0) w3 = 1;
    const words = this.#words;
    const capacity = this.#capacity;
    let slot = home(w0 >>> 0, capacity);
    for (;;) {
      const i = slot << 2;
      const a = words[i]!;
      const b = words[i + 1]!;
      const c = words[i + 2]!;
      const d = words[i + 3]!;
      if ((a | b | c | d) === 0) return false;
      if (a === w0 && b === w1 && c === w2 && d === w3) return true;
      if (++slot === capacity) slot = 0;
    }
  }

  /** Slots in the table (for walking it with {@link readSlot}). */
  get slots(): number {
    return this.#capacity;
  }

  /** Copy the key in `slot` into `out`; false when the slot is empty. No allocation (a walk over 1M keys). */
  readSlot(slot: number, out: Uint32Array): boolean {
    const words = this.#words;
    const i = slot << 2;
    if ((words[i]! | words[i + 1]! | words[i + 2]! | words[i + 3]!) === 0) return false;
    for (let k = 0; k < 4; k++) out[k] = words[i + k]!;
    return true;
  }

  /** Every key, as 4 words each, in table order. */
  *entries(): IterableIterator<Uint32Array> {
    const words = this.#words;
    for (let i = 0; i < words.length; i += 4) {
      if ((words[i]! | words[i + 1]! | words[i + 2]! | words[i + 3]!) !== 0) yield words.subarray(i, i + 4);
    }
  }

  clear(): void {
    this.#words = new Uint32Array(MIN_CAPACITY * 4);
    this.#capacity = MIN_CAPACITY;
    this.#size = 0;
  }

  #grow(): void {
    const old = this.#words;
    const capacity = Math.ceil(this.#capacity * 1.5);
    const words = new Uint32Array(capacity * 4);
    for (let i = 0; i < old.length; i += 4) {
      const w0 = old[i]!;
      const w1 = old[i + 1]!;
      const w2 = old[i + 2]!;
      const w3 = old[i + 3]!;
      if ((w0 | w1 | w2 | w3) === 0) continue;
      let j = home(w0, capacity) << 2;
      while ((words[j]! | words[j + 1]! | words[j + 2]! | words[j + 3]!) !== 0) {
        j += 4;
        if (j === words.length) j = 0;
      }
      words[j] = w0;
      words[j + 1] = w1;
      words[j + 2] = w2;
      words[j + 3] = w3;
    }
    this.#words = words;
    this.#capacity = capacity;
  }
}
