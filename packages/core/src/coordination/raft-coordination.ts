/**
 * Coordination on the embedded Raft control plane (`@mocra/cluster`): no Redis, no external
 * coordinator. A thin shell over a {@link ClusterNode}; every call may go to any node (writes
 * are forwarded to the leader, reads are linearizable by ReadIndex), and every comparison with
 * time is in the cluster's time, which only the leaders' monotonic clocks move — never this
 * process's clock or any wall clock, so clock skew between nodes frees no lock and expires no
 * key early (see `@mocra/cluster`'s README, "Leases and TTLs under clock skew").
 *
 * ```
 *  {ns}/kv/{key}          the KV entries (TTL and CAS are the state machine's own)
 *  {ns}/lock/{name}       fenced locks; the token is the Raft index of the committed acquire
 *  {ns}/member/{id}       '{"addr","meta","seen"}' with a TTL of memberTtlMs, re-set by heartbeats
 * ```
 *
 * Membership lives in the KV (a key per member, kept alive by heartbeats) rather than in the
 * node's own registry, so that it is namespaced like everything else and so that a client that
 * stops without leaving simply stops heartbeating — the same life cycle as the Redis backend.
 * A member's `lastSeen` is the heartbeating process's clock at its last heartbeat, for display;
 * whether it is live is decided by the key's TTL in cluster time.
 *
 * A TTL lapses at the next sweep after it runs out (`ClusterNodeOptions.sweepIntervalMs`, 1 s by
 * default): an expired key or member may be seen for up to that long. Locks are exact: an
 * acquire judges expiry at its own commit. A leader change gives every lock, key and member its
 * full TTL again.
 */
import type { ClusterConfig, ClusterNode, ClusterNodeOptions, ClusterStatus } from '@mocra/cluster';
import {
  BackendUnavailableError,
  CoordinationClosedError,
  InvalidArgumentError,
  isMocraError,
} from '../errors.js';
import type { Coordination, LockLease, Member } from './types.js';

const BACKEND = 'the Raft coordination backend';

export interface RaftCoordinationOptions {
  /**
   * A running cluster node to use. It is not closed with this client unless `ownsNode` is set.
   * Exactly one of `node` and `config` is required.
   */
  node?: ClusterNode;
  /** Start a cluster node from this config (bootstrap, join or fromEnv); it is closed with this client. */
  config?: ClusterConfig;
  /** Timing options of the node started from `config`. @default the config's own */
  nodeOptions?: ClusterNodeOptions;
  /** Close `node` when this client closes. @default true with `config`, false with `node` */
  ownsNode?: boolean;
  /** This member's id in the coordination. @default the cluster node's id */
  nodeId?: string;
  /** Keeps crawls sharing one cluster apart. @default 'mocra' */
  namespace?: string;
  /** A member silent for this long is no longer live. @default 10000 */
  memberTtlMs?: number;
  /** How often a joined member sends its heartbeat. @default memberTtlMs / 3 */
  heartbeatMs?: number;
  /**
   * With `config`: how long to wait for the cluster to have a leader before resolving (a joining
   * node has one once it was added). 0 skips the wait. @default 30000
   */
  leaderTimeoutMs?: number;
  /**
   * Closing an owned node waits up to this long until no other member of the namespace is live.
   * The nodes of a run finish one after another; a node that closed at once could take the
   * quorum away from those still finishing (after a voter died, one more leaving is too many).
   * 0 closes at once. @default memberTtlMs + 5000
   */
  closeGraceMs?: number;
}

/** The Raft coordination backend. */
export interface RaftCoordination extends Coordination {
  readonly kind: 'raft';
  /** The cluster node underneath (status, leadership, administration). */
  readonly node: ClusterNode;
  /** The node's Raft view: role, term, leader, commit/applied index, voters, learners. */
  status(): ClusterStatus;
  /**
   * Stop heartbeats and refuse further calls. `leave: false` keeps the membership record until it
   * expires, which is what a crashed process looks like to the others. An owned node is closed
   * (handing leadership to a caught-up voter first).
   */
  close(options?: { leave?: boolean }): Promise<void>;
}

/** Open the Raft coordination backend over a running node, or start a node from a config. */
export async function createRaftCoordination(options: RaftCoordinationOptions): Promise<RaftCoordination> {
  if ((options.node === undefined) === (options.config === undefined)) {
    throw new InvalidArgumentError('createRaftCoordination needs exactly one of `node` and `config`');
  }
  if (options.node !== undefined) return new RaftCoordinationClient(options.node, options);
  const { createClusterNode } = await import('@mocra/cluster');
  const node = await createClusterNode(options.config!, options.nodeOptions ?? {});
  try {
    const wait = options.leaderTimeoutMs ?? 30_000;
    if (wait > 0) await node.waitForLeader(wait);
  } catch (err) {
    await node.close({ transferLeadership: false }).catch(() => {});
    throw raftFailure('waiting for a leader', err);
  }
  try {
    return new RaftCoordinationClient(node, { ...options, ownsNode: options.ownsNode ?? true });
  } catch (err) {
    await node.close().catch(() => {});
    throw err;
  }
}

