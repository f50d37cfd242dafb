/**
 * Every error @mocra/dag raises. Each class carries a stable `code` (listed in `docs/errors.md`;
 * a test keeps the table and the docs in step), the `cause` it wraps, a `retryable` flag that says
 * whether trying the same thing again may help, and readonly context fields naming the problem.
 *
 * This package depends on no other mocra package, so it has its own base class, {@link DagError}.
 * Its shape (`code` starting with `MOCRA_ERR_`, `retryable`, `toJSON`) matches `MocraError` in
 * `@mocra/core`, so code that handles mocra errors handles these too.
 */

import type { DagReport } from './scheduler/types.js';

/** Every code this package can raise, with the one-line meaning shown in docs/errors.md. */
export const DAG_ERROR_CODES = {
  MOCRA_ERR_DAG_DUPLICATE_NODE: 'Two nodes of one graph have the same id.',
  MOCRA_ERR_DAG_UNKNOWN_PREDECESSOR: 'A node names a predecessor that is not in the graph.',
  MOCRA_ERR_DAG_CYCLE: 'The graph has a cycle; the error lists the nodes on it.',
  MOCRA_ERR_DAG_EMPTY_GRAPH: 'The graph has no nodes.',
  MOCRA_ERR_DAG_RESERVED_NODE_ID: 'A node uses an id reserved for the implicit start and end of a graph.',
  MOCRA_ERR_DAG_INVALID_NODE: 'A node definition cannot be used (bad id, no run function, bad policy).',
  MOCRA_ERR_DAG_INVALID_OPTIONS: 'Scheduler, run or store options cannot be used.',
  MOCRA_ERR_DAG_UNKNOWN_NODE:
    'A node id was looked up that is not in the graph (or not upstream of the caller).',
  MOCRA_ERR_DAG_NODE_FAILED: 'A node failed with an error that is not retried.',
  MOCRA_ERR_DAG_RETRY_EXHAUSTED: 'A node failed on its last allowed attempt.',
  MOCRA_ERR_DAG_NODE_TIMEOUT: 'A node attempt ran longer than its timeout and was aborted.',
  MOCRA_ERR_DAG_INVALID_OUTPUT: 'A node resolved with something that is not a Payload.',
  MOCRA_ERR_DAG_NODE_RETRYABLE: 'Thrown by node code: the attempt failed and may be retried.',
  MOCRA_ERR_DAG_NODE_PERMANENT: 'Thrown by node code: the attempt failed and retrying cannot help.',
  MOCRA_ERR_DAG_RUN_TIMEOUT: 'The whole run took longer than its run timeout.',
  MOCRA_ERR_DAG_RUN_ABORTED: "The caller's AbortSignal stopped the run.",
  MOCRA_ERR_DAG_EXECUTION_INCOMPLETE:
    'A run ended before every node succeeded; the error lists the unfinished nodes.',
  MOCRA_ERR_DAG_RUN_IN_PROGRESS: 'Another owner holds the run guard for this key.',
  MOCRA_ERR_DAG_RUN_GUARD_ACQUIRE: 'The run guard could not be asked for the run (its backend failed).',
  MOCRA_ERR_DAG_RUN_GUARD_LOST: 'The run guard was lost while the run was going; the run stopped.',
  MOCRA_ERR_DAG_MISSING_FENCING_TOKEN: 'A fencing store is configured but the run has no fencing token.',
  MOCRA_ERR_DAG_FENCING_REJECTED:
    'A write carried a fencing token lower than one the store has already seen.',
  MOCRA_ERR_DAG_RUN_STATE: 'The run-state store failed to load, save or clear a checkpoint.',
  MOCRA_ERR_DAG_IDEMPOTENCY_STORE: 'The idempotency store failed.',
  MOCRA_ERR_DAG_REMOTE_DISPATCH_NOT_CONFIGURED:
    'A node is placed on a remote worker group but no dispatcher was given.',
  MOCRA_ERR_DAG_INVALID_ENVELOPE:
    'Bytes are not a valid envelope (bad magic, truncated, trailing bytes, bad UTF-8).',
  MOCRA_ERR_DAG_UNSUPPORTED_ENVELOPE_VERSION:
    'An envelope was written by a format version this build cannot read.',
  MOCRA_ERR_DAG_INVALID_PAYLOAD:
    'A payload cannot be read the way asked (not JSON, bad bytes, field too long).',
} as const;

