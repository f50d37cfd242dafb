/**
 * A scalable Bloom filter over 128-bit random keys: "definitely new" or "maybe seen". It sits
 * in front of the exact on-disk set so that most new keys never cost a disk read.
 *
 * Scalable (Almeida et al., 2007): when a filter holds its planned number of keys, a new one
 * twice as large with half the false-positive rate is added, so the compound rate stays under
 * the target however many keys arrive, at about 1.2–1.5 bytes per key for 1 %.
 *
 * ```
 *   filters: [ 64K keys, p/2 ] [ 128K keys, p/4 ] [ 256K keys, p/8 ] …   a key is "maybe seen"
 *            when any filter has all of its k bits set; adds go to the last one.
 * ```
 *
 * Probe positions come from two key words by double hashing (Kirsch–Mitzenmacher):
 * `pos_i = (w1 + i·w2) mod m`.
 */

class BloomLayer {
  readonly bits: Uint32Array;
  readonly m: number;
  readonly k: number;
  readonly capacity: number;
  count = 0;

  constructor(capacity: number, falsePositiveRate: number) {
    const m = Math.max(1024, Math.ceil((-capacity * Math.log(falsePositiveRate)) / Math.LN2 ** 2));
    this.m = Math.ceil(m / 32) * 32;
    this.k = Math.max(1, Math.round((this.m / capacity) * Math.LN2));
    this.capacity = capacity;
    this.bits = new Uint32Array(this.m / 32);
  }

  add(h1: number, h2: number): void {
    const { bits, m, k } = this;
    for (let i = 0; i < k; i++) {
      const pos = (h1 + i * h2) % m;
      bits[pos >>> 5]! |= 1 << (pos & 31);
    }
    this.count++;
  }

  has(h1: number, h2: number): boolean {
    const { bits, m, k } = this;
    for (let i = 0; i < k; i++) {
      const pos = (h1 + i * h2) % m;
      if ((bits[pos >>> 5]! & (1 << (pos & 31))) === 0) return false;
    }
    return true;
  }
}

export interface BloomFilterOptions {
  /** Keys the first layer is planned for. @default 65536 */
  initialCapacity?: number;
  /** Target false-positive rate of the whole filter. @default 0.01 */
  falsePositiveRate?: number;
}

export class ScalableBloomFilter {
  readonly #layers: BloomLayer[] = [];
  readonly #rate: number;
  #nextCapacity: number;
  #nextRate: number;

  constructor(options: BloomFilterOptions = {}) {
    const capacity = options.initialCapacity ?? 65_536;
    this.#rate = options.falsePositiveRate ?? 0.01;
    if (!(this.#rate > 0 && this.#rate < 1)) throw new RangeError('falsePositiveRate must be in (0, 1)');
    this.#nextCapacity = Math.max(1024, capacity);
    this.#nextRate = this.#rate / 2;
    this.#addLayer();
  }

  /** Keys added. */
  get count(): number {
    let n = 0;
    for (const layer of this.#layers) n += layer.count;
    return n;
  }

  get byteLength(): number {
    let n = 0;
    for (const layer of this.#layers) n += layer.bits.byteLength;
    return n;
  }

  get falsePositiveRate(): number {
    return this.#rate;
  }

  /** Add a key given by two of its random words. */
  add(w1: number, w2: number): void {
    let last = this.#layers[this.#layers.length - 1]!;
    if (last.count >= last.capacity) last = this.#addLayer();
    last.add(w1 >>> 0, (w2 | 1) >>> 0);
  }

  /** False: never added. True: probably added. */
  mightHave(w1: number, w2: number): boolean {
    const h1 = w1 >>> 0;
    const h2 = (w2 | 1) >>> 0;
    for (let i = this.#layers.length - 1; i >= 0; i--) if (this.#layers[i]!.has(h1, h2)) return true;
    return false;
  }

  #addLayer(): BloomLayer {
    const layer = new BloomLayer(this.#nextCapacity, this.#nextRate);
    this.#layers.push(layer);
    this.#nextCapacity *= 2;
    this.#nextRate /= 2;
    return layer;
  }
}
