import {
  ClusterArgumentError,
  ClusterClosedError,
  ClusterError,
  ClusterTimeoutError,
  CommandFailedError,
  ConfigChangePendingError,
  errorFromJSON,
  InvalidClusterMessageError,
  JoinFailedError,
  NodeIdRetiredError,
  NodeRemovedError,
  NodeStartingError,
  NoLeaderError,
  NotLeaderError,
  SessionExpiredError,
  TransferFailedError,
  UnknownNodeError,
  VoterDataLostError,
} from '../errors.js';
import { findMember, isVoter } from '../raft/configuration.js';
import type { ProposeResult, RaftEvent } from '../raft/raft-core.js';
import { RaftCore } from '../raft/raft-core.js';
import type {
  LogEntry,
  NodeId,
  RaftConfiguration,
  RaftMessage,
  Ready,
  Role,
  Snapshot,
} from '../raft/types.js';
import type { CommandEnvelope, CommandResult, Operation } from '../state/commands.js';
import { validateEnvelope, validateOperation } from '../state/commands.js';
import { ControlState } from '../state/control-state.js';
import {
  DEFAULT_PARTITION_COUNT,
  partitionOf,
  partitionsOwnedBy,
  rendezvousOwner,
} from '../state/partition.js';
import type { KvEngine } from '../storage/kv-engine.js';
import { RaftStorage } from '../storage/raft-storage.js';
import type { ClusterEvent } from './events.js';
import { publishEvent } from './events.js';
import type { Clock, NodeRequest, NodeResponse, PeerHandler, PeerTransport } from './ports.js';

/** Timing and policy of a node. Every field has a default that suits a LAN control plane. */
export interface ClusterNodeOptions {
  /** Length of one Raft tick. @default 50 */
  readonly tickMs?: number;
  /** Ticks without a leader before an election (randomized up to 2×). @default 20 (1–2 s) */
  readonly electionTicks?: number;
  /** Ticks between leader heartbeats. @default 2 (100 ms) */
  readonly heartbeatTicks?: number;
  /** Deadline of one client operation, retries included. @default 10000 */
  readonly requestTimeoutMs?: number;
  /** Deadline of one forwarded attempt to the leader. @default 3000 */
  readonly attemptTimeoutMs?: number;
  /** Take a snapshot once this many entries were applied since the last one. @default 4096 */
  readonly snapshotThreshold?: number;
  /** Entries kept in memory behind a snapshot, so slightly slow followers need no snapshot. @default 512 */
  readonly snapshotTrailingEntries?: number;
  /** How often the leader looks for expired keys, locks, members and sessions. @default 1000 */
  readonly sweepIntervalMs?: number;
  /** Promote learners to voters once they are caught up. @default true */
  readonly autoPromote?: boolean;
  /** Learners are not promoted beyond this many voters. @default 7 */
  readonly maxVoters?: number;
  /**
   * Opt-in: the leader removes a voter it has not heard from for this long (ms), one at a time
   * and never below `minVoters`, so that a cluster that lost a node regains its fault tolerance
   * without an operator. The removed node's id is retired: to bring the machine back, give it a
   * new id and an empty data directory. 0 turns the rule off. @default 0
   */
  readonly removeDeadVotersAfterMs?: number;
  /** The dead-voter rule never shrinks the voters below this many. @default 3 */
  readonly minVoters?: number;
  /**
   * Pre-vote round before an election (a partitioned node cannot inflate terms). Turn off only
   * to test. @default true
   */
  readonly preVote?: boolean;
  /**
   * The leader steps down without a quorum for an election timeout, and followers ignore
   * campaigns while they hear from a leader. Turn off only to test. @default true
   */
  readonly checkQuorum?: boolean;
  /** Pipelining window per follower. @default 64 */
  readonly maxInflight?: number;
  /** Most entries per AppendEntries. @default 512 */
  readonly maxEntriesPerAppend?: number;
  /** How long a joining node keeps trying its seeds. @default 30000 */
  readonly joinTimeoutMs?: number;
  /** Called with every {@link ClusterEvent} (also published on `mocra:cluster:*` diagnostics channels). */
  readonly onEvent?: (event: ClusterEvent) => void;
}

/** Everything a node runs on. Production wiring is {@link createClusterNode}; tests wire fakes. */
export interface ClusterNodeDeps {
  readonly id: NodeId;
  readonly addr: string;
  readonly engine: KvEngine;
  readonly transport: PeerTransport;
  readonly clock: Clock;
  /** A number in [0, 1). */
  readonly random: () => number;
  /** Create a one-node cluster if the log is empty. */
  readonly bootstrap: boolean;
  /** Nodes to ask to let this one in, if the log is empty and `bootstrap` is false. */
  readonly seeds: readonly string[];
  readonly options?: ClusterNodeOptions;
  /** Called with the node as soon as it exists (before joining), so a server can route to it. */
  readonly attach?: (handler: PeerHandler) => void;
  /** Every event of the Raft core (the simulator checks its invariants with these). */
  readonly onRaftEvent?: (event: RaftEvent) => void;
  /** Every entry applied to the state machine, with its result and cluster time (simulator oracles). */
  readonly onApply?: (entry: LogEntry, result: CommandResult | undefined, clusterTime: number) => void;
}

export type ClusterRole = Role | 'learner' | 'joining' | 'removed';

export interface ClusterMemberStatus {
  readonly id: NodeId;
  readonly addr: string;
  readonly voter: boolean;
}

export interface ClusterStatus {
  readonly id: NodeId;
  readonly addr: string;
  readonly role: ClusterRole;
  readonly term: number;
  readonly leaderId: NodeId | null;
  readonly leaderAddr: string | null;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  readonly lastIndex: number;
  readonly snapshotIndex: number;
  readonly members: readonly ClusterMemberStatus[];
  readonly voters: readonly NodeId[];
  readonly learners: readonly NodeId[];
}

/** A held lock. `token` is the fencing token: the Raft index of the acquire, strictly increasing. */
export interface LockLease {
  readonly name: string;
  readonly owner: string;
  readonly token: number;
  /**
   * Cluster time at which the lock lapses unless renewed: epoch-like ms that only leaders'
   * monotonic clocks move, behind wall clocks by the time spent in failovers. Do not compare it
   * with `Date.now()`; time protected work from before the acquire call, with `ttlMs`.
   */
  readonly expiresAt: number;
}

export interface Member {
  readonly id: string;
  readonly addr?: string;
  readonly meta: Readonly<Record<string, string>>;
  /** Cluster time (see {@link LockLease.expiresAt}) of the last heartbeat the cluster applied. */
  readonly lastSeen: number;
}

export interface ReadOptions {
  /**
   * `linearizable` confirms leadership with a quorum (ReadIndex) and waits until this node has
   * applied that point; `local` reads this node's state as it is, possibly stale.
   * @default 'linearizable'
   */
  readonly consistency?: 'linearizable' | 'local';
}

export interface AnnounceOptions {
  /** The member id. @default the node id */
  readonly id?: string;
  /** Where the member can be reached, shown to others. @default undefined */
  readonly addr?: string;
  /** Free-form facts about the member (version, hostname, roles). @default {} */
  readonly meta?: Readonly<Record<string, string>>;
  /** A member that misses heartbeats this long is not live. @default 10000 */
  readonly ttlMs?: number;
  /** Heartbeat period. @default ttlMs / 3 */
  readonly heartbeatMs?: number;
}

export interface CloseOptions {
  /** When this node leads, hand leadership to a caught-up voter first (faster failover). @default true */
  readonly transferLeadership?: boolean;
}

interface PendingProposal {
  readonly term: number;
  readonly resolve: (result: CommandResult | undefined) => void;
  readonly reject: (err: Error) => void;
}

