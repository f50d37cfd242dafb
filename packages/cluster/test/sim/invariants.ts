/**
 * Safety invariants checked after every simulator event (the openraft/etcd list):
 *
 *  - election safety: at most one leader per term, ever;
 *  - log matching: two logs with an entry of the same index and term agree up to it (checked
 *    with a running hash of the log prefix, so it costs O(1) per entry);
 *  - leader completeness: a new leader of term T holds every entry committed in a term < T (a
 *    commit seen by a node in term t happened in a term ≤ t; a stale leader of an old term —
 *    say one that was paused with its winning votes in flight — need not hold later commits);
 *  - committed entries are never lost or changed: every node that commits index i has the
 *    same prefix up to i as every other node that committed i;
 *  - state-machine safety: every node applies the same command, with the same result, at i;
 *  - local sanity: applied ≤ commit ≤ last, term and commit never go back in one incarnation;
 *  - fenced locks (oracle over the applied log): tokens are the acquire's index and strictly
 *    increase, and a lock is never granted to a second owner while the first holds it (by the
 *    cluster time of the commands; the simulation checks the same in real time).
 */
import type { CommandEnvelope, CommandResult, LogEntry, RaftCore } from '../../src/internal.js';

/** FNV-1a over a string, continuing from `h`. */
function fnv(h: number, text: string): number {
  let x = h >>> 0;
  for (let i = 0; i < text.length; i++) {
    x ^= text.charCodeAt(i);
    x = Math.imul(x, 0x01000193) >>> 0;
  }
  return x;
}

function entryHash(prev: number, e: LogEntry): number {
  return fnv(fnv(prev, `${e.term}|${e.kind}|`), e.data);
}

interface NodeView {
  /** Running prefix hash by index, for the entries this incarnation holds. */
  chain: Map<number, number>;
  dirtyFrom: number;
  lastRole: string;
  lastTerm: number;
  lastCommit: number;
}

interface LockView {
  owner: string;
  token: number;
  expiresAt: number;
  released: boolean;
}

export class InvariantChecker {
  readonly violations: string[] = [];
  /** (index:term) → prefix hash, from any node that ever held that entry. */
  readonly #prefix = new Map<string, number>();
  /** index → prefix hash of a committed prefix. */
  readonly #committed = new Map<number, number>();
  /** index → who first committed it, and the entry's term (for failure messages). */
  readonly #committedBy = new Map<number, string>();
  #maxCommitted = 0;
  /** term t → the highest commit index any node observed while in term t. */
  readonly #maxCommittedByTerm = new Map<number, number>();
  readonly #leaders = new Map<number, string>();
  readonly #applied = new Map<number, string>();
  readonly #views = new Map<string, NodeView>();
  // lock oracle
  #oracleNext = 1;
  readonly #pendingOracle = new Map<
    number,
    { entry: LogEntry; result: CommandResult | undefined; clusterTime: number }
  >();
  readonly #locks = new Map<string, LockView>();
  readonly #lockTokens = new Map<string, number>();
  readonly #seen = new Set<string>();
  grants = 0;

