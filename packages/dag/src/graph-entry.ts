// @mocra/dag/graph — graph validation alone (`analyzeGraph`: cycles, unknown predecessors,
// duplicate ids, topological order and layers) on bare `{ id, after }` records, for a host that
// checks a graph of its own without loading the executor.
export type { GraphAnalysis, GraphNodeShape } from './graph/analyze.js';
export { analyzeGraph, RESERVED_NODE_IDS } from './graph/analyze.js';
