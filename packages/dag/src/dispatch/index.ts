export { decodeNodeTask, encodeNodeTask, NODE_TASK_VERSION } from './node-task-codec.js';
export type { RunNodeTaskOptions } from './run-node-task.js';
export { runNodeTask } from './run-node-task.js';
export type { NodeDispatcher, NodePlacement, NodeTask } from './types.js';
export { LOCAL_PLACEMENT } from './types.js';