interface ReadBatch {
  readonly ctx: string;
  readonly waiters: Array<{ resolve: (index: number) => void; reject: (err: Error) => void }>;
}

const ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** Transient failures worth another attempt within the deadline. */
class AttemptFailed extends Error {
  override readonly cause: Error;
  /** The attempt may have reached a leader, so a write may have been applied. */
  readonly maybeApplied: boolean;
  constructor(cause: Error, maybeApplied: boolean) {
    super(cause.message);
    this.cause = cause;
    this.maybeApplied = maybeApplied;
  }
}

/**
 * One member of a Raft cluster: drives a `RaftCore` with a clock, persists its Ready batches
 * to `RaftStorage` before anything they promise is sent, applies committed entries to the
 * `ControlState`, and serves the client API (any node accepts writes and forwards them to
 * the leader; reads are linearizable through ReadIndex by default).
 *
 * ```
 *   tick/step/propose ─▶ RaftCore ─▶ urgent msgs ─────────────────────────────▶ transport
 *                           │
 *                           └▶ ready ─▶ storage.save (sync) ─▶ msgs ─▶ apply ─▶ advance
 *                                        one write at a time; proposals arriving meanwhile
 *                                        join the next write (group commit)
 * ```
 */
export class ClusterNode implements PeerHandler {
  readonly id: NodeId;
  readonly addr: string;
  readonly #core: RaftCore;
  readonly #storage: RaftStorage;
  #sm: ControlState;
  readonly #transport: PeerTransport;
  /** Handlers of application messages by topic (`onAppRequest`). */
  readonly #appHandlers = new Map<string, (body: unknown) => Promise<unknown>>();
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #opts: Required<Omit<ClusterNodeOptions, 'onEvent'>>;
  readonly #onEvent: ((event: ClusterEvent) => void) | undefined;
  readonly #onApply: ClusterNodeDeps['onApply'];

  readonly #clientId: string;
  #seq = 0;
  readonly #outstanding = new Set<number>();

  #writing = false;
  #pumpScheduled = false;
  #closed = false;
  #failed: Error | undefined;
  #removed = false;
  #wasMember = false;
  readonly #proposals = new Map<number, PendingProposal>();
  readonly #appliedWaiters: Array<{ index: number; resolve: () => void; reject: (err: Error) => void }> = [];
  #readBatch: ReadBatch | undefined;
  readonly #readBatches = new Map<string, ReadBatch>();
  #readCtx = 0;
  #snapshotIndex: number;
  #snapshotDue = false;
  #sweepInFlight = false;
  readonly #timers = new Set<() => void>();
  readonly #sleepers = new Set<() => void>();
  readonly #announced = new Map<string, () => void>();
  #lastLeader: NodeId | null = null;
  #writeIdle: Array<() => void> = [];
  /** Addresses of every node ever seen in a configuration (a removed leader still needs answers). */
  readonly #knownAddrs = new Map<NodeId, string>();

  private constructor(
    deps: ClusterNodeDeps,
    storage: RaftStorage,
    core: RaftCore,
    sm: ControlState,
    snapshotIndex: number,
    snapshotConfig: RaftConfiguration | undefined,
  ) {
    this.id = deps.id;
    this.addr = deps.addr;
    this.#storage = storage;
    this.#core = core;
    this.#sm = sm;
    this.#snapshotIndex = snapshotIndex;
    this.#transport = deps.transport;
    this.#clock = deps.clock;
    this.#random = deps.random;
    const o = deps.options ?? {};
    this.#opts = {
      tickMs: o.tickMs ?? 50,
      electionTicks: o.electionTicks ?? 20,
      heartbeatTicks: o.heartbeatTicks ?? 2,
      requestTimeoutMs: o.requestTimeoutMs ?? 10_000,
      attemptTimeoutMs: o.attemptTimeoutMs ?? 3000,
      snapshotThreshold: o.snapshotThreshold ?? 4096,
      snapshotTrailingEntries: o.snapshotTrailingEntries ?? 512,
      sweepIntervalMs: o.sweepIntervalMs ?? 1000,
      autoPromote: o.autoPromote ?? true,
      maxVoters: o.maxVoters ?? 7,
      removeDeadVotersAfterMs: o.removeDeadVotersAfterMs ?? 0,
      minVoters: o.minVoters ?? 3,
      preVote: o.preVote ?? true,
      checkQuorum: o.checkQuorum ?? true,
      maxInflight: o.maxInflight ?? 64,
      maxEntriesPerAppend: o.maxEntriesPerAppend ?? 512,
      joinTimeoutMs: o.joinTimeoutMs ?? 30_000,
    };
    this.#onEvent = o.onEvent;
    this.#onApply = deps.onApply;
    const r = () => Math.floor(this.#random() * 0x1_0000_0000).toString(36);
    this.#clientId = `${this.id}/${r()}${r()}`;
    // Only a committed configuration counts; the snapshot's is, the log's newest may not be.
    this.#wasMember = snapshotConfig !== undefined && findMember(snapshotConfig, this.id) !== undefined;
    for (const m of core.config.members) this.#knownAddrs.set(m.id, m.addr);
  }

