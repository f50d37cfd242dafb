/**
 * Every error @mocra/cluster raises. Each class carries a stable `code` (listed in
 * `docs/errors.md`; a test keeps the table and the docs in step), the `cause` it wraps, a
 * `retryable` flag that says whether trying the same thing again may help, and readonly context
 * fields naming the problem.
 *
 * This package depends on no other mocra package, so it has its own base class,
 * {@link ClusterError}. Its shape (`code` starting with `MOCRA_ERR_`, `retryable`, `toJSON`)
 * matches `MocraError` in `@mocra/core`, so code that handles mocra errors handles these too.
 */

/** Every code this package can raise, with the one-line meaning shown in docs/errors.md. */
export const CLUSTER_ERROR_CODES = {
  MOCRA_ERR_CLUSTER_INVALID_CONFIG:
    'The cluster configuration cannot be used (bad node id, address, data dir, seeds or timing).',
  MOCRA_ERR_CLUSTER_INVALID_ARGUMENT:
    'A cluster API call got an argument it cannot use (empty key, bad TTL…).',
  MOCRA_ERR_CLUSTER_INVALID_MESSAGE:
    'A peer or client sent a request body that is not a valid cluster message.',
  MOCRA_ERR_CLUSTER_UNAUTHORIZED: 'A request between nodes carried no shared secret or the wrong one.',
  MOCRA_ERR_CLUSTER_NO_LEADER: 'No leader was reachable before the deadline; the operation did not run.',
  MOCRA_ERR_CLUSTER_STARTING:
    'The node asked is listening but still opening its log; the request did not run (retried by joins and forwards).',
  MOCRA_ERR_CLUSTER_NOT_LEADER: 'A leader-only request reached a node that is not the leader.',
  MOCRA_ERR_CLUSTER_TIMEOUT:
    'The operation did not finish before its deadline; a write may or may not have been applied.',
  MOCRA_ERR_CLUSTER_CLOSED: 'The node was closed (or is closing) while the operation was pending.',
  MOCRA_ERR_CLUSTER_REMOVED: 'This node was removed from the cluster and no longer serves requests.',
  MOCRA_ERR_CLUSTER_CONFIG_CHANGE_PENDING:
    'Another membership change has not committed yet; try again shortly.',
  MOCRA_ERR_CLUSTER_UNKNOWN_NODE: 'The node named in a membership or transfer request is not a member.',
  MOCRA_ERR_CLUSTER_NODE_ID_RETIRED:
    'A node id that was removed from the cluster tried to join again; ids are never reused.',
  MOCRA_ERR_CLUSTER_DATA_LOST:
    'A voter asked to join again with an empty data directory (it lost its log, and with it its votes); remove it and join under a new id.',
  MOCRA_ERR_CLUSTER_TRANSFER_FAILED:
    'Leadership did not move to the requested node before the transfer timed out.',
  MOCRA_ERR_CLUSTER_JOIN_FAILED:
    'The node could not join the cluster through any of its seeds before the deadline.',
  MOCRA_ERR_CLUSTER_SESSION_EXPIRED:
    'The client session was dropped, so a retried request can no longer be told apart from a new one.',
  MOCRA_ERR_CLUSTER_FENCING_REJECTED:
    'A fenced resource refused a token lower than the highest it has already seen (a stale lock holder).',
  MOCRA_ERR_CLUSTER_COMMAND_FAILED:
    'The state machine rejected a command (for example, incrementing a non-integer).',
  MOCRA_ERR_CLUSTER_STORAGE: 'The LevelDB log could not be opened, read or written.',
  MOCRA_ERR_CLUSTER_STORAGE_CORRUPT:
    'The LevelDB log failed its checks on open (bad checksum, gap, or a torn batch that cannot be repaired).',
  MOCRA_ERR_CLUSTER_IDENTITY_MISMATCH: 'The data directory belongs to a different node id.',
} as const;

export type ClusterErrorCode = keyof typeof CLUSTER_ERROR_CODES;

export interface ClusterErrorOptions {
  /** The error this one wraps. */
  cause?: unknown;
}

