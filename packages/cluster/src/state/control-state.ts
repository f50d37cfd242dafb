import type { CommandEnvelope, CommandResult, Operation } from './commands.js';
import { isRecord, validateEnvelope } from './commands.js';

/**
 * The control state machine replicated by Raft: key-value with compare-and-set and TTLs, fenced
 * locks, fenced resources, a member registry with heartbeats, and client sessions for dedup.
 *
 * It is a pure function of the committed log: no clock, no randomness, no I/O. "Now" is cluster
 * time, which only the leaders' monotonic clocks move (see {@link ControlState.now}); so no wall
 * clock, however far off, can make a lease or a TTL lapse early, and every replica decides expiry
 * the same way.
 *
 * Fencing: the token of a lock grant is the Raft index of the committed acquire, so tokens are
 * strictly increasing per lock (and across locks), survive leader changes and are never reused.
 */

/** How long an idle client session (and its cached answers) is kept, in leader time. */
export const SESSION_TTL_MS = 60 * 60 * 1000;
/** Answers kept per session; older ones are dropped and retries of them are refused. */
export const SESSION_MAX_RESULTS = 4096;

interface KvEntry {
  value: string;
  /** Cluster time; 0 = never expires. */
  expiresAt: number;
  /** The TTL it was written with (0 = none): a new leader extends it by this much. */
  ttlMs: number;
}

export interface LockState {
  readonly owner: string;
  readonly token: number;
  readonly acquiredAt: number;
  /** Cluster time at which the lock lapses unless renewed. */
  readonly expiresAt: number;
  /** The TTL of the last acquire or renew: a new leader extends the lock by this much. */
  readonly ttlMs: number;
}

interface FencedEntry {
  maxToken: number;
  value: string | null;
}

export interface MemberRecord {
  readonly id: string;
  readonly addr: string | undefined;
  readonly meta: Readonly<Record<string, string>>;
  readonly lastSeen: number;
  readonly ttlMs: number;
}

interface Session {
  floor: number;
  lastActive: number;
  readonly results: Map<number, CommandResult>;
}

export class ControlState {
  #now = 0;
  #appliedIndex = 0;
  /** Term of the newest entry applied; an entry of a higher term means a new leader. */
  #term = 0;
  /**
   * The term whose leader's monotonic clock drives `now`, with that clock's reading and `now` at
   * the term's first command. Readings of different processes are never compared.
   */
  #clockTerm = 0;
  #clockMono = 0;
  #clockBase = 0;
  readonly #kv = new Map<string, KvEntry>();
  readonly #locks = new Map<string, LockState>();
  readonly #fenced = new Map<string, FencedEntry>();
  readonly #members = new Map<string, MemberRecord>();
  readonly #sessions = new Map<string, Session>();

  /**
   * Cluster time (ms) as of the last applied command: epoch-like — a new cluster starts at its
   * first leader's wall clock — but from then on moved only by the monotonic clock of the leader
   * that stamped each command, measured from that leader's first command of its term. A leader
   * change does not move it at all: the time without a leader is not counted, and a new leader's
   * wall clock, however far off, does not matter. So cluster time never runs faster than real
   * time (up to the monotonic clock's own rate error), and a TTL measured in it never lapses
   * early. It runs behind wall clocks by the time spent in failovers.
   */
  get now(): number {
    return this.#now;
  }

  get appliedIndex(): number {
    return this.#appliedIndex;
  }

  /** The term of the leader whose clock moves cluster time; 0 before the first command. */
  get clockTerm(): number {
    return this.#clockTerm;
  }

