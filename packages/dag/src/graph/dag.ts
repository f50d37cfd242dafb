/**
 * Building and holding a graph. A {@link DagBuilder} collects node declarations in any order
 * (predecessors may be declared after the nodes that name them); `build()` validates the whole
 * graph and returns an immutable {@link Dag}.
 */

import { LOCAL_PLACEMENT, type NodePlacement } from '../dispatch/types.js';
import { DuplicateNodeError, InvalidNodeError, ReservedNodeIdError, UnknownNodeError } from '../errors.js';
import { policyProblem } from '../policy/retry.js';
import { analyzeGraph, type GraphAnalysis, RESERVED_NODE_IDS } from './analyze.js';
import type { DagNode, DagNodeSpec, NodeOptions, NodeRun } from './node.js';

export interface ChainOptions {
  /** Predecessors of the first node of the chain. @default [] */
  readonly after?: readonly string[];
}

/** The compiled form the scheduler walks: arrays indexed by topological position. */
export interface CompiledDag {
  readonly analysis: GraphAnalysis;
  readonly nodes: readonly DagNode[];
}

const compiled = new WeakMap<Dag, CompiledDag>();

/** @internal The scheduler's view of a built graph. Not exported from the package. */
export function compiledOf(dag: Dag): CompiledDag {
  const c = compiled.get(dag);
  if (c === undefined) throw new TypeError('not a Dag built by DagBuilder.build()');
  return c;
}

const reserved = new Set(RESERVED_NODE_IDS);

/** Collects nodes; see {@link createDagBuilder}. */
export class DagBuilder {
  readonly #specs: DagNodeSpec[] = [];
  readonly #ids = new Set<string>();

  /** Number of nodes added so far. */
  get size(): number {
    return this.#specs.length;
  }

  has(id: string): boolean {
    return this.#ids.has(id);
  }

  /**
   * Adds one node. Throws at once for a bad or duplicate id, a reserved id, a missing `run` on a
   * local node, or a bad policy; unknown predecessors and cycles are found by `build()`.
   */
  addNode(spec: DagNodeSpec): this;
  addNode(id: string, run: NodeRun, options?: NodeOptions): this;
  addNode(specOrId: DagNodeSpec | string, run?: NodeRun, options: NodeOptions = {}): this {
    const spec: DagNodeSpec =
      typeof specOrId === 'string'
        ? { ...options, id: specOrId, ...(run === undefined ? {} : { run }) }
        : specOrId;
    this.#add(spec);
    return this;
  }

  /** Adds nodes that run one after another: each runs after the previous (and after its own `after`). */
  addChain(nodes: readonly DagNodeSpec[], options: ChainOptions = {}): this {
    let previous: readonly string[] = options.after ?? [];
    for (const spec of nodes) {
      this.#add({ ...spec, after: [...previous, ...(spec.after ?? [])] });
      previous = [spec.id];
    }
    return this;
  }

  /** Adds nodes that each run after `from` (one id or several) — a fan-out. */
  fanOut(from: string | readonly string[], nodes: readonly DagNodeSpec[]): this {
    const after = typeof from === 'string' ? [from] : from;
    for (const spec of nodes) this.#add({ ...spec, after: [...after, ...(spec.after ?? [])] });
    return this;
  }

  /** Adds one node that runs after every node of `from` — a fan-in. Its `ctx.upstream` holds all their outputs. */
  fanIn(from: readonly string[], node: DagNodeSpec): this {
    this.#add({ ...node, after: [...from, ...(node.after ?? [])] });
    return this;
  }

