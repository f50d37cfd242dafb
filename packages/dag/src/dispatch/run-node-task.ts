/** The worker side of remote placement: run one dispatched attempt against a local copy of the graph. */
import { InvalidNodeError, InvalidNodeOutputError, UnknownNodeError } from '../errors.js';
import type { Dag } from '../graph/dag.js';
import type { NodeContext } from '../graph/node.js';
import { isPayload, type Payload } from '../payload/payload.js';
import type { NodeTask } from './types.js';

export interface RunNodeTaskOptions {
  /** Aborts the node (its `ctx.signal`). @default a signal that never aborts */
  signal?: AbortSignal;
}

/**
 * Runs `task` with the `run` function of the same node in `dag` (the worker's copy of the graph)
 * and resolves with its output. Throws {@link UnknownNodeError} when the graph has no such
 * node and {@link InvalidNodeError} when the worker's copy has no `run` for it.
 */
export async function runNodeTask(
  dag: Dag,
  task: NodeTask,
  options: RunNodeTaskOptions = {},
): Promise<Payload> {
  const node = dag.node(task.nodeId);
  if (node.run === undefined)
    throw new InvalidNodeError(node.id, "this worker's graph has no run function for the node");
  const signal = options.signal ?? new AbortController().signal;
  const predecessors = node.predecessors;
  const ctx: NodeContext = {
    runId: task.runId,
    fencingToken: task.fencingToken,
    nodeId: node.id,
    attempt: task.attempt,
    layer: node.layer,
    predecessors,
    upstream: task.upstream,
    input(id) {
      const out = task.upstream.get(id);
      if (out === undefined) throw new UnknownNodeError(id, `is not a direct predecessor of '${node.id}'`);
      return out;
    },
    signal,
    deadline: task.deadline,
    idempotencyKey: task.idempotencyKey,
  };
  const output = await node.run(ctx);
  if (!isPayload(output)) throw new InvalidNodeOutputError(node.id, output);
  return output;
}
