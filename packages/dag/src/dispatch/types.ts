import type { Payload } from '../payload/payload.js';

/**
 * Where a node runs. `local` nodes run in this process, inline; `remote` nodes are handed to
 * the scheduler's {@link NodeDispatcher} with the name of the worker group that should run them.
 */
export type NodePlacement =
  | { readonly kind: 'local' }
  | { readonly kind: 'remote'; readonly workerGroup: string };

export const LOCAL_PLACEMENT: NodePlacement = Object.freeze({ kind: 'local' });

/**
 * Everything a worker on another machine needs to run one attempt of a node: plain data, no
 * functions. `encodeNodeTask` turns it into bytes and `decodeNodeTask` back; the worker calls
 * `runNodeTask(dag, task)` with the same graph definition.
 */
export interface NodeTask {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly nodeId: string;
  /** 1-based. */
  readonly attempt: number;
  readonly layer: number;
  readonly workerGroup: string | undefined;
  readonly idempotencyKey: string | undefined;
  /** Epoch ms (scheduler clock) after which the attempt is abandoned, if it has a timeout. */
  readonly deadline: number | undefined;
  /** Outputs of the node's direct predecessors. */
  readonly upstream: ReadonlyMap<string, Payload>;
}

/**
 * Runs remote-placed nodes. A cluster implementation sends the task (e.g. as
 * `encodeNodeTask(task)`) to a worker of `task.workerGroup` and resolves with the worker's
 * output; it should stop waiting (and tell the worker) when `signal` aborts. A rejection is the
 * attempt's failure and goes through the node's retry policy like any other error.
 */
export interface NodeDispatcher {
  dispatch(task: NodeTask, signal: AbortSignal): Promise<Payload>;
}