  /** Validates the whole graph and returns it. See `analyzeGraph` for the errors it throws. */
  build(): Dag {
    return new Dag(this.#specs);
  }

  #add(spec: DagNodeSpec): void {
    if (typeof spec !== 'object' || spec === null)
      throw new InvalidNodeError('?', 'a node must be an object');
    const { id } = spec;
    if (typeof id !== 'string' || id.length === 0)
      throw new InvalidNodeError(String(id), 'node id must be a non-empty string');
    if (reserved.has(id)) throw new ReservedNodeIdError(id);
    if (this.#ids.has(id)) throw new DuplicateNodeError(id);
    checkSpec(spec);
    this.#ids.add(id);
    this.#specs.push(spec);
  }
}

/** A new, empty graph builder. */
export function createDagBuilder(): DagBuilder {
  return new DagBuilder();
}

/** Builds a graph from a list of node declarations in one call (same checks as the builder). */
export function createDag(nodes: readonly DagNodeSpec[]): Dag {
  return new Dag(nodes);
}

function checkSpec(spec: DagNodeSpec): void {
  const { id } = spec;
  const placement: NodePlacement = spec.placement ?? LOCAL_PLACEMENT;
  if (placement.kind === 'remote') {
    if (typeof placement.workerGroup !== 'string' || placement.workerGroup.length === 0) {
      throw new InvalidNodeError(id, 'a remote placement needs a non-empty workerGroup');
    }
  } else if (placement.kind !== 'local') {
    throw new InvalidNodeError(
      id,
      `placement.kind must be 'local' or 'remote', got ${String((placement as { kind?: unknown }).kind)}`,
    );
  }
  if (spec.run !== undefined && typeof spec.run !== 'function')
    throw new InvalidNodeError(id, 'run must be a function');
  if (spec.run === undefined && placement.kind === 'local') {
    throw new InvalidNodeError(
      id,
      'a local node needs a run function (only remote-placed nodes may leave it out)',
    );
  }
  if (spec.after !== undefined && !Array.isArray(spec.after)) {
    throw new InvalidNodeError(id, '`after` must be an array of node ids');
  }
  if (
    spec.idempotencyKey !== undefined &&
    (typeof spec.idempotencyKey !== 'string' || spec.idempotencyKey.length === 0)
  ) {
    throw new InvalidNodeError(id, 'idempotencyKey must be a non-empty string');
  }
  const problem = policyProblem(spec);
  if (problem !== undefined) throw new InvalidNodeError(id, problem);
}

/**
 * A validated, immutable graph. Iteration and every list it returns follow the deterministic
 * topological order (Kahn's algorithm, smallest id first), which depends only on the graph,
 * not on the order nodes were added in.
 */
export class Dag {
  readonly #analysis: GraphAnalysis;
  readonly #nodes: readonly DagNode[];
  readonly #roots: readonly string[];
  readonly #leaves: readonly string[];

  /** Validates `specs` as a whole graph; {@link createDagBuilder} is the friendlier way to get here. */
  constructor(specs: readonly DagNodeSpec[]) {
    if (!Array.isArray(specs)) throw new InvalidNodeError('?', 'a graph is an array of node declarations');
    for (const spec of specs) {
      if (typeof spec !== 'object' || spec === null)
        throw new InvalidNodeError('?', 'a node must be an object');
      if (typeof spec.id === 'string' && spec.id.length > 0 && !reserved.has(spec.id)) checkSpec(spec);
    }
    const analysis = analyzeGraph(specs);
    const { order, predecessors, successors, layerOf, inputIndex } = analysis;
    const nodes: DagNode[] = new Array(order.length);
    for (let pos = 0; pos < order.length; pos++) {
      const id = order[pos] as string;
      const spec = specs[inputIndex[pos] as number] as DagNodeSpec;
      nodes[pos] = Object.freeze({
        id,
        predecessors: Object.freeze((predecessors[pos] as number[]).map((p) => order[p] as string)),
        successors: Object.freeze((successors[pos] as number[]).map((s) => order[s] as string)),
        layer: layerOf[pos] as number,
        run: spec.run,
        placement: spec.placement ?? LOCAL_PLACEMENT,
        idempotencyKey: spec.idempotencyKey,
        retry: spec.retry,
        timeoutMs: spec.timeoutMs,
        circuitBreaker: spec.circuitBreaker,
      });
    }
    this.#analysis = analysis;
    this.#nodes = nodes;
    this.#roots = Object.freeze(nodes.filter((n) => n.predecessors.length === 0).map((n) => n.id));
    this.#leaves = Object.freeze(nodes.filter((n) => n.successors.length === 0).map((n) => n.id));
    Object.freeze(analysis.order);
    for (const layer of analysis.layers) Object.freeze(layer);
    Object.freeze(analysis.layers);
    compiled.set(this, { analysis, nodes });
  }

  /** Number of nodes. */
  get size(): number {
    return this.#nodes.length;
  }

  /** Every id in deterministic topological order. */
  get topologicalOrder(): readonly string[] {
    return this.#analysis.order;
  }

  /** Ids grouped by longest-path depth; each layer sorted by id. */
  get layers(): readonly (readonly string[])[] {
    return this.#analysis.layers;
  }

  /** Nodes without predecessors, in topological order. */
  get roots(): readonly string[] {
    return this.#roots;
  }

  /** Nodes without successors, in topological order. */
  get leaves(): readonly string[] {
    return this.#leaves;
  }

  has(id: string): boolean {
    return this.#analysis.index.has(id);
  }

  /** The node `id`; throws {@link UnknownNodeError} when there is none. */
  node(id: string): DagNode {
    const pos = this.#analysis.index.get(id);
    if (pos === undefined) throw new UnknownNodeError(id);
    return this.#nodes[pos] as DagNode;
  }

  predecessors(id: string): readonly string[] {
    return this.node(id).predecessors;
  }

  successors(id: string): readonly string[] {
    return this.node(id).successors;
  }

  layerOf(id: string): number {
    return this.node(id).layer;
  }

  /** Nodes in topological order. */
  [Symbol.iterator](): IterableIterator<DagNode> {
    return this.#nodes[Symbol.iterator]();
  }
}
