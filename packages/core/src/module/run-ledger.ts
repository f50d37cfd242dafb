/**
 * What each run of each module still has to do, node by node — the bookkeeping behind join
 * nodes, the advance gate and the stop signal.
 *
 * A unit of work belongs to one node of one run: a task (for each entry node), a request (from
 * admission until its response is parsed), a hand-off to a node (until its generate is done).
 * Units are added before the unit that produced them is done, so a node's count only reaches
 * zero when nothing more can come from it:
 *
 * ```
 *   task ─ add(entry) ─ generate ─ add(requests) ─ done(entry)
 *   response parsed ─ add(follow-ups, hand-offs) ─ done(node)
 *   dead-lettered, dropped, or run stopped ─ done(node)
 * ```
 *
 * A node is **finished** for the run when its count is zero and every predecessor is finished.
 * When all predecessors of a `join` node are finished, the join fires — once per run.
 *
 * The ledger is per process. Work of one run shares its partition key (the account), so on a
 * partitioned queue one consumer sees the whole run and the ledger is complete. The advance gate
 * and the stop flag can also go through a {@link Coordination} backend, so "once per run" and
 * "stopped" hold cluster-wide. Their keys (`<namespace>:dag:gate:…`, `…:dag:stop:…`, and the join
 * credits' `…:dag:…` keys) keep the `dag` of the names mocra for Rust gave them: they live in the
 * shared coordination store, where a running cluster reads them.
 */
import type { Coordination } from '../coordination/types.js';
import type { ModuleGraph } from './graph.js';

interface RunState {
  readonly graph: ModuleGraph;
  readonly counts: Map<string, number>;
  readonly finished: Set<string>;
  readonly joined: Set<string>;
  readonly advanced: Set<string>;
  /** A unit was ever added (a run that never started is not finished). */
  started: boolean;
  /** Every node finished once: the run-end listener was told (once per run). */
  ended: boolean;
}

export interface RunLedgerOptions {
  /** Gate claims and stop flags go here when given (cluster-wide); else they stay in this process. */
  coordination?: Coordination;
  /** Prefix of coordination keys. @default 'mocra' */
  namespace?: string;
  /** How long gate claims and stop flags live in the coordination backend. @default 86400000 (a day) */
  ttlMs?: number;
  /** Runs tracked at most; the oldest finished ones are forgotten first. @default 10000 */
  maxRuns?: number;
  /**
   * How long a "not stopped" answer from coordination is trusted before asking again: a stop
   * made on another process takes effect here within this long. Every download, parse and
   * admission asks, so asking coordination each time would put a round trip on every one of
   * them. @default 250
   */
  stopRecheckMs?: number;
}

/** A join node whose predecessors all finished: fire its generate once. */
export interface JoinReady {
  runId: string;
  module: string;
  node: string;
}

export class RunLedger {
  readonly #runs = new Map<string, RunState>();
  readonly #stopped = new Map<string, string>();
  readonly #coordination: Coordination | undefined;
  readonly #namespace: string;
  readonly #ttlMs: number;
  readonly #maxRuns: number;
  readonly #stopRecheckMs: number;
  #onRunFinished: ((runId: string, module: string) => void) | undefined;
  /** Remote stop lookups per run × module: in flight (shared by every caller), or fresh until `until`. */
  readonly #stopChecks = new Map<
    string,
    { until: number; pending: Promise<string | undefined> | undefined }
  >();

  /**
   * The last key built: a crawl asks about the same run of the same module for every page, and
   * a key built anew is a string to flatten and hash on every lookup.
   */
  #last = { runId: '', module: '', key: key('', '') };

  constructor(options: RunLedgerOptions = {}) {
    this.#coordination = options.coordination;
    this.#namespace = options.namespace ?? 'mocra';
    this.#ttlMs = options.ttlMs ?? 86_400_000;
    this.#maxRuns = options.maxRuns ?? 10_000;
    this.#stopRecheckMs = Math.max(0, options.stopRecheckMs ?? 250);
  }

  /**
   * Called once per run × module, the first time every node of it is finished (a follow to a
   * finished node later reopens the run, but does not call this again).
   */
  onRunFinished(listener: ((runId: string, module: string) => void) | undefined): void {
    this.#onRunFinished = listener;
  }

  /** Outstanding units of a node (for tests and stats). */
  outstanding(runId: string, module: string, node: string): number {
    return this.#runs.get(this.#key(runId, module))?.counts.get(node) ?? 0;
  }

  /** Whether a node is finished for the run. */
  isFinished(runId: string, module: string, node: string): boolean {
    return this.#runs.get(this.#key(runId, module))?.finished.has(node) ?? false;
  }

  /** Adds `n` units of work for a node. */
  add(runId: string, graph: ModuleGraph, module: string, node: string, n = 1): void {
    if (n <= 0) return;
    const run = this.#run(runId, module, graph);
    run.started = true;
    run.counts.set(node, (run.counts.get(node) ?? 0) + n);
    // A node that had finished gets work again (an explicit follow to it): it is not finished now.
    if (run.finished.has(node)) this.#unfinish(run, node);
  }

  /** Marks `n` units of a node done; returns the join nodes that became ready to fire. */
  done(runId: string, module: string, node: string, n = 1): JoinReady[] {
    const run = this.#runs.get(this.#key(runId, module));
    if (!run || n <= 0) return [];
    const left = Math.max(0, (run.counts.get(node) ?? 0) - n);
    run.counts.set(node, left);
    if (left > 0) return [];
    return this.#settle(runId, module, run);
  }