  /**
   * Open the log, recover, and start ticking. A node whose log is empty either bootstraps a
   * one-node cluster or joins through its seeds (resolving once the leader has added it).
   */
  static async start(deps: ClusterNodeDeps): Promise<ClusterNode> {
    validateOptions(deps);
    const bootstrapEntry: LogEntry | undefined = deps.bootstrap
      ? {
          index: 1,
          term: 1,
          kind: 'config',
          data: JSON.stringify({ members: [{ id: deps.id, addr: deps.addr, voter: true }], retired: [] }),
        }
      : undefined;
    const { storage, state } = await RaftStorage.open(deps.engine, deps.id, bootstrapEntry);
    const o = deps.options ?? {};
    const core = new RaftCore(
      {
        id: deps.id,
        electionTicks: o.electionTicks ?? 20,
        heartbeatTicks: o.heartbeatTicks ?? 2,
        maxInflight: o.maxInflight ?? 64,
        maxEntriesPerAppend: o.maxEntriesPerAppend ?? 512,
        autoPromote: o.autoPromote ?? true,
        maxVoters: o.maxVoters ?? 7,
        deadVoterTicks: Math.ceil((o.removeDeadVotersAfterMs ?? 0) / (o.tickMs ?? 50)),
        minVoters: o.minVoters ?? 3,
        preVote: o.preVote ?? true,
        checkQuorum: o.checkQuorum ?? true,
        random: deps.random,
      },
      { hardState: state.hardState, snapshot: state.snapshot, entries: state.entries },
    );
    const sm = state.snapshot ? ControlState.deserialize(state.snapshot.data) : new ControlState();
    const node = new ClusterNode(
      deps,
      storage,
      core,
      sm,
      state.snapshot?.meta.index ?? 0,
      state.snapshot?.meta.config,
    );
    if (state.repaired.tornEntries > 0 || state.repaired.strayKeys > 0) {
      node.#emit({ type: 'storage-repaired', nodeId: deps.id, ...state.repaired });
    }
    deps.transport.onRemoved?.(() => node.#markRemoved());
    const observe = deps.onRaftEvent;
    core.setListener((e) => {
      node.#onRaftEvent(e);
      observe?.(e);
    });
    deps.attach?.(node);
    node.#startTicking();
    node.#schedule();
    const joining = state.fresh && !deps.bootstrap;
    if (joining) {
      try {
        await node.#join(deps.seeds);
      } catch (err) {
        await node.close({ transferLeadership: false });
        throw err;
      }
    }
    return node;
  }

  // ── status ───────────────────────────────────────────────────────────────────

  status(): ClusterStatus {
    const s = this.#core.status();
    const config = s.config;
    const me = findMember(config, this.id);
    let role: ClusterRole = s.role;
    if (this.#removed) role = 'removed';
    else if (!me) role = 'joining';
    else if (!me.voter) role = 'learner';
    const leader = s.leader === null ? undefined : findMember(config, s.leader);
    return {
      id: this.id,
      addr: this.addr,
      role,
      term: s.term,
      leaderId: s.leader,
      leaderAddr: leader?.addr ?? null,
      commitIndex: s.commitIndex,
      appliedIndex: this.#sm.appliedIndex,
      lastIndex: s.lastIndex,
      snapshotIndex: this.#snapshotIndex,
      members: config.members.map((m) => ({ id: m.id, addr: m.addr, voter: m.voter })),
      voters: config.members.filter((m) => m.voter).map((m) => m.id),
      learners: config.members.filter((m) => !m.voter).map((m) => m.id),
    };
  }

  /**
   * The Raft core and state machine behind this node, for the simulator and tests. Reading them
   * is fine; changing them breaks the node. No semver promise.
   * @internal
   */
  internals(): { readonly core: RaftCore; readonly stateMachine: ControlState } {
    return { core: this.#core, stateMachine: this.#sm };
  }

  /** True while this node is the leader (as far as it knows). */
  get isLeader(): boolean {
    return this.#core.role === 'leader';
  }

  /** Resolve once some leader is known and has committed an entry of its term, or throw NoLeaderError. */
  async waitForLeader(timeoutMs = this.#opts.requestTimeoutMs): Promise<{ id: NodeId; addr: string }> {
    const deadline = this.#clock.now() + timeoutMs;
    for (;;) {
      this.#assertOpen();
      const leader = this.#leaderInfo();
      if (leader) {
        try {
          await this.#readBarrier(
            Math.min(this.#opts.attemptTimeoutMs, Math.max(1, deadline - this.#clock.now())),
          );
          const again = this.#leaderInfo();
          if (again) return again;
        } catch {
          // fall through and retry
        }
      }
      if (this.#clock.now() >= deadline) throw new NoLeaderError();
      await this.#sleep(Math.min(50, Math.max(1, deadline - this.#clock.now())));
    }
  }

  // ── key-value ────────────────────────────────────────────────────────────────

  async get(key: string, options: ReadOptions = {}): Promise<string | undefined> {
    checkKey(key);
    await this.#read(options);
    return this.#sm.get(key);
  }

  /** List live keys with `prefix` (sorted). */
  async keys(prefix = '', options: ReadOptions = {}): Promise<string[]> {
    await this.#read(options);
    return this.#sm.keys(prefix);
  }

  async set(key: string, value: string, options: { ttlMs?: number } = {}): Promise<void> {
    await this.#submit({ type: 'set', key, value, ...ttl(options.ttlMs) });
  }

  /** Returns whether the key existed. */
  async delete(key: string): Promise<boolean> {
    const r = await this.#submit({ type: 'delete', key });
    return r.type === 'existed' && r.existed;
  }

  /**
   * Replace the value when it equals `expected` (`undefined` = absent); `next === undefined`
   * deletes. Returns whether the swap happened.
   */
  async compareAndSet(
    key: string,
    expected: string | undefined,
    next: string | undefined,
    options: { ttlMs?: number } = {},
  ): Promise<boolean> {
    const r = await this.#submit({
      type: 'cas',
      key,
      expected: expected ?? null,
      next: next ?? null,
      ...ttl(options.ttlMs),
    });
    return r.type === 'swapped' && r.swapped;
  }

  /** Atomic counter; returns the new value. An absent key counts from 0. */
  async increment(key: string, by = 1): Promise<number> {
    const r = await this.#submit({ type: 'incr', key, by });
    if (r.type !== 'value') throw new CommandFailedError(`increment of ${key} returned ${r.type}`);
    return r.value;
  }

  // ── fenced locks ─────────────────────────────────────────────────────────────

  /**
   * Take `name` for `ttlMs` if it is free or lapsed (or already held by `owner`, which gets a new
   * token). Returns undefined when someone else holds it.
   */
  async acquireLock(
    name: string,
    options: { ttlMs: number; owner?: string },
  ): Promise<LockLease | undefined> {
    const owner = options.owner ?? this.id;
    const r = await this.#submit({ type: 'lock-acquire', name, owner, ttlMs: options.ttlMs });
    if (r.type !== 'lock') throw new CommandFailedError(`lock acquire returned ${r.type}`);
    return r.acquired ? { name, owner, token: r.token, expiresAt: r.expiresAt } : undefined;
  }

  /** Extend a held lock. Returns the renewed lease (same token), or undefined if it was lost. */
  async renewLock(lease: LockLease, ttlMs: number): Promise<LockLease | undefined> {
    const r = await this.#submit({ type: 'lock-renew', name: lease.name, token: lease.token, ttlMs });
    if (r.type !== 'renewed') throw new CommandFailedError(`lock renew returned ${r.type}`);
    return r.renewed ? { ...lease, expiresAt: r.expiresAt } : undefined;
  }

  /** Release a held lock. Returns false for a stale token or a lease that had already lapsed. */
  async releaseLock(lease: LockLease): Promise<boolean> {
    const r = await this.#submit({ type: 'lock-release', name: lease.name, token: lease.token });
    return r.type === 'released' && r.released;
  }

  /** The current holder of `name`, if any (as of the read point). */
  async getLock(name: string, options: ReadOptions = {}): Promise<LockLease | undefined> {
    checkKey(name);
    await this.#read(options);
    const l = this.#sm.getLock(name);
    return l ? { name, owner: l.owner, token: l.token, expiresAt: l.expiresAt } : undefined;
  }

  /**
   * A write to a Raft-side fenced resource: accepted only when `token` is at least the highest
   * token the key has seen (which it then becomes). Returns whether it was accepted.
   */
  async fencedPut(
    key: string,
    token: number,
    value: string,
  ): Promise<{ accepted: boolean; maxToken: number }> {
    const r = await this.#submit({ type: 'fenced', key, token, value });
    if (r.type !== 'fenced') throw new CommandFailedError(`fenced write returned ${r.type}`);
    return { accepted: r.accepted, maxToken: r.maxToken };
  }

  /**
   * A fenced read: like {@link fencedPut} it raises the key's highest token, so a holder that reads
   * under token t can no longer be overtaken by a write from an older holder.
   */
  async fencedGet(
    key: string,
    token: number,
  ): Promise<{ accepted: boolean; maxToken: number; value: string | undefined }> {
    const r = await this.#submit({ type: 'fenced', key, token });
    if (r.type !== 'fenced') throw new CommandFailedError(`fenced read returned ${r.type}`);
    return { accepted: r.accepted, maxToken: r.maxToken, value: r.value ?? undefined };
  }

  // ── membership registry and partitions ───────────────────────────────────────

  /**
   * Register a member and keep it live with heartbeats until {@link withdrawMember} or
   * {@link close}. Resolves once the registration is committed.
   */
  async announceMember(options: AnnounceOptions = {}): Promise<void> {
    const id = options.id ?? this.id;
    const ttlMs = options.ttlMs ?? 10_000;
    const heartbeatMs = options.heartbeatMs ?? Math.max(1, Math.floor(ttlMs / 3));
    if (!Number.isSafeInteger(heartbeatMs) || heartbeatMs <= 0 || heartbeatMs >= ttlMs) {
      throw new ClusterArgumentError('heartbeatMs must be a positive integer below ttlMs');
    }
    const register: Operation = {
      type: 'member-register',
      id,
      meta: { ...(options.meta ?? {}) },
      ttlMs,
      ...(options.addr === undefined ? {} : { addr: options.addr }),
    };
    await this.#submit(register);
    this.#announced.get(id)?.();
    let cancel: () => void = () => {};
    let stopped = false;
    const beat = (): void => {
      cancel = this.#timer(async () => {
        if (stopped || this.#closed) return;
        try {
          const r = await this.#submit({ type: 'member-heartbeat', id });
          if (r.type === 'known' && !r.known && !stopped) await this.#submit(register);
        } catch (err) {
          if (!this.#closed)
            this.#emit({ type: 'error', nodeId: this.id, error: asError(err), fatal: false });
        }
        if (!stopped) beat();
      }, heartbeatMs);
    };
    beat();
    this.#announced.set(id, () => {
      stopped = true;
      cancel();
    });
  }

