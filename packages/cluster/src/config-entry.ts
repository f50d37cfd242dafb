// @mocra/cluster/config — ClusterConfig alone: what a program needs to describe its node
// (`ClusterConfig.bootstrap(…)`, `.join(…)`, `.fromEnv()`), without loading the Raft node, its
// log or its transport. The node starts from the public entry, when a run connects.
export type { ClusterConfigOptions, ClusterMode } from './config/cluster-config.js';
export { ClusterConfig } from './config/cluster-config.js';