export type DagErrorCode = keyof typeof DAG_ERROR_CODES;

export interface DagErrorOptions {
  /** The error this one wraps. */
  cause?: unknown;
}

/** A JSON-safe view of an error, as carried by events and {@link DagError.toJSON}. */
export interface SerializedError {
  readonly name: string;
  readonly code?: string;
  readonly message: string;
  readonly retryable: boolean;
}

/** Base class of every error @mocra/dag raises. `code` is stable across versions; `message` is not. */
export abstract class DagError extends Error {
  override readonly name: string = 'DagError';
  abstract readonly code: DagErrorCode;
  /** Whether doing the same thing again may succeed. */
  abstract readonly retryable: boolean;

  constructor(message: string, options: DagErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
  }

  toJSON(): SerializedError & { cause?: string } {
    const cause =
      this.cause instanceof Error
        ? this.cause.message
        : this.cause === undefined
          ? undefined
          : String(this.cause);
    return {
      name: this.name,
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(cause === undefined ? {} : { cause }),
    };
  }
}

/** True for any @mocra/dag error, also across duplicated package copies (checks the shape). */
export function isDagError(err: unknown): err is DagError {
  if (err instanceof DagError) return true;
  const code = err instanceof Error ? (err as Error & { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('MOCRA_ERR_DAG_');
}

/**
 * Whether a failure says it may be retried. Reads a boolean `retryable` property on the error
 * (every mocra error has one; user errors may add one); `undefined` when the error does not say.
 */
export function retryableOf(err: unknown): boolean | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const flag = (err as { retryable?: unknown }).retryable;
  return typeof flag === 'boolean' ? flag : undefined;
}

/** A JSON-safe view of any thrown value. */
export function serializeError(err: unknown): SerializedError {
  if (err instanceof Error) {
    const code = (err as Error & { code?: unknown }).code;
    return {
      name: err.name,
      ...(typeof code === 'string' ? { code } : {}),
      message: err.message,
      retryable: retryableOf(err) ?? false,
    };
  }
  return { name: 'Error', message: String(err), retryable: false };
}

// ── graph validation ─────────────────────────────────────────────────────────────────────────

export class DuplicateNodeError extends DagError {
  override readonly name = 'DuplicateNodeError';
  readonly code = 'MOCRA_ERR_DAG_DUPLICATE_NODE';
  readonly retryable = false;
  constructor(readonly nodeId: string) {
    super(`node '${nodeId}' is defined twice; node ids must be unique in a graph`);
  }
}

export class UnknownPredecessorError extends DagError {
  override readonly name = 'UnknownPredecessorError';
  readonly code = 'MOCRA_ERR_DAG_UNKNOWN_PREDECESSOR';
  readonly retryable = false;
  constructor(
    readonly nodeId: string,
    readonly predecessorId: string,
  ) {
    super(`node '${nodeId}' runs after '${predecessorId}', which is not in the graph`);
  }
}

export class CycleError extends DagError {
  override readonly name = 'CycleError';
  readonly code = 'MOCRA_ERR_DAG_CYCLE';
  readonly retryable = false;
  /**
   * The nodes on one cycle in edge order, first node repeated at the end:
   * `['a', 'b', 'a']` means a → b → a.
   */
  readonly cycle: readonly string[];
  constructor(cycle: readonly string[]) {
    super(`the graph has a cycle: ${cycle.join(' -> ')}`);
    this.cycle = cycle;
  }
}

export class EmptyGraphError extends DagError {
  override readonly name = 'EmptyGraphError';
  readonly code = 'MOCRA_ERR_DAG_EMPTY_GRAPH';
  readonly retryable = false;
  constructor() {
    super('the graph has no nodes; add at least one node before building it');
  }
}

export class ReservedNodeIdError extends DagError {
  override readonly name = 'ReservedNodeIdError';
  readonly code = 'MOCRA_ERR_DAG_RESERVED_NODE_ID';
  readonly retryable = false;
  constructor(readonly nodeId: string) {
    super(`node id '${nodeId}' is reserved for the implicit start and end of a graph; choose another id`);
  }
}

export class InvalidNodeError extends DagError {
  override readonly name = 'InvalidNodeError';
  readonly code = 'MOCRA_ERR_DAG_INVALID_NODE';
  readonly retryable = false;
  constructor(
    readonly nodeId: string,
    readonly reason: string,
  ) {
    super(`node '${nodeId}': ${reason}`);
  }
}

export class InvalidOptionsError extends DagError {
  override readonly name = 'InvalidOptionsError';
  readonly code = 'MOCRA_ERR_DAG_INVALID_OPTIONS';
  readonly retryable = false;
  constructor(
    readonly option: string,
    readonly reason: string,
  ) {
    super(`option '${option}' ${reason}`);
  }
}

export class UnknownNodeError extends DagError {
  override readonly name = 'UnknownNodeError';
  readonly code = 'MOCRA_ERR_DAG_UNKNOWN_NODE';
  readonly retryable = false;
  constructor(
    readonly nodeId: string,
    detail = 'is not in the graph',
  ) {
    super(`node '${nodeId}' ${detail}`);
  }
}

// ── node failures ────────────────────────────────────────────────────────────────────────────

/** A node failed with an error its policy does not retry; `cause` is what the node threw. */
export class NodeFailedError extends DagError {
  override readonly name = 'NodeFailedError';
  readonly code = 'MOCRA_ERR_DAG_NODE_FAILED';
  readonly retryable: boolean;
  constructor(
    readonly nodeId: string,
    readonly attempt: number,
    cause: unknown,
  ) {
    super(`node '${nodeId}' failed on attempt ${attempt}: ${describe(cause)}`, { cause });
    this.retryable = retryableOf(cause) ?? false;
  }
}

/** A node failed on its last allowed attempt; `cause` is the last error. */
export class RetryExhaustedError extends DagError {
  override readonly name = 'RetryExhaustedError';
  readonly code = 'MOCRA_ERR_DAG_RETRY_EXHAUSTED';
  /** The last failure was retryable: running the whole DAG again later may succeed. */
  readonly retryable: boolean;
  constructor(
    readonly nodeId: string,
    readonly attempts: number,
    readonly maxRetries: number,
    cause: unknown,
  ) {
    super(
      `node '${nodeId}' failed after ${attempts} attempt(s) (maxRetries ${maxRetries}): ${describe(cause)}`,
      {
        cause,
      },
    );
    this.retryable = retryableOf(cause) ?? true;
  }
}

export class NodeTimeoutError extends DagError {
  override readonly name = 'NodeTimeoutError';
  readonly code = 'MOCRA_ERR_DAG_NODE_TIMEOUT';
  readonly retryable = true;
  constructor(
    readonly nodeId: string,
    readonly attempt: number,
    readonly timeoutMs: number,
  ) {
    super(`node '${nodeId}' attempt ${attempt} timed out after ${timeoutMs} ms`);
  }
}

export class InvalidNodeOutputError extends DagError {
  override readonly name = 'InvalidNodeOutputError';
  readonly code = 'MOCRA_ERR_DAG_INVALID_OUTPUT';
  readonly retryable = false;
  constructor(
    readonly nodeId: string,
    received: unknown,
  ) {
    super(
      `node '${nodeId}' resolved with ${received === null ? 'null' : typeof received}, not a Payload; ` +
        'return createPayload(...), jsonPayload(...), textPayload(...) or EMPTY_PAYLOAD',
    );
  }
}

export interface RetryableNodeErrorOptions extends DagErrorOptions {
  /** Wait this long before the next attempt instead of the policy's backoff. */
  delayMs?: number;
}

/**
 * Throw from a node to say "this attempt failed, another may work" (a 503, a lock held elsewhere).
 * It is retried even under `retryOn: 'retryable'`; `delayMs` replaces the backoff for the next attempt.
 */
export class RetryableNodeError extends DagError {
  override readonly name = 'RetryableNodeError';
  readonly code = 'MOCRA_ERR_DAG_NODE_RETRYABLE';
  readonly retryable = true;
  readonly delayMs: number | undefined;
  constructor(message: string, options: RetryableNodeErrorOptions = {}) {
    super(message, options);
    this.delayMs = options.delayMs;
  }
}

/** Throw from a node to say "retrying cannot help" (bad input, a 404 that stays a 404). Never retried. */
export class PermanentNodeError extends DagError {
  override readonly name = 'PermanentNodeError';
  readonly code = 'MOCRA_ERR_DAG_NODE_PERMANENT';
  readonly retryable = false;
}

// ── run failures ─────────────────────────────────────────────────────────────────────────────

export class RunTimeoutError extends DagError {
  override readonly name = 'RunTimeoutError';
  readonly code = 'MOCRA_ERR_DAG_RUN_TIMEOUT';
  readonly retryable = true;
  constructor(
    readonly runId: string,
    readonly timeoutMs: number,
  ) {
    super(`run '${runId}' did not finish within its run timeout of ${timeoutMs} ms`);
  }
}

export class RunAbortedError extends DagError {
  override readonly name = 'RunAbortedError';
  readonly code = 'MOCRA_ERR_DAG_RUN_ABORTED';
  readonly retryable = false;
  constructor(
    readonly runId: string,
    reason: unknown,
  ) {
    super(`run '${runId}' was aborted by its caller${reason === undefined ? '' : `: ${describe(reason)}`}`, {
      cause: reason,
    });
  }
}

/** What one node did in a run that ended early. */
export interface NodeFailure {
  readonly nodeId: string;
  readonly error: unknown;
}

/**
 * A run started but ended before every node succeeded. `cause` is what stopped it (a
 * {@link RetryExhaustedError}, {@link RunTimeoutError}, {@link RunGuardLostError}, …); `report`
 * is the partial report (outputs of the nodes that did succeed, every node's state).
 */
export class ExecutionIncompleteError extends DagError {
  override readonly name = 'ExecutionIncompleteError';
  readonly code = 'MOCRA_ERR_DAG_EXECUTION_INCOMPLETE';
  /** Mirrors the cause: running the DAG again later may finish it. */
  readonly retryable: boolean;
  constructor(
    readonly runId: string,
    /** Nodes that did not succeed, in topological order. */
    readonly unfinishedNodes: readonly string[],
    /** Every node that failed, in the order the failures happened. */
    readonly failures: readonly NodeFailure[],
    readonly report: DagReport,
    cause: unknown,
  ) {
    const shown = unfinishedNodes.slice(0, 10).join(', ');
    const more = unfinishedNodes.length > 10 ? `, … (${unfinishedNodes.length - 10} more)` : '';
    super(
      `run '${runId}' is incomplete: ${describe(cause)}; ${unfinishedNodes.length} node(s) unfinished: ${shown}${more}`,
      { cause },
    );
    this.retryable = retryableOf(cause) ?? false;
  }
}

// ── run guard, fencing, stores, dispatch ─────────────────────────────────────────────────────

export class RunInProgressError extends DagError {
  override readonly name = 'RunInProgressError';
  readonly code = 'MOCRA_ERR_DAG_RUN_IN_PROGRESS';
  readonly retryable = true;
  constructor(readonly key: string) {
    super(`another owner holds the run guard for '${key}'; a run of it is already in progress`);
  }
}

export class RunGuardAcquireError extends DagError {
  override readonly name = 'RunGuardAcquireError';
  readonly code = 'MOCRA_ERR_DAG_RUN_GUARD_ACQUIRE';
  readonly retryable = true;
  constructor(
    readonly key: string,
    cause: unknown,
  ) {
    super(`could not acquire the run guard for '${key}': ${describe(cause)}`, { cause });
  }
}

export class RunGuardLostError extends DagError {
  override readonly name = 'RunGuardLostError';
  readonly code = 'MOCRA_ERR_DAG_RUN_GUARD_LOST';
  readonly retryable = true;
  constructor(
    readonly key: string,
    readonly fencingToken: number,
    cause?: unknown,
  ) {
    super(
      `lost the run guard for '${key}' (token ${fencingToken})${cause === undefined ? '' : `: ${describe(cause)}`}; ` +
        'the run stopped so that the new holder is the only writer',
      { cause },
    );
  }
}

export class MissingFencingTokenError extends DagError {
  override readonly name = 'MissingFencingTokenError';
  readonly code = 'MOCRA_ERR_DAG_MISSING_FENCING_TOKEN';
  readonly retryable = false;
  constructor() {
    super(
      'a fencing store is configured but the run has no fencing token; configure a runGuard or pass fencingToken',
    );
  }
}

export class FencingTokenRejectedError extends DagError {
  override readonly name = 'FencingTokenRejectedError';
  readonly code = 'MOCRA_ERR_DAG_FENCING_REJECTED';
  readonly retryable = false;
  constructor(
    readonly resource: string,
    readonly token: number,
    readonly highestToken: number,
  ) {
    super(
      `write to '${resource}' with fencing token ${token} rejected: token ${highestToken} was already seen`,
    );
  }
}

export type RunStateOperation = 'load' | 'save' | 'clear';

export class RunStateError extends DagError {
  override readonly name = 'RunStateError';
  readonly code = 'MOCRA_ERR_DAG_RUN_STATE';
  readonly retryable = true;
  constructor(
    readonly operation: RunStateOperation,
    readonly key: string,
    cause: unknown,
  ) {
    super(`run-state store could not ${operation} the checkpoint of '${key}': ${describe(cause)}`, { cause });
  }
}

export class IdempotencyStoreError extends DagError {
  override readonly name = 'IdempotencyStoreError';
  readonly code = 'MOCRA_ERR_DAG_IDEMPOTENCY_STORE';
  readonly retryable = true;
  constructor(
    readonly key: string,
    readonly operation: string,
    cause: unknown,
  ) {
    super(`idempotency store failed to ${operation} key '${key}': ${describe(cause)}`, { cause });
  }
}

export class RemoteDispatchNotConfiguredError extends DagError {
  override readonly name = 'RemoteDispatchNotConfiguredError';
  readonly code = 'MOCRA_ERR_DAG_REMOTE_DISPATCH_NOT_CONFIGURED';
  readonly retryable = false;
  constructor(
    readonly nodeId: string,
    readonly workerGroup: string,
  ) {
    super(
      `node '${nodeId}' is placed on worker group '${workerGroup}' but the scheduler has no dispatcher; ` +
        'pass `dispatcher` in the scheduler options',
    );
  }
}

// ── payloads and envelopes ───────────────────────────────────────────────────────────────────

export type InvalidEnvelopeReason =
  | 'bad-magic'
  | 'truncated'
  | 'trailing-bytes'
  | 'invalid-utf8'
  | 'invalid-field'
  | 'duplicate-key';

export class InvalidEnvelopeError extends DagError {
  override readonly name = 'InvalidEnvelopeError';
  readonly code = 'MOCRA_ERR_DAG_INVALID_ENVELOPE';
  readonly retryable = false;
  constructor(
    readonly reason: InvalidEnvelopeReason,
    detail: string,
  ) {
    super(`invalid envelope (${reason}): ${detail}`);
  }
}

export class UnsupportedEnvelopeVersionError extends DagError {
  override readonly name = 'UnsupportedEnvelopeVersionError';
  readonly code = 'MOCRA_ERR_DAG_UNSUPPORTED_ENVELOPE_VERSION';
  readonly retryable = false;
  constructor(
    readonly version: number,
    readonly supported: number,
  ) {
    super(`envelope version ${version} is not supported; this build reads version ${supported}`);
  }
}

export class InvalidPayloadError extends DagError {
  override readonly name = 'InvalidPayloadError';
  readonly code = 'MOCRA_ERR_DAG_INVALID_PAYLOAD';
  readonly retryable = false;
  constructor(message: string, options: DagErrorOptions = {}) {
    super(message, options);
  }
}

function describe(value: unknown): string {
  if (value instanceof Error) {
    const code = (value as Error & { code?: unknown }).code;
    return typeof code === 'string' ? `${value.message} (${code})` : value.message;
  }
  return String(value);
}
