/**
 * Graph validation, deterministic topological order and layers. Works on bare `{ id, after }`
 * records so that a host can validate a graph of anything (the mocra engine validates module
 * graphs with it) without building executable nodes.
 */
import {
  CycleError,
  DuplicateNodeError,
  EmptyGraphError,
  InvalidNodeError,
  ReservedNodeIdError,
  UnknownPredecessorError,
} from '../errors.js';

/**
 * Ids reserved for the implicit start and end of a graph. No node may use them, so a graph can
 * be embedded in a larger one (and hosts can name its entry and exit) without a clash.
 */
export const RESERVED_NODE_IDS: readonly string[] = Object.freeze(['__start__', '__end__']);
const RESERVED = new Set(RESERVED_NODE_IDS);

/** The part of a node that the graph's shape depends on. */
export interface GraphNodeShape {
  readonly id: string;
  /** Ids of the nodes that must succeed before this one starts. @default [] */
  readonly after?: readonly string[] | undefined;
}

/** The validated shape of a graph. Nodes are numbered by their topological position. */
export interface GraphAnalysis {
  /** Every id in deterministic topological order: Kahn's algorithm, smallest id first among the ready. */
  readonly order: readonly string[];
  /** id → position in `order`. */
  readonly index: ReadonlyMap<string, number>;
  /** Position → index of the node in the input list. */
  readonly inputIndex: Int32Array;
  /** Predecessor positions of each position, ascending, without duplicates. */
  readonly predecessors: readonly (readonly number[])[];
  /** Successor positions of each position, ascending. */
  readonly successors: readonly (readonly number[])[];
  /** Longest-path depth of each position (roots are 0). */
  readonly layerOf: Int32Array;
  /** Ids by layer; each layer sorted by id (string code-unit order). */
  readonly layers: readonly (readonly string[])[];
}

function byId(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Validates `nodes` and computes their order and layers. Throws, naming the problem, the first
 * of: {@link EmptyGraphError}, {@link InvalidNodeError} (id not a non-empty string),
 * {@link ReservedNodeIdError}, {@link DuplicateNodeError}, {@link UnknownPredecessorError},
 * {@link CycleError} (with the nodes on one cycle). Checks run in input order, so the same
 * input always reports the same problem.
 */
export function analyzeGraph(nodes: readonly GraphNodeShape[]): GraphAnalysis {
  const n = nodes.length;
  if (n === 0) throw new EmptyGraphError();

  // Pass 1: ids. `slot` numbers nodes in input order.
  const slotOf = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const id = (nodes[i] as GraphNodeShape).id;
    if (typeof id !== 'string' || id.length === 0) {
      throw new InvalidNodeError(String(id), 'node id must be a non-empty string');
    }
    if (RESERVED.has(id)) throw new ReservedNodeIdError(id);
    if (slotOf.has(id)) throw new DuplicateNodeError(id);
    slotOf.set(id, i);
  }

  // Pass 2: edges, by input slot. Duplicate predecessors collapse into one edge.
  const predSlots: number[][] = new Array(n);
  const succSlots: number[][] = new Array(n);
  for (let i = 0; i < n; i++) succSlots[i] = [];
  const indegree = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const node = nodes[i] as GraphNodeShape;
    const after = node.after ?? [];
    if (!Array.isArray(after)) throw new InvalidNodeError(node.id, '`after` must be an array of node ids');
    const preds: number[] = [];
    // Short lists dedupe by scan; a big fan-in would make that quadratic, so it uses a set.
    const seen = after.length > 16 ? new Set<number>() : undefined;
    for (const pred of after) {
      const p = typeof pred === 'string' ? slotOf.get(pred) : undefined;
      if (p === undefined) throw new UnknownPredecessorError(node.id, String(pred));
      if (seen === undefined ? preds.includes(p) : seen.has(p)) continue;
      seen?.add(p);
      preds.push(p);
      (succSlots[p] as number[]).push(i);
    }
    predSlots[i] = preds;
    indegree[i] = preds.length;
  }

  // Rank ids once so the ready heap compares integers, not strings.
  const sortedSlots = Array.from({ length: n }, (_, i) => i).sort((a, b) =>
    byId((nodes[a] as GraphNodeShape).id, (nodes[b] as GraphNodeShape).id),
  );
  const rank = new Int32Array(n);
  for (let r = 0; r < n; r++) rank[sortedSlots[r] as number] = r;
  const slotOfRank = Int32Array.from(sortedSlots);

  // Kahn's algorithm with a min-heap of ranks: the smallest ready id goes next.
  const heap = new MinHeap(n);
  for (let i = 0; i < n; i++) if (indegree[i] === 0) heap.push(rank[i] as number);
  const orderSlots = new Int32Array(n);
  let count = 0;
  while (heap.size > 0) {
    const slot = slotOfRank[heap.pop()] as number;
    orderSlots[count++] = slot;
    for (const s of succSlots[slot] as number[]) {
      indegree[s] = (indegree[s] as number) - 1;
      if (indegree[s] === 0) heap.push(rank[s] as number);
    }
  }
  if (count < n) throw new CycleError(findCycle(nodes, predSlots, indegree, rank));

  // Renumber by topological position; `slotOf` becomes the id → position index.
  const positionOfSlot = new Int32Array(n);
  const order: string[] = new Array(n);
  const index = slotOf;
  for (let pos = 0; pos < n; pos++) {
    const slot = orderSlots[pos] as number;
    positionOfSlot[slot] = pos;
    const id = (nodes[slot] as GraphNodeShape).id;
    order[pos] = id;
    index.set(id, pos);
  }
  const predecessors: number[][] = new Array(n);
  const successors: number[][] = new Array(n);
  const layerOf = new Int32Array(n);
  let depth = 0;
  for (let pos = 0; pos < n; pos++) {
    const slot = orderSlots[pos] as number;
    const preds = (predSlots[slot] as number[]).map((p) => positionOfSlot[p] as number);
    if (preds.length > 1) preds.sort((a, b) => a - b);
    const succs = (succSlots[slot] as number[]).map((s) => positionOfSlot[s] as number);
    if (succs.length > 1) succs.sort((a, b) => a - b);
    predecessors[pos] = preds;
    successors[pos] = succs;
    // Predecessors come earlier in topological order, so their layers are final.
    let layer = 0;
    for (const p of preds) {
      const l = (layerOf[p] as number) + 1;
      if (l > layer) layer = l;
    }
    layerOf[pos] = layer;
    if (layer > depth) depth = layer;
  }
  const layers: string[][] = Array.from({ length: depth + 1 }, () => []);
  for (let pos = 0; pos < n; pos++) (layers[layerOf[pos] as number] as string[]).push(order[pos] as string);
  for (const layer of layers) if (layer.length > 1) layer.sort(byId);

  return { order, index, inputIndex: orderSlots, predecessors, successors, layerOf, layers };
}

