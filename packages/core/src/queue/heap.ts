/**
 * A binary min-heap ordered by a numeric key (deadlines, ready times). Ties pop in insertion
 * order, so equal deadlines are served FIFO.
 */
interface Node<T> {
  key: number;
  seq: number;
  value: T;
}

export class MinHeap<T> {
  #nodes: Node<T>[] = [];
  #seq = 0;

  get size(): number {
    return this.#nodes.length;
  }

  push(key: number, value: T): void {
    const nodes = this.#nodes;
    nodes.push({ key, seq: this.#seq++, value });
    let i = nodes.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(nodes[i]!, nodes[parent]!)) break;
      [nodes[i], nodes[parent]] = [nodes[parent]!, nodes[i]!];
      i = parent;
    }
  }

  /** Smallest key, or undefined when empty. */
  peekKey(): number | undefined {
    return this.#nodes[0]?.key;
  }

  peek(): T | undefined {
    return this.#nodes[0]?.value;
  }

  pop(): T | undefined {
    const nodes = this.#nodes;
    const top = nodes[0];
    if (!top) return undefined;
    const last = nodes.pop()!;
    if (nodes.length > 0) {
      nodes[0] = last;
      this.#siftDown(0);
    }
    return top.value;
  }

  #siftDown(start: number): void {
    const nodes = this.#nodes;
    let i = start;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < nodes.length && this.#less(nodes[l]!, nodes[m]!)) m = l;
      if (r < nodes.length && this.#less(nodes[r]!, nodes[m]!)) m = r;
      if (m === i) break;
      [nodes[i], nodes[m]] = [nodes[m]!, nodes[i]!];
      i = m;
    }
  }

  clear(): void {
    this.#nodes = [];
  }

  /**
   * Keeps only the values `keep` accepts, in O(n) (Floyd's heap construction). Order among equal
   * keys is kept, so FIFO ties survive a compaction.
   */
  retain(keep: (value: T) => boolean): void {
    this.#nodes = this.#nodes.filter((node) => keep(node.value));
    for (let i = (this.#nodes.length >> 1) - 1; i >= 0; i--) this.#siftDown(i);
  }

  #less(a: Node<T>, b: Node<T>): boolean {
    return a.key < b.key || (a.key === b.key && a.seq < b.seq);
  }
}
