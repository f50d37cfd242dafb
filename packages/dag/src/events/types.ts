/**
 * Every state change of a run and of its nodes, as typed, JSON-safe events. An {@link EventSink}
 * receives them in order; `node:diagnostics_channel` subscribers of `mocra:dag:run` and
 * `mocra:dag:node` receive the same objects.
 *
 * Node states and the events that enter them:
 *
 * ```
 *  pending ─node-ready─▶ ready ─node-running─▶ running ─node-succeeded─▶ succeeded
 *     │                    │                      │  └─node-attempt-failed─┬─node-retry-scheduled─▶ backoff ─▶ ready
 *     │                    │                      │                        └─node-failed─▶ failed
 *     │                    │                      └──node-failed (a store refused the output)─▶ failed
 *     │                    └─node-singleflight-wait─▶ waiting ─node-succeeded (singleflight)─▶ succeeded
 *     └─node-restored (from a checkpoint)─▶ succeeded
 *
 *  running, waiting, backoff ─node-cancelled─▶ cancelled   (when the run stops; pending and
 *                                                          ready nodes keep their state)
 * ```
 *
 * With a run-state store, `node-checkpointed` follows each checkpoint write (before the node's
 * `node-succeeded`). A run the guard refused emits only `run-guard-refused`.
 */
import type { SerializedError } from '../errors.js';

export type NodeState =
  | 'pending'
  | 'ready'
  | 'running'
  | 'waiting'
  | 'backoff'
  | 'succeeded'
  | 'failed'
  | 'cancelled';

/** Where a succeeded node's output came from. */
export type OutputSource = 'run' | 'cache' | 'singleflight' | 'checkpoint';

interface RunEventBase {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  /** Epoch ms by the scheduler's clock. */
  readonly timestampMs: number;
}

export interface RunStartedEvent extends RunEventBase {
  readonly type: 'run-started';
  readonly nodeCount: number;
  /** Nodes skipped because a checkpoint holds their output. */
  readonly restoredCount: number;
}
export interface RunSucceededEvent extends RunEventBase {
  readonly type: 'run-succeeded';
  readonly durationMs: number;
}
export interface RunFailedEvent extends RunEventBase {
  readonly type: 'run-failed';
  readonly durationMs: number;
  readonly error: SerializedError;
  readonly unfinishedNodes: readonly string[];
}
export interface RunGuardAcquiredEvent extends RunEventBase {
  readonly type: 'run-guard-acquired';
  readonly key: string;
  readonly expiresAt: number;
}
export interface RunGuardRenewedEvent extends RunEventBase {
  readonly type: 'run-guard-renewed';
  readonly key: string;
  readonly expiresAt: number;
}
export interface RunGuardLostEvent extends RunEventBase {
  readonly type: 'run-guard-lost';
  readonly key: string;
  readonly error: SerializedError;
}
/** The run did not start: another owner holds the guard (`held`) or asking failed (`error`). */
export interface RunGuardRefusedEvent extends RunEventBase {
  readonly type: 'run-guard-refused';
  readonly key: string;
  readonly reason: 'held' | 'error';
  readonly error?: SerializedError;
}
export interface RunGuardReleasedEvent extends RunEventBase {
  readonly type: 'run-guard-released';
  readonly key: string;
  /** False when the guard had already lapsed or the release failed (`error` says why). */
  readonly released: boolean;
  readonly error?: SerializedError;
}

export type DagRunEvent =
  | RunStartedEvent
  | RunSucceededEvent
  | RunFailedEvent
  | RunGuardAcquiredEvent
  | RunGuardRenewedEvent
  | RunGuardLostEvent
  | RunGuardRefusedEvent
  | RunGuardReleasedEvent;

interface NodeEventBase extends RunEventBase {
  readonly nodeId: string;
  readonly layer: number;
  /** The attempt the event is about (0 before the first attempt starts). */
  readonly attempt: number;
  readonly placement: 'local' | 'remote';
  readonly workerGroup?: string;
  readonly idempotencyKey?: string;
}

export interface NodeReadyEvent extends NodeEventBase {
  readonly type: 'node-ready';
}
export interface NodeRunningEvent extends NodeEventBase {
  readonly type: 'node-running';
  /** When the attempt will be aborted, if it has a timeout. */
  readonly deadline?: number;
}
export interface NodeSucceededEvent extends NodeEventBase {
  readonly type: 'node-succeeded';
  readonly source: Exclude<OutputSource, 'checkpoint'>;
  /** From the start of the last attempt (or of the wait) to success. */
  readonly durationMs: number;
}
export interface NodeRetryScheduledEvent extends NodeEventBase {
  readonly type: 'node-retry-scheduled';
  readonly delayMs: number;
  readonly error: SerializedError;
  /** The wait is the node's circuit breaker being open, not its backoff. */
  readonly breakerOpen: boolean;
}
/** One attempt failed (threw, rejected, timed out or returned no payload); a retry or the final failure follows. */
export interface NodeAttemptFailedEvent extends NodeEventBase {
  readonly type: 'node-attempt-failed';
  readonly error: SerializedError;
  /** From the start of the attempt to its failure. */
  readonly durationMs: number;
}
export interface NodeFailedEvent extends NodeEventBase {
  readonly type: 'node-failed';
  readonly error: SerializedError;
}
export interface NodeCancelledEvent extends NodeEventBase {
  readonly type: 'node-cancelled';
  readonly reason: SerializedError;
}
export interface NodeRestoredEvent extends NodeEventBase {
  readonly type: 'node-restored';
}
/** The node's output was written to the run-state store (the run resumes from it). */
export interface NodeCheckpointedEvent extends NodeEventBase {
  readonly type: 'node-checkpointed';
}
export interface NodeSingleflightWaitEvent extends NodeEventBase {
  readonly type: 'node-singleflight-wait';
}

export type DagNodeEvent =
  | NodeReadyEvent
  | NodeRunningEvent
  | NodeSucceededEvent
  | NodeRetryScheduledEvent
  | NodeAttemptFailedEvent
  | NodeFailedEvent
  | NodeCancelledEvent
  | NodeRestoredEvent
  | NodeCheckpointedEvent
  | NodeSingleflightWaitEvent;

export type DagEvent = DagRunEvent | DagNodeEvent;
export type DagEventType = DagEvent['type'];

/**
 * Receives every event of the runs it is given to. Called synchronously, in order; a returned
 * promise is not awaited (a slow sink must not slow the run) and its rejection, like a thrown
 * error, is published on `mocra:dag:sink-error` and otherwise ignored.
 */
export interface EventSink {
  emit(event: DagEvent): void | Promise<void>;
}
