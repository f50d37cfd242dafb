import type { FencingStore, IdempotencyStore, RunGuard, RunStateStore } from '../coordination/types.js';
import type { NodeDispatcher } from '../dispatch/types.js';
import type { EventSink, NodeState, OutputSource } from '../events/types.js';
import type { Payload } from '../payload/payload.js';
import type { NodePolicy } from '../policy/types.js';
import type { Clock, RandomSource } from '../time/clock.js';

export interface RunGuardOptions {
  readonly guard: RunGuard;
  /** How long one acquisition or renewal holds the guard. @default 30_000 */
  readonly ttlMs?: number;
  /** How often the guard is renewed while the run goes. @default max(50, ttlMs / 3) */
  readonly renewIntervalMs?: number;
  /** Spread each renewal interval by ±this fraction (0–0.9), so many runs do not renew in step. @default 0.2 */
  readonly renewJitter?: number;
  /** The owner name given to the guard. @default the run id */
  readonly owner?: string;
}

export interface FencingOptions {
  readonly store: FencingStore;
  /** The resource commits are fenced on. @default the run key */
  readonly resource?: string;
}

export interface RunStateOptions {
  readonly store: RunStateStore;
}

export interface IdempotencyOptions {
  readonly store: IdempotencyStore;
  /** How long a claim on a key lasts before others may take it over. Keep it above the node's timeout. @default 60_000 */
  readonly claimTtlMs?: number;
}

export interface DagSchedulerOptions {
  /** Most node attempts running at once (an integer ≥ 1). @default Infinity */
  readonly maxInFlight?: number;
  /**
   * When a node fails for good, abort the nodes still running (through their `ctx.signal`) and
   * end the run at once. With `false`, running nodes may finish (their outputs are checkpointed)
   * and the run ends when they have; no new node starts either way. @default true
   */
  readonly cancelInFlightOnFailure?: boolean;
  /** End the run (aborting running nodes) if it is not done this long after its nodes start. @default undefined (no limit) */
  readonly runTimeoutMs?: number;
  /** Policy for every node that does not set the field itself. @default {} (no retries, no timeout, no breaker) */
  readonly defaultPolicy?: NodePolicy;
  /** @default systemClock */
  readonly clock?: Clock;
  /** Used for retry and renewal jitter. @default Math.random */
  readonly random?: RandomSource;
  /** Receives every state change as a typed event. @default undefined */
  readonly eventSink?: EventSink;
  /** Runs remote-placed nodes. Without it, a remote node fails with `RemoteDispatchNotConfiguredError`. @default undefined */
  readonly dispatcher?: NodeDispatcher;
  /** One run of a key at a time, with a fencing token. Needs a run key. @default undefined */
  readonly runGuard?: RunGuardOptions;
  /** Commit every node output under the run's fencing token. Needs a token (run guard or `fencingToken`). @default undefined */
  readonly fencing?: FencingOptions;
  /** Checkpoint after every success and resume from the checkpoint. Needs a run key. @default undefined */
  readonly runState?: RunStateOptions;
  /** Share idempotency keys across runs (and processes). Without it, keys are shared within one run. @default undefined */
  readonly idempotency?: IdempotencyOptions;
  /** The run key used when a run does not give one (the job a run belongs to, e.g. `etl:2024-06-01`). @default undefined */
  readonly key?: string;
}

export interface DagRunOptions {
  /** @default the checkpoint's run id when resuming, else a random UUID */
  readonly runId?: string;
  /** Names the job this run belongs to: the run-guard key, the run-state key and the default fencing resource. @default the scheduler's `key` */
  readonly key?: string;
  /** Aborting it stops the run (running nodes are aborted too). @default undefined */
  readonly signal?: AbortSignal;
  /** A fencing token from a lock the caller already holds; overrides the run guard's. @default undefined */
  readonly fencingToken?: number;
}

/** What one node did in a run. */
export interface NodeResult {
  readonly nodeId: string;
  readonly layer: number;
  readonly state: NodeState;
  /** Attempts started (0 for a node restored, served from cache, or never started). */
  readonly attempts: number;
  readonly source?: OutputSource;
  readonly output?: Payload;
  readonly error?: unknown;
}

/** The outcome of a run. For a run that did not finish, see `ExecutionIncompleteError.report`. */
export interface DagReport {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly durationMs: number;
  /** Outputs of the nodes that succeeded, in topological order. */
  readonly outputs: ReadonlyMap<string, Payload>;
  /** One result per node, in topological order. */
  readonly results: readonly NodeResult[];
  readonly states: ReadonlyMap<string, NodeState>;
  readonly layers: readonly (readonly string[])[];
  /** The output of node `id`, or undefined if it did not succeed. Cheaper than `outputs.get` on a big graph. */
  output(id: string): Payload | undefined;
}