  /** Stop heartbeats for `id` and remove it from the registry. */
  async withdrawMember(id: string = this.id): Promise<void> {
    this.#announced.get(id)?.();
    this.#announced.delete(id);
    await this.#submit({ type: 'member-leave', id });
  }

  /** Live members (heartbeat within TTL, by leader time), ordered by id. */
  async members(options: ReadOptions = {}): Promise<Member[]> {
    await this.#read(options);
    return this.#sm.liveMembers().map((m) => ({
      id: m.id,
      ...(m.addr === undefined ? {} : { addr: m.addr }),
      meta: m.meta,
      lastSeen: m.lastSeen,
    }));
  }

  /** The live member that owns `key`'s partition (rendezvous hashing), if there are members. */
  async partitionOwner(
    key: string,
    options: ReadOptions & { partitions?: number } = {},
  ): Promise<{ partition: number; owner: string | undefined }> {
    const partition = partitionOf(key, options.partitions ?? DEFAULT_PARTITION_COUNT);
    const ids = (await this.members(options)).map((m) => m.id);
    return { partition, owner: rendezvousOwner(partition, ids) };
  }

  /** The partitions `memberId` owns among the live members. */
  async ownedPartitions(
    memberId: string = this.id,
    options: ReadOptions & { partitions?: number } = {},
  ): Promise<number[]> {
    const ids = (await this.members(options)).map((m) => m.id);
    return partitionsOwnedBy(memberId, ids, options.partitions ?? DEFAULT_PARTITION_COUNT);
  }

  // ── cluster administration ───────────────────────────────────────────────────

  /** Remove a node from the cluster (it may be the leader). Resolves once the change is committed. */
  async removeNode(id: NodeId): Promise<void> {
    if (!ID_PATTERN.test(id)) throw new ClusterArgumentError(`bad node id ${JSON.stringify(id)}`);
    await this.#admin({ kind: 'remove', id }, 'remove');
  }

  /** Hand leadership to `to` (or the most caught-up voter). Resolves once the new leader is known. */
  async transferLeadership(to?: NodeId): Promise<NodeId> {
    const r = await this.#admin({ kind: 'transfer', to: to ?? null }, 'transfer');
    return String(r);
  }

  /** Stop: hand off leadership (optionally), finish the write in flight, close storage and transport. */
  async close(options: CloseOptions = {}): Promise<void> {
    if (this.#closed) return;
    for (const stop of this.#announced.values()) stop();
    this.#announced.clear();
    if ((options.transferLeadership ?? true) && this.#core.role === 'leader' && !this.#failed) {
      try {
        await this.#transferLocal(null, Math.min(2000, this.#opts.electionTicks * this.#opts.tickMs));
      } catch {
        // Best effort: the others elect a leader on their own.
      }
    }
    this.#closed = true;
    for (const cancel of this.#timers) cancel();
    this.#timers.clear();
    for (const wake of this.#sleepers) wake();
    this.#sleepers.clear();
    const closed = new ClusterClosedError();
    for (const p of this.#proposals.values()) p.reject(closed);
    this.#proposals.clear();
    for (const w of this.#appliedWaiters) w.reject(closed);
    this.#appliedWaiters.length = 0;
    for (const b of this.#readBatches.values()) for (const w of b.waiters) w.reject(closed);
    this.#readBatches.clear();
    if (this.#writing) await new Promise<void>((resolve) => this.#writeIdle.push(resolve));
    await this.#transport.close();
    await this.#storage.close();
  }

  // ── PeerHandler (the transport's server side calls these) ────────────────────

  handleMessages(messages: readonly RaftMessage[], fromAddr?: string): void {
    if (this.#closed || this.#failed) return;
    const from = messages[0]?.from;
    if (
      from !== undefined &&
      fromAddr !== undefined &&
      from !== this.id &&
      !findMember(this.#core.config, from)
    ) {
      this.#knownAddrs.set(from, fromAddr);
    }
    for (const m of messages) {
      if (m.to !== this.id) continue;
      try {
        this.#core.step(m);
      } catch (err) {
        this.#fail(asError(err));
        return;
      }
    }
    this.#schedule();
  }

  /**
   * Serve application messages of `topic` sent by other nodes with {@link callApp}: the
   * application's own node-to-node calls on the cluster's transport (same address, same secret),
   * outside Raft — nothing is logged or replicated. The handler validates `body`; what it returns
   * (JSON) is the caller's result, what it throws the caller's error. Returns an unsubscribe.
   */
  onAppRequest(topic: string, handler: (body: unknown) => Promise<unknown>): () => void {
    if (!/^[\w.:-]{1,200}$/.test(topic))
      throw new ClusterArgumentError(`bad app topic ${JSON.stringify(topic)}`);
    this.#appHandlers.set(topic, handler);
    return () => {
      if (this.#appHandlers.get(topic) === handler) this.#appHandlers.delete(topic);
    };
  }

  /**
   * Send an application message to the member `to` (a node of the current configuration) and
   * wait for its handler's answer. Rejects with the handler's error, `NodeStartingError` while
   * `to` has no handler for `topic`, `UnknownNodeError` for a node not in the configuration, or a
   * network error / timeout. Not retried: whether to try again is the application's decision.
   */
  async callApp(
    to: NodeId,
    topic: string,
    body: unknown,
    timeoutMs = this.#opts.requestTimeoutMs,
  ): Promise<unknown> {
    this.#assertOpen();
    if (to === this.id) return this.#handleApp(topic, JSON.parse(JSON.stringify(body ?? null)) as unknown);
    const member = findMember(this.#core.configAt(this.#core.commitIndex), to);
    if (!member) throw new UnknownNodeError(to);
    const resp = await this.#transport.call(member.addr, { kind: 'app', topic, body }, timeoutMs);
    if (resp.ok) return resp.result;
    throw errorFromJSON(resp.error);
  }

  async #handleApp(topic: string, body: unknown): Promise<unknown> {
    const handler = this.#appHandlers.get(topic);
    if (!handler) throw new NodeStartingError(`no handler for app topic ${topic} on node ${this.id} yet`);
    try {
      return await handler(body);
    } catch (err) {
      if (err instanceof ClusterError) throw err;
      throw new CommandFailedError(asError(err).message);
    }
  }

  isRetired(id: NodeId): boolean {
    return this.#core.configAt(this.#core.commitIndex).retired.includes(id);
  }

  async handleRequest(request: NodeRequest): Promise<NodeResponse> {
    try {
      this.#assertOpen();
      switch (request.kind) {
        case 'propose': {
          const bad = validateEnvelope(request.env);
          if (bad !== undefined) throw new InvalidClusterMessageError(bad);
          const result = await this.#withTimeout(
            this.#proposeLocal(request.env),
            this.#opts.attemptTimeoutMs,
            'propose',
          );
          return { ok: true, result };
        }
        case 'join':
          return { ok: true, result: await this.#handleJoin(request.id, request.addr) };
        case 'remove':
          return { ok: true, result: await this.#handleRemove(request.id) };
        case 'transfer':
          return { ok: true, result: await this.#handleTransfer(request.to) };
        case 'app':
          return { ok: true, result: await this.#handleApp(request.topic, request.body) };
      }
    } catch (err) {
      const inner = err instanceof AttemptFailed ? err.cause : err;
      const e =
        inner instanceof ClusterError
          ? inner
          : new ClusterError('MOCRA_ERR_CLUSTER_INVALID_MESSAGE', asError(inner).message, false);
      return { ok: false, error: e.toJSON() };
    }
  }

  // ── the Raft loop ────────────────────────────────────────────────────────────

  #startTicking(): void {
    const tick = (): void => {
      if (this.#closed) return;
      try {
        this.#core.tick();
      } catch (err) {
        this.#fail(asError(err));
        return;
      }
      this.#schedule();
      this.#timer(tick, this.#opts.tickMs);
    };
    this.#timer(tick, this.#opts.tickMs);
    const sweep = (): void => {
      if (this.#closed) return;
      this.#maybeSweep();
      this.#timer(sweep, this.#opts.sweepIntervalMs);
    };
    this.#timer(sweep, this.#opts.sweepIntervalMs);
  }

  #schedule(): void {
    if (this.#pumpScheduled || this.#closed) return;
    this.#pumpScheduled = true;
    this.#clock.defer(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#closed || this.#failed) return;
    this.#sendAll(this.#core.takeUrgentMessages());
    if (this.#writing) return;
    if (this.#snapshotDue) {
      this.#snapshotDue = false;
      if (this.#takeSnapshot()) return;
    }
    if (!this.#core.hasReady()) return;
    const rd = this.#core.ready();
    const needsWrite = rd.hardState !== undefined || rd.entries.length > 0 || rd.snapshot !== undefined;
    if (!needsWrite) {
      this.#finishReady(rd);
      this.#schedule();
      return;
    }
    this.#writing = true;
    const started = this.#clock.now();
    this.#storage.save(rd).then(
      () => {
        this.#writeDone();
        if (this.#closed) return;
        this.#emit({
          type: 'persist',
          nodeId: this.id,
          entries: rd.entries.length,
          durationMs: this.#clock.now() - started,
        });
        this.#finishReady(rd);
        this.#schedule();
      },
      (err: unknown) => {
        this.#writeDone();
        this.#fail(asError(err));
      },
    );
  }

  #writeDone(): void {
    this.#writing = false;
    const idle = this.#writeIdle;
    this.#writeIdle = [];
    for (const resolve of idle) resolve();
  }

  #finishReady(rd: Ready): void {
    this.#sendAll(rd.messages);
    if (rd.snapshot) this.#installSnapshot(rd.snapshot);
    try {
      for (const e of rd.committed) this.#applyEntry(e);
      this.#core.advance(rd);
    } catch (err) {
      this.#fail(asError(err));
      return;
    }
    const last = rd.committed[rd.committed.length - 1];
    if (last) {
      this.#emit({ type: 'apply', nodeId: this.id, index: last.index, entries: rd.committed.length });
      this.#wakeAppliedWaiters();
    }
    for (const rs of rd.readStates) {
      const batch = this.#readBatches.get(rs.ctx);
      if (!batch) continue;
      this.#readBatches.delete(rs.ctx);
      for (const w of batch.waiters) w.resolve(rs.index);
    }
    if (this.#sm.appliedIndex - this.#snapshotIndex >= this.#opts.snapshotThreshold) this.#snapshotDue = true;
    this.#sendAll(this.#core.takeUrgentMessages());
  }

  #installSnapshot(snapshot: Snapshot): void {
    this.#sm = ControlState.deserialize(snapshot.data);
    this.#snapshotIndex = snapshot.meta.index;
    // Proposals covered by the snapshot have an outcome we cannot see; their callers retry with
    // the same sequence number and the session answers from its cache.
    for (const [index, p] of this.#proposals) {
      if (index <= snapshot.meta.index) {
        this.#proposals.delete(index);
        p.reject(
          new AttemptFailed(
            new ClusterError(
              'MOCRA_ERR_CLUSTER_TIMEOUT',
              'the outcome is inside an installed snapshot; retrying',
              true,
            ),
            true,
          ),
        );
      }
    }
    this.#emit({ type: 'snapshot-installed', nodeId: this.id, index: snapshot.meta.index });
    this.#checkMembership(snapshot.meta.config);
    this.#wakeAppliedWaiters();
  }

  #applyEntry(e: LogEntry): void {
    let result: CommandResult | undefined;
    if (e.kind === 'command') result = this.#sm.apply(e.index, e.term, e.data);
    else this.#sm.skip(e.index, e.term);
    // Entries apply in log order, so this walks the committed configurations in order: a node
    // replaying its log from the start sees the bootstrap configuration (without itself) before
    // the one that added it, and only a later one without it means it was removed.
    if (e.kind === 'config') this.#checkMembership(this.#core.configAt(e.index));
    this.#onApply?.(e, result, this.#sm.now);
    const p = this.#proposals.get(e.index);
    if (p) {
      this.#proposals.delete(e.index);
      if (p.term === e.term) p.resolve(result);
      else
        p.reject(
          new AttemptFailed(new NoLeaderError('leadership changed before the proposal committed'), false),
        );
    }
  }

  #checkMembership(config: RaftConfiguration): void {
    const me = findMember(config, this.id);
    if (me) this.#wasMember = true;
    else if (this.#wasMember) this.#markRemoved();
    this.#emit({
      type: 'membership',
      nodeId: this.id,
      voters: config.members.filter((m) => m.voter).map((m) => m.id),
      learners: config.members.filter((m) => !m.voter).map((m) => m.id),
    });
  }

  /** A committed configuration without this node: stop serving (and stop campaigning). */
  #markRemoved(): void {
    if (this.#removed || this.#closed) return;
    this.#removed = true;
    this.#emit({ type: 'removed', nodeId: this.id });
    for (const cancel of this.#timers) cancel();
    this.#timers.clear();
  }

  #wakeAppliedWaiters(): void {
    const applied = this.#sm.appliedIndex;
    for (let i = this.#appliedWaiters.length - 1; i >= 0; i--) {
      const w = this.#appliedWaiters[i]!;
      if (w.index <= applied) {
        this.#appliedWaiters.splice(i, 1);
        w.resolve();
      }
    }
  }

  /** Start writing a snapshot of the applied state; false when there is nothing new to snapshot. */
  #takeSnapshot(): boolean {
    const index = this.#sm.appliedIndex;
    if (index <= this.#snapshotIndex) return false;
    const snapshot: Snapshot = { meta: this.#core.snapshotMetaAt(index), data: this.#sm.serialize() };
    this.#writing = true;
    this.#storage.saveSnapshot(snapshot).then(
      () => {
        this.#writeDone();
        if (this.#closed) return;
        this.#core.compact(snapshot, index - this.#opts.snapshotTrailingEntries);
        this.#snapshotIndex = index;
        this.#emit({ type: 'snapshot', nodeId: this.id, index, bytes: snapshot.data.length });
        this.#schedule();
      },
      (err: unknown) => {
        this.#writeDone();
        this.#fail(asError(err));
      },
    );
    return true;
  }

  #sendAll(messages: readonly RaftMessage[]): void {
    if (messages.length === 0) return;
    const config = this.#core.config;
    const byPeer = new Map<NodeId, RaftMessage[]>();
    for (const m of messages) {
      let list = byPeer.get(m.to);
      if (!list) {
        list = [];
        byPeer.set(m.to, list);
      }
      list.push(m);
    }
    for (const [to, list] of byPeer) {
      // A peer that just left the configuration may still need our answer (e.g. the append
      // response that lets a removed leader commit its own removal), so fall back to the
      // address it was last known by.
      const addr = findMember(config, to)?.addr ?? this.#knownAddrs.get(to);
      if (addr) this.#transport.send(to, addr, list);
    }
  }

  #onRaftEvent(e: RaftEvent): void {
    if (e.type === 'dead-voter') {
      this.#emit({
        type: 'dead-voter',
        nodeId: this.id,
        voter: e.id,
        silentMs: e.silentTicks * this.#opts.tickMs,
      });
    }
    if (e.type === 'role') {
      this.#emit({ type: 'role', nodeId: this.id, role: e.role, term: e.term });
      if (e.leader !== this.#lastLeader) {
        this.#lastLeader = e.leader;
        this.#emit({ type: 'leader', nodeId: this.id, leader: e.leader, term: e.term });
      }
    }
    if (e.type === 'log-changed' || e.type === 'snapshot-restored') {
      for (const m of this.#core.config.members) this.#knownAddrs.set(m.id, m.addr);
    }
    if (e.type === 'commit' || e.type === 'log-changed') {
      const leader = this.#core.leader;
      if (leader !== this.#lastLeader) {
        this.#lastLeader = leader;
        this.#emit({ type: 'leader', nodeId: this.id, leader, term: this.#core.term });
      }
    }
  }

  #fail(err: Error): void {
    if (this.#failed) return;
    // After a failed write (or a broken invariant) the node's memory and disk may disagree:
    // continuing could acknowledge something that is not durable, so the node stops serving.
    this.#failed = err;
    this.#emit({ type: 'error', nodeId: this.id, error: err, fatal: true });
    for (const cancel of this.#timers) cancel();
    this.#timers.clear();
    for (const p of this.#proposals.values()) p.reject(err);
    this.#proposals.clear();
  }

  // ── proposals and reads ──────────────────────────────────────────────────────

  #proposeLocal(env: CommandEnvelope): Promise<CommandResult> {
    const r = this.#core.propose(JSON.stringify(this.#stamp(env)));
    return this.#track(r).then((result) => {
      if (!result) throw new CommandFailedError('a command entry produced no result');
      return result;
    });
  }

  /** The leader's clock readings, in whole milliseconds (the state machine takes integers only). */
  #stamp(env: CommandEnvelope): CommandEnvelope {
    return { ...env, t: Math.floor(this.#clock.now()), m: Math.floor(this.#clock.monotonic()) };
  }

  #track(r: ProposeResult): Promise<CommandResult | undefined> {
    if (!r.ok) return Promise.reject(this.#proposeError(r.reason));
    this.#schedule();
    return new Promise((resolve, reject) => this.#proposals.set(r.index, { term: r.term, resolve, reject }));
  }

  #proposeError(reason: Exclude<ProposeResult, { ok: true }>['reason']): Error {
    switch (reason) {
      case 'not-leader': {
        const leader = this.#leaderInfo();
        return new NotLeaderError(leader?.id, leader?.addr);
      }
      case 'transferring':
        return new NoLeaderError('leadership is being transferred');
      case 'config-pending':
      case 'not-committed-in-term':
        return new ConfigChangePendingError();
      case 'unknown-node':
      case 'retired':
        return new ClusterArgumentError(
          `the membership change names a node that is not a member (${reason})`,
        );
      case 'last-voter':
        return new ClusterArgumentError('cannot remove the last voter');
      case 'no-op':
        return new ClusterArgumentError('the change would not change anything');
    }
  }

  #leaderInfo(): { id: NodeId; addr: string } | undefined {
    const leader = this.#core.leader;
    if (leader === null) return undefined;
    const m = findMember(this.#core.config, leader);
    return m ? { id: m.id, addr: m.addr } : undefined;
  }

  /** Run a client write through Raft exactly once: same (client, seq) on every retry. */
  async #submit(op: Operation): Promise<CommandResult> {
    const bad = validateOperation(op);
    if (bad !== undefined) throw new ClusterArgumentError(bad);
    this.#assertOpen();
    if (this.#removed) throw new NodeRemovedError(this.id);
    const seq = ++this.#seq;
    this.#outstanding.add(seq);
    try {
      const result = await this.#retrying(op.type, async (attemptMs) => {
        const env: CommandEnvelope = { c: this.#clientId, s: seq, f: this.#floor(), t: 0, m: 0, op };
        if (this.#core.role === 'leader') {
          try {
            return await this.#withTimeout(this.#proposeLocal(env), attemptMs, op.type);
          } catch (err) {
            throw toAttemptFailure(err, true);
          }
        }
        const leader = this.#leaderInfo();
        if (!leader) throw new AttemptFailed(new NoLeaderError(), false);
        let resp: NodeResponse;
        try {
          resp = await this.#transport.call(leader.addr, { kind: 'propose', env }, attemptMs);
        } catch (err) {
          throw new AttemptFailed(asError(err), true);
        }
        if (!resp.ok) throw remoteFailure(errorFromJSON(resp.error));
        return resp.result as CommandResult;
      });
      if (result.type === 'error') {
        if (result.code === 'stale-request') throw new SessionExpiredError(this.#clientId, seq);
        throw new CommandFailedError(result.message);
      }
      return result;
    } finally {
      this.#outstanding.delete(seq);
    }
  }

  #floor(): number {
    let min = this.#seq + 1;
    for (const s of this.#outstanding) min = Math.min(min, s);
    return min;
  }

  async #retrying<T>(what: string, attempt: (attemptMs: number) => Promise<T>): Promise<T> {
    const timeout = this.#opts.requestTimeoutMs;
    const deadline = this.#clock.now() + timeout;
    let maybeApplied = false;
    let lastError: Error | undefined;
    for (let n = 0; ; n++) {
      this.#assertOpen();
      const left = deadline - this.#clock.now();
      if (left <= 0) break;
      try {
        return await attempt(Math.min(left, this.#opts.attemptTimeoutMs));
      } catch (err) {
        if (!(err instanceof AttemptFailed)) throw err;
        maybeApplied ||= err.maybeApplied;
        lastError = err.cause;
        if (this.#closed) throw new ClusterClosedError();
      }
      const backoff = Math.min(500, 10 * 2 ** Math.min(n, 6)) * (0.5 + this.#random() / 2);
      const wait = Math.min(backoff, deadline - this.#clock.now());
      if (wait > 0) await this.#sleep(wait);
    }
    if (
      !maybeApplied &&
      lastError instanceof ClusterError &&
      lastError.code === 'MOCRA_ERR_CLUSTER_NO_LEADER'
    ) {
      throw lastError;
    }
    throw new ClusterTimeoutError(what, timeout, lastError ? { cause: lastError } : {});
  }

  async #read(options: ReadOptions): Promise<void> {
    this.#assertOpen();
    if (this.#removed) throw new NodeRemovedError(this.id);
    if (options.consistency === 'local') return;
    await this.#retrying('read', async (attemptMs) => {
      await this.#readBarrier(attemptMs);
    });
  }

  /** ReadIndex: learn a commit index that is current as of now, then wait until it is applied. */
  async #readBarrier(timeoutMs: number): Promise<void> {
    const index = await this.#withTimeout(
      new Promise<number>((resolve, reject) => {
        let batch = this.#readBatch;
        if (!batch) {
          // Reads that arrive in the same turn share one ReadIndex round.
          const fresh: ReadBatch = { ctx: `${this.id}:${++this.#readCtx}`, waiters: [] };
          this.#readBatch = fresh;
          batch = fresh;
          this.#readBatches.set(fresh.ctx, fresh);
          this.#clock.defer(() => {
            this.#readBatch = undefined;
            if (this.#closed) return;
            this.#core.readIndex(fresh.ctx);
            this.#schedule();
          });
        }
        batch.waiters.push({ resolve, reject });
      }),
      timeoutMs,
      'read',
    ).catch((err: unknown) => {
      throw toAttemptFailure(err, false);
    });
    if (index < 0) throw new AttemptFailed(new NoLeaderError(), false);
    if (this.#sm.appliedIndex >= index) return;
    await this.#withTimeout(
      new Promise<void>((resolve, reject) => this.#appliedWaiters.push({ index, resolve, reject })),
      timeoutMs,
      'read',
    ).catch((err: unknown) => {
      throw toAttemptFailure(err, false);
    });
  }

  // ── membership changes ───────────────────────────────────────────────────────

  async #join(seeds: readonly string[]): Promise<void> {
    if (seeds.length === 0) throw new JoinFailedError('no seeds to join through');
    const deadline = this.#clock.now() + this.#opts.joinTimeoutMs;
    let lastError: Error | undefined;
    for (let n = 0; this.#clock.now() < deadline; n++) {
      if (this.#closed) throw new ClusterClosedError();
      // Once the leader has added us and replicated the change, we are in.
      if (findMember(this.#core.config, this.id)) return;
      const seed = seeds[n % seeds.length]!;
      try {
        const resp = await this.#transport.call(
          seed,
          { kind: 'join', id: this.id, addr: this.addr },
          Math.min(this.#opts.attemptTimeoutMs * 2, Math.max(1, deadline - this.#clock.now())),
        );
        if (resp.ok) return;
        const err = errorFromJSON(resp.error);
        if (!err.retryable) throw err;
        lastError = err;
      } catch (err) {
        if (err instanceof ClusterError && !err.retryable) throw err;
        lastError = asError(err);
      }
      await this.#sleep(Math.min(1000, 50 * 2 ** Math.min(n, 5)));
    }
    throw new JoinFailedError(
      `could not join through ${seeds.join(', ')} within ${this.#opts.joinTimeoutMs} ms`,
      lastError ? { cause: lastError } : {},
    );
  }

  async #handleJoin(id: unknown, addr: unknown): Promise<unknown> {
    if (typeof id !== 'string' || !ID_PATTERN.test(id))
      throw new InvalidClusterMessageError('bad node id in join');
    if (typeof addr !== 'string' || !isAddr(addr))
      throw new InvalidClusterMessageError('bad address in join');
    const config = this.#core.config;
    if (config.retired.includes(id)) throw new NodeIdRetiredError(id);
    const existing = findMember(config, id);
    // Joins come only from nodes with an empty log. A learner that asks again is retrying a join
    // whose answer it missed; a voter that asks again lost its disk — and with it the votes it
    // cast — so letting it vote again could elect two leaders in one term.
    if (existing?.voter) throw new VoterDataLostError(id);
    if (existing && existing.addr === addr && this.#core.configIndex <= this.#core.commitIndex) {
      return { joined: true };
    }
    return this.#changeConfig({ op: 'add-learner', id, addr }, { kind: 'join', id, addr });
  }

  async #handleRemove(id: unknown): Promise<unknown> {
    if (typeof id !== 'string' || !ID_PATTERN.test(id))
      throw new InvalidClusterMessageError('bad node id in remove');
    if (this.#core.role === 'leader') {
      // Idempotent: a retried removal that already committed is a success, not an unknown node.
      if (this.#core.configAt(this.#core.commitIndex).retired.includes(id)) return { removed: id };
      if (!findMember(this.#core.config, id)) throw new UnknownNodeError(id);
    }
    return this.#changeConfig({ op: 'remove', id }, { kind: 'remove', id });
  }

  /** Propose a configuration change on the leader (forwarding if this node is not it) and wait for it. */
  async #changeConfig(
    change: Parameters<RaftCore['proposeConfigChange']>[0],
    forward: NodeRequest,
  ): Promise<unknown> {
    const deadline = this.#clock.now() + this.#opts.attemptTimeoutMs;
    for (;;) {
      if (this.#core.role !== 'leader') {
        const leader = this.#leaderInfo();
        if (!leader || leader.id === this.id) throw new NoLeaderError();
        const resp = await this.#transport.call(
          leader.addr,
          forward,
          Math.max(1, deadline - this.#clock.now()),
        );
        if (!resp.ok) throw errorFromJSON(resp.error);
        return resp.result;
      }
      // A retry of a change that has meanwhile committed (ours or an earlier attempt) is done.
      const committed = this.#core.configAt(this.#core.commitIndex);
      if (change.op === 'remove' && committed.retired.includes(change.id))
        return { index: this.#core.commitIndex };
      if (change.op === 'add-learner' && findMember(committed, change.id)?.addr === change.addr) {
        return { index: this.#core.commitIndex };
      }
      const r = this.#core.proposeConfigChange(change);
      if (r.ok) {
        await this.#withTimeout(this.#track(r), Math.max(1, deadline - this.#clock.now()), forward.kind);
        return { index: r.index };
      }
      if (r.reason === 'no-op') return { index: this.#core.configIndex };
      if (r.reason === 'unknown-node') throw new UnknownNodeError(change.id);
      if (r.reason === 'retired') throw new NodeIdRetiredError(change.id);
      if (r.reason !== 'config-pending' && r.reason !== 'not-committed-in-term')
        throw this.#proposeError(r.reason);
      if (this.#clock.now() >= deadline) throw new ConfigChangePendingError();
      await this.#sleep(this.#opts.tickMs);
    }
  }

  async #handleTransfer(to: unknown): Promise<unknown> {
    if (to !== null && (typeof to !== 'string' || !ID_PATTERN.test(to))) {
      throw new InvalidClusterMessageError('bad node id in transfer');
    }
    if (this.#core.role !== 'leader') {
      const leader = this.#leaderInfo();
      if (!leader || leader.id === this.id) throw new NoLeaderError();
      const resp = await this.#transport.call(
        leader.addr,
        { kind: 'transfer', to },
        this.#opts.attemptTimeoutMs,
      );
      if (!resp.ok) throw errorFromJSON(resp.error);
      return resp.result;
    }
    return this.#transferLocal(to, this.#opts.attemptTimeoutMs);
  }

  async #transferLocal(to: NodeId | null, timeoutMs: number): Promise<NodeId> {
    let target = to;
    const status = this.#core.status();
    if (target === null) {
      let best = -1;
      for (const p of status.progress) {
        if (isVoter(status.config, p.id) && p.match > best) {
          best = p.match;
          target = p.id;
        }
      }
      if (target === null) throw new TransferFailedError('there is no other voter to hand leadership to');
    }
    if (target === this.id) return this.id;
    if (!isVoter(status.config, target)) throw new UnknownNodeError(target);
    if (!this.#core.transferLeadership(target))
      throw new TransferFailedError(`cannot start a transfer to ${target}`);
    this.#schedule();
    const deadline = this.#clock.now() + timeoutMs;
    while (this.#clock.now() < deadline) {
      if (this.#core.leader === target) return target;
      if (this.#core.role === 'leader' && this.#core.status().transferee === null) break;
      await this.#sleep(this.#opts.tickMs);
    }
    if (this.#core.leader === target) return target;
    throw new TransferFailedError(`leadership did not move to ${target}`);
  }

  async #admin(request: NodeRequest, what: string): Promise<unknown> {
    this.#assertOpen();
    const deadline = this.#clock.now() + this.#opts.requestTimeoutMs;
    let last: Error | undefined;
    while (this.#clock.now() < deadline) {
      const resp = await this.handleRequest(request);
      if (resp.ok) return resp.result;
      const err = errorFromJSON(resp.error);
      if (!err.retryable) throw err;
      last = err;
      await this.#sleep(Math.min(200, Math.max(1, deadline - this.#clock.now())));
    }
    throw new ClusterTimeoutError(what, this.#opts.requestTimeoutMs, last ? { cause: last } : {});
  }

  // ── leader housekeeping ──────────────────────────────────────────────────────

  #maybeSweep(): void {
    if (this.#core.role !== 'leader' || !this.#core.committedInTerm || this.#sweepInFlight) return;
    const next = this.#sm.nextExpiry();
    if (next === undefined) return;
    const term = this.#core.term;
    // Cluster time stands still in a new term until its leader's first command is applied, so
    // a leader that has anything waiting to expire starts its clock with a sweep.
    const clockRunning = this.#sm.clockTerm === term;
    if (clockRunning && next > this.#sm.timeAt(term, Math.floor(this.#clock.monotonic()))) return;
    const env = this.#stamp({ c: '', s: 0, f: 0, t: 0, m: 0, op: { type: 'sweep' } });
    const r = this.#core.propose(JSON.stringify(env));
    if (!r.ok) return;
    this.#sweepInFlight = true;
    this.#track(r).then(
      () => {
        this.#sweepInFlight = false;
      },
      () => {
        this.#sweepInFlight = false;
      },
    );
  }

  // ── small helpers ────────────────────────────────────────────────────────────

  #assertOpen(): void {
    if (this.#closed) throw new ClusterClosedError();
    if (this.#failed)
      throw new ClusterError('MOCRA_ERR_CLUSTER_STORAGE', `node stopped: ${this.#failed.message}`, false, {
        cause: this.#failed,
      });
  }

  #timer(fn: () => void, ms: number): () => void {
    const cancelClock = this.#clock.setTimer(() => {
      this.#timers.delete(cancel);
      fn();
    }, ms);
    const cancel = (): void => {
      this.#timers.delete(cancel);
      cancelClock();
    };
    this.#timers.add(cancel);
    return cancel;
  }

  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#closed) {
        resolve();
        return;
      }
      const wake = (): void => {
        this.#sleepers.delete(wake);
        cancel();
        resolve();
      };
      const cancel = this.#clock.setTimer(wake, ms);
      this.#sleepers.add(wake);
    });
  }

  #withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const cancel = this.#clock.setTimer(() => {
        if (done) return;
        done = true;
        reject(new ClusterTimeoutError(what, ms));
      }, ms);
      promise.then(
        (v) => {
          if (done) return;
          done = true;
          cancel();
          resolve(v);
        },
        (err: unknown) => {
          if (done) return;
          done = true;
          cancel();
          reject(err);
        },
      );
    });
  }

  #emit(event: ClusterEvent): void {
    publishEvent(event, this.#onEvent);
  }
}

function toAttemptFailure(err: unknown, maybeApplied: boolean): Error {
  if (err instanceof AttemptFailed) return err;
  if (err instanceof ClusterError) {
    if (err.code === 'MOCRA_ERR_CLUSTER_TIMEOUT') return new AttemptFailed(err, maybeApplied);
    if (err.code === 'MOCRA_ERR_CLUSTER_NOT_LEADER' || err.code === 'MOCRA_ERR_CLUSTER_NO_LEADER') {
      return new AttemptFailed(err, false);
    }
    if (err.retryable) return new AttemptFailed(err, maybeApplied);
    return err;
  }
  return new AttemptFailed(asError(err), maybeApplied);
}

/** Codes a forwarded attempt can end with that retrying cannot fix: they are the caller's answer. */
const FINAL_REMOTE_CODES = new Set<string>([
  'MOCRA_ERR_CLUSTER_INVALID_MESSAGE',
  'MOCRA_ERR_CLUSTER_INVALID_ARGUMENT',
  'MOCRA_ERR_CLUSTER_COMMAND_FAILED',
  'MOCRA_ERR_CLUSTER_SESSION_EXPIRED',
  'MOCRA_ERR_CLUSTER_UNAUTHORIZED',
]);

/** The leader (or who we thought it was) answered with an error. */
function remoteFailure(err: ClusterError): Error {
  if (FINAL_REMOTE_CODES.has(err.code)) return err;
  // Not the leader / no leader: the command was not proposed there. Anything else (it closed,
  // timed out, stopped): it may have been.
  const notProposed =
    err.code === 'MOCRA_ERR_CLUSTER_NOT_LEADER' || err.code === 'MOCRA_ERR_CLUSTER_NO_LEADER';
  return new AttemptFailed(err, !notProposed);
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function ttl(ttlMs: number | undefined): { ttlMs?: number } {
  return ttlMs === undefined ? {} : { ttlMs };
}

function checkKey(key: unknown): void {
  if (typeof key !== 'string' || key.length === 0 || key.length > 1024) {
    throw new ClusterArgumentError('key must be a non-empty string of at most 1024 characters');
  }
}

/** `host:port` with a port in range. */
export function isAddr(addr: string): boolean {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(addr);
  if (!m) return false;
  const port = Number(m[2]);
  return port > 0 && port < 65536;
}

function validateOptions(deps: ClusterNodeDeps): void {
  if (!ID_PATTERN.test(deps.id)) {
    throw new ClusterArgumentError(
      `node id ${JSON.stringify(deps.id)} must match ${ID_PATTERN} (letters, digits, . _ -)`,
    );
  }
  const o = deps.options ?? {};
  const positive: Array<[string, number | undefined]> = [
    ['tickMs', o.tickMs],
    ['electionTicks', o.electionTicks],
    ['heartbeatTicks', o.heartbeatTicks],
    ['requestTimeoutMs', o.requestTimeoutMs],
    ['attemptTimeoutMs', o.attemptTimeoutMs],
    ['snapshotThreshold', o.snapshotThreshold],
    ['sweepIntervalMs', o.sweepIntervalMs],
    ['maxVoters', o.maxVoters],
    ['minVoters', o.minVoters],
    ['maxInflight', o.maxInflight],
    ['maxEntriesPerAppend', o.maxEntriesPerAppend],
    ['joinTimeoutMs', o.joinTimeoutMs],
  ];
  for (const [name, v] of positive) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v <= 0)) {
      throw new ClusterArgumentError(`${name} must be a positive integer`);
    }
  }
  if (
    o.removeDeadVotersAfterMs !== undefined &&
    (!Number.isSafeInteger(o.removeDeadVotersAfterMs) || o.removeDeadVotersAfterMs < 0)
  ) {
    throw new ClusterArgumentError('removeDeadVotersAfterMs must be a non-negative integer (0 = off)');
  }
  const electionMs = (o.electionTicks ?? 20) * (o.tickMs ?? 50);
  if (o.removeDeadVotersAfterMs && o.removeDeadVotersAfterMs < 2 * electionMs) {
    // Shorter than a couple of election timeouts, a slow or restarting node would be thrown out.
    throw new ClusterArgumentError(
      `removeDeadVotersAfterMs must be 0 or at least two election timeouts (${2 * electionMs} ms)`,
    );
  }
  if (
    o.snapshotTrailingEntries !== undefined &&
    (!Number.isSafeInteger(o.snapshotTrailingEntries) || o.snapshotTrailingEntries < 0)
  ) {
    throw new ClusterArgumentError('snapshotTrailingEntries must be a non-negative integer');
  }
  if ((o.heartbeatTicks ?? 2) >= (o.electionTicks ?? 20)) {
    throw new ClusterArgumentError('heartbeatTicks must be smaller than electionTicks');
  }
}
