/**
 * The data the Raft core works on: log entries, the cluster configuration, snapshots, the hard
 * state that must survive a crash, and the messages nodes exchange. Everything here is plain
 * JSON-safe data so the same values travel over HTTP, sit in LevelDB and run in the simulator.
 */

export type NodeId = string;

/**
 * `noop` is the entry a new leader appends so it can commit something in its own term (Raft
 * §5.4.2); `command` carries state-machine input; `config` carries a whole new
 * {@link RaftConfiguration} (single-server change, active as soon as it is in the log).
 */
export type EntryKind = 'noop' | 'command' | 'config';

export interface LogEntry {
  readonly index: number;
  readonly term: number;
  readonly kind: EntryKind;
  /** Command JSON for `command`, configuration JSON for `config`, empty for `noop`. */
  readonly data: string;
}

export interface RaftMember {
  readonly id: NodeId;
  /** `host:port` of the node's HTTP endpoint. */
  readonly addr: string;
  /** Voters elect and count toward commit; learners only receive the log. */
  readonly voter: boolean;
}

/**
 * The cluster membership as of some log index. `retired` lists ids that were removed: ids are
 * never reused, so a removed node that comes back with an empty disk cannot vote twice in a term.
 */
export interface RaftConfiguration {
  readonly members: readonly RaftMember[];
  readonly retired: readonly NodeId[];
}

/** A single-server membership change (Raft thesis §4.1): at most one is uncommitted at a time. */
export type ConfigChange =
  | { readonly op: 'add-learner'; readonly id: NodeId; readonly addr: string }
  | { readonly op: 'promote'; readonly id: NodeId }
  | { readonly op: 'remove'; readonly id: NodeId };

export interface SnapshotMeta {
  /** Last log index the snapshot covers. */
  readonly index: number;
  readonly term: number;
  /** The configuration in force at `index`. */
  readonly config: RaftConfiguration;
}

export interface Snapshot {
  readonly meta: SnapshotMeta;
  /** The serialized state machine, opaque to Raft. */
  readonly data: string;
}

/** What must be on disk before the node answers anyone (Raft Figure 2, "persistent state"). */
export interface HardState {
  readonly term: number;
  readonly vote: NodeId | null;
  /** Not required for safety; persisted so a restarted node can apply known-committed entries at once. */
  readonly commit: number;
}

export type Role = 'follower' | 'pre-candidate' | 'candidate' | 'leader';

interface Envelope {
  readonly from: NodeId;
  readonly to: NodeId;
  readonly term: number;
}

export interface AppendMessage extends Envelope {
  readonly type: 'append';
  readonly prevIndex: number;
  readonly prevTerm: number;
  readonly entries: readonly LogEntry[];
  readonly commit: number;
}

export interface AppendResponse extends Envelope {
  readonly type: 'append-resp';
  readonly reject: boolean;
  /** Accepted: the follower's last index matching the leader. Rejected: the prevIndex it could not match. */
  readonly index: number;
  /** Rejected only: a guess at where the logs agree (largest index ≤ index with term ≤ hintTerm). */
  readonly hintIndex: number;
  readonly hintTerm: number;
}

export interface HeartbeatMessage extends Envelope {
  readonly type: 'heartbeat';
  /** min(leader commit, follower match): a follower must never commit past what it is known to match. */
  readonly commit: number;
  /** ReadIndex round this heartbeat confirms leadership for (0 = none). */
  readonly round: number;
}

export interface HeartbeatResponse extends Envelope {
  readonly type: 'heartbeat-resp';
  readonly round: number;
}

export interface VoteMessage extends Envelope {
  readonly type: 'vote';
  /** Pre-vote (thesis §9.6): asks "would you vote for me?" without anyone changing term. */
  readonly pre: boolean;
  /** Sent because of a leadership transfer: voters skip the leader-lease check. */
  readonly transfer: boolean;
  readonly lastIndex: number;
  readonly lastTerm: number;
}

export interface VoteResponse extends Envelope {
  readonly type: 'vote-resp';
  readonly pre: boolean;
  readonly reject: boolean;
}

export interface SnapshotMessage extends Envelope {
  readonly type: 'snapshot';
  readonly snapshot: Snapshot;
}

export interface TimeoutNowMessage extends Envelope {
  readonly type: 'timeout-now';
}

export interface ReadIndexMessage extends Envelope {
  readonly type: 'read-index';
  readonly ctx: string;
}

export interface ReadIndexResponse extends Envelope {
  readonly type: 'read-index-resp';
  readonly ctx: string;
  /** The commit index the reader must wait for; -1 when the leader refused. */
  readonly index: number;
}

export type RaftMessage =
  | AppendMessage
  | AppendResponse
  | HeartbeatMessage
  | HeartbeatResponse
  | VoteMessage
  | VoteResponse
  | SnapshotMessage
  | TimeoutNowMessage
  | ReadIndexMessage
  | ReadIndexResponse;

export type RaftMessageType = RaftMessage['type'];

/** The outcome of a ReadIndex request: wait until `index` is applied, then read. -1 = failed. */
export interface ReadState {
  readonly ctx: string;
  readonly index: number;
}

/**
 * What the host must do next, in this order:
 *   1. persist `snapshot` (if any), then `entries`, then `hardState`, in one synced write;
 *   2. send `messages` (they promise what step 1 made durable);
 *   3. apply `committed` to the state machine and serve `readStates` once applied;
 *   4. call `advance(ready)`.
 * Messages that do not depend on local durability (leader replication traffic) are handed out
 * earlier by `takeUrgentMessages()` so the leader writes its own log in parallel with followers.
 */
export interface Ready {
  readonly hardState: HardState | undefined;
  readonly snapshot: Snapshot | undefined;
  readonly entries: readonly LogEntry[];
  readonly messages: readonly RaftMessage[];
  readonly committed: readonly LogEntry[];
  readonly readStates: readonly ReadState[];
}

export const EMPTY_CONFIGURATION: RaftConfiguration = Object.freeze({ members: [], retired: [] });