/**
 * Every node Kahn's algorithm could not order still has an unordered predecessor. Walking from
 * the smallest such id to its smallest unordered predecessor, again and again, must revisit a
 * node; the stretch between the two visits is a cycle. Reported in edge order, starting at its
 * smallest id.
 */
function findCycle(
  nodes: readonly GraphNodeShape[],
  predSlots: readonly (readonly number[])[],
  indegree: Int32Array,
  rank: Int32Array,
): string[] {
  let start = -1;
  for (let i = 0; i < nodes.length; i++) {
    if ((indegree[i] as number) > 0 && (start < 0 || (rank[i] as number) < (rank[start] as number)))
      start = i;
  }
  const seenAt = new Map<number, number>();
  const walk: number[] = [];
  let v = start;
  while (!seenAt.has(v)) {
    seenAt.set(v, walk.length);
    walk.push(v);
    let next = -1;
    for (const p of predSlots[v] as number[]) {
      if ((indegree[p] as number) > 0 && (next < 0 || (rank[p] as number) < (rank[next] as number))) next = p;
    }
    v = next;
  }
  // walk[k..] runs backwards along edges; reverse it to follow them.
  const loop = walk.slice(seenAt.get(v)).reverse();
  let first = 0;
  for (let i = 1; i < loop.length; i++) {
    if ((rank[loop[i] as number] as number) < (rank[loop[first] as number] as number)) first = i;
  }
  const rotated = [...loop.slice(first), ...loop.slice(0, first)];
  const ids = rotated.map((slot) => (nodes[slot] as GraphNodeShape).id);
  ids.push(ids[0] as string);
  return ids;
}

/** A binary min-heap of non-negative integers with a fixed capacity. */
export class MinHeap {
  readonly #items: Int32Array;
  #size = 0;

  constructor(capacity: number) {
    this.#items = new Int32Array(Math.max(1, capacity));
  }

  get size(): number {
    return this.#size;
  }

  push(value: number): void {
    const items = this.#items;
    let i = this.#size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = items[parent] as number;
      if (p <= value) break;
      items[i] = p;
      i = parent;
    }
    items[i] = value;
  }

  /** Removes and returns the smallest value. The heap must not be empty. */
  pop(): number {
    const items = this.#items;
    const top = items[0] as number;
    const last = items[--this.#size] as number;
    const size = this.#size;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= size) break;
      if (child + 1 < size && (items[child + 1] as number) < (items[child] as number)) child++;
      if ((items[child] as number) >= last) break;
      items[i] = items[child] as number;
      i = child;
    }
    items[i] = last;
    return top;
  }
}