  #fail(message: string): void {
    if (this.violations.length < 20) this.violations.push(message);
  }

  /** A new incarnation of a node (fresh start or restart). */
  resetNode(owner: string): void {
    this.#views.set(owner, {
      chain: new Map(),
      dirtyFrom: 1,
      lastRole: 'follower',
      lastTerm: 0,
      lastCommit: 0,
    });
  }

  logChanged(owner: string, from: number): void {
    const v = this.#views.get(owner);
    if (v) v.dirtyFrom = v.dirtyFrom === 0 ? from : Math.min(v.dirtyFrom, from);
  }

  /** Check one live node (`id` names it in messages). */
  checkNode(owner: string, id: string, core: RaftCore): void {
    let v = this.#views.get(owner);
    if (!v) {
      this.resetNode(owner);
      v = this.#views.get(owner)!;
      v.dirtyFrom = core.firstIndex;
    }
    const st = core.status();
    if (st.appliedIndex > st.commitIndex || st.commitIndex > st.lastIndex) {
      this.#fail(
        `${id}: applied ${st.appliedIndex} / commit ${st.commitIndex} / last ${st.lastIndex} out of order`,
      );
    }
    if (st.term < v.lastTerm) this.#fail(`${id}: term went back from ${v.lastTerm} to ${st.term}`);
    if (st.commitIndex < v.lastCommit)
      this.#fail(`${id}: commit went back from ${v.lastCommit} to ${st.commitIndex}`);
    v.lastTerm = st.term;
    v.lastCommit = st.commitIndex;

    if (v.dirtyFrom > 0) {
      this.#rehash(v, id, core, v.dirtyFrom);
      v.dirtyFrom = 0;
    }

    // Committed prefixes agree everywhere.
    const c = st.commitIndex;
    if (c > 0) {
      const h = v.chain.get(c);
      if (h !== undefined) {
        const known = this.#committed.get(c);
        if (known === undefined) {
          this.#committed.set(c, h);
          this.#committedBy.set(c, `${owner} (term ${core.termAt(c)}, node term ${st.term})`);
        } else if (known !== h)
          this.#fail(`${id}: committed prefix at ${c} differs from one committed elsewhere`);
        this.#maxCommitted = Math.max(this.#maxCommitted, c);
        this.#maxCommittedByTerm.set(st.term, Math.max(this.#maxCommittedByTerm.get(st.term) ?? 0, c));
      }
    }

    if (st.role === 'leader' && v.lastRole !== 'leader') {
      const prev = this.#leaders.get(st.term);
      if (prev !== undefined && prev !== id) this.#fail(`two leaders in term ${st.term}: ${prev} and ${id}`);
      this.#leaders.set(st.term, id);
      // Leader completeness: what was committed in earlier terms must be in the new leader's log.
      let m = 0;
      for (const [t, c] of this.#maxCommittedByTerm) if (t < st.term) m = Math.max(m, c);
      if (m > core.firstIndex - 1) {
        const mine = v.chain.get(m);
        const known = this.#committed.get(m);
        if (mine === undefined) {
          this.#fail(
            `${id} became leader of term ${st.term} without committed index ${m} (last ${st.lastIndex})`,
          );
        } else if (known !== undefined && known !== mine) {
          const diverge = m;
          for (let i = core.firstIndex; i <= m; i++) {
            const t = core.termAt(i);
            if (this.#prefix.get(`${i}:${t}`) !== v.chain.get(i) || this.#committedBy.has(i)) {
              /* keep scanning */
            }
          }
          this.#fail(
            `${id} became leader of term ${st.term} with a different committed prefix at ${m} (committed by ${this.#committedBy.get(m)}; leader has term ${core.termAt(m)} there; first index ${core.firstIndex}; diverge ${diverge})`,
          );
        }
      }
    }
    v.lastRole = st.role;
  }

  #rehash(v: NodeView, id: string, core: RaftCore, from: number): void {
    const first = core.firstIndex;
    const last = core.lastIndex;
    for (const k of [...v.chain.keys()]) if (k >= from || k < first - 1) v.chain.delete(k);
    let start = Math.max(from, first);
    let prev = v.chain.get(start - 1);
    if (prev === undefined) {
      const base = start - 1;
      if (base === 0) prev = 0;
      else {
        const baseTerm = core.termAt(base);
        prev = baseTerm === undefined ? undefined : this.#prefix.get(`${base}:${baseTerm}`);
      }
      if (prev === undefined) {
        // The base came from a snapshot whose prefix no live view holds; start over from here.
        start = first;
        prev = this.#prefix.get(`${first - 1}:${core.termAt(first - 1)}`);
        if (prev === undefined) return;
      }
      v.chain.set(start - 1, prev);
    }
    for (let i = start; i <= last; i++) {
      const e = core.entryAt(i);
      if (!e) break;
      const h = entryHash(prev, e);
      const key = `${i}:${e.term}`;
      const known = this.#prefix.get(key);
      if (known === undefined) this.#prefix.set(key, h);
      else if (known !== h) {
        this.#fail(`${id}: log matching broken at index ${i} term ${e.term}`);
        return;
      }
      v.chain.set(i, h);
      prev = h;
    }
  }

  /** Every applied entry, from every node. */
  applied(id: string, entry: LogEntry, result: CommandResult | undefined, clusterTime: number): void {
    const sig = `${entry.term}|${entry.kind}|${entry.data}|${JSON.stringify(result ?? null)}|${clusterTime}`;
    const known = this.#applied.get(entry.index);
    if (known === undefined) {
      this.#applied.set(entry.index, sig);
      this.#pendingOracle.set(entry.index, { entry, result, clusterTime });
      this.#drainOracle();
    } else if (known !== sig) {
      this.#fail(`${id} applied something else at index ${entry.index}`);
    }
  }

  /** Indexes skipped by snapshot installation still reach the oracle through other nodes. */
  #drainOracle(): void {
    for (;;) {
      const next = this.#pendingOracle.get(this.#oracleNext);
      if (!next) return;
      this.#pendingOracle.delete(this.#oracleNext);
      this.#oracle(next.entry, next.result, next.clusterTime);
      this.#oracleNext++;
    }
  }

  #oracle(entry: LogEntry, result: CommandResult | undefined, now: number): void {
    if (entry.kind !== 'command' || !result) return;
    const env = JSON.parse(entry.data) as CommandEnvelope;
    const op = env.op;
    if (env.c !== '') {
      // A retried request (same client and sequence) is answered from the session, not re-run.
      const key = `${env.c}:${env.s}`;
      if (this.#seen.has(key)) return;
      this.#seen.add(key);
    }
    if (result.type === 'error') return;
    if (op.type === 'lock-acquire' && result.type === 'lock' && result.acquired) {
      const held = this.#locks.get(op.name);
      if (result.token !== entry.index)
        this.#fail(`lock ${op.name}: token ${result.token} is not the index ${entry.index}`);
      {
        // `expiresAt` is the last one a grant or renew reported; a leader change only extends it.
        if (held && !held.released && held.owner !== op.owner && held.expiresAt > now) {
          this.#fail(
            `lock ${op.name} granted to ${op.owner} at ${entry.index} while ${held.owner} holds it until ${held.expiresAt} (now ${now})`,
          );
        }
        const lastToken = this.#lockTokens.get(op.name) ?? 0;
        if (result.token <= lastToken)
          this.#fail(`lock ${op.name}: token ${result.token} after ${lastToken}`);
        this.#lockTokens.set(op.name, result.token);
        if (result.expiresAt !== now + op.ttlMs) {
          this.#fail(
            `lock ${op.name}: expiry ${result.expiresAt} is not cluster time ${now} + ttl ${op.ttlMs} (index ${entry.index})`,
          );
        }
        this.#locks.set(op.name, {
          owner: op.owner,
          token: result.token,
          expiresAt: result.expiresAt,
          released: false,
        });
        this.grants++;
      }
    } else if (op.type === 'lock-renew' && result.type === 'renewed' && result.renewed) {
      const held = this.#locks.get(op.name);
      if (!held || held.token !== op.token || held.released)
        this.#fail(`lock ${op.name}: renewed a lease it lost`);
      else held.expiresAt = result.expiresAt;
    } else if (op.type === 'lock-release' && result.type === 'released') {
      const held = this.#locks.get(op.name);
      if (held && held.token === op.token) held.released = true;
    }
  }

  get maxCommitted(): number {
    return this.#maxCommitted;
  }
}