export class RaftCoordinationClient implements RaftCoordination {
  readonly kind = 'raft' as const;
  readonly nodeId: string;
  readonly node: ClusterNode;
  readonly #ownsNode: boolean;
  readonly #ns: string;
  readonly #memberTtlMs: number;
  readonly #heartbeatMs: number;
  readonly #closeGraceMs: number;
  #heartbeat: NodeJS.Timeout | undefined;
  #joined: string | undefined;
  #closed = false;

  constructor(node: ClusterNode, options: Omit<RaftCoordinationOptions, 'node' | 'config'> = {}) {
    this.node = node;
    this.nodeId = options.nodeId ?? node.id;
    this.#ownsNode = options.ownsNode ?? false;
    const ns = options.namespace ?? 'mocra';
    if (ns === '' || ns.includes('/'))
      throw new InvalidArgumentError(`namespace must be non-empty and contain no '/', got '${ns}'`);
    this.#ns = `${ns}/`;
    this.#memberTtlMs = options.memberTtlMs ?? 10_000;
    this.#heartbeatMs = options.heartbeatMs ?? Math.max(1, Math.floor(this.#memberTtlMs / 3));
    if (!(this.#memberTtlMs > 0 && Number.isFinite(this.#memberTtlMs)))
      throw new InvalidArgumentError(`memberTtlMs must be > 0, got ${this.#memberTtlMs}`);
    this.#closeGraceMs = options.closeGraceMs ?? this.#memberTtlMs + 5_000;
    if (!(this.#heartbeatMs > 0 && this.#heartbeatMs < this.#memberTtlMs))
      throw new InvalidArgumentError(`heartbeatMs must be > 0 and < memberTtlMs, got ${this.#heartbeatMs}`);
  }

  status(): ClusterStatus {
    return this.node.status();
  }

  #kv(key: string): string {
    return `${this.#ns}kv/${key}`;
  }
  #lock(name: string): string {
    return `${this.#ns}lock/${name}`;
  }
  #memberPrefix(): string {
    return `${this.#ns}member/`;
  }

  async #run<R>(what: string, fn: () => Promise<R>): Promise<R> {
    if (this.#closed) throw new CoordinationClosedError('raft');
    try {
      return await fn();
    } catch (err) {
      if (this.#closed) throw new CoordinationClosedError('raft');
      throw raftFailure(what, err);
    }
  }

  // ── key-value ──────────────────────────────────────────────────────────────────

  async get(key: string): Promise<string | undefined> {
    return this.#run('get', () => this.node.get(this.#kv(key)));
  }

  async set(key: string, value: string, options: { ttlMs?: number } = {}): Promise<void> {
    const ttl = ttlOf(options.ttlMs);
    return this.#run('set', () => this.node.set(this.#kv(key), value, ttl));
  }

  async delete(key: string): Promise<boolean> {
    return this.#run('delete', () => this.node.delete(this.#kv(key)));
  }

  async compareAndSet(
    key: string,
    expected: string | undefined,
    next: string | undefined,
    options: { ttlMs?: number } = {},
  ): Promise<boolean> {
    const ttl = ttlOf(options.ttlMs);
    return this.#run('compareAndSet', () => this.node.compareAndSet(this.#kv(key), expected, next, ttl));
  }

  async increment(key: string, by = 1): Promise<number> {
    if (!Number.isSafeInteger(by))
      throw new InvalidArgumentError(`increment by must be a safe integer, got ${by}`);
    return this.#run('increment', async () => {
      try {
        return await this.node.increment(this.#kv(key), by);
      } catch (err) {
        // The state machine refuses to increment a value that is not an integer.
        if (codeOf(err) === 'MOCRA_ERR_CLUSTER_COMMAND_FAILED') {
          throw new InvalidArgumentError(`cannot increment '${key}': its value is not an integer`, {
            cause: err,
          });
        }
        throw err;
      }
    });
  }

  // ── fenced locks ───────────────────────────────────────────────────────────────

  async acquireLock(
    name: string,
    options: { ttlMs: number; owner?: string },
  ): Promise<LockLease | undefined> {
    const ttlMs = checkTtl(options.ttlMs);
    const owner = options.owner ?? this.nodeId;
    return this.#run('acquireLock', async () => {
      const lease = await this.node.acquireLock(this.#lock(name), { ttlMs, owner });
      return lease && { name, owner: lease.owner, token: lease.token, expiresAt: lease.expiresAt };
    });
  }

