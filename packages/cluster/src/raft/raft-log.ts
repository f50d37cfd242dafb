import type { LogEntry } from './types.js';

/**
 * The in-memory view of one node's log. LevelDB holds the durable copy; the core reads only this.
 *
 * ```
 *   compacted      │ kept in memory ───────────────────────────────────────────────│
 *   ... ──────── base │ base+1 ....... applied ..... committed ..... stable ..... last
 *                     │◀── handed to the state machine ──▶│        │◀─ not yet on disk ─▶│
 * ```
 * Invariants: base ≤ applied ≤ committed ≤ last; stable ≤ last; entries only ever get truncated
 * above `committed` (a conflict at or below it is a safety violation and throws).
 */
export class RaftLog {
  /** Index and term of the last entry that is no longer in memory (0/0 for a fresh log). */
  #baseIndex: number;
  #baseTerm: number;
  /** entries[k].index === baseIndex + 1 + k */
  #entries: LogEntry[];
  #committed: number;
  #applied: number;
  /** Entries up to here are durable on this node's disk. */
  #stable: number;
  /** Entries up to here have been handed to the host for writing (≥ stable). */
  #inProgress: number;

  constructor(baseIndex: number, baseTerm: number, entries: readonly LogEntry[], committed: number) {
    this.#baseIndex = baseIndex;
    this.#baseTerm = baseTerm;
    this.#entries = [...entries];
    for (let k = 0; k < this.#entries.length; k++) {
      if (this.#entries[k]!.index !== baseIndex + 1 + k) throw new Error('log entries are not contiguous');
    }
    this.#stable = this.lastIndex();
    this.#inProgress = this.#stable;
    this.#committed = Math.min(Math.max(committed, baseIndex), this.lastIndex());
    this.#applied = baseIndex;
  }

  get committed(): number {
    return this.#committed;
  }
  get applied(): number {
    return this.#applied;
  }
  get stable(): number {
    return this.#stable;
  }
  get baseIndex(): number {
    return this.#baseIndex;
  }
  get baseTerm(): number {
    return this.#baseTerm;
  }

  firstIndex(): number {
    return this.#baseIndex + 1;
  }

  lastIndex(): number {
    return this.#baseIndex + this.#entries.length;
  }

  lastTerm(): number {
    const last = this.#entries[this.#entries.length - 1];
    return last ? last.term : this.#baseTerm;
  }

  /** Term of the entry at `index`, or undefined when it is compacted away or past the end. */
  term(index: number): number | undefined {
    if (index === this.#baseIndex) return this.#baseTerm;
    if (index < this.#baseIndex || index > this.lastIndex()) return undefined;
    return this.#entries[index - this.#baseIndex - 1]!.term;
  }

  matchTerm(index: number, term: number): boolean {
    return this.term(index) === term;
  }

  entry(index: number): LogEntry | undefined {
    if (index <= this.#baseIndex) return undefined;
    return this.#entries[index - this.#baseIndex - 1];
  }

  /** Entries in [lo, hi), at most `maxCount` and about `maxBytes` of data (always at least one). */
  slice(
    lo: number,
    hi: number,
    maxCount = Number.POSITIVE_INFINITY,
    maxBytes = Number.POSITIVE_INFINITY,
  ): LogEntry[] {
    if (lo <= this.#baseIndex)
      throw new Error(`slice(${lo}) reaches into the compacted log (base ${this.#baseIndex})`);
    const end = Math.min(hi, this.lastIndex() + 1, lo + maxCount);
    const out: LogEntry[] = [];
    let bytes = 0;
    for (let i = lo; i < end; i++) {
      const e = this.#entries[i - this.#baseIndex - 1]!;
      bytes += e.data.length + 32;
      if (out.length > 0 && bytes > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  /** Raft §5.4.1: is a log ending at (lastIndex, lastTerm) at least as up to date as ours? */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const myTerm = this.lastTerm();
    return lastTerm > myTerm || (lastTerm === myTerm && lastIndex >= this.lastIndex());
  }

  /** Leader-side append of fresh entries (they continue the log by construction). */
  append(entries: readonly LogEntry[]): void {
    for (const e of entries) {
      if (e.index !== this.lastIndex() + 1) throw new Error(`append of ${e.index} after ${this.lastIndex()}`);
      this.#entries.push(e);
    }
  }

  /**
   * Follower-side append (AppendEntries receiver, Raft Figure 2 steps 2–5). Returns the index of the
   * last entry known to match the leader, or undefined when (prevIndex, prevTerm) does not match.
   * Entries already present with the same term are kept: a stale or reordered message must never
   * cut off entries that a newer message added.
   */
  maybeAppend(prevIndex: number, prevTerm: number, entries: readonly LogEntry[]): number | undefined {
    if (!this.matchTerm(prevIndex, prevTerm)) return undefined;
    const lastNew = prevIndex + entries.length;
    let k = 0;
    for (; k < entries.length; k++) {
      const e = entries[k]!;
      if (e.index <= this.#baseIndex) continue; // already compacted, hence committed and equal
      const existing = this.term(e.index);
      if (existing === undefined) break;
      if (existing !== e.term) {
        if (e.index <= this.#committed) {
          throw new Error(`conflict at committed index ${e.index} (committed ${this.#committed})`);
        }
        this.truncateFrom(e.index);
        break;
      }
    }
    for (; k < entries.length; k++) {
      const e = entries[k]!;
      if (e.index <= this.#baseIndex) continue;
      this.append([e]);
    }
    return lastNew;
  }

  /** Drop every entry at or after `index`. */
  truncateFrom(index: number): void {
    if (index <= this.#committed) throw new Error(`truncate at ${index} would drop committed entries`);
    if (index > this.lastIndex()) return;
    this.#entries.length = Math.max(0, index - this.#baseIndex - 1);
    this.#stable = Math.min(this.#stable, index - 1);
    this.#inProgress = Math.min(this.#inProgress, index - 1);
  }

  commitTo(index: number): boolean {
    const target = Math.min(index, this.lastIndex());
    if (target <= this.#committed) return false;
    this.#committed = target;
    return true;
  }

  /** Entries not yet handed to the host for writing. */
  unstableEntries(): LogEntry[] {
    if (this.#inProgress >= this.lastIndex()) return [];
    return this.#entries.slice(this.#inProgress - this.#baseIndex);
  }

  hasUnstable(): boolean {
    return this.#inProgress < this.lastIndex();
  }

  markInProgress(index: number): void {
    this.#inProgress = Math.max(this.#inProgress, Math.min(index, this.lastIndex()));
  }

  /** The host wrote entries up to (index, term). A write that a truncation overtook is ignored. */
  stableTo(index: number, term: number): boolean {
    if (index <= this.#stable) return false;
    if (this.term(index) !== term) return false;
    this.#stable = index;
    return true;
  }

  /** Committed entries that are durable here and not yet handed out, up to `maxCount`. */
  nextCommitted(maxCount: number): LogEntry[] {
    const hi = Math.min(this.#committed, this.#stable);
    if (hi <= this.#applied) return [];
    return this.slice(this.#applied + 1, hi + 1, maxCount);
  }

  hasNextCommitted(): boolean {
    return Math.min(this.#committed, this.#stable) > this.#applied;
  }

  appliedTo(index: number): void {
    if (index > this.#committed) throw new Error(`applied ${index} beyond commit ${this.#committed}`);
    this.#applied = Math.max(this.#applied, index);
  }

  /** Replace the log with a received snapshot's position (entries before it are committed elsewhere). */
  restore(index: number, term: number): void {
    this.#baseIndex = index;
    this.#baseTerm = term;
    this.#entries = [];
    this.#committed = index;
    this.#applied = index;
    this.#stable = index;
    this.#inProgress = index;
  }

  /** Forget entries up to `index` (a local snapshot covers them). */
  compact(index: number): void {
    if (index <= this.#baseIndex) return;
    if (index > this.#applied) throw new Error(`compact(${index}) past applied ${this.#applied}`);
    const term = this.term(index);
    if (term === undefined) throw new Error(`compact(${index}): no such entry`);
    this.#entries = this.#entries.slice(index - this.#baseIndex);
    this.#baseIndex = index;
    this.#baseTerm = term;
  }

  /**
   * Fast backtracking (etcd "findConflictByTerm"): the largest index ≤ `index` whose term is ≤
   * `term`. Lets a leader skip a whole divergent term per round trip instead of one entry.
   */
  findConflictByTerm(index: number, term: number): number {
    let i = Math.min(index, this.lastIndex());
    while (i > this.#baseIndex) {
      const t = this.term(i);
      if (t === undefined || t <= term) break;
      i--;
    }
    return i;
  }
}
