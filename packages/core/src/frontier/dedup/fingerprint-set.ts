/**
 * An exact set of 128-bit keys in one typed array: open addressing, linear probing, 4 words
 * per slot, all-zero = empty. 16 bytes per slot and a load factor kept between 0.375 and 0.75
 * (it doubles past 0.75), so 1M keys take 16–43 MB, none of it on the V8 heap's object graph
 * (a `Set<string>` of 27-character fingerprints costs ~80 bytes a key and GC time).
 *
 * ```
 *   words: [ w0 w1 w2 w3 | w0 w1 w2 w3 | 0 0 0 0 | … ]   slot = w0 & mask, then +1, +1, …
 * ```
 *
 * Keys are uniformly random (see fingerprint-key.ts), so w0 alone is a good hash. A key that
 * is all zeros (never produced in practice) is stored with w3 = 1.
 */
const MIN_CAPACITY = 1024;

export class FingerprintSet {
  #words: Uint32Array;
  #mask: number;
  #size = 0;

  constructor(expected = 0) {
    let capacity = MIN_CAPACITY;
    while (capacity * 0.75 < expected) capacity *= 2;
    this.#words = new Uint32Array(capacity * 4);
    this.#mask = capacity - 1;
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
    if (this.#size + 1 > (this.#mask + 1) * 0.75) this.#grow();
    const words = this.#words;
    const mask = this.#mask;
    let slot = w0 & mask;
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
      slot = (slot + 1) & mask;
    }
  }

  has(w0: number, w1: number, w2: number, w3: number): boolean {
    if ((w0 | w1 | w2 | w3) === 0) w3 = 1;
    const words = this.#words;
    const mask = this.#mask;
    let slot = w0 & mask;
    for (;;) {
      const i = slot << 2;
      const a = words[i]!;
      const b = words[i + 1]!;
      const c = words[i + 2]!;
      const d = words[i + 3]!;
      if ((a | b | c | d) === 0) return false;
      if (a === w0 && b === w1 && c === w2 && d === w3) return true;
      slot = (slot + 1) & mask;
    }
  }

  /** Slots in the table (for walking it with {@link readSlot}). */
  get slots(): number {
    return this.#mask + 1;
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
    this.#mask = MIN_CAPACITY - 1;
    this.#size = 0;
  }

  #grow(): void {
    const old = this.#words;
    const capacity = (this.#mask + 1) * 2;
    const words = new Uint32Array(capacity * 4);
    const mask = capacity - 1;
    for (let i = 0; i < old.length; i += 4) {
      const w0 = old[i]!;
      const w1 = old[i + 1]!;
      const w2 = old[i + 2]!;
      const w3 = old[i + 3]!;
      if ((w0 | w1 | w2 | w3) === 0) continue;
      let slot = w0 & mask;
      while (
        (words[slot << 2]! | words[(slot << 2) + 1]! | words[(slot << 2) + 2]! | words[(slot << 2) + 3]!) !==
        0
      ) {
        slot = (slot + 1) & mask;
      }
      const j = slot << 2;
      words[j] = w0;
      words[j + 1] = w1;
      words[j + 2] = w2;
      words[j + 3] = w3;
    }
    this.#words = words;
    this.#mask = mask;
  }
}
