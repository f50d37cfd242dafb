import {
  applyConfigChange,
  decodeConfiguration,
  encodeConfiguration,
  findMember,
  isVoter,
  quorumSize,
  quorumValue,
  voterIds,
} from './configuration.js';
import { Progress } from './progress.js';
import { RaftLog } from './raft-log.js';
import type {
  AppendMessage,
  AppendResponse,
  ConfigChange,
  HardState,
  HeartbeatMessage,
  LogEntry,
  NodeId,
  RaftConfiguration,
  RaftMessage,
  ReadState,
  Ready,
  Role,
  Snapshot,
  SnapshotMessage,
  SnapshotMeta,
  VoteMessage,
} from './types.js';
import { EMPTY_CONFIGURATION } from './types.js';

/**
 * The deterministic Raft core: no clock, no timers, no I/O, no promises. Time moves only when the
 * host calls {@link RaftCore.tick}; randomness comes from the injected `random`; messages come in
 * through {@link RaftCore.step} and go out through {@link RaftCore.ready} /
 * {@link RaftCore.takeUrgentMessages}. The same object runs in the simulator and in production.
 *
 * Implemented (Raft paper and Ongaro's thesis, with etcd-io/raft's refinements):
 *  - election with pre-vote (§9.6) and check-quorum; votes are ignored while a leader lease holds;
 *  - replication with batching, pipelining (optimistic `next`, bounded in-flight window), fast
 *    backtracking by term, and a no-op entry on election;
 *  - commit only of current-term entries counted over a quorum that includes the leader's own
 *    *durable* log;
 *  - ReadIndex reads (leader and follower) confirmed by a heartbeat round;
 *  - snapshots, compaction and InstallSnapshot;
 *  - single-server membership changes active on append, learners promoted once caught up, leader
 *    removal (the leader stops counting itself, and hands off after the change commits), and an
 *    opt-in removal of voters that stopped answering (never below `minVoters`);
 *  - leadership transfer (TimeoutNow, which bypasses pre-vote and the lease).
 */

export interface RaftCoreOptions {
  readonly id: NodeId;
  /** Ticks without hearing from a leader before a follower campaigns (randomized up to 2×). @default 10 */
  readonly electionTicks?: number;
  /** Ticks between leader heartbeats. Must be well below `electionTicks`. @default 1 */
  readonly heartbeatTicks?: number;
  /** Most entries in one AppendEntries. @default 512 */
  readonly maxEntriesPerAppend?: number;
  /** About the most entry bytes in one AppendEntries. @default 1048576 */
  readonly maxBytesPerAppend?: number;
  /** AppendEntries in flight per follower in replicate state (pipelining window). @default 64 */
  readonly maxInflight?: number;
  /** Most committed entries handed out by one `ready()`. @default 4096 */
  readonly maxApplyBatch?: number;
  /** Run a pre-vote round before a real election. @default true */
  readonly preVote?: boolean;
  /** A leader steps down when it has not heard from a quorum for an election timeout. @default true */
  readonly checkQuorum?: boolean;
  /** Promote learners to voters once they have caught up. @default true */
  readonly autoPromote?: boolean;
  /** Learners are not promoted beyond this many voters. @default 7 */
  readonly maxVoters?: number;
  /**
   * The leader removes a voter it has not heard from for this many ticks (one at a time, while it
   * has a quorum); 0 turns the rule off. @default 0
   */
  readonly deadVoterTicks?: number;
  /** The dead-voter rule never shrinks the voters below this many. @default 3 */
  readonly minVoters?: number;
  /** A number in [0, 1); the only source of randomness (election timeouts). */
  readonly random: () => number;
}

/** What a node recovers from disk. */
export interface RaftRestoreState {
  readonly hardState: HardState;
  readonly snapshot: Snapshot | undefined;
  /** Entries after the snapshot, contiguous. */
  readonly entries: readonly LogEntry[];
}

export type ProposeResult =
  | { readonly ok: true; readonly index: number; readonly term: number }
  | {
      readonly ok: false;
      readonly reason:
        | 'not-leader'
        | 'transferring'
        | 'config-pending'
        | 'not-committed-in-term'
        | 'unknown-node'
        | 'retired'
        | 'last-voter'
        | 'no-op';
    };

export interface RaftProgressView {
  readonly id: NodeId;
  readonly match: number;
  readonly next: number;
  readonly state: string;
  readonly recentActive: boolean;
}

export interface RaftStatus {
  readonly id: NodeId;
  readonly role: Role;
  readonly term: number;
  readonly vote: NodeId | null;
  readonly leader: NodeId | null;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  readonly lastIndex: number;
  readonly lastTerm: number;
  readonly stableIndex: number;
  readonly snapshotIndex: number;
  readonly config: RaftConfiguration;
  readonly configIndex: number;
  readonly transferee: NodeId | null;
  readonly progress: readonly RaftProgressView[];
}

/** Notifications for observers (metrics, the simulator's invariant checks). Never affect behaviour. */
export type RaftEvent =
  | { readonly type: 'role'; readonly role: Role; readonly term: number; readonly leader: NodeId | null }
  | { readonly type: 'log-changed'; readonly from: number }
  | { readonly type: 'commit'; readonly index: number }
  /** The leader proposed removing `id`, a voter silent for `silentTicks` (the dead-voter rule). */
  | { readonly type: 'dead-voter'; readonly id: NodeId; readonly silentTicks: number }
  | { readonly type: 'snapshot-restored'; readonly index: number; readonly term: number };

interface ConfigRecord {
  readonly index: number;
  readonly term: number;
  readonly config: RaftConfiguration;
}

