/**
 * One run of a graph: an event-driven ready queue over arrays indexed by topological position.
 *
 * ```
 *            ┌──────────── successors whose last predecessor just succeeded ───────────┐
 *            ▼                                                                          │
 *   ready heap (min topological position) ──pump──▶ running (≤ maxInFlight) ──success──┘
 *            ▲                                          │
 *            └──── backoff / breaker timer ◀── failure ─┴── final failure ──▶ stop the run
 * ```
 *
 * A node starts as soon as its last predecessor succeeds; there is no layer barrier. Picking the
 * smallest topological position among the ready nodes makes runs reproducible: with
 * `maxInFlight: 1` nodes run exactly in `dag.topologicalOrder`.
 *
 * Invariants, relied on throughout:
 * - every asynchronous continuation (attempt settled, timer fired, store answered) carries the
 *   node's generation `gen[i]` from when it began and does nothing if it changed: a timed-out,
 *   cancelled or superseded attempt can never touch the run again;
 * - `holds[i]` is 1 exactly while node i occupies one of the `maxInFlight` slots, and
 *   `inFlight` is the sum of `holds`;
 * - the no-store, no-observer path allocates one context and two closures per attempt, so the
 *   scheduler stays within a small factor of a bare Promise-based runner (bench/dag-overhead.ts).
 */
import type {
  FencingStore,
  IdempotencyStore,
  RunCheckpoint,
  RunGuard,
  RunGuardLease,
  RunStateStore,
} from '../coordination/types.js';
import type { NodeDispatcher, NodeTask } from '../dispatch/types.js';
import {
  ExecutionIncompleteError,
  FencingTokenRejectedError,
  IdempotencyStoreError,
  InvalidNodeOutputError,
  NodeFailedError,
  type NodeFailure,
  NodeTimeoutError,
  RemoteDispatchNotConfiguredError,
  RetryExhaustedError,
  RunAbortedError,
  RunGuardLostError,
  RunStateError,
  RunTimeoutError,
  serializeError,
} from '../errors.js';
import { nodeChannel, storeErrorChannel } from '../events/channels.js';
import { emitNodeEvent, emitRunEvent } from '../events/emit.js';
import type { DagNodeEvent, DagRunEvent, EventSink } from '../events/types.js';
import { MinHeap } from '../graph/analyze.js';
import type { DagNode } from '../graph/node.js';
import { isPayload, type Payload } from '../payload/payload.js';
import type { CircuitBreakers } from '../policy/circuit-breaker.js';
import {
  applyJitter,
  backoffDelay,
  type ResolvedPolicy,
  requestedDelay,
  shouldRetry,
} from '../policy/retry.js';
import type { Clock, ClockTimer, RandomSource } from '../time/clock.js';
import { AttemptContext, type ContextSource } from './context.js';
import { RunReport } from './report.js';
import type { DagReport } from './types.js';

// Node states (indexes into STATE_NAMES in report.ts).
const PENDING = 0;
const READY = 1;
const RUNNING = 2;
const WAITING = 3;
const BACKOFF = 4;
const SUCCEEDED = 5;
const FAILED = 6;
const CANCELLED = 7;
// Output sources (indexes into SOURCE_NAMES).
const SRC_RUN = 1;
const SRC_CACHE = 2;
const SRC_SINGLEFLIGHT = 3;
const SRC_CHECKPOINT = 4;
const SOURCE_EVENT = ['run', 'run', 'cache', 'singleflight'] as const;

/** What the scheduler computed once for its graph. */
export interface SchedulerShape {
  readonly ids: readonly string[];
  readonly index: ReadonlyMap<string, number>;
  readonly predecessors: readonly (readonly number[])[];
  readonly successors: readonly (readonly number[])[];
  readonly layerOf: Int32Array;
  readonly layers: readonly (readonly string[])[];
  readonly nodes: readonly DagNode[];
  readonly policies: readonly ResolvedPolicy[];
  readonly predCount: Int32Array;
  readonly remote: Uint8Array;
  readonly keys: readonly (string | undefined)[];
}

export interface GuardConfig {
  readonly guard: RunGuard;
  readonly lease: RunGuardLease;
  readonly ttlMs: number;
  readonly renewIntervalMs: number;
  readonly renewJitter: number;
}

