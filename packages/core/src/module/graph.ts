/**
 * A module's nodes as a validated DAG. The edges come from `steps` (a chain), `graph` (a graph)
 * or neither (independent nodes routed by name); `@mocra/dag`'s `analyzeGraph` checks them —
 * a cycle, an edge to an unknown node or a duplicate id is an InvalidModuleError naming the
 * module, with the graph error as its cause.
 *
 * ```
 *   steps: [list, detail, api]          graph().edge(list, detail).edge(list, api)
 *                                             .edge(detail, merge).edge(api, merge)
 *   list ─▶ detail ─▶ api                        ┌─▶ detail ─┐
 *                                           list ─┤           ├─▶ merge (join)
 *                                                 └─▶ api ────┘
 * ```
 *
 * Entry nodes are every node without a predecessor (in declaration order) — all of them start,
 * not only the first.
 */
import { analyzeGraph } from '@mocra/dag/graph';
import { InvalidModuleError } from '../errors.js';
import type { Module, ModuleGraphDefinition, ModuleNode, NodeRef } from './types.js';

export interface ModuleGraph<TItem = unknown> {
  readonly nodes: ReadonlyMap<string, ModuleNode<TItem>>;
  /** Node ids a task starts, in declaration order. */
  readonly entry: readonly string[];
  /** Topological order (deterministic). */
  readonly order: readonly string[];
  /** True when any edge exists (a chain or graph), false for independent nodes. */
  readonly hasEdges: boolean;
  successors(id: string): readonly string[];
  predecessors(id: string): readonly string[];
}

/** Builds a graph of nodes with `edge(a, b)`; `build()` returns it for a module's `graph`. */
export class ModuleGraphBuilder<TItem = unknown> {
  readonly #nodes: ModuleNode<TItem>[] = [];
  readonly #edges: [string, string][] = [];

  /** Adds a node without edges (nodes in edges are added by `edge` too). */
  node(node: ModuleNode<TItem>): this {
    this.#add(node);
    return this;
  }

  /** `from` hands on to `to`. Either may be a node or the id of a node added before. */
  edge(from: NodeRef<TItem>, to: NodeRef<TItem>): this {
    this.#edges.push([this.#ref(from), this.#ref(to)]);
    return this;
  }

  build(): ModuleGraphDefinition<TItem> {
    return { nodes: [...this.#nodes], edges: this.#edges.map(([a, b]) => [a, b] as const) };
  }

  #ref(ref: NodeRef<TItem>): string {
    if (typeof ref === 'string') return ref;
    this.#add(ref);
    return ref.id;
  }

  #add(node: ModuleNode<TItem>): void {
    if (!this.#nodes.includes(node)) this.#nodes.push(node);
  }
}

/** Starts a graph of nodes: `graph().edge(list, detail).edge(detail, api).build()`. */
export function graph<TItem = unknown>(): ModuleGraphBuilder<TItem> {
  return new ModuleGraphBuilder<TItem>();
}

/** Validates a module's nodes and edges. Throws InvalidModuleError. */
export function compileModuleGraph<TItem>(module: Module<TItem>): ModuleGraph<TItem> {
  const name = module.name;
  const nodes = new Map<string, ModuleNode<TItem>>();
  const declared: string[] = [];
  const addNode = (node: ModuleNode<TItem>) => {
    if (node === null || typeof node !== 'object')
      throw new InvalidModuleError(name, 'a node is not an object');
    if (typeof node.id !== 'string' || node.id === '') {
      throw new InvalidModuleError(name, 'every node needs a non-empty id');
    }
    if (typeof node.parse !== 'function')
      throw new InvalidModuleError(name, `node '${node.id}' has no parse()`);
    if (node.generate !== undefined && typeof node.generate !== 'function') {
      throw new InvalidModuleError(name, `node '${node.id}': generate must be a function`);
    }
    const existing = nodes.get(node.id);
    if (existing === node) return;
    if (existing) throw new InvalidModuleError(name, `two different nodes are named '${node.id}'`);
    nodes.set(node.id, node);
    declared.push(node.id);
  };
  if (module.nodes !== undefined && !Array.isArray(module.nodes)) {
    throw new InvalidModuleError(name, 'nodes must be an array');
  }
  for (const node of module.nodes ?? []) addNode(node);
  const edges: [string, string][] = [];
  if (module.steps !== undefined) {
    if (!Array.isArray(module.steps) || module.steps.length === 0) {
      throw new InvalidModuleError(name, 'steps must be a non-empty array of nodes');
    }
    const ids = module.steps.map((step) => {
      if (typeof step === 'string') return step;
      addNode(step);
      return step.id;
    });
    for (let i = 1; i < ids.length; i++) edges.push([ids[i - 1]!, ids[i]!]);
    if (ids.length === 1 && !nodes.has(ids[0]!)) {
      throw new InvalidModuleError(name, `step '${ids[0]}' is not a node of the module`);
    }
  }
  // `dag` names the @mocra/dag executor and its DAG jobs; a module's graph was once set under
  // that name too. Ignoring it would run the nodes without their edges.
  if (Object.hasOwn(module, 'dag')) {
    throw new InvalidModuleError(name, "'dag' was renamed: use 'graph' (graph().edge(a, b)…build())");
  }
  if (module.graph !== undefined) {
    const definition = module.graph as ModuleGraphDefinition<TItem>;
    if (!Array.isArray(definition?.nodes) || !Array.isArray(definition.edges)) {
      throw new InvalidModuleError(name, 'graph must come from graph()…build() (nodes and edges)');
    }
    for (const node of definition.nodes) addNode(node);
    for (const edge of definition.edges) edges.push([edge[0], edge[1]]);
  }
  if (nodes.size === 0) throw new InvalidModuleError(name, 'has no nodes');

  const preds = new Map<string, string[]>(declared.map((id) => [id, []]));
  const succs = new Map<string, string[]>(declared.map((id) => [id, []]));
  for (const [from, to] of edges) {
    for (const id of [from, to]) {
      if (!nodes.has(id))
        throw new InvalidModuleError(name, `an edge names '${id}', which is not a node of the module`);
    }
    if (!preds.get(to)!.includes(from)) {
      preds.get(to)!.push(from);
      succs.get(from)!.push(to);
    }
  }
  let order: readonly string[];
  try {
    order = analyzeGraph(declared.map((id) => ({ id, after: preds.get(id)! }))).order;
  } catch (err) {
    throw new InvalidModuleError(
      name,
      `invalid node graph: ${err instanceof Error ? err.message : String(err)}`,
      {
        cause: err,
      },
    );
  }
  const hasEdges = edges.length > 0;
  let entry: string[];
  if (module.entry !== undefined) {
    if (!Array.isArray(module.entry) || module.entry.length === 0) {
      throw new InvalidModuleError(name, 'entry must be a non-empty array of node ids');
    }
    entry = [...module.entry];
    for (const id of entry) {
      if (!nodes.has(id)) throw new InvalidModuleError(name, `entry node '${id}' does not exist`);
    }
  } else {
    entry = hasEdges ? declared.filter((id) => preds.get(id)!.length === 0) : [declared[0]!];
  }
  for (const id of declared) {
    if (nodes.get(id)!.join === true && preds.get(id)!.length === 0) {
      throw new InvalidModuleError(name, `node '${id}' asks for a join but has no predecessor`);
    }
  }
  return {
    nodes,
    entry,
    order,
    hasEdges,
    successors: (id) => succs.get(id) ?? [],
    predecessors: (id) => preds.get(id) ?? [],
  };
}