interface ReadRequest {
  readonly ctx: string;
  readonly from: NodeId;
}

interface PendingRead extends ReadRequest {
  readonly round: number;
  readonly index: number;
}

const REPLICATION_TYPES = new Set(['append', 'heartbeat', 'snapshot', 'timeout-now', 'read-index-resp']);

export class RaftCore {
  readonly id: NodeId;
  readonly #electionTicks: number;
  readonly #heartbeatTicks: number;
  readonly #maxEntries: number;
  readonly #maxBytes: number;
  readonly #maxInflight: number;
  readonly #maxApplyBatch: number;
  readonly #preVote: boolean;
  readonly #checkQuorum: boolean;
  readonly #autoPromote: boolean;
  readonly #maxVoters: number;
  readonly #deadVoterTicks: number;
  readonly #minVoters: number;
  readonly #random: () => number;

  #term: number;
  #vote: NodeId | null;
  #role: Role = 'follower';
  #leader: NodeId | null = null;
  readonly #log: RaftLog;
  /** Configurations in the log, oldest first; [0] is the one in force at the log base. */
  #configs: ConfigRecord[];
  /** The newest local snapshot (sent to followers that fell behind compaction). */
  #snapshot: Snapshot | undefined;
  /** A snapshot received from the leader that the host has not persisted yet. */
  #pendingSnapshot: Snapshot | undefined;

  #progress = new Map<NodeId, Progress>();
  #votes = new Map<NodeId, boolean>();
  #electionElapsed = 0;
  #heartbeatElapsed = 0;
  #randomizedElectionTimeout = 0;
  #transferee: NodeId | null = null;
  #transferElapsed = 0;

  #urgent: RaftMessage[] = [];
  #deferred: RaftMessage[] = [];
  #readStates: ReadState[] = [];
  #needBroadcast = false;

  /** Reads waiting for the leader to commit its first entry of the term. */
  #readsAwaitingCommit: ReadRequest[] = [];
  /** Reads waiting for a heartbeat round to be acknowledged by a quorum. */
  #readsAwaitingRound: PendingRead[] = [];
  #readRound = 0;
  #readAcks = new Map<NodeId, number>();

  /** The hard state the host has made durable, and the last one handed out in a Ready. */
  #durable: HardState;
  #handedOut: HardState;

  #listener: ((event: RaftEvent) => void) | undefined;

  constructor(options: RaftCoreOptions, restored: RaftRestoreState) {
    this.id = options.id;
    this.#electionTicks = options.electionTicks ?? 10;
    this.#heartbeatTicks = options.heartbeatTicks ?? 1;
    if (this.#heartbeatTicks >= this.#electionTicks) {
      throw new RangeError('heartbeatTicks must be smaller than electionTicks');
    }
    this.#maxEntries = options.maxEntriesPerAppend ?? 512;
    this.#maxBytes = options.maxBytesPerAppend ?? 1024 * 1024;
    this.#maxInflight = options.maxInflight ?? 64;
    this.#maxApplyBatch = options.maxApplyBatch ?? 4096;
    this.#preVote = options.preVote ?? true;
    this.#checkQuorum = options.checkQuorum ?? true;
    this.#autoPromote = options.autoPromote ?? true;
    this.#maxVoters = options.maxVoters ?? 7;
    this.#deadVoterTicks = options.deadVoterTicks ?? 0;
    this.#minVoters = options.minVoters ?? 3;
    this.#random = options.random;

    const snap = restored.snapshot;
    const baseIndex = snap?.meta.index ?? 0;
    const baseTerm = snap?.meta.term ?? 0;
    this.#log = new RaftLog(baseIndex, baseTerm, restored.entries, restored.hardState.commit);
    this.#snapshot = snap;
    this.#configs = [{ index: baseIndex, term: baseTerm, config: snap?.meta.config ?? EMPTY_CONFIGURATION }];
    for (const e of restored.entries) {
      if (e.kind === 'config')
        this.#configs.push({ index: e.index, term: e.term, config: decodeConfiguration(e.data) });
    }
    this.#term = restored.hardState.term;
    this.#vote = restored.hardState.vote;
    this.#durable = { term: this.#term, vote: this.#vote, commit: this.#log.committed };
    this.#handedOut = this.#durable;
    this.#resetRandomizedTimeout();
  }

  /** Subscribe to {@link RaftEvent}s (one listener; the host fans out). */
  setListener(listener: ((event: RaftEvent) => void) | undefined): void {
    this.#listener = listener;
  }

  // ── queries ──────────────────────────────────────────────────────────────────

  get role(): Role {
    return this.#role;
  }
  get term(): number {
    return this.#term;
  }
  get leader(): NodeId | null {
    return this.#leader;
  }
  get commitIndex(): number {
    return this.#log.committed;
  }
  get appliedIndex(): number {
    return this.#log.applied;
  }
  get lastIndex(): number {
    return this.#log.lastIndex();
  }
  get config(): RaftConfiguration {
    return this.#configs[this.#configs.length - 1]!.config;
  }
  get configIndex(): number {
    return this.#configs[this.#configs.length - 1]!.index;
  }
  /** True once the leader has committed an entry of its own term (ReadIndex and config changes need it). */
  get committedInTerm(): boolean {
    return this.#log.term(this.#log.committed) === this.#term;
  }

  /** The entry at `index` if it is still in memory (tests and the simulator inspect logs with this). */
  entryAt(index: number): LogEntry | undefined {
    return this.#log.entry(index);
  }
  termAt(index: number): number | undefined {
    return this.#log.term(index);
  }
  get firstIndex(): number {
    return this.#log.firstIndex();
  }

