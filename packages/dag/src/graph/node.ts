/** The node contract: what a node is given when it runs, and how it is declared. */
import type { NodePlacement } from '../dispatch/types.js';
import type { Payload } from '../payload/payload.js';
import type { CircuitBreakerPolicy, NodePolicy, RetryPolicy } from '../policy/types.js';

/** What one attempt of a node is given. */
export interface NodeContext {
  readonly runId: string;
  /** The run's fencing token (from the run guard or the caller), if it has one. Pass it on to writes you fence yourself. */
  readonly fencingToken: number | undefined;
  readonly nodeId: string;
  /** 1 for the first attempt, 2 for the first retry, … */
  readonly attempt: number;
  /** Longest-path depth of the node (roots are 0). */
  readonly layer: number;
  /** Ids of the node's direct predecessors, in topological order. */
  readonly predecessors: readonly string[];
  /** Outputs of the node's direct predecessors, by id. */
  readonly upstream: ReadonlyMap<string, Payload>;
  /** The output of direct predecessor `id`; throws `UnknownNodeError` for any other id. */
  input(id: string): Payload;
  /**
   * Aborts when the attempt times out, the run is cancelled, or (with `cancelInFlightOnFailure`)
   * another node fails. `signal.reason` is the error that caused it. Pass it to fetch, timers, …
   */
  readonly signal: AbortSignal;
  /** Epoch ms (scheduler clock) at which the attempt will be aborted, if it has a deadline. */
  readonly deadline: number | undefined;
  readonly idempotencyKey: string | undefined;
}

/**
 * A node's work. Resolve with the node's output ({@link EMPTY_PAYLOAD} when there is none);
 * throw (or reject) to fail the attempt. Returning a payload synchronously is allowed.
 */
export type NodeRun = (ctx: NodeContext) => Promise<Payload> | Payload;

/** Everything about a node except its id and its work. */
export interface NodeOptions extends NodePolicy {
  /** Ids of nodes that must succeed before this one starts. @default [] (a root) */
  readonly after?: readonly string[];
  /** @default { kind: 'local' } */
  readonly placement?: NodePlacement;
  /**
   * Nodes with the same key do the same work: within a run the first one to start runs it and
   * the others get its output; with an idempotency store, so do other runs and processes.
   * @default undefined
   */
  readonly idempotencyKey?: string;
}

/** A node declaration. `run` may be left out only for remote-placed nodes. */
export interface DagNodeSpec extends NodeOptions {
  readonly id: string;
  readonly run?: NodeRun;
}

/** A node of a built {@link Dag}. */
export interface DagNode {
  readonly id: string;
  readonly predecessors: readonly string[];
  readonly successors: readonly string[];
  readonly layer: number;
  readonly run: NodeRun | undefined;
  readonly placement: NodePlacement;
  readonly idempotencyKey: string | undefined;
  readonly retry: RetryPolicy | undefined;
  readonly timeoutMs: number | undefined;
  readonly circuitBreaker: CircuitBreakerPolicy | undefined;
}
