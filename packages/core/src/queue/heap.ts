/**
 * A binary min-heap ordered by a numeric key (deadlines, ready times). Ties pop in insertion
 * order, so equal deadlines are served FIFO.
 *
 * Keys and insertion numbers live in typed arrays beside the values, not in a node object per
 * entry: a heap of a million leases or delays is then two flat buffers and one array of
 * references, nothing for the garbage collector to trace per entry.
 */
export class MinHeap<T> {
  #keys = new Float64Array(16);
  #seqs = new Float64Array(16);
  #values: (T | undefined)[] = [];
  #size = 0;
  #seq = 0;

  get size(): number {
    return this.#size;
  }

  push(key: number, value: T): void {
    if (this.#size === this.#keys.length) this.#grow();
    this.#place(this.#size, key, this.#seq++, value);
    this.#size++;
    this.#siftUp(this.#size - 1);
  }

  /** Smallest key, or undefined when empty. */
  peekKey(): number | undefined {
    return this.#size > 0 ? this.#keys[0] : undefined;
  }

  peek(): T | undefined {
    return this.#size > 0 ? this.#values[0] : undefined;
  }

  pop(): T | undefined {
    if (this.#size === 0) return undefined;
    const top = this.#values[0];
    const last = --this.#size;
    if (last > 0) {
      this.#place(0, this.#keys[last]!, this.#seqs[last]!, this.#values[last] as T);
      this.#values[last] = undefined;
      this.#siftDown(0);
    } else {
      this.#values[0] = undefined;
    }
    return top;
  }

  clear(): void {
    this.#keys = new Float64Array(16);
    this.#seqs = new Float64Array(16);
    this.#values = [];
    this.#size = 0;
  }

  /**
   * Keeps only the values `keep` accepts, in O(n) (Floyd's heap construction). Order among equal
   * keys is kept, so FIFO ties survive a compaction.
   */
  retain(keep: (value: T) => boolean): void {
    let n = 0;
    for (let i = 0; i < this.#size; i++) {
      const value = this.#values[i] as T;
      if (keep(value)) this.#place(n++, this.#keys[i]!, this.#seqs[i]!, value);
    }
    for (let i = n; i < this.#size; i++) this.#values[i] = undefined;
    this.#values.length = n;
    this.#size = n;
    for (let i = (n >> 1) - 1; i >= 0; i--) this.#siftDown(i);
  }

  #place(i: number, key: number, seq: number, value: T): void {
    this.#keys[i] = key;
    this.#seqs[i] = seq;
    this.#values[i] = value;
  }

  #grow(): void {
    const keys = new Float64Array(this.#keys.length * 2);
    keys.set(this.#keys);
    const seqs = new Float64Array(this.#seqs.length * 2);
    seqs.set(this.#seqs);
    this.#keys = keys;
    this.#seqs = seqs;
  }

  #less(a: number, b: number): boolean {
    const ka = this.#keys[a]!;
    const kb = this.#keys[b]!;
    return ka < kb || (ka === kb && this.#seqs[a]! < this.#seqs[b]!);
  }

  #swap(a: number, b: number): void {
    const keys = this.#keys;
    const seqs = this.#seqs;
    const values = this.#values;
    const k = keys[a]!;
    keys[a] = keys[b]!;
    keys[b] = k;
    const s = seqs[a]!;
    seqs[a] = seqs[b]!;
    seqs[b] = s;
    const v = values[a];
    values[a] = values[b];
    values[b] = v;
  }

  #siftUp(start: number): void {
    let i = start;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) break;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #siftDown(start: number): void {
    const n = this.#size;
    let i = start;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.#less(l, m)) m = l;
      if (r < n && this.#less(r, m)) m = r;
      if (m === i) break;
      this.#swap(i, m);
      i = m;
    }
  }
}