  /** Configuration in force at `index` (the newest config entry at or before it). */
  configAt(index: number): RaftConfiguration {
    let found = this.#configs[0]!.config;
    for (const rec of this.#configs) {
      if (rec.index <= index) found = rec.config;
      else break;
    }
    return found;
  }

  status(): RaftStatus {
    return {
      id: this.id,
      role: this.#role,
      term: this.#term,
      vote: this.#vote,
      leader: this.#leader,
      commitIndex: this.#log.committed,
      appliedIndex: this.#log.applied,
      lastIndex: this.#log.lastIndex(),
      lastTerm: this.#log.lastTerm(),
      stableIndex: this.#log.stable,
      snapshotIndex: this.#snapshot?.meta.index ?? 0,
      config: this.config,
      configIndex: this.configIndex,
      transferee: this.#transferee,
      progress: [...this.#progress].map(([id, p]) => ({
        id,
        match: p.match,
        next: p.next,
        state: p.state,
        recentActive: p.recentActive,
      })),
    };
  }

  // ── inputs ───────────────────────────────────────────────────────────────────

  /** One unit of logical time. */
  tick(): void {
    if (this.#role === 'leader') this.#tickLeader();
    else this.#tickElection();
  }

  /** Start an election now (tests and bootstrapping; normally ticks do this). */
  campaign(): void {
    if (this.#role === 'leader' || !this.#promotable()) return;
    this.#campaign(this.#preVote ? 'pre' : 'normal');
  }

  /** Append a state-machine command (leader only). */
  propose(data: string): ProposeResult {
    if (this.#role !== 'leader') return { ok: false, reason: 'not-leader' };
    if (this.#transferee !== null) return { ok: false, reason: 'transferring' };
    return this.#appendLocal('command', data);
  }

  /** Append a single-server membership change (leader only, one uncommitted change at a time). */
  proposeConfigChange(change: ConfigChange): ProposeResult {
    if (this.#role !== 'leader') return { ok: false, reason: 'not-leader' };
    if (this.#transferee !== null) return { ok: false, reason: 'transferring' };
    // Thesis §4.1 / Ongaro's 2015 fix: a leader must commit an entry of its own term before it
    // changes the configuration, and may have only one change in flight.
    if (!this.committedInTerm) return { ok: false, reason: 'not-committed-in-term' };
    if (this.configIndex > this.#log.committed) return { ok: false, reason: 'config-pending' };
    const result = applyConfigChange(this.config, change);
    if (!result.ok) return { ok: false, reason: result.reason };
    return this.#appendLocal('config', encodeConfiguration(result.config));
  }

  /**
   * Ask for a linearizable read point. The answer arrives as a {@link ReadState} with the same
   * `ctx` in a later `ready()`: serve the read once the state machine has applied `index`.
   */
  readIndex(ctx: string): void {
    if (this.#role === 'leader') {
      this.#leaderRead({ ctx, from: this.id });
    } else if (this.#leader !== null && this.#leader !== this.id) {
      this.#send({ type: 'read-index', from: this.id, to: this.#leader, term: this.#term, ctx });
    } else {
      this.#readStates.push({ ctx, index: -1 });
    }
  }

  /** Hand leadership to `to` (leader only). Returns false when that cannot start. */
  transferLeadership(to: NodeId): boolean {
    if (this.#role !== 'leader' || to === this.id || !isVoter(this.config, to)) return false;
    const pr = this.#progress.get(to);
    if (!pr) return false;
    this.#transferee = to;
    this.#transferElapsed = 0;
    if (pr.match === this.#log.lastIndex()) this.#sendTimeoutNow(to);
    else this.#sendAppend(to, true);
    return true;
  }

  /** A message from a peer. Malformed or misaddressed messages are dropped by the transport. */
  step(m: RaftMessage): void {
    if (m.term > this.#term) {
      if (m.type === 'vote') {
        const inLease =
          this.#checkQuorum && this.#leader !== null && this.#electionElapsed < this.#electionTicks;
        // A node that heard from a leader recently ignores campaigns (so a flapping or removed
        // node cannot depose a healthy leader), unless the campaign comes from a transfer.
        if (inLease && !m.transfer) return;
      }
      if (m.type === 'vote' && m.pre) {
        // Pre-votes never change anyone's term.
      } else if (m.type === 'vote-resp' && m.pre && !m.reject) {
        // A granted pre-vote carries the term we would campaign in; it is counted below.
      } else {
        const lead = m.type === 'append' || m.type === 'heartbeat' || m.type === 'snapshot' ? m.from : null;
        this.#becomeFollower(m.term, lead);
      }
    } else if (m.term < this.#term) {
      if ((this.#checkQuorum || this.#preVote) && (m.type === 'append' || m.type === 'heartbeat')) {
        // A stale leader (say, back from a partition) learns our term and steps down; without this
        // a node that raised its term could never be heard from again (etcd does the same).
        this.#send({
          type: 'append-resp',
          from: this.id,
          to: m.from,
          term: this.#term,
          reject: true,
          index: 0,
          hintIndex: 0,
          hintTerm: 0,
        });
      } else if (m.type === 'vote' && m.pre) {
        this.#send({
          type: 'vote-resp',
          from: this.id,
          to: m.from,
          term: this.#term,
          pre: true,
          reject: true,
        });
      }
      return;
    }

    if (m.type === 'vote') {
      this.#handleVote(m);
      return;
    }

    switch (this.#role) {
      case 'leader':
        this.#stepLeader(m);
        break;
      case 'candidate':
      case 'pre-candidate':
        this.#stepCandidate(m);
        break;
      case 'follower':
        this.#stepFollower(m);
        break;
    }
  }

  /**
   * Messages the host may send right away, before the current write finishes: leader replication
   * traffic in a term that is already durable. Also flushes appends batched since the last call.
   */
  takeUrgentMessages(): RaftMessage[] {
    if (this.#needBroadcast) {
      this.#needBroadcast = false;
      if (this.#role === 'leader') this.#broadcastAppend(false);
    }
    const out = this.#urgent;
    this.#urgent = [];
    return out;
  }

  hasReady(): boolean {
    return (
      this.#needBroadcast ||
      this.#urgent.length > 0 ||
      this.#log.hasUnstable() ||
      this.#pendingSnapshot !== undefined ||
      this.#deferred.length > 0 ||
      this.#log.hasNextCommitted() ||
      this.#readStates.length > 0 ||
      this.#term !== this.#handedOut.term ||
      this.#vote !== this.#handedOut.vote
    );
  }

  /** Take the next batch of work. Call {@link advance} after doing it, before calling this again. */
  ready(): Ready {
    const entries = this.#log.unstableEntries();
    const last = entries[entries.length - 1];
    if (last) this.#log.markInProgress(last.index);
    const snapshot = this.#pendingSnapshot;
    this.#pendingSnapshot = undefined;
    const termOrVoteChanged = this.#term !== this.#handedOut.term || this.#vote !== this.#handedOut.vote;
    // Commit is persisted only alongside something else: it is not needed for safety, and an
    // fsync per commit-index change would double the writes of a follower.
    let hardState: HardState | undefined;
    if (termOrVoteChanged || entries.length > 0 || snapshot !== undefined) {
      hardState = { term: this.#term, vote: this.#vote, commit: this.#log.committed };
      this.#handedOut = hardState;
    }
    const committed = this.#log.nextCommitted(this.#maxApplyBatch);
    const lastCommitted = committed[committed.length - 1];
    if (lastCommitted) this.#log.appliedTo(lastCommitted.index);
    const messages = this.#deferred;
    this.#deferred = [];
    const readStates = this.#readStates;
    this.#readStates = [];
    return { hardState, snapshot, entries, messages, committed, readStates };
  }

  /** The host has made `ready` durable and sent its messages. */
  advance(ready: Ready): void {
    if (ready.hardState) this.#durable = ready.hardState;
    const last = ready.entries[ready.entries.length - 1];
    let stableMoved = false;
    if (last) stableMoved = this.#log.stableTo(last.index, last.term);
    if (this.#role === 'leader' && stableMoved) {
      // The leader's own entry counts toward commit only now that it is on disk.
      if (this.#maybeCommit()) this.#broadcastAppend(false);
    }
  }

  /**
   * The host persisted a snapshot of the state machine at `meta.index` (≤ applied). Entries up to
   * `compactTo` (≤ meta.index) are dropped from memory; keeping a few lets slightly slow followers
   * catch up without a snapshot.
   */
  compact(snapshot: Snapshot, compactTo: number): void {
    if (snapshot.meta.index > this.#log.applied) throw new Error('snapshot beyond applied index');
    if (!this.#snapshot || snapshot.meta.index > this.#snapshot.meta.index) this.#snapshot = snapshot;
    const to = Math.min(compactTo, snapshot.meta.index);
    if (to <= this.#log.baseIndex) return;
    this.#log.compact(to);
    // Keep the configuration in force at the new base as the first record.
    const base = this.configAt(to);
    this.#configs = [
      { index: to, term: this.#log.baseTerm, config: base },
      ...this.#configs.filter((c) => c.index > to),
    ];
    this.#emit({ type: 'log-changed', from: to });
  }

  /** Snapshot metadata for the state at `index` (which must be applied and still in memory). */
  snapshotMetaAt(index: number): SnapshotMeta {
    const term = this.#log.term(index);
    if (term === undefined) throw new Error(`no term known for index ${index}`);
    return { index, term, config: this.configAt(index) };
  }

  // ── roles ────────────────────────────────────────────────────────────────────

  #promotable(): boolean {
    return isVoter(this.config, this.id) && this.#pendingSnapshot === undefined;
  }

  #resetRandomizedTimeout(): void {
    this.#randomizedElectionTimeout = this.#electionTicks + Math.floor(this.#random() * this.#electionTicks);
  }

  #reset(term: number): void {
    if (term !== this.#term) {
      this.#term = term;
      this.#vote = null;
    }
    this.#leader = null;
    this.#electionElapsed = 0;
    this.#heartbeatElapsed = 0;
    this.#resetRandomizedTimeout();
    this.#transferee = null;
    this.#votes = new Map();
    this.#progress = new Map();
    this.#needBroadcast = false;
    this.#failPendingReads();
  }

  #becomeFollower(term: number, leader: NodeId | null): void {
    this.#reset(term);
    this.#role = 'follower';
    this.#leader = leader;
    this.#emit({ type: 'role', role: 'follower', term: this.#term, leader });
  }

  #becomePreCandidate(): void {
    // A pre-candidate changes neither term nor vote, so it does not disturb anyone.
    this.#role = 'pre-candidate';
    this.#leader = null;
    this.#votes = new Map();
    this.#progress = new Map();
    this.#electionElapsed = 0;
    this.#resetRandomizedTimeout();
    this.#failPendingReads();
    this.#emit({ type: 'role', role: 'pre-candidate', term: this.#term, leader: null });
  }

  #becomeCandidate(): void {
    this.#reset(this.#term + 1);
    this.#vote = this.id;
    this.#role = 'candidate';
    this.#emit({ type: 'role', role: 'candidate', term: this.#term, leader: null });
  }

  #becomeLeader(): void {
    this.#reset(this.#term);
    this.#role = 'leader';
    this.#leader = this.id;
    this.#readAcks = new Map();
    for (const m of this.config.members) {
      if (m.id !== this.id) this.#progress.set(m.id, this.#newProgress());
    }
    this.#emit({ type: 'role', role: 'leader', term: this.#term, leader: this.id });
    // Raft §5.4.2 / §8: commit a no-op of this term so earlier entries commit and reads can start.
    this.#appendLocal('noop', '');
    this.#broadcastAppend(true);
    this.#needBroadcast = false;
  }

  #newProgress(): Progress {
    const pr = new Progress(this.#log.lastIndex() + 1, this.#maxInflight);
    pr.recentActive = true;
    return pr;
  }

  #campaign(kind: 'pre' | 'normal' | 'transfer'): void {
    let voteTerm: number;
    if (kind === 'pre') {
      this.#becomePreCandidate();
      voteTerm = this.#term + 1;
    } else {
      this.#becomeCandidate();
      voteTerm = this.#term;
    }
    const voters = voterIds(this.config);
    this.#votes.set(this.id, true);
    if (this.#tally(voters).granted >= quorumSize(voters.length)) {
      if (kind === 'pre') this.#campaign('normal');
      else this.#becomeLeader();
      return;
    }
    for (const v of voters) {
      if (v === this.id) continue;
      this.#send({
        type: 'vote',
        from: this.id,
        to: v,
        term: voteTerm,
        pre: kind === 'pre',
        transfer: kind === 'transfer',
        lastIndex: this.#log.lastIndex(),
        lastTerm: this.#log.lastTerm(),
      });
    }
  }

  #tally(voters: readonly NodeId[]): { granted: number; rejected: number } {
    let granted = 0;
    let rejected = 0;
    for (const v of voters) {
      const vote = this.#votes.get(v);
      if (vote === true) granted++;
      else if (vote === false) rejected++;
    }
    return { granted, rejected };
  }

  // ── ticks ────────────────────────────────────────────────────────────────────

  #tickElection(): void {
    this.#electionElapsed++;
    if (this.#promotable() && this.#electionElapsed >= this.#randomizedElectionTimeout) {
      this.#electionElapsed = 0;
      this.#campaign(this.#preVote ? 'pre' : 'normal');
    }
  }

  #tickLeader(): void {
    this.#heartbeatElapsed++;
    this.#electionElapsed++;
    if (this.#transferee !== null && ++this.#transferElapsed >= this.#electionTicks) {
      this.#transferee = null; // the transfer did not happen in time: keep leading
    }
    if (this.#electionElapsed >= this.#electionTicks) {
      this.#electionElapsed = 0;
      if (this.#checkQuorum) {
        if (!this.#quorumActive()) {
          this.#becomeFollower(this.#term, null);
          return;
        }
        for (const pr of this.#progress.values()) pr.recentActive = false;
      }
    }
    for (const [id, pr] of this.#progress) {
      pr.silentTicks++;
      if (pr.state === 'snapshot' && ++pr.snapshotTicks >= this.#electionTicks) {
        // The snapshot or its answer was lost; probe again (which resends it if still needed).
        pr.becomeProbe();
        this.#sendAppend(id, false);
      }
    }
    if (this.#heartbeatElapsed >= this.#heartbeatTicks) {
      this.#heartbeatElapsed = 0;
      this.#broadcastHeartbeat();
    }
    this.#maybePromoteLearner();
    this.#maybeRemoveDeadVoter();
  }

  /**
   * The opt-in dead-voter rule: a voter that has not answered for `deadVoterTicks` is removed,
   * so that the cluster gets its fault tolerance back without an operator — one voter at a time,
   * never below `minVoters`, only while this leader hears from a quorum. Silence is counted
   * from when this node became leader, so a new leader waits the full time again.
   */
  #maybeRemoveDeadVoter(): void {
    if (this.#deadVoterTicks <= 0 || this.#role !== 'leader' || !this.committedInTerm) return;
    if (this.configIndex > this.#log.committed || this.#transferee !== null) return;
    const voters = voterIds(this.config);
    if (!voters.includes(this.id) || voters.length <= this.#minVoters) return;
    const answering = voters.filter(
      (v) =>
        v === this.id ||
        (this.#progress.get(v)?.silentTicks ?? Number.POSITIVE_INFINITY) < this.#electionTicks,
    );
    if (answering.length < quorumSize(voters.length)) return;
    let dead: NodeId | null = null;
    let silent = this.#deadVoterTicks - 1;
    for (const v of voters) {
      const pr = this.#progress.get(v);
      if (v !== this.id && pr && pr.silentTicks > silent) {
        dead = v;
        silent = pr.silentTicks;
      }
    }
    if (dead === null) return;
    if (this.proposeConfigChange({ op: 'remove', id: dead }).ok) {
      this.#emit({ type: 'dead-voter', id: dead, silentTicks: silent });
    }
  }

  #quorumActive(): boolean {
    const voters = voterIds(this.config);
    let active = 0;
    for (const v of voters) {
      if (v === this.id || this.#progress.get(v)?.recentActive) active++;
    }
    return active >= quorumSize(voters.length);
  }

  // ── message handling ─────────────────────────────────────────────────────────

  #handleVote(m: VoteMessage): void {
    const canVote =
      this.#vote === m.from ||
      (this.#vote === null && this.#leader === null) ||
      (m.pre && m.term > this.#term);
    if (canVote && this.#log.isUpToDate(m.lastIndex, m.lastTerm)) {
      this.#send({ type: 'vote-resp', from: this.id, to: m.from, term: m.term, pre: m.pre, reject: false });
      if (!m.pre) {
        this.#electionElapsed = 0;
        this.#vote = m.from;
      }
    } else {
      this.#send({
        type: 'vote-resp',
        from: this.id,
        to: m.from,
        term: this.#term,
        pre: m.pre,
        reject: true,
      });
    }
  }

  #stepFollower(m: RaftMessage): void {
    switch (m.type) {
      case 'append':
        this.#electionElapsed = 0;
        this.#leader = m.from;
        this.#handleAppend(m);
        break;
      case 'heartbeat':
        this.#electionElapsed = 0;
        this.#leader = m.from;
        this.#handleHeartbeat(m);
        break;
      case 'snapshot':
        this.#electionElapsed = 0;
        this.#leader = m.from;
        this.#handleSnapshot(m);
        break;
      case 'timeout-now':
        if (this.#promotable()) this.#campaign('transfer');
        break;
      case 'read-index-resp':
        this.#readStates.push({ ctx: m.ctx, index: m.index });
        break;
      case 'read-index':
        this.#refuseReadIndex(m);
        break;
      default:
        break;
    }
  }

  /** Not the leader (or no leader known): answer a read-index request with index -1, "ask again". */
  #refuseReadIndex(m: Extract<RaftMessage, { type: 'read-index' }>): void {
    this.#send({
      type: 'read-index-resp',
      from: this.id,
      to: m.from,
      term: this.#term,
      ctx: m.ctx,
      index: -1,
    });
  }

  #stepCandidate(m: RaftMessage): void {
    switch (m.type) {
      case 'append':
      case 'heartbeat':
      case 'snapshot':
        // Someone won this term; follow them.
        this.#becomeFollower(this.#term, m.from);
        this.#stepFollower(m);
        break;
      case 'vote-resp': {
        if (m.pre !== (this.#role === 'pre-candidate')) break;
        this.#votes.set(m.from, !m.reject);
        const voters = voterIds(this.config);
        const { granted, rejected } = this.#tally(voters);
        const q = quorumSize(voters.length);
        if (granted >= q) {
          if (this.#role === 'pre-candidate') this.#campaign('normal');
          else this.#becomeLeader();
        } else if (rejected >= q) {
          this.#becomeFollower(this.#term, null);
        }
        break;
      }
      case 'read-index':
        this.#refuseReadIndex(m);
        break;
      default:
        break;
    }
  }

  #stepLeader(m: RaftMessage): void {
    const pr = this.#progress.get(m.from);
    switch (m.type) {
      case 'append-resp':
        if (pr) this.#handleAppendResponse(m, pr);
        break;
      case 'heartbeat-resp':
        if (!pr) break;
        pr.recentActive = true;
        pr.silentTicks = 0;
        pr.probeSent = false;
        if (pr.state === 'replicate' && pr.isPaused()) pr.freeFirstInflight();
        if (pr.match < this.#log.lastIndex()) this.#sendAppend(m.from, true);
        if (m.round > 0) {
          this.#readAcks.set(m.from, Math.max(this.#readAcks.get(m.from) ?? 0, m.round));
          this.#releaseReads();
        }
        break;
      case 'read-index':
        if (pr || findMember(this.config, m.from)) this.#leaderRead({ ctx: m.ctx, from: m.from });
        break;
      default:
        break;
    }
  }

  #handleAppend(m: AppendMessage): void {
    if (m.prevIndex < this.#log.committed) {
      this.#sendAppendResponse(m.from, false, this.#log.committed);
      return;
    }
    const oldLast = this.#log.lastIndex();
    const lastNew = this.#log.maybeAppend(m.prevIndex, m.prevTerm, m.entries);
    if (lastNew === undefined) {
      const hintIndex = this.#log.findConflictByTerm(
        Math.min(m.prevIndex, this.#log.lastIndex()),
        m.prevTerm,
      );
      this.#send({
        type: 'append-resp',
        from: this.id,
        to: m.from,
        term: this.#term,
        reject: true,
        index: m.prevIndex,
        hintIndex,
        hintTerm: this.#log.term(hintIndex) ?? 0,
      });
      return;
    }
    if (m.entries.length > 0) this.#syncConfigs(m.entries, oldLast);
    if (this.#log.commitTo(Math.min(m.commit, lastNew)))
      this.#emit({ type: 'commit', index: this.#log.committed });
    this.#sendAppendResponse(m.from, false, lastNew);
  }

  /** Bring the configuration history in line with the log after a follower-side append. */
  #syncConfigs(entries: readonly LogEntry[], oldLast: number): void {
    const before = this.configIndex;
    let changedFrom = Number.POSITIVE_INFINITY;
    // Drop records whose entries were truncated away.
    while (this.#configs.length > 1) {
      const rec = this.#configs[this.#configs.length - 1]!;
      if (this.#log.term(rec.index) === rec.term && this.#log.entry(rec.index)?.kind === 'config') break;
      this.#configs.pop();
    }
    const lastRecorded = this.configIndex;
    for (const e of entries) {
      if (e.index <= lastRecorded || this.#log.term(e.index) !== e.term) continue;
      changedFrom = Math.min(changedFrom, e.index);
      if (e.kind === 'config')
        this.#configs.push({ index: e.index, term: e.term, config: decodeConfiguration(e.data) });
    }
    const firstTouched = Math.min(changedFrom, oldLast + 1, entries[0]?.index ?? changedFrom);
    this.#emit({ type: 'log-changed', from: firstTouched });
    if (this.configIndex !== before) this.#onConfigChanged();
  }

  #handleHeartbeat(m: HeartbeatMessage): void {
    if (this.#log.commitTo(m.commit)) this.#emit({ type: 'commit', index: this.#log.committed });
    this.#send({ type: 'heartbeat-resp', from: this.id, to: m.from, term: this.#term, round: m.round });
  }

  #handleSnapshot(m: SnapshotMessage): void {
    const meta = m.snapshot.meta;
    if (meta.index <= this.#log.committed) {
      this.#sendAppendResponse(m.from, false, this.#log.committed);
      return;
    }
    if (this.#log.matchTerm(meta.index, meta.term)) {
      // We already hold that prefix: just learn that it is committed.
      if (this.#log.commitTo(meta.index)) this.#emit({ type: 'commit', index: this.#log.committed });
      this.#sendAppendResponse(m.from, false, this.#log.committed);
      return;
    }
    this.#log.restore(meta.index, meta.term);
    this.#configs = [{ index: meta.index, term: meta.term, config: meta.config }];
    this.#snapshot = m.snapshot;
    this.#pendingSnapshot = m.snapshot;
    this.#emit({ type: 'snapshot-restored', index: meta.index, term: meta.term });
    this.#emit({ type: 'log-changed', from: meta.index });
    this.#emit({ type: 'commit', index: meta.index });
    this.#onConfigChanged();
    this.#sendAppendResponse(m.from, false, meta.index);
  }

  #sendAppendResponse(to: NodeId, reject: boolean, index: number): void {
    this.#send({
      type: 'append-resp',
      from: this.id,
      to,
      term: this.#term,
      reject,
      index,
      hintIndex: 0,
      hintTerm: 0,
    });
  }

  #handleAppendResponse(m: AppendResponse, pr: Progress): void {
    pr.recentActive = true;
    pr.silentTicks = 0;
    if (m.reject) {
      let probeFrom = m.hintIndex;
      if (m.hintTerm > 0) probeFrom = this.#log.findConflictByTerm(m.hintIndex, m.hintTerm);
      if (pr.maybeDecrTo(m.index, probeFrom)) {
        if (pr.state === 'replicate') pr.becomeProbe();
        this.#sendAppend(m.from, false);
      }
      return;
    }
    const wasPaused = pr.isPaused();
    if (!pr.maybeUpdate(m.index)) {
      // Old news, but a probe that was answered may send again.
      if (wasPaused && !pr.isPaused()) this.#sendAppend(m.from, false);
      return;
    }
    if (pr.state === 'probe') pr.becomeReplicate();
    else if (pr.state === 'snapshot' && pr.match >= pr.pendingSnapshot) {
      pr.becomeProbe();
      pr.becomeReplicate();
    } else if (pr.state === 'replicate') pr.freeInflightTo(m.index);

    if (this.#maybeCommit()) this.#broadcastAppend(false);
    else this.#sendAppend(m.from, false);
    // Refill the pipeline.
    while (!pr.isPaused() && pr.next <= this.#log.lastIndex() && this.#sendAppend(m.from, false)) {
      /* keep sending */
    }
    if (this.#transferee === m.from && pr.match === this.#log.lastIndex()) this.#sendTimeoutNow(m.from);
    this.#maybePromoteLearner();
  }

  // ── leader replication ───────────────────────────────────────────────────────

  #appendLocal(kind: LogEntry['kind'], data: string): ProposeResult {
    const entry: LogEntry = { index: this.#log.lastIndex() + 1, term: this.#term, kind, data };
    this.#log.append([entry]);
    this.#emit({ type: 'log-changed', from: entry.index });
    if (kind === 'config') {
      this.#configs.push({ index: entry.index, term: entry.term, config: decodeConfiguration(data) });
      this.#onConfigChanged();
    }
    this.#needBroadcast = true;
    return { ok: true, index: entry.index, term: entry.term };
  }

  #broadcastAppend(sendIfEmpty: boolean): void {
    for (const id of this.#progress.keys()) this.#sendAppend(id, sendIfEmpty);
  }

  #broadcastHeartbeat(): void {
    for (const [id, pr] of this.#progress) {
      const hb: HeartbeatMessage = {
        type: 'heartbeat',
        from: this.id,
        to: id,
        term: this.#term,
        commit: Math.min(pr.match, this.#log.committed),
        round: this.#readRound,
      };
      this.#send(hb);
    }
  }

  /** Returns whether something was sent. */
  #sendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const pr = this.#progress.get(to);
    if (!pr || pr.isPaused()) return false;
    const prevIndex = pr.next - 1;
    const prevTerm = this.#log.term(prevIndex);
    if (prevTerm === undefined) {
      const snap = this.#snapshot;
      if (!snap || snap.meta.index < this.#log.baseIndex) {
        throw new Error(
          `follower ${to} needs entries before ${this.#log.firstIndex()} but no snapshot is held`,
        );
      }
      this.#send({ type: 'snapshot', from: this.id, to, term: this.#term, snapshot: snap });
      pr.becomeSnapshot(snap.meta.index);
      return true;
    }
    const entries =
      pr.next <= this.#log.lastIndex()
        ? this.#log.slice(pr.next, this.#log.lastIndex() + 1, this.#maxEntries, this.#maxBytes)
        : [];
    if (entries.length === 0 && !sendIfEmpty) return false;
    this.#send({
      type: 'append',
      from: this.id,
      to,
      term: this.#term,
      prevIndex,
      prevTerm,
      entries,
      commit: this.#log.committed,
    });
    const last = entries[entries.length - 1];
    if (last) pr.sentEntries(last.index);
    else if (pr.state === 'probe') pr.probeSent = true;
    return true;
  }

  #sendTimeoutNow(to: NodeId): void {
    this.#send({ type: 'timeout-now', from: this.id, to, term: this.#term });
  }

  #maybeCommit(): boolean {
    const voters = voterIds(this.config);
    const matches = voters.map((v) =>
      v === this.id ? this.#log.stable : (this.#progress.get(v)?.match ?? 0),
    );
    const n = quorumValue(matches, quorumSize(voters.length));
    // Raft §5.4.2: only entries of the current term are committed by counting replicas.
    if (n <= this.#log.committed || this.#log.term(n) !== this.#term) return false;
    this.#log.commitTo(n);
    this.#emit({ type: 'commit', index: n });
    this.#afterLeaderCommit();
    return true;
  }

  #afterLeaderCommit(): void {
    if (this.#readsAwaitingCommit.length > 0 && this.committedInTerm) {
      const waiting = this.#readsAwaitingCommit;
      this.#readsAwaitingCommit = [];
      for (const r of waiting) this.#leaderRead(r);
    }
    // A leader that removed itself hands over once the change is committed (thesis §4.2.2).
    if (!isVoter(this.config, this.id) && this.configIndex <= this.#log.committed) {
      let best: NodeId | null = null;
      let bestMatch = -1;
      for (const [id, pr] of this.#progress) {
        if (isVoter(this.config, id) && pr.match > bestMatch) {
          best = id;
          bestMatch = pr.match;
        }
      }
      // Let followers learn the commit before they are asked to take over.
      this.#broadcastAppend(true);
      if (best !== null) this.#sendTimeoutNow(best);
      this.#becomeFollower(this.#term, null);
    }
  }

  #maybePromoteLearner(): void {
    if (!this.#autoPromote || this.#role !== 'leader' || !this.committedInTerm) return;
    if (this.configIndex > this.#log.committed || this.#transferee !== null) return;
    if (!isVoter(this.config, this.id)) return;
    if (voterIds(this.config).length >= this.#maxVoters) return;
    for (const m of this.config.members) {
      if (m.voter) continue;
      const pr = this.#progress.get(m.id);
      if (pr && pr.state === 'replicate' && pr.recentActive && pr.match >= this.#log.committed) {
        this.proposeConfigChange({ op: 'promote', id: m.id });
        return;
      }
    }
  }

  #onConfigChanged(): void {
    if (this.#role !== 'leader') return;
    const members = new Set(this.config.members.map((m) => m.id));
    for (const id of [...this.#progress.keys()]) {
      if (!members.has(id)) this.#progress.delete(id);
    }
    for (const id of members) {
      if (id !== this.id && !this.#progress.has(id)) this.#progress.set(id, this.#newProgress());
    }
    if (this.#transferee !== null && !members.has(this.#transferee)) this.#transferee = null;
    // Membership changed the quorum: something may be committed already (e.g. a voter left).
    if (this.#maybeCommit()) this.#broadcastAppend(false);
  }

  // ── reads ────────────────────────────────────────────────────────────────────

  #leaderRead(r: ReadRequest): void {
    if (!this.committedInTerm) {
      this.#readsAwaitingCommit.push(r);
      return;
    }
    const voters = voterIds(this.config);
    if (voters.length === 1 && voters[0] === this.id) {
      this.#answerRead(r, this.#log.committed);
      return;
    }
    this.#readRound++;
    this.#readsAwaitingRound.push({ ...r, round: this.#readRound, index: this.#log.committed });
    this.#broadcastHeartbeat();
  }

  #releaseReads(): void {
    const voters = voterIds(this.config);
    const acks = voters.map((v) => (v === this.id ? Number.POSITIVE_INFINITY : (this.#readAcks.get(v) ?? 0)));
    const confirmed = quorumValue(acks, quorumSize(voters.length));
    let k = 0;
    while (k < this.#readsAwaitingRound.length && this.#readsAwaitingRound[k]!.round <= confirmed) {
      const r = this.#readsAwaitingRound[k]!;
      this.#answerRead(r, r.index);
      k++;
    }
    if (k > 0) this.#readsAwaitingRound.splice(0, k);
  }

  #answerRead(r: ReadRequest, index: number): void {
    if (r.from === this.id) this.#readStates.push({ ctx: r.ctx, index });
    else
      this.#send({ type: 'read-index-resp', from: this.id, to: r.from, term: this.#term, ctx: r.ctx, index });
  }

  #failPendingReads(): void {
    const pending: ReadRequest[] = [...this.#readsAwaitingCommit, ...this.#readsAwaitingRound];
    this.#readsAwaitingCommit = [];
    this.#readsAwaitingRound = [];
    for (const r of pending) this.#answerRead(r, -1);
  }

  // ── plumbing ─────────────────────────────────────────────────────────────────

  #send(m: RaftMessage): void {
    // Leader replication traffic in a durable term does not depend on this node's pending write
    // (the leader counts itself only once its own write lands), so it may go out at once.
    // Everything else — votes, vote grants, append acknowledgements — promises durable state
    // and waits until the write that made it durable has finished.
    if (this.#role === 'leader' && this.#term === this.#durable.term && REPLICATION_TYPES.has(m.type)) {
      this.#urgent.push(m);
    } else {
      this.#deferred.push(m);
    }
  }

  #emit(event: RaftEvent): void {
    this.#listener?.(event);
  }
}
