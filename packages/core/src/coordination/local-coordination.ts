/**
 * Coordination inside one process: the default when no Redis or Raft is configured. The state
 * lives in a {@link LocalCoordinationStore}; by default every client gets its own, so a process
 * is a cluster of one (it is always the leader, owns every partition). Several clients sharing
 * one store behave like the members of a real cluster, which is how the conformance suite runs
 * leader failover and membership expiry against this backend.
 *
 * Every operation runs to completion inside one turn of the event loop, so each is atomic.
 */
import { hostname } from 'node:os';
import { CoordinationClosedError, InvalidArgumentError } from '../errors.js';
import type { Coordination, LockLease, Member } from './types.js';

interface KvEntry {
  value: string;
  expiresAt: number | undefined;
}

interface LockEntry {
  owner: string;
  token: number;
  expiresAt: number;
}

interface MemberEntry {
  id: string;
  addr: string | undefined;
  meta: Record<string, string>;
  lastSeen: number;
  expiresAt: number;
}

/** The shared state of local coordination clients. */
export class LocalCoordinationStore {
  readonly kv = new Map<string, KvEntry>();
  readonly locks = new Map<string, LockEntry>();
  /** Last fencing token per lock name. Never reset, so tokens never repeat. */
  readonly fences = new Map<string, number>();
  readonly members = new Map<string, MemberEntry>();
  readonly now: () => number;

  constructor(options: { now?: () => number } = {}) {
    this.now = options.now ?? Date.now;
  }
}

export interface LocalCoordinationOptions {
  /** This member's id. @default `${hostname}-${pid}-${random}` */
  nodeId?: string;
  /** Share state with other local clients (tests, or several engines in one process). @default a private store */
  store?: LocalCoordinationStore;
  /** A member that has not sent a heartbeat for this long is no longer live. @default 10000 */
  memberTtlMs?: number;
  /** How often a joined member sends its heartbeat. @default memberTtlMs / 3 */
  heartbeatMs?: number;
}

export function createLocalCoordination(options: LocalCoordinationOptions = {}): LocalCoordination {
  return new LocalCoordination(options);
}

export class LocalCoordination implements Coordination {
  readonly kind = 'local' as const;
  readonly nodeId: string;
  readonly #store: LocalCoordinationStore;
  readonly #memberTtlMs: number;
  readonly #heartbeatMs: number;
  #heartbeat: NodeJS.Timeout | undefined;
  #joined: { addr: string | undefined; meta: Record<string, string> } | undefined;
  #closed = false;