  async renewLock(lease: LockLease, ttlMs: number): Promise<LockLease | undefined> {
    const ttl = checkTtl(ttlMs);
    return this.#run('renewLock', async () => {
      if (!(await this.#holds(lease))) return undefined;
      const renewed = await this.node.renewLock(this.#clusterLease(lease), ttl);
      return renewed && { ...lease, expiresAt: renewed.expiresAt };
    });
  }

  async releaseLock(lease: LockLease): Promise<boolean> {
    return this.#run('releaseLock', async () => {
      if (!(await this.#holds(lease))) return false;
      return this.node.releaseLock(this.#clusterLease(lease));
    });
  }

  /**
   * The cluster renews and releases by token alone. The token is the Raft index of one acquire,
   * so it names one holder for good: a lease whose owner is not that holder's is not a lease of
   * this lock, and checking it before the write is as good as checking it in the same command.
   */
  async #holds(lease: LockLease): Promise<boolean> {
    if (!Number.isSafeInteger(lease.token) || lease.token <= 0) return false;
    const held = await this.node.getLock(this.#lock(lease.name));
    return held !== undefined && held.token === lease.token && held.owner === lease.owner;
  }

  #clusterLease(lease: LockLease): LockLease {
    return { ...lease, name: this.#lock(lease.name) };
  }

  // ── membership ─────────────────────────────────────────────────────────────────

  async join(member: { addr?: string; meta?: Record<string, string> } = {}): Promise<void> {
    if (this.#closed) throw new CoordinationClosedError('raft');
    this.#joined = JSON.stringify({
      ...(member.addr === undefined ? {} : { addr: member.addr }),
      meta: { ...member.meta },
    });
    await this.#beat();
    if (!this.#heartbeat) {
      this.#heartbeat = setInterval(() => {
        // A failed beat is retried by the next one; the member expires only if they all fail.
        this.#beat().catch(() => {});
      }, this.#heartbeatMs);
      this.#heartbeat.unref();
    }
  }

  #beat(): Promise<void> {
    const data = this.#joined;
    if (data === undefined || this.#closed) return Promise.resolve();
    const record = `${data.slice(0, -1)},"seen":${Date.now()}}`;
    return this.#run('heartbeat', () =>
      this.node.set(`${this.#memberPrefix()}${this.nodeId}`, record, { ttlMs: Math.ceil(this.#memberTtlMs) }),
    );
  }

  async leave(): Promise<void> {
    this.#stopHeartbeat();
    await this.#run('leave', () => this.node.delete(`${this.#memberPrefix()}${this.nodeId}`));
  }

  async members(): Promise<Member[]> {
    const prefix = this.#memberPrefix();
    return this.#run('members', async () => {
      // One linearizable read point (ReadIndex), then the values as of at least that point.
      const keys = await this.node.keys(prefix);
      const out: Member[] = [];
      for (const key of keys) {
        const raw = await this.node.get(key, { consistency: 'local' });
        if (raw === undefined) continue;
        out.push(parseMember(key.slice(prefix.length), raw));
      }
      return out;
    });
  }

  async close(options: { leave?: boolean } = {}): Promise<void> {
    if (this.#closed) return;
    if ((options.leave ?? true) && this.#joined !== undefined) await this.leave().catch(() => {});
    this.#stopHeartbeat();
    if (this.#ownsNode && this.#closeGraceMs > 0) await this.#othersGone(this.#closeGraceMs);
    this.#closed = true;
    if (this.#ownsNode) await this.node.close().catch(() => {});
  }

  /** Wait (bounded) until no other member is live: they left, or their heartbeats lapsed. */
  async #othersGone(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      try {
        const others = (await this.members()).filter((m) => m.id !== this.nodeId);
        if (others.length === 0) return;
      } catch {
        // No quorum any more: nobody is left to keep it for.
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    this.#joined = undefined;
  }
}

function parseMember(id: string, raw: string): Member {
  let data: { addr?: unknown; meta?: unknown; seen?: unknown } = {};
  try {
    data = JSON.parse(raw) as typeof data;
  } catch {
    // A record written by something else: list the id, skip the details.
  }
  const meta: Record<string, string> = {};
  if (data.meta && typeof data.meta === 'object') {
    for (const [k, v] of Object.entries(data.meta)) if (typeof v === 'string') meta[k] = v;
  }
  return {
    id,
    ...(typeof data.addr === 'string' ? { addr: data.addr } : {}),
    meta,
    lastSeen: typeof data.seen === 'number' ? data.seen : 0,
  };
}

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A cluster error as the coordination contract names it. */
function raftFailure(what: string, err: unknown): Error {
  const code = codeOf(err);
  if (code?.startsWith('MOCRA_ERR_CLUSTER_') !== true && isMocraError(err)) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'MOCRA_ERR_CLUSTER_CLOSED') return new CoordinationClosedError('raft');
  if (code === 'MOCRA_ERR_CLUSTER_INVALID_ARGUMENT')
    return new InvalidArgumentError(`${what}: ${message}`, { cause: err });
  // No leader, a timeout (the write may have run once), a removed node, storage trouble: the
  // work can be tried again later, perhaps on another node.
  return new BackendUnavailableError(BACKEND, `${what} failed: ${message}`, { cause: err });
}

function checkTtl(ttlMs: number): number {
  if (!(ttlMs > 0 && Number.isFinite(ttlMs))) {
    throw new InvalidArgumentError(`ttlMs must be a finite number > 0, got ${ttlMs}`);
  }
  return Math.ceil(ttlMs);
}

function ttlOf(ttlMs: number | undefined): { ttlMs?: number } {
  return ttlMs === undefined ? {} : { ttlMs: checkTtl(ttlMs) };
}
