/**
 * A FIFO of unbounded length made of fixed-size ring buffers, so push/shift are O(1) with no
 * array re-indexing (Array#shift is O(n) once V8 leaves its fast path) and memory is returned
 * as the queue drains.
 *
 * ```
 *   head ─▶ [ring 0: full] ─▶ [ring 1: full] ─▶ [ring 2: part] ◀─ tail
 *            shift() reads here                   push() writes here
 * ```
 */
const RING = 2048; // power of two: index arithmetic is a mask

class Ring<T> {
  readonly items: (T | undefined)[] = new Array(RING);
  top = 0; // next write
  bottom = 0; // next read
  next: Ring<T> | undefined;

  get full(): boolean {
    return ((this.top + 1) & (RING - 1)) === this.bottom;
  }
  get empty(): boolean {
    return this.top === this.bottom;
  }
}

export class Fifo<T> {
  #head = new Ring<T>();
  #tail = this.#head;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  push(item: T): void {
    if (this.#tail.full) {
      const ring = new Ring<T>();
      this.#tail.next = ring;
      this.#tail = ring;
    }
    const tail = this.#tail;
    tail.items[tail.top] = item;
    tail.top = (tail.top + 1) & (RING - 1);
    this.#size++;
  }

  shift(): T | undefined {
    const head = this.#head;
    if (head.empty) return undefined;
    const item = head.items[head.bottom];
    head.items[head.bottom] = undefined;
    head.bottom = (head.bottom + 1) & (RING - 1);
    this.#size--;
    if (head.empty && head.next) this.#head = head.next;
    return item;
  }

  /** Remove and return every item after the first `keep`, in order. O(size): for rare cuts. */
  truncate(keep: number): T[] {
    if (keep >= this.#size) return [];
    const items: T[] = [];
    while (this.#size > 0) items.push(this.shift() as T);
    for (let i = 0; i < keep; i++) this.push(items[i]!);
    return items.slice(keep);
  }

  peek(): T | undefined {
    const head = this.#head;
    return head.empty ? undefined : head.items[head.bottom];
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let ring: Ring<T> | undefined = this.#head; ring; ring = ring.next) {
      for (let i = ring.bottom; i !== ring.top; i = (i + 1) & (RING - 1)) yield ring.items[i] as T;
    }
  }
}