  /**
   * The cluster time a command stamped now by the leader of `term` (monotonic reading `mono`)
   * would be applied at. Until that leader's first command is applied, time stands still.
   */
  timeAt(term: number, mono: number): number {
    if (term !== this.#clockTerm) return this.#now;
    return Math.max(this.#now, this.#clockBase + (mono - this.#clockMono));
  }

  /** Record that a non-command entry (no-op, configuration) of `term` was applied at `index`. */
  skip(index: number, term: number): void {
    this.#appliedIndex = index;
    this.#enterTerm(term);
  }

  /**
   * Apply the command at `index` of `term`. Never throws on bad input: a malformed command (which
   * the boundary should have refused) yields an `invalid-command` error result on every replica.
   */
  apply(index: number, term: number, data: string): CommandResult {
    this.#appliedIndex = index;
    this.#enterTerm(term);
    let env: CommandEnvelope;
    try {
      const parsed: unknown = JSON.parse(data);
      const bad = validateEnvelope(parsed);
      if (bad !== undefined) return { type: 'error', code: 'invalid-command', message: bad };
      env = parsed as CommandEnvelope;
    } catch {
      return { type: 'error', code: 'invalid-command', message: 'command is not JSON' };
    }
    this.#advanceClock(term, env);

    if (env.c === '') return this.#execute(index, env.op);

    let session = this.#sessions.get(env.c);
    if (!session) {
      session = { floor: 0, lastActive: this.#now, results: new Map() };
      this.#sessions.set(env.c, session);
    }
    session.lastActive = this.#now;
    const cached = session.results.get(env.s);
    if (cached) return cached;
    if (env.s < session.floor) {
      return {
        type: 'error',
        code: 'stale-request',
        message: `request ${env.s} is older than what the session keeps (${session.floor})`,
      };
    }
    if (env.f > session.floor) {
      session.floor = env.f;
      for (const seq of session.results.keys()) if (seq < env.f) session.results.delete(seq);
    }
    const result = this.#execute(index, env.op);
    session.results.set(env.s, result);
    if (session.results.size > SESSION_MAX_RESULTS) {
      let oldest = Number.POSITIVE_INFINITY;
      for (const seq of session.results.keys()) oldest = Math.min(oldest, seq);
      session.results.delete(oldest);
      session.floor = Math.max(session.floor, oldest + 1);
    }
    return result;
  }

  #advanceClock(term: number, env: CommandEnvelope): void {
    if (term !== this.#clockTerm) {
      // This leader's first command: its clock takes over from here, without a jump.
      this.#clockTerm = term;
      this.#clockMono = env.m;
      this.#clockBase = this.#now === 0 ? env.t : this.#now;
      this.#now = this.#clockBase;
    } else {
      this.#now = Math.max(this.#now, this.#clockBase + (env.m - this.#clockMono));
    }
  }

  /**
   * The first entry of a new term (the new leader's no-op) extends every live lock, TTL key and
   * member by its full TTL from now, as etcd does with its leases on a leader change: whatever
   * the old leader's clock said, the holder gets a whole TTL again before anything lapses.
   */
  #enterTerm(term: number): void {
    if (term <= this.#term) return;
    const first = this.#term === 0;
    this.#term = term;
    if (first) return;
    const now = this.#now;
    for (const [name, l] of this.#locks) {
      if (l.expiresAt > now) this.#locks.set(name, { ...l, expiresAt: Math.max(l.expiresAt, now + l.ttlMs) });
    }
    for (const e of this.#kv.values()) {
      if (e.ttlMs > 0 && e.expiresAt > now) e.expiresAt = Math.max(e.expiresAt, now + e.ttlMs);
    }
    for (const [id, m] of this.#members) {
      if (m.lastSeen + m.ttlMs > now) this.#members.set(id, { ...m, lastSeen: Math.max(m.lastSeen, now) });
    }
  }

  #execute(index: number, op: Operation): CommandResult {
    const now = this.#now;
    switch (op.type) {
      case 'set':
        this.#kv.set(op.key, kvEntry(op.value, now, op.ttlMs));
        return { type: 'ok' };
      case 'delete': {
        const existed = this.#liveValue(op.key) !== undefined;
        this.#kv.delete(op.key);
        return { type: 'existed', existed };
      }
      case 'cas': {
        const current = this.#liveValue(op.key) ?? null;
        if (current !== op.expected) return { type: 'swapped', swapped: false };
        if (op.next === null) this.#kv.delete(op.key);
        else this.#kv.set(op.key, kvEntry(op.next, now, op.ttlMs));
        return { type: 'swapped', swapped: true };
      }
      case 'incr': {
        const entry = this.#kv.get(op.key);
        const current = this.#liveValue(op.key);
        let base = 0;
        if (current !== undefined) {
          if (!/^-?\d+$/.test(current) || !Number.isSafeInteger(Number(current))) {
            return { type: 'error', code: 'not-integer', message: `value of ${op.key} is not an integer` };
          }
          base = Number(current);
        }
        const value = base + op.by;
        if (!Number.isSafeInteger(value)) {
          return { type: 'error', code: 'not-integer', message: `counter ${op.key} would overflow` };
        }
        const live = current === undefined ? undefined : entry;
        this.#kv.set(op.key, {
          value: String(value),
          expiresAt: live?.expiresAt ?? 0,
          ttlMs: live?.ttlMs ?? 0,
        });
        return { type: 'value', value };
      }
      case 'lock-acquire': {
        const held = this.#locks.get(op.name);
        if (held && held.expiresAt > now && held.owner !== op.owner) {
          return { type: 'lock', acquired: false, owner: held.owner, token: 0, expiresAt: held.expiresAt };
        }
        // Every grant, including a re-grant to the same owner, gets a fresh token: this index.
        const lock: LockState = {
          owner: op.owner,
          token: index,
          acquiredAt: now,
          expiresAt: now + op.ttlMs,
          ttlMs: op.ttlMs,
        };
        this.#locks.set(op.name, lock);
        return { type: 'lock', acquired: true, owner: op.owner, token: index, expiresAt: lock.expiresAt };
      }
      case 'lock-renew': {
        const held = this.#locks.get(op.name);
        if (!held || held.token !== op.token || held.expiresAt <= now) {
          return { type: 'renewed', renewed: false, expiresAt: 0 };
        }
        const expiresAt = now + op.ttlMs;
        this.#locks.set(op.name, { ...held, expiresAt, ttlMs: op.ttlMs });
        return { type: 'renewed', renewed: true, expiresAt };
      }
      case 'lock-release': {
        const held = this.#locks.get(op.name);
        if (!held || held.token !== op.token) return { type: 'released', released: false };
        this.#locks.delete(op.name);
        // Released while still held; false tells the caller its lease had already lapsed.
        return { type: 'released', released: held.expiresAt > now };
      }
      case 'fenced': {
        const entry = this.#fenced.get(op.key) ?? { maxToken: 0, value: null };
        if (op.token < entry.maxToken) {
          return { type: 'fenced', accepted: false, maxToken: entry.maxToken, value: entry.value };
        }
        entry.maxToken = op.token;
        if (op.value !== undefined) entry.value = op.value;
        this.#fenced.set(op.key, entry);
        return { type: 'fenced', accepted: true, maxToken: entry.maxToken, value: entry.value };
      }
      case 'member-register':
        this.#members.set(op.id, {
          id: op.id,
          addr: op.addr,
          meta: { ...op.meta },
          lastSeen: now,
          ttlMs: op.ttlMs,
        });
        return { type: 'ok' };
      case 'member-heartbeat': {
        const m = this.#members.get(op.id);
        if (!m || m.lastSeen + m.ttlMs <= now) {
          if (m) this.#members.delete(op.id);
          return { type: 'known', known: false };
        }
        this.#members.set(op.id, { ...m, lastSeen: now });
        return { type: 'known', known: true };
      }
      case 'member-leave': {
        const existed = this.#members.delete(op.id);
        return { type: 'existed', existed };
      }
      case 'sweep':
        return { type: 'swept', removed: this.#sweep(now) };
    }
  }

  #liveValue(key: string): string | undefined {
    const e = this.#kv.get(key);
    if (!e) return undefined;
    if (e.expiresAt !== 0 && e.expiresAt <= this.#now) return undefined;
    return e.value;
  }

  #sweep(now: number): number {
    let removed = 0;
    for (const [k, e] of this.#kv) {
      if (e.expiresAt !== 0 && e.expiresAt <= now) {
        this.#kv.delete(k);
        removed++;
      }
    }
    for (const [k, l] of this.#locks) {
      if (l.expiresAt <= now) {
        this.#locks.delete(k);
        removed++;
      }
    }
    for (const [k, m] of this.#members) {
      if (m.lastSeen + m.ttlMs <= now) {
        this.#members.delete(k);
        removed++;
      }
    }
    for (const [k, s] of this.#sessions) {
      if (s.lastActive + SESSION_TTL_MS <= now) {
        this.#sessions.delete(k);
        removed++;
      }
    }
    return removed;
  }

  /** The earliest time at which something expires, or undefined. The leader sweeps once it passes. */
  nextExpiry(): number | undefined {
    let next = Number.POSITIVE_INFINITY;
    for (const e of this.#kv.values()) if (e.expiresAt !== 0) next = Math.min(next, e.expiresAt);
    for (const l of this.#locks.values()) next = Math.min(next, l.expiresAt);
    for (const m of this.#members.values()) next = Math.min(next, m.lastSeen + m.ttlMs);
    for (const s of this.#sessions.values()) next = Math.min(next, s.lastActive + SESSION_TTL_MS);
    return next === Number.POSITIVE_INFINITY ? undefined : next;
  }

  // ── reads (a pure function of the applied state) ───────────────────────────────

  get(key: string): string | undefined {
    return this.#liveValue(key);
  }

  /** The lock as the state machine sees it, if it is held (not expired) at `now`. */
  getLock(name: string): LockState | undefined {
    const l = this.#locks.get(name);
    return l && l.expiresAt > this.#now ? l : undefined;
  }

  /** The highest token a fenced key has seen, and its value. */
  getFenced(key: string): { maxToken: number; value: string | null } | undefined {
    const e = this.#fenced.get(key);
    return e ? { maxToken: e.maxToken, value: e.value } : undefined;
  }

  /** Members whose last heartbeat is within their TTL, ordered by id. */
  liveMembers(): MemberRecord[] {
    return [...this.#members.values()]
      .filter((m) => m.lastSeen + m.ttlMs > this.#now)
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Keys with a live value and the given prefix, sorted. */
  keys(prefix = ''): string[] {
    const out: string[] = [];
    for (const k of this.#kv.keys())
      if (k.startsWith(prefix) && this.#liveValue(k) !== undefined) out.push(k);
    return out.sort();
  }

  sessionCount(): number {
    return this.#sessions.size;
  }

  // ── snapshots ────────────────────────────────────────────────────────────────

  /** A canonical serialization: two replicas in the same state produce the same string. */
  serialize(): string {
    const sorted = <T>(m: Map<string, T>): [string, T][] =>
      [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return JSON.stringify({
      v: 2,
      now: this.#now,
      applied: this.#appliedIndex,
      clock: [this.#term, this.#clockTerm, this.#clockMono, this.#clockBase],
      kv: sorted(this.#kv).map(([k, e]) => [k, e.value, e.expiresAt, e.ttlMs]),
      locks: sorted(this.#locks).map(([k, l]) => [k, l.owner, l.token, l.acquiredAt, l.expiresAt, l.ttlMs]),
      fenced: sorted(this.#fenced).map(([k, e]) => [k, e.maxToken, e.value]),
      members: sorted(this.#members).map(([, m]) => m),
      sessions: sorted(this.#sessions).map(([k, s]) => [
        k,
        s.floor,
        s.lastActive,
        [...s.results].sort(([a], [b]) => a - b),
      ]),
    });
  }

  /** Replace the whole state with a serialized one. Throws on data it did not write. */
  static deserialize(data: string): ControlState {
    const raw: unknown = JSON.parse(data);
    if (!isRecord(raw) || raw.v !== 2) throw new TypeError('not a control-state snapshot');
    const s = new ControlState();
    s.#now = Number(raw.now);
    s.#appliedIndex = Number(raw.applied);
    [s.#term, s.#clockTerm, s.#clockMono, s.#clockBase] = (raw.clock as number[]).map(Number) as [
      number,
      number,
      number,
      number,
    ];
    for (const [k, value, expiresAt, ttlMs] of raw.kv as [string, string, number, number][])
      s.#kv.set(k, { value, expiresAt, ttlMs });
    for (const [k, owner, token, acquiredAt, expiresAt, ttlMs] of raw.locks as [
      string,
      string,
      number,
      number,
      number,
      number,
    ][]) {
      s.#locks.set(k, { owner, token, acquiredAt, expiresAt, ttlMs });
    }
    for (const [k, maxToken, value] of raw.fenced as [string, number, string | null][]) {
      s.#fenced.set(k, { maxToken, value });
    }
    for (const m of raw.members as MemberRecord[]) s.#members.set(m.id, m);
    for (const [k, floor, lastActive, results] of raw.sessions as [
      string,
      number,
      number,
      [number, CommandResult][],
    ][]) {
      s.#sessions.set(k, { floor, lastActive, results: new Map(results) });
    }
    return s;
  }
}

function kvEntry(value: string, now: number, ttlMs: number | undefined): KvEntry {
  return ttlMs ? { value, expiresAt: now + ttlMs, ttlMs } : { value, expiresAt: 0, ttlMs: 0 };
}