export interface RunConfig {
  readonly runId: string;
  readonly key: string | undefined;
  readonly fencingToken: number | undefined;
  readonly fencingResource: string | undefined;
  readonly signal: AbortSignal | undefined;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly maxInFlight: number;
  readonly cancelInFlightOnFailure: boolean;
  readonly runTimeoutMs: number | undefined;
  readonly eventSink: EventSink | undefined;
  readonly dispatcher: NodeDispatcher | undefined;
  readonly fencing: FencingStore | undefined;
  readonly runState: RunStateStore | undefined;
  readonly idempotency: IdempotencyStore | undefined;
  readonly claimTtlMs: number;
  readonly guard: GuardConfig | undefined;
  readonly checkpoint: RunCheckpoint | undefined;
  readonly breakers: CircuitBreakers;
}

interface TimeoutLane {
  readonly timeoutMs: number;
  /** Deadlines, non-decreasing; entries before `head` are done. */
  readonly at: number[];
  readonly node: number[];
  /** The node's generation when the entry was made: a mismatch means the attempt is over. */
  readonly gen: number[];
  head: number;
  timer: ClockTimer | undefined;
}

interface KeyEntry {
  /** The node doing the work for this key in this run. */
  owner: number;
  output: Payload | undefined;
  /** Nodes of this run waiting for the owner (they hold no slot while they wait). */
  waiters: number[];
}

type Outcome = { ok: true } | { ok: false; cause: unknown };

export class Run implements ContextSource {
  // ContextSource
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly ids: readonly string[];
  readonly predecessors: readonly (readonly number[])[];
  readonly layerOf: Int32Array;
  readonly outputs: (Payload | undefined)[];
  readonly keys: readonly (string | undefined)[];

  readonly #shape: SchedulerShape;
  readonly #c: RunConfig;
  readonly #n: number;
  readonly #clock: Clock;
  readonly #max: number;
  readonly #sink: EventSink | undefined;
  /** Whether a success must go through stores before its successors are released. */
  readonly #storesOnSuccess: boolean;

  readonly #state: Uint8Array;
  readonly #sources: Uint8Array;
  readonly #holds: Uint8Array;
  readonly #claimed: Uint8Array;
  readonly #remaining: Int32Array;
  readonly #attempts: Int32Array;
  readonly #gen: Int32Array;
  readonly #contexts: (AttemptContext | undefined)[];
  readonly #errors = new Map<number, unknown>();
  readonly #failures: NodeFailure[] = [];
  readonly #backoff = new Map<number, ClockTimer>();
  readonly #waitStarted = new Map<number, number>();
  readonly #keyEntries = new Map<string, KeyEntry>();
  readonly #lanes = new Map<number, TimeoutLane>();
  readonly #heap: MinHeap;

  #inFlight = 0;
  #settling = 0;
  #succeeded = 0;
  #pumping = false;
  #stopping = false;
  #cancelAll = false;
  #finished = false;
  #cause: unknown = undefined;
  #startedAt = 0;
  #runDeadline: number | undefined = undefined;
  #runTimer: ClockTimer | undefined = undefined;
  #renewTimer: ClockTimer | undefined = undefined;
  #lease: RunGuardLease | undefined;
  #controller: AbortController | undefined = undefined;
  #resolve!: (outcome: Outcome) => void;
  readonly #done: Promise<Outcome>;