/** A JSON-safe view of an error, as sent between nodes and returned by {@link ClusterError.toJSON}. */
export interface SerializedClusterError {
  readonly name: string;
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly cause?: string;
}

/** Base class of every error @mocra/cluster raises. `code` is stable across versions; `message` is not. */
export class ClusterError extends Error {
  override readonly name: string = 'ClusterError';
  readonly code: ClusterErrorCode;
  /** Whether doing the same thing again may succeed. */
  readonly retryable: boolean;

  constructor(
    code: ClusterErrorCode,
    message: string,
    retryable: boolean,
    options: ClusterErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = retryable;
  }

  toJSON(): SerializedClusterError {
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

export class ClusterConfigError extends ClusterError {
  override readonly name = 'ClusterConfigError';
  constructor(message: string, options: ClusterErrorOptions = {}) {
    super('MOCRA_ERR_CLUSTER_INVALID_CONFIG', message, false, options);
  }
}

export class ClusterArgumentError extends ClusterError {
  override readonly name = 'ClusterArgumentError';
  constructor(message: string) {
    super('MOCRA_ERR_CLUSTER_INVALID_ARGUMENT', message, false);
  }
}

export class InvalidClusterMessageError extends ClusterError {
  override readonly name = 'InvalidClusterMessageError';
  constructor(message: string, options: ClusterErrorOptions = {}) {
    super('MOCRA_ERR_CLUSTER_INVALID_MESSAGE', message, false, options);
  }
}

export class ClusterUnauthorizedError extends ClusterError {
  override readonly name = 'ClusterUnauthorizedError';
  constructor(message = 'missing or wrong cluster secret') {
    super('MOCRA_ERR_CLUSTER_UNAUTHORIZED', message, false);
  }
}

export class NoLeaderError extends ClusterError {
  override readonly name = 'NoLeaderError';
  constructor(message = 'no leader is known; the cluster may be electing one') {
    super('MOCRA_ERR_CLUSTER_NO_LEADER', message, true);
  }
}

/** A peer is listening but has not opened its log yet: normal while nodes start together. */
export class NodeStartingError extends ClusterError {
  override readonly name = 'NodeStartingError';
  constructor(message = 'node is starting; try again shortly') {
    super('MOCRA_ERR_CLUSTER_STARTING', message, true);
  }
}

export class NotLeaderError extends ClusterError {
  override readonly name = 'NotLeaderError';
  /** The node this one believes is the leader, when it knows one. */
  readonly leaderId: string | undefined;
  readonly leaderAddr: string | undefined;
  constructor(leaderId: string | undefined, leaderAddr: string | undefined) {
    super(
      'MOCRA_ERR_CLUSTER_NOT_LEADER',
      leaderId === undefined
        ? 'this node is not the leader and knows none'
        : `this node is not the leader; try ${leaderId}`,
      true,
    );
    this.leaderId = leaderId;
    this.leaderAddr = leaderAddr;
  }
}

export class ClusterTimeoutError extends ClusterError {
  override readonly name = 'ClusterTimeoutError';
  /** What timed out, e.g. `set`, `read`, `join`. */
  readonly operation: string;
  constructor(operation: string, timeoutMs: number, options: ClusterErrorOptions = {}) {
    super(
      'MOCRA_ERR_CLUSTER_TIMEOUT',
      `${operation} did not finish within ${timeoutMs} ms; a write may or may not have been applied`,
      true,
      options,
    );
    this.operation = operation;
  }
}

export class ClusterClosedError extends ClusterError {
  override readonly name = 'ClusterClosedError';
  constructor() {
    super('MOCRA_ERR_CLUSTER_CLOSED', 'the cluster node is closed', false);
  }
}

export class NodeRemovedError extends ClusterError {
  override readonly name = 'NodeRemovedError';
  constructor(nodeId: string) {
    super('MOCRA_ERR_CLUSTER_REMOVED', `node ${nodeId} was removed from the cluster`, false);
  }
}

export class ConfigChangePendingError extends ClusterError {
  override readonly name = 'ConfigChangePendingError';
  constructor(message = 'a membership change is still in progress') {
    super('MOCRA_ERR_CLUSTER_CONFIG_CHANGE_PENDING', message, true);
  }
}

export class UnknownNodeError extends ClusterError {
  override readonly name = 'UnknownNodeError';
  readonly nodeId: string;
  constructor(nodeId: string) {
    super('MOCRA_ERR_CLUSTER_UNKNOWN_NODE', `node ${nodeId} is not a member of the cluster`, false);
    this.nodeId = nodeId;
  }
}

export class NodeIdRetiredError extends ClusterError {
  override readonly name = 'NodeIdRetiredError';
  readonly nodeId: string;
  constructor(nodeId: string) {
    super(
      'MOCRA_ERR_CLUSTER_NODE_ID_RETIRED',
      `node id ${nodeId} was removed from this cluster and cannot be reused; pick a new id`,
      false,
    );
    this.nodeId = nodeId;
  }
}

export class VoterDataLostError extends ClusterError {
  override readonly name = 'VoterDataLostError';
  readonly nodeId: string;
  constructor(nodeId: string) {
    super(
      'MOCRA_ERR_CLUSTER_DATA_LOST',
      `node ${nodeId} is a voter but came back with an empty log; remove it (removeNode) and join under a new id`,
      false,
    );
    this.nodeId = nodeId;
  }
}

export class TransferFailedError extends ClusterError {
  override readonly name = 'TransferFailedError';
  constructor(message: string) {
    super('MOCRA_ERR_CLUSTER_TRANSFER_FAILED', message, true);
  }
}

export class JoinFailedError extends ClusterError {
  override readonly name = 'JoinFailedError';
  constructor(message: string, options: ClusterErrorOptions = {}) {
    super('MOCRA_ERR_CLUSTER_JOIN_FAILED', message, true, options);
  }
}

export class SessionExpiredError extends ClusterError {
  override readonly name = 'SessionExpiredError';
  constructor(clientId: string, seq: number) {
    super(
      'MOCRA_ERR_CLUSTER_SESSION_EXPIRED',
      `request ${seq} of client ${clientId} is older than the session keeps; its outcome is unknown`,
      false,
    );
  }
}

export class CommandFailedError extends ClusterError {
  override readonly name = 'CommandFailedError';
  constructor(message: string) {
    super('MOCRA_ERR_CLUSTER_COMMAND_FAILED', message, false);
  }
}

export class FencingRejectedError extends ClusterError {
  override readonly name = 'FencingRejectedError';
  readonly key: string;
  readonly token: number;
  readonly highest: number;
  constructor(key: string, token: number, highest: number) {
    super(
      'MOCRA_ERR_CLUSTER_FENCING_REJECTED',
      `token ${token} for ${key} is older than token ${highest} already seen; the lock was lost`,
      false,
    );
    this.key = key;
    this.token = token;
    this.highest = highest;
  }
}

export class ClusterStorageError extends ClusterError {
  override readonly name = 'ClusterStorageError';
  constructor(message: string, options: ClusterErrorOptions = {}) {
    super('MOCRA_ERR_CLUSTER_STORAGE', message, false, options);
  }
}

export class StorageCorruptError extends ClusterError {
  override readonly name = 'StorageCorruptError';
  constructor(message: string) {
    super('MOCRA_ERR_CLUSTER_STORAGE_CORRUPT', message, false);
  }
}

export class IdentityMismatchError extends ClusterError {
  override readonly name = 'IdentityMismatchError';
  constructor(expected: string, found: string) {
    super(
      'MOCRA_ERR_CLUSTER_IDENTITY_MISMATCH',
      `the data directory belongs to node ${found}, not ${expected}`,
      false,
    );
  }
}

/** Rebuild an error sent by a peer (see {@link ClusterError.toJSON}) so callers can match on `code`. */
export function errorFromJSON(json: SerializedClusterError): ClusterError {
  const code = (
    json.code in CLUSTER_ERROR_CODES ? json.code : 'MOCRA_ERR_CLUSTER_INVALID_MESSAGE'
  ) as ClusterErrorCode;
  const err = new ClusterError(code, json.message, json.retryable);
  return err;
}