  /**
   * Claims the advance gate of a node for the run: true exactly once per run × module × node
   * (cluster-wide with a coordination backend).
   */
  async claimAdvance(runId: string, module: string, node: string): Promise<boolean> {
    const local = this.#runs.get(this.#key(runId, module));
    if (local?.advanced.has(node)) return false;
    local?.advanced.add(node);
    if (!this.#coordination) return local !== undefined;
    return this.#coordination.compareAndSet(
      `${this.#namespace}:dag:gate:advance:${runId}:${module}:${node}`,
      undefined,
      this.#coordination.nodeId,
      { ttlMs: this.#ttlMs },
    );
  }

  /** Ends a run of a module: later work of it is dropped. */
  async stop(runId: string, module: string, reason: string): Promise<void> {
    this.#stopped.set(this.#key(runId, module), reason);
    await this.#coordination?.set(`${this.#namespace}:dag:stop:${runId}:${module}`, reason, {
      ttlMs: this.#ttlMs,
    });
  }

  /**
   * The stop reason when the run of the module was stopped (here or, with coordination, anywhere).
   * Answered at once when it is known here (always without shared coordination, and between
   * rechecks with it), so the per-page checks of a crawl cost no await.
   */
  stoppedReason(runId: string, module: string): string | undefined | Promise<string | undefined> {
    const coordination = this.#coordination;
    // Nothing stopped here and nobody else to ask: the answer of almost every call.
    if (this.#stopped.size === 0 && (!coordination || coordination.kind === 'local')) return undefined;
    const k = this.#key(runId, module);
    const local = this.#stopped.get(k);
    if (local !== undefined || !coordination || coordination.kind === 'local') return local;
    const check = this.#stopChecks.get(k);
    if (check?.pending !== undefined) return check.pending;
    if (check !== undefined && check.until > Date.now()) return undefined;
    const pending = coordination.get(`${this.#namespace}:dag:stop:${runId}:${module}`).then(
      (remote) => {
        if (remote !== undefined) this.#stopped.set(k, remote);
        this.#stopChecks.set(k, { until: Date.now() + this.#stopRecheckMs, pending: undefined });
        return remote;
      },
      (err: unknown) => {
        this.#stopChecks.delete(k); // the next caller asks again
        throw err;
      },
    );
    // A cache, not state: dropping it only costs lookups (bounded like the runs themselves).
    if (this.#stopChecks.size >= this.#maxRuns) this.#stopChecks.clear();
    this.#stopChecks.set(k, { until: 0, pending });
    return pending;
  }

  #key(runId: string, module: string): string {
    const last = this.#last;
    if (runId === last.runId && module === last.module) return last.key;
    this.#last = { runId, module, key: key(runId, module) };
    return this.#last.key;
  }

  /** Forgets everything about a run of a module (after it ended). */
  forget(runId: string, module: string): void {
    this.#runs.delete(this.#key(runId, module));
    this.#stopChecks.delete(this.#key(runId, module));
  }

  #run(runId: string, module: string, graph: ModuleGraph): RunState {
    const k = this.#key(runId, module);
    let run = this.#runs.get(k);
    if (!run) {
      if (this.#runs.size >= this.#maxRuns) this.#evict();
      run = {
        graph,
        counts: new Map(),
        finished: new Set(),
        joined: new Set(),
        advanced: new Set(),
        started: false,
        ended: false,
      };
      this.#runs.set(k, run);
    }
    return run;
  }

  /** Recomputes which nodes are finished (topological order) and collects joins that became ready. */
  #settle(runId: string, module: string, run: RunState): JoinReady[] {
    if (!run.started) return [];
    const ready: JoinReady[] = [];
    for (const id of run.graph.order) {
      if (run.finished.has(id)) continue;
      const preds = run.graph.predecessors(id);
      if (!preds.every((p) => run.finished.has(p))) continue;
      const node = run.graph.nodes.get(id);
      if (node?.join === true && preds.length > 0 && !run.joined.has(id)) {
        run.joined.add(id);
        ready.push({ runId, module, node: id });
        continue; // the caller adds the join's unit; it finishes when that is done
      }
      if ((run.counts.get(id) ?? 0) === 0) run.finished.add(id);
    }
    if (!run.ended && ready.length === 0 && run.finished.size === run.graph.order.length) {
      run.ended = true;
      this.#onRunFinished?.(runId, module);
    }
    return ready;
  }

  #unfinish(run: RunState, node: string): void {
    // Everything downstream depended on this node being finished.
    const stack = [node];
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (!run.finished.delete(id)) continue;
      stack.push(...run.graph.successors(id));
    }
  }

  #evict(): void {
    for (const [k, run] of this.#runs) {
      if (run.graph.order.every((id) => run.finished.has(id))) this.#runs.delete(k);
      if (this.#runs.size < this.#maxRuns) return;
    }
    // Every tracked run is still busy: drop the oldest rather than grow without bound.
    const oldest = this.#runs.keys().next().value;
    if (oldest !== undefined) this.#runs.delete(oldest);
  }
}

function key(runId: string, module: string): string {
  return `${runId}\u0000${module}`;
}