  constructor(shape: SchedulerShape, config: RunConfig) {
    const n = shape.ids.length;
    this.runId = config.runId;
    this.fencingToken = config.fencingToken;
    this.ids = shape.ids;
    this.predecessors = shape.predecessors;
    this.layerOf = shape.layerOf;
    this.keys = shape.keys;
    this.outputs = new Array(n);
    this.#shape = shape;
    this.#c = config;
    this.#n = n;
    this.#clock = config.clock;
    this.#max = config.maxInFlight;
    this.#sink = config.eventSink;
    this.#storesOnSuccess = config.fencing !== undefined || config.runState !== undefined;
    this.#state = new Uint8Array(n);
    this.#sources = new Uint8Array(n);
    this.#holds = new Uint8Array(n);
    this.#claimed = new Uint8Array(n);
    this.#remaining = shape.predCount.slice();
    this.#attempts = new Int32Array(n);
    this.#gen = new Int32Array(n);
    this.#contexts = new Array(n);
    this.#heap = new MinHeap(n);
    this.#lease = config.guard?.lease;
    this.#done = new Promise((resolve) => {
      this.#resolve = resolve;
    });
  }

  async execute(): Promise<DagReport> {
    const c = this.#c;
    const clock = this.#clock;
    this.#startedAt = clock.now();
    if (c.guard !== undefined && this.#lease !== undefined) {
      this.#emitRun({
        type: 'run-guard-acquired',
        ...this.#runBase(),
        key: this.#lease.key,
        expiresAt: this.#lease.expiresAt,
      });
      this.#scheduleRenewal(c.guard.renewIntervalMs);
    }
    const restored = this.#restore();
    this.#emitRun({
      type: 'run-started',
      ...this.#runBase(),
      nodeCount: this.#n,
      restoredCount: restored.length,
    });
    if (this.#observed())
      for (const i of restored) this.#emitNode({ type: 'node-restored', ...this.#nodeBase(i) });
    for (let i = 0; i < this.#n; i++) {
      if (this.#state[i] === PENDING && this.#remaining[i] === 0) this.#markReady(i);
    }

    const onAbort = () => this.#stop(new RunAbortedError(this.runId, c.signal?.reason), true);
    c.signal?.addEventListener('abort', onAbort, { once: true });
    if (c.runTimeoutMs !== undefined) {
      const ms = c.runTimeoutMs;
      this.#runDeadline = this.#startedAt + ms;
      this.#runTimer = clock.setTimeout(() => this.#stop(new RunTimeoutError(this.runId, ms), true), ms);
    }

    if (this.#succeeded === this.#n) this.#finish(true);
    else this.#pump();
    const outcome = await this.#done;

    c.signal?.removeEventListener('abort', onAbort);
    this.#runTimer?.cancel();
    this.#renewTimer?.cancel();
    this.#controller?.abort(outcome.ok ? undefined : outcome.cause);
    const durationMs = clock.now() - this.#startedAt;
    const report = new RunReport({
      runId: this.runId,
      fencingToken: this.fencingToken,
      durationMs,
      ids: this.ids,
      index: this.#shape.index,
      layers: this.#shape.layers,
      layerOf: this.layerOf,
      states: this.#state,
      sources: this.#sources,
      attempts: this.#attempts,
      outputs: this.outputs,
      errors: this.#errors,
    });

    if (outcome.ok) {
      if (c.runState !== undefined) {
        // The work is done either way. A checkpoint that could not be cleared only means the
        // next run restores every node from it and finishes at once, so this is not a failure.
        try {
          await c.runState.clear(c.key as string, this.fencingToken);
        } catch (error) {
          this.#storeError(new RunStateError('clear', c.key as string, error), 'run-state-clear');
        }
      }
      await this.#releaseGuard();
      this.#emitRun({ type: 'run-succeeded', ...this.#runBase(), durationMs });
      return report;
    }
    await this.#releaseGuard();
    const unfinished: string[] = [];
    for (let i = 0; i < this.#n; i++)
      if (this.#state[i] !== SUCCEEDED) unfinished.push(this.ids[i] as string);
    this.#emitRun({
      type: 'run-failed',
      ...this.#runBase(),
      durationMs,
      error: serializeError(outcome.cause),
      unfinishedNodes: unfinished,
    });
    throw new ExecutionIncompleteError(this.runId, unfinished, this.#failures, report, outcome.cause);
  }

  // ── scheduling ───────────────────────────────────────────────────────────────────────────

  /** Marks the nodes the checkpoint holds as succeeded; returns their positions. */
  #restore(): number[] {
    const outputs = this.#c.checkpoint?.outputs;
    const restored: number[] = [];
    const n = this.#n;
    if (outputs !== undefined && outputs.size > 0) {
      const preds = this.predecessors;
      // A node counts as restored only if all its predecessors are too: its saved output was
      // computed from theirs. Topological order means predecessors are decided first.
      for (let i = 0; i < n; i++) {
        const out = outputs.get(this.ids[i] as string);
        if (out === undefined || !isPayload(out)) continue;
        let ok = true;
        for (const p of preds[i] as readonly number[]) {
          if (this.#state[p] !== SUCCEEDED) {
            ok = false;
            break;
          }
        }
        if (!ok) continue;
        this.#state[i] = SUCCEEDED;
        this.#sources[i] = SRC_CHECKPOINT;
        this.outputs[i] = out;
        this.#succeeded++;
        restored.push(i);
        const key = this.keys[i];
        if (key !== undefined && !this.#keyEntries.has(key)) {
          this.#keyEntries.set(key, { owner: i, output: out, waiters: [] });
        }
        for (const s of this.#shape.successors[i] as readonly number[]) this.#remaining[s]! -= 1;
      }
    }
    return restored;
  }

  #markReady(i: number): void {
    this.#state[i] = READY;
    if (this.#observed()) this.#emitNode({ type: 'node-ready', ...this.#nodeBase(i) });
    this.#heap.push(i);
  }

  #pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      const heap = this.#heap;
      while (!this.#stopping && !this.#finished && this.#inFlight < this.#max && heap.size > 0) {
        const i = heap.pop();
        this.#holds[i] = 1;
        this.#inFlight++;
        const key = this.keys[i];
        if (key !== undefined && this.#keyEntries.get(key)?.owner !== i) this.#beginKeyed(i, key);
        else this.#attempt(i);
      }
    } finally {
      this.#pumping = false;
    }
  }

  #free(i: number): void {
    if (this.#holds[i] === 1) {
      this.#holds[i] = 0;
      this.#inFlight--;
    }
  }

  /** A node with an idempotency key that this run has not assigned an owner for yet, or that has one. */
  #beginKeyed(i: number, key: string): void {
    const entry = this.#keyEntries.get(key);
    if (entry?.output !== undefined) {
      this.#state[i] = RUNNING;
      this.#succeed(i, entry.output, SRC_CACHE, this.#observed() ? this.#clock.now() : 0);
      return;
    }
    if (entry !== undefined) {
      // The owner is running: wait for its output without holding a slot.
      this.#free(i);
      this.#state[i] = WAITING;
      entry.waiters.push(i);
      if (this.#observed()) {
        this.#waitStarted.set(i, this.#clock.now());
        this.#emitNode({ type: 'node-singleflight-wait', ...this.#nodeBase(i) });
      }
      return;
    }
    this.#keyEntries.set(key, { owner: i, output: undefined, waiters: [] });
    if (this.#c.idempotency === undefined) this.#attempt(i);
    else {
      this.#state[i] = RUNNING;
      void this.#claim(i, key, this.#c.idempotency);
    }
  }

  /** Asks the idempotency store whether this key is done, in progress elsewhere, or ours to do. */
  async #claim(i: number, key: string, store: IdempotencyStore): Promise<void> {
    const g = this.#gen[i];
    const owner = `${this.runId}/${this.ids[i]}`;
    let operation = 'begin';
    try {
      for (;;) {
        operation = 'begin';
        const r = await store.begin(key, owner, this.#c.claimTtlMs);
        if (this.#gen[i] !== g || this.#finished) return;
        if (r.status === 'claimed') {
          this.#claimed[i] = 1;
          this.#attempt(i);
          return;
        }
        if (r.status === 'done') {
          if (!isPayload(r.output)) throw new TypeError('the store returned an output that is not a Payload');
          this.#succeed(i, r.output, SRC_CACHE, this.#waitStarted.get(i) ?? 0);
          return;
        }
        if (this.#state[i] !== WAITING) {
          this.#state[i] = WAITING;
          if (this.#observed()) {
            this.#waitStarted.set(i, this.#clock.now());
            this.#emitNode({ type: 'node-singleflight-wait', ...this.#nodeBase(i) });
          }
        }
        operation = 'wait';
        const out = await store.wait(key, this.#runSignal());
        if (this.#gen[i] !== g || this.#finished) return;
        if (out !== undefined) {
          if (!isPayload(out)) throw new TypeError('the store returned an output that is not a Payload');
          this.#succeed(i, out, SRC_SINGLEFLIGHT, this.#waitStarted.get(i) ?? 0);
          return;
        }
        if (this.#stopping) {
          this.#cancelNode(i, this.#cause);
          this.#maybeFinish();
          return;
        }
      }
    } catch (cause) {
      if (this.#gen[i] !== g || this.#finished) return;
      this.#failFatally(i, new IdempotencyStoreError(key, operation, cause));
    }
  }

  #attempt(i: number): void {
    if (this.#stopping) {
      // Reached from a store answer that arrived after the run began to stop.
      this.#cancelNode(i, this.#cause);
      this.#maybeFinish();
      return;
    }
    const policy = this.#shape.policies[i] as ResolvedPolicy;
    const clock = this.#clock;
    if (policy.breaker !== undefined) {
      const wait = this.#c.breakers.waitMs(policy.breaker.key, clock.now());
      if (wait > 0) {
        this.#free(i);
        this.#delay(i, wait, undefined, true);
        return;
      }
    }
    const attempt = ++this.#attempts[i]!;
    const g = ++this.#gen[i]!;
    this.#state[i] = RUNNING;
    const timeoutMs = policy.timeoutMs;
    let deadline = this.#runDeadline;
    let now = 0;
    if (timeoutMs > 0) {
      now = clock.now();
      if (deadline === undefined || now + timeoutMs < deadline) deadline = now + timeoutMs;
    }
    const ctx = new AttemptContext(this, i, attempt, deadline);
    this.#contexts[i] = ctx;
    if (timeoutMs > 0) this.#armTimeout(i, g, timeoutMs, now + timeoutMs);
    if (this.#observed()) {
      ctx.startedAt = now || clock.now();
      this.#emitNode({
        type: 'node-running',
        ...this.#nodeBase(i),
        ...(deadline === undefined ? {} : { deadline }),
      });
    }
    let result: Promise<Payload> | Payload;
    try {
      result =
        this.#shape.remote[i] === 1 ? this.#dispatch(i, ctx) : (this.#shape.nodes[i] as DagNode).run!(ctx);
    } catch (error) {
      this.#attemptFailed(i, g, error);
      return;
    }
    if (
      result !== null &&
      typeof result === 'object' &&
      typeof (result as Promise<Payload>).then === 'function'
    ) {
      (result as Promise<Payload>).then(
        (value) => this.#attemptSucceeded(i, g, value),
        (error) => this.#attemptFailed(i, g, error),
      );
    } else {
      this.#attemptSucceeded(i, g, result);
    }
  }

  #dispatch(i: number, ctx: AttemptContext): Promise<Payload> {
    const node = this.#shape.nodes[i] as DagNode;
    const group = node.placement.kind === 'remote' ? node.placement.workerGroup : '';
    const dispatcher = this.#c.dispatcher;
    if (dispatcher === undefined) throw new RemoteDispatchNotConfiguredError(node.id, group);
    const task: NodeTask = {
      runId: this.runId,
      fencingToken: this.fencingToken,
      nodeId: node.id,
      attempt: ctx.attempt,
      layer: ctx.layer,
      workerGroup: group,
      idempotencyKey: node.idempotencyKey,
      deadline: ctx.deadline,
      upstream: ctx.upstream,
    };
    return dispatcher.dispatch(task, ctx.signal);
  }

  /**
   * Attempts with the same timeout share a lane: a FIFO of deadlines with one clock timer, armed
   * for the oldest. Deadlines in a lane only grow, so FIFO order is deadline order. An attempt that
   * settles is not removed (its generation no longer matches, so its entry is skipped), which
   * makes a timeout cost a few array writes instead of a timer set and cleared per attempt.
   */
  #armTimeout(i: number, g: number, timeoutMs: number, at: number): void {
    let lane = this.#lanes.get(timeoutMs);
    if (lane === undefined) {
      lane = { timeoutMs, at: [], node: [], gen: [], head: 0, timer: undefined };
      this.#lanes.set(timeoutMs, lane);
    }
    // A clock that stepped back must not put a deadline before the lane's newest one.
    const last = lane.at.length > lane.head ? (lane.at[lane.at.length - 1] as number) : at;
    lane.at.push(Math.max(at, last));
    lane.node.push(i);
    lane.gen.push(g);
    if (lane.timer === undefined) this.#armLane(lane);
  }

  #armLane(lane: TimeoutLane): void {
    const delay = (lane.at[lane.head] as number) - this.#clock.now();
    lane.timer = this.#clock.setTimeout(() => this.#fireLane(lane), Math.max(0, delay));
  }

  #fireLane(lane: TimeoutLane): void {
    lane.timer = undefined;
    if (this.#finished) return;
    const now = this.#clock.now();
    while (lane.head < lane.at.length && (lane.at[lane.head] as number) <= now) {
      const i = lane.node[lane.head] as number;
      const g = lane.gen[lane.head] as number;
      lane.head++;
      if (this.#gen[i] === g) this.#onTimeout(i, g, lane.timeoutMs);
    }
    if (lane.head > 1024 && lane.head * 2 > lane.at.length) {
      lane.at.splice(0, lane.head);
      lane.node.splice(0, lane.head);
      lane.gen.splice(0, lane.head);
      lane.head = 0;
    }
    if (lane.head < lane.at.length) this.#armLane(lane);
    else {
      lane.at.length = 0;
      lane.node.length = 0;
      lane.gen.length = 0;
      lane.head = 0;
    }
  }

  #onTimeout(i: number, g: number, timeoutMs: number): void {
    const ctx = this.#contexts[i] as AttemptContext;
    const error = new NodeTimeoutError(this.ids[i] as string, ctx.attempt, timeoutMs);
    ctx.abort(error);
    this.#attemptFailed(i, g, error);
  }

  #attemptSucceeded(i: number, g: number, value: unknown): void {
    if (this.#gen[i] !== g) return;
    if (!isPayload(value)) {
      this.#attemptFailed(i, g, new InvalidNodeOutputError(this.ids[i] as string, value));
      return;
    }
    this.#gen[i]!++;
    const ctx = this.#contexts[i] as AttemptContext;
    this.#contexts[i] = undefined;
    const breaker = (this.#shape.policies[i] as ResolvedPolicy).breaker;
    if (breaker !== undefined) this.#c.breakers.onSuccess(breaker.key);
    this.#succeed(i, value, SRC_RUN, ctx.startedAt);
  }

  #attemptFailed(i: number, g: number, error: unknown): void {
    if (this.#gen[i] !== g) return;
    this.#gen[i]!++;
    const ctx = this.#contexts[i];
    this.#contexts[i] = undefined;
    this.#free(i);
    if (this.#observed()) {
      const startedAt = ctx?.startedAt ?? 0;
      this.#emitNode({
        type: 'node-attempt-failed',
        ...this.#nodeBase(i),
        error: serializeError(error),
        durationMs: startedAt === 0 ? 0 : this.#clock.now() - startedAt,
      });
    }
    const policy = this.#shape.policies[i] as ResolvedPolicy;
    const attempt = this.#attempts[i] as number;
    let breakerWait = 0;
    if (policy.breaker !== undefined) {
      const now = this.#clock.now();
      const b = policy.breaker;
      this.#c.breakers.onFailure(b.key, b.failureThreshold, b.openMs, now);
      breakerWait = this.#c.breakers.waitMs(b.key, now);
    }
    const retryable = shouldRetry(error, policy.retryAll);
    if (!this.#stopping && retryable && attempt <= policy.maxRetries) {
      const delay =
        requestedDelay(error) ??
        applyJitter(backoffDelay(policy.backoff, attempt), policy.jitter, this.#c.random());
      this.#delay(i, Math.max(delay, breakerWait), error, breakerWait > delay);
      this.#pump();
      return;
    }
    const id = this.ids[i] as string;
    const final =
      !retryable || policy.maxRetries === 0
        ? new NodeFailedError(id, attempt, error)
        : new RetryExhaustedError(id, attempt, policy.maxRetries, error);
    this.#failNode(i, final);
    this.#stop(final, false);
  }

  /** Puts a node in backoff; it becomes ready again after `ms` (at once when `ms` is 0). */
  #delay(i: number, ms: number, error: unknown, breakerOpen: boolean): void {
    this.#state[i] = BACKOFF;
    if (this.#observed()) {
      this.#emitNode({
        type: 'node-retry-scheduled',
        ...this.#nodeBase(i),
        delayMs: ms,
        error: serializeError(error ?? 'circuit breaker open'),
        breakerOpen,
      });
    }
    if (ms <= 0) {
      this.#markReady(i);
      return;
    }
    const g = this.#gen[i];
    const timer = this.#clock.setTimeout(() => {
      this.#backoff.delete(i);
      if (this.#gen[i] !== g || this.#stopping || this.#finished) return;
      this.#markReady(i);
      this.#pump();
    }, ms);
    this.#backoff.set(i, timer);
  }

  /** An output is in hand (from an attempt, a cache or another node): store it, then release successors. */
  #succeed(i: number, output: Payload, source: number, startedAt: number): void {
    if (this.#storesOnSuccess || this.#claimed[i] === 1) {
      this.#settling++;
      void this.#persist(i, output, source, startedAt);
      return;
    }
    this.#release(i, output, source, startedAt);
  }

  /** Fencing commit → idempotency result → checkpoint, in that order, before successors may start. */
  async #persist(i: number, output: Payload, source: number, startedAt: number): Promise<void> {
    const c = this.#c;
    const g = this.#gen[i];
    const nodeId = this.ids[i] as string;
    let failure: unknown;
    try {
      if (c.fencing !== undefined) {
        await c.fencing.commit({
          resource: c.fencingResource as string,
          token: this.fencingToken as number,
          runId: this.runId,
          nodeId,
          output,
        });
      }
      if (this.#claimed[i] === 1 && c.idempotency !== undefined) {
        const key = this.keys[i] as string;
        try {
          await c.idempotency.complete(key, `${this.runId}/${nodeId}`, output);
        } catch (cause) {
          throw new IdempotencyStoreError(key, 'complete', cause);
        }
      }
      if (c.runState !== undefined) {
        const key = c.key as string;
        try {
          await c.runState.save(key, { runId: this.runId, fencingToken: this.fencingToken, nodeId, output });
        } catch (cause) {
          throw cause instanceof FencingTokenRejectedError ? cause : new RunStateError('save', key, cause);
        }
        if (!this.#finished && this.#observed())
          this.#emitNode({ type: 'node-checkpointed', ...this.#nodeBase(i) });
      }
    } catch (error) {
      failure = error;
    }
    this.#settling--;
    if (this.#gen[i] !== g || this.#finished) {
      this.#maybeFinish();
      return;
    }
    if (failure !== undefined) {
      this.#failFatally(i, failure);
      return;
    }
    this.#release(i, output, source, startedAt);
  }

  #release(i: number, output: Payload, source: number, startedAt: number): void {
    this.#state[i] = SUCCEEDED;
    this.outputs[i] = output;
    this.#sources[i] = source;
    this.#free(i);
    this.#succeeded++;
    if (this.#observed()) {
      this.#emitNode({
        type: 'node-succeeded',
        ...this.#nodeBase(i),
        source: SOURCE_EVENT[source as 1 | 2 | 3],
        durationMs: startedAt === 0 ? 0 : this.#clock.now() - startedAt,
      });
    }
    const key = this.keys[i];
    if (key !== undefined) {
      const entry = this.#keyEntries.get(key);
      if (entry !== undefined && entry.owner === i) {
        entry.output = output;
        const waiters = entry.waiters;
        entry.waiters = [];
        for (const w of waiters) {
          if (this.#state[w] !== WAITING) continue;
          this.#gen[w]!++;
          this.#succeed(w, output, SRC_SINGLEFLIGHT, this.#waitStarted.get(w) ?? 0);
        }
      }
    }
    if (!this.#stopping) {
      const remaining = this.#remaining;
      for (const s of this.#shape.successors[i] as readonly number[]) {
        if (--remaining[s]! === 0) this.#markReady(s);
      }
    }
    if (this.#succeeded === this.#n) this.#finish(true);
    else if (this.#stopping) this.#maybeFinish();
    else this.#pump();
  }

  #failNode(i: number, error: unknown): void {
    this.#state[i] = FAILED;
    this.#errors.set(i, error);
    this.#failures.push({ nodeId: this.ids[i] as string, error });
    if (this.#observed())
      this.#emitNode({ type: 'node-failed', ...this.#nodeBase(i), error: serializeError(error) });
    this.#abandonClaim(i);
  }

  /** A store failed while handling node i: the node fails and the run stops, cancelling the rest. */
  #failFatally(i: number, error: unknown): void {
    this.#gen[i]!++;
    this.#contexts[i] = undefined;
    this.#free(i);
    this.#failNode(i, error);
    this.#stop(error, true);
  }

  // ── ending a run ─────────────────────────────────────────────────────────────────────────

  /**
   * Stops starting nodes. The first cause is the run's cause. `fatal` (timeout, abort, guard
   * lost, store failure) or `cancelInFlightOnFailure` also aborts running nodes and ends the run
   * now; otherwise the run ends when the running nodes have settled.
   */
  #stop(cause: unknown, fatal: boolean): void {
    if (this.#finished) return;
    const first = !this.#stopping;
    if (first) {
      this.#stopping = true;
      this.#cause = cause;
    }
    const cancelAll = fatal || this.#c.cancelInFlightOnFailure;
    if (first || (cancelAll && !this.#cancelAll)) {
      for (const [i, timer] of this.#backoff) {
        timer.cancel();
        this.#cancelNode(i, cause);
      }
      this.#backoff.clear();
      // Waiting nodes run no code of their own: nothing is lost by cancelling them.
      for (let i = 0; i < this.#n; i++) {
        const s = this.#state[i];
        if (s === BACKOFF || s === WAITING) this.#cancelNode(i, cause);
        else if (cancelAll && s === RUNNING) {
          this.#contexts[i]?.abort(cause);
          this.#cancelNode(i, cause);
        }
      }
      if (cancelAll) this.#cancelAll = true;
      this.#controller?.abort(cause);
    }
    this.#maybeFinish();
  }

  #cancelNode(i: number, cause: unknown): void {
    this.#gen[i]!++;
    this.#contexts[i] = undefined;
    this.#free(i);
    this.#state[i] = CANCELLED;
    this.#abandonClaim(i);
    if (this.#observed())
      this.#emitNode({ type: 'node-cancelled', ...this.#nodeBase(i), reason: serializeError(cause) });
  }

  /** Gives a key this run claimed back to the store, so another run may do the work. */
  #abandonClaim(i: number): void {
    if (this.#claimed[i] !== 1 || this.#c.idempotency === undefined) return;
    this.#claimed[i] = 0;
    const key = this.keys[i] as string;
    this.#c.idempotency.abandon(key, `${this.runId}/${this.ids[i]}`).catch((cause: unknown) => {
      this.#storeError(new IdempotencyStoreError(key, 'abandon', cause), 'idempotency-abandon');
    });
  }

  #maybeFinish(): void {
    if (this.#finished) return;
    if (this.#succeeded === this.#n) this.#finish(true);
    else if (this.#stopping && (this.#cancelAll || (this.#inFlight === 0 && this.#settling === 0)))
      this.#finish(false);
  }

  #finish(ok: boolean): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#runTimer?.cancel();
    this.#renewTimer?.cancel();
    for (const lane of this.#lanes.values()) lane.timer?.cancel();
    this.#lanes.clear();
    this.#resolve(ok ? { ok: true } : { ok: false, cause: this.#cause });
  }

  /** A signal for store waits that aborts when the run stops. */
  #runSignal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#stopping || this.#finished) this.#controller.abort(this.#cause);
    }
    return this.#controller.signal;
  }

  // ── run guard ────────────────────────────────────────────────────────────────────────────

  #scheduleRenewal(baseMs: number): void {
    const g = this.#c.guard as GuardConfig;
    const delay = applyJitter(baseMs, g.renewJitter, this.#c.random());
    this.#renewTimer = this.#clock.setTimeout(() => void this.#renew(g), delay);
  }

  #retryRenewal(delayMs: number): void {
    const g = this.#c.guard as GuardConfig;
    this.#renewTimer = this.#clock.setTimeout(() => void this.#renew(g), delayMs);
  }

  async #renew(g: GuardConfig): Promise<void> {
    if (this.#finished) return;
    const lease = this.#lease as RunGuardLease;
    let next: RunGuardLease | undefined;
    try {
      next = await g.guard.renew(lease, g.ttlMs);
    } catch (error) {
      if (this.#finished) return;
      // A failed call is not a lost guard while the lease still runs: try again every half
      // interval, the last time at the moment it lapses (then it is lost).
      const left = lease.expiresAt - this.#clock.now();
      if (left > 0) this.#retryRenewal(Math.min(left, Math.max(1, g.renewIntervalMs / 2)));
      else this.#guardLost(error);
      return;
    }
    if (this.#finished) return;
    if (next === undefined) {
      this.#guardLost(undefined);
      return;
    }
    this.#lease = next;
    this.#emitRun({
      type: 'run-guard-renewed',
      ...this.#runBase(),
      key: next.key,
      expiresAt: next.expiresAt,
    });
    this.#scheduleRenewal(g.renewIntervalMs);
  }

  #guardLost(cause: unknown): void {
    const lease = this.#lease as RunGuardLease;
    const error = new RunGuardLostError(lease.key, lease.token, cause);
    this.#lease = undefined;
    this.#emitRun({
      type: 'run-guard-lost',
      ...this.#runBase(),
      key: lease.key,
      error: serializeError(error),
    });
    this.#stop(error, true);
  }

  async #releaseGuard(): Promise<void> {
    const g = this.#c.guard;
    const lease = this.#lease;
    if (g === undefined || lease === undefined) return;
    this.#lease = undefined;
    let released = false;
    let error: unknown;
    try {
      released = await g.guard.release(lease);
    } catch (e) {
      error = e;
      this.#storeError(e, 'run-guard-release');
    }
    this.#emitRun({
      type: 'run-guard-released',
      ...this.#runBase(),
      key: lease.key,
      released,
      ...(error === undefined ? {} : { error: serializeError(error) }),
    });
  }

  // ── events ───────────────────────────────────────────────────────────────────────────────

  #observed(): boolean {
    return this.#sink !== undefined || nodeChannel.hasSubscribers;
  }

  #runBase() {
    return { runId: this.runId, fencingToken: this.fencingToken, timestampMs: this.#clock.now() };
  }

  #nodeBase(i: number) {
    const node = this.#shape.nodes[i] as DagNode;
    return {
      runId: this.runId,
      fencingToken: this.fencingToken,
      timestampMs: this.#clock.now(),
      nodeId: node.id,
      layer: this.layerOf[i] as number,
      attempt: this.#attempts[i] as number,
      placement: node.placement.kind,
      ...(node.placement.kind === 'remote' ? { workerGroup: node.placement.workerGroup } : {}),
      ...(node.idempotencyKey === undefined ? {} : { idempotencyKey: node.idempotencyKey }),
    };
  }

  #emitNode(event: DagNodeEvent): void {
    emitNodeEvent(this.#sink, event);
  }

  #emitRun(event: DagRunEvent): void {
    emitRunEvent(this.#sink, event);
  }

  #storeError(error: unknown, operation: string): void {
    if (storeErrorChannel.hasSubscribers) storeErrorChannel.publish({ error, runId: this.runId, operation });
  }
}
