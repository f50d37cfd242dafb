export type { GraphAnalysis, GraphNodeShape } from './analyze.js';
export { analyzeGraph, RESERVED_NODE_IDS } from './analyze.js';
export type { ChainOptions } from './dag.js';
export { createDag, createDagBuilder, Dag, DagBuilder } from './dag.js';
export type { DagNode, DagNodeSpec, NodeContext, NodeOptions, NodeRun } from './node.js';
