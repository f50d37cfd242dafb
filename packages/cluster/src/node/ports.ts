import type { SerializedClusterError } from '../errors.js';
import type { NodeId, RaftMessage } from '../raft/types.js';
import type { CommandEnvelope } from '../state/commands.js';

/**
 * The ports a {@link ClusterNode} runs against. Production plugs in the wall clock, undici and
 * LevelDB; the simulator plugs in virtual time, a faulty network and a model disk. Keeping every
 * source of time, randomness and I/O behind these is what makes a simulation run replayable.
 */

export interface Clock {
  /**
   * Wall-clock epoch ms: deadlines of this node's own calls, and the start of a new cluster's
   * time. No lease or TTL depends on it.
   */
  now(): number;
  /**
   * Milliseconds on a clock that never jumps (`performance.now()`), any origin. The leader stamps
   * commands with it; lock and TTL time is measured on it (see `ControlState.now`).
   */
  monotonic(): number;
  /** Call `fn` after `ms`; returns a function that cancels the timer. */
  setTimer(fn: () => void, ms: number): () => void;
  /** Call `fn` once the current turn ends (batching point for proposals, reads and writes). */
  defer(fn: () => void): void;
}

/** Requests a node answers for its peers (and for nodes that are joining). */
export type NodeRequest =
  | { readonly kind: 'propose'; readonly env: CommandEnvelope }
  | { readonly kind: 'join'; readonly id: NodeId; readonly addr: string }
  | { readonly kind: 'remove'; readonly id: NodeId }
  | { readonly kind: 'transfer'; readonly to: NodeId | null }
  /** A message of the application running on the nodes (see `ClusterNode.onAppRequest`); never touches Raft. */
  | { readonly kind: 'app'; readonly topic: string; readonly body: unknown };

export type NodeResponse =
  | { readonly ok: true; readonly result: unknown }
  | { readonly ok: false; readonly error: SerializedClusterError };

export interface PeerTransport {
  /** Best-effort, unordered delivery of Raft messages to the node `to` at `addr`. Never throws. */
  send(to: NodeId, addr: string, messages: readonly RaftMessage[]): void;
  /** Ask the node at `addr`; rejects on network failure or after `timeoutMs`. */
  call(addr: string, request: NodeRequest, timeoutMs: number): Promise<NodeResponse>;
  /** Register the callback for "a peer says this node was removed from the cluster". */
  onRemoved?(listener: () => void): void;
  close(): Promise<void>;
}

/** What a node serves to its transport's server side. */
export interface PeerHandler {
  /**
   * Raft messages from a peer. `fromAddr` is where the sender says it can be reached: a node that
   * is joining knows nobody's address yet and answers its first leader through it.
   */
  handleMessages(messages: readonly RaftMessage[], fromAddr?: string): void;
  handleRequest(request: NodeRequest): Promise<NodeResponse>;
  /**
   * Whether `id` was removed by a committed configuration change. Its messages are refused
   * (HTTP 410), which is how a removed node that missed its own removal finds out.
   */
  isRetired(id: NodeId): boolean;
}