  constructor(options: LocalCoordinationOptions = {}) {
    this.nodeId = options.nodeId ?? `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    this.#store = options.store ?? new LocalCoordinationStore();
    this.#memberTtlMs = options.memberTtlMs ?? 10_000;
    this.#heartbeatMs = options.heartbeatMs ?? Math.max(1, Math.floor(this.#memberTtlMs / 3));
    if (!(this.#memberTtlMs > 0))
      throw new InvalidArgumentError(`memberTtlMs must be > 0, got ${this.#memberTtlMs}`);
  }

  #open(): LocalCoordinationStore {
    if (this.#closed) throw new CoordinationClosedError('local');
    return this.#store;
  }

  #live(key: string): KvEntry | undefined {
    const store = this.#store;
    const entry = store.kv.get(key);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= store.now()) {
      store.kv.delete(key);
      return undefined;
    }
    return entry;
  }

  async get(key: string): Promise<string | undefined> {
    this.#open();
    return this.#live(key)?.value;
  }

  async set(key: string, value: string, options: { ttlMs?: number } = {}): Promise<void> {
    const store = this.#open();
    store.kv.set(key, { value, expiresAt: expiry(store, options.ttlMs) });
  }

  async delete(key: string): Promise<boolean> {
    this.#open();
    const existed = this.#live(key) !== undefined;
    this.#store.kv.delete(key);
    return existed;
  }

  async compareAndSet(
    key: string,
    expected: string | undefined,
    next: string | undefined,
    options: { ttlMs?: number } = {},
  ): Promise<boolean> {
    const store = this.#open();
    const current = this.#live(key)?.value;
    if (current !== expected) return false;
    if (next === undefined) store.kv.delete(key);
    else store.kv.set(key, { value: next, expiresAt: expiry(store, options.ttlMs) });
    return true;
  }

  async increment(key: string, by = 1): Promise<number> {
    const store = this.#open();
    if (!Number.isSafeInteger(by))
      throw new InvalidArgumentError(`increment by must be a safe integer, got ${by}`);
    const entry = this.#live(key);
    const current = entry === undefined ? 0 : Number(entry.value);
    if (entry !== undefined && !/^-?\d+$/.test(entry.value)) {
      throw new InvalidArgumentError(`cannot increment '${key}': its value is not an integer`);
    }
    const value = current + by;
    // Like Redis INCRBY, the key keeps its TTL.
    store.kv.set(key, { value: String(value), expiresAt: entry?.expiresAt });
    return value;
  }

  async acquireLock(
    name: string,
    options: { ttlMs: number; owner?: string },
  ): Promise<LockLease | undefined> {
    const store = this.#open();
    checkTtl(options.ttlMs);
    const owner = options.owner ?? this.nodeId;
    const now = store.now();
    const held = store.locks.get(name);
    if (held && held.expiresAt > now && held.owner !== owner) return undefined;
    const token = (store.fences.get(name) ?? 0) + 1;
    store.fences.set(name, token);
    const entry = { owner, token, expiresAt: now + options.ttlMs };
    store.locks.set(name, entry);
    return { name, ...entry };
  }

  async renewLock(lease: LockLease, ttlMs: number): Promise<LockLease | undefined> {
    const store = this.#open();
    checkTtl(ttlMs);
    const now = store.now();
    const held = store.locks.get(lease.name);
    if (!held || held.token !== lease.token || held.owner !== lease.owner || held.expiresAt <= now)
      return undefined;
    held.expiresAt = now + ttlMs;
    return { name: lease.name, owner: held.owner, token: held.token, expiresAt: held.expiresAt };
  }

  async releaseLock(lease: LockLease): Promise<boolean> {
    const store = this.#open();
    const held = store.locks.get(lease.name);
    if (!held || held.token !== lease.token || held.owner !== lease.owner || held.expiresAt <= store.now()) {
      return false;
    }
    store.locks.delete(lease.name);
    return true;
  }

  async join(member: { addr?: string; meta?: Record<string, string> } = {}): Promise<void> {
    this.#open();
    this.#joined = { addr: member.addr, meta: { ...member.meta } };
    this.#beat();
    if (!this.#heartbeat) {
      this.#heartbeat = setInterval(() => this.#beat(), this.#heartbeatMs);
      this.#heartbeat.unref();
    }
  }

  #beat(): void {
    const joined = this.#joined;
    if (!joined || this.#closed) return;
    const now = this.#store.now();
    this.#store.members.set(this.nodeId, {
      id: this.nodeId,
      addr: joined.addr,
      meta: joined.meta,
      lastSeen: now,
      expiresAt: now + this.#memberTtlMs,
    });
  }

  async leave(): Promise<void> {
    this.#open();
    this.#stopHeartbeat();
    this.#store.members.delete(this.nodeId);
  }

  async members(): Promise<Member[]> {
    const store = this.#open();
    const now = store.now();
    const out: Member[] = [];
    for (const m of store.members.values()) {
      if (m.expiresAt <= now) {
        store.members.delete(m.id);
        continue;
      }
      out.push({
        id: m.id,
        ...(m.addr === undefined ? {} : { addr: m.addr }),
        meta: { ...m.meta },
        lastSeen: m.lastSeen,
      });
    }
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /**
   * Stop heartbeats and refuse further calls. `leave: false` keeps the membership record until
   * it expires, which is what a crashed process looks like to the others.
   */
  async close(options: { leave?: boolean } = {}): Promise<void> {
    if (this.#closed) return;
    if (options.leave ?? true) await this.leave();
    this.#stopHeartbeat();
    this.#closed = true;
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    this.#joined = undefined;
  }
}

function expiry(store: LocalCoordinationStore, ttlMs: number | undefined): number | undefined {
  if (ttlMs === undefined) return undefined;
  checkTtl(ttlMs);
  return store.now() + ttlMs;
}

function checkTtl(ttlMs: number): void {
  if (!(ttlMs > 0 && Number.isFinite(ttlMs)))
    throw new InvalidArgumentError(`ttlMs must be a finite number > 0, got ${ttlMs}`);
}
