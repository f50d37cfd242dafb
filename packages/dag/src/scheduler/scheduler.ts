/**
 * The scheduler: validates options once, then runs the graph as many times as asked. Each run
 * is a {@link Run}; circuit breakers belong to the scheduler and carry over between its runs.
 */
import { randomUUID } from 'node:crypto';
import type { RunCheckpoint, RunGuardLease } from '../coordination/types.js';
import {
  InvalidOptionsError,
  MissingFencingTokenError,
  RunAbortedError,
  RunGuardAcquireError,
  RunInProgressError,
  RunStateError,
  serializeError,
} from '../errors.js';
import { storeErrorChannel } from '../events/channels.js';
import { emitRunEvent } from '../events/emit.js';
import type { EventSink } from '../events/types.js';
import { compiledOf, type Dag } from '../graph/dag.js';
import { type BreakerState, CircuitBreakers } from '../policy/circuit-breaker.js';
import { policyProblem, type ResolvedPolicy, resolvePolicy } from '../policy/retry.js';
import type { NodePolicy } from '../policy/types.js';
import { type Clock, systemClock } from '../time/clock.js';
import { Run, type RunConfig, type SchedulerShape } from './run.js';
import type { DagReport, DagRunOptions, DagSchedulerOptions } from './types.js';

const DEFAULT_GUARD_TTL_MS = 30_000;
const DEFAULT_CLAIM_TTL_MS = 60_000;

const isFn = (v: unknown): boolean => typeof v === 'function';
const hasMethods = (v: unknown, ...names: string[]): boolean =>
  typeof v === 'object' && v !== null && names.every((n) => isFn((v as Record<string, unknown>)[n]));
const isPositive = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0;
const isNonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

function checkOptions(o: DagSchedulerOptions): void {
  if (typeof o !== 'object' || o === null) throw new InvalidOptionsError('options', 'must be an object');
  const max = o.maxInFlight;
  if (max !== undefined && max !== Number.POSITIVE_INFINITY && !(Number.isInteger(max) && max >= 1)) {
    throw new InvalidOptionsError('maxInFlight', `must be an integer >= 1 or Infinity, got ${String(max)}`);
  }
  if (o.runTimeoutMs !== undefined && !isPositive(o.runTimeoutMs)) {
    throw new InvalidOptionsError('runTimeoutMs', `must be a positive number, got ${String(o.runTimeoutMs)}`);
  }
  if (o.cancelInFlightOnFailure !== undefined && typeof o.cancelInFlightOnFailure !== 'boolean') {
    throw new InvalidOptionsError('cancelInFlightOnFailure', 'must be a boolean');
  }
  if (o.defaultPolicy !== undefined) {
    const problem =
      typeof o.defaultPolicy === 'object' && o.defaultPolicy !== null
        ? policyProblem(o.defaultPolicy)
        : 'must be an object';
    if (problem !== undefined) throw new InvalidOptionsError('defaultPolicy', problem);
  }
  if (o.clock !== undefined && !hasMethods(o.clock, 'now', 'setTimeout')) {
    throw new InvalidOptionsError('clock', 'must have now() and setTimeout(callback, ms)');
  }
  if (o.random !== undefined && !isFn(o.random))
    throw new InvalidOptionsError('random', 'must be a function returning [0, 1)');
  if (o.eventSink !== undefined && !hasMethods(o.eventSink, 'emit'))
    throw new InvalidOptionsError('eventSink', 'must have emit(event)');
  if (o.dispatcher !== undefined && !hasMethods(o.dispatcher, 'dispatch')) {
    throw new InvalidOptionsError('dispatcher', 'must have dispatch(task, signal)');
  }
  const g = o.runGuard;
  if (g !== undefined) {
    if (!hasMethods(g.guard, 'acquire', 'renew', 'release')) {
      throw new InvalidOptionsError('runGuard.guard', 'must have acquire, renew and release');
    }
    const ttl = g.ttlMs ?? DEFAULT_GUARD_TTL_MS;
    if (!isPositive(ttl))
      throw new InvalidOptionsError('runGuard.ttlMs', `must be a positive number, got ${String(g.ttlMs)}`);
    if (g.renewIntervalMs !== undefined && !(isPositive(g.renewIntervalMs) && g.renewIntervalMs < ttl)) {
      throw new InvalidOptionsError(
        'runGuard.renewIntervalMs',
        `must be positive and below ttlMs (${ttl}), got ${String(g.renewIntervalMs)}`,
      );
    }
    if (
      g.renewJitter !== undefined &&
      !(typeof g.renewJitter === 'number' && g.renewJitter >= 0 && g.renewJitter <= 0.9)
    ) {
      throw new InvalidOptionsError(
        'runGuard.renewJitter',
        `must be between 0 and 0.9, got ${String(g.renewJitter)}`,
      );
    }
    if (g.owner !== undefined && !isNonEmptyString(g.owner))
      throw new InvalidOptionsError('runGuard.owner', 'must be a non-empty string');
  }
  if (o.fencing !== undefined) {
    if (!hasMethods(o.fencing.store, 'commit'))
      throw new InvalidOptionsError('fencing.store', 'must have commit(commit)');
    if (o.fencing.resource !== undefined && !isNonEmptyString(o.fencing.resource)) {
      throw new InvalidOptionsError('fencing.resource', 'must be a non-empty string');
    }
  }
  if (o.runState !== undefined && !hasMethods(o.runState.store, 'load', 'save', 'clear')) {
    throw new InvalidOptionsError('runState.store', 'must have load, save and clear');
  }
  if (o.idempotency !== undefined) {
    if (!hasMethods(o.idempotency.store, 'begin', 'complete', 'abandon', 'wait')) {
      throw new InvalidOptionsError('idempotency.store', 'must have begin, complete, abandon and wait');
    }
    if (o.idempotency.claimTtlMs !== undefined && !isPositive(o.idempotency.claimTtlMs)) {
      throw new InvalidOptionsError(
        'idempotency.claimTtlMs',
        `must be a positive number, got ${String(o.idempotency.claimTtlMs)}`,
      );
    }
  }
  if (o.key !== undefined && !isNonEmptyString(o.key))
    throw new InvalidOptionsError('key', 'must be a non-empty string');
}

function checkRunOptions(r: DagRunOptions): void {
  if (typeof r !== 'object' || r === null) throw new InvalidOptionsError('run options', 'must be an object');
  if (r.runId !== undefined && !isNonEmptyString(r.runId))
    throw new InvalidOptionsError('runId', 'must be a non-empty string');
  if (r.key !== undefined && !isNonEmptyString(r.key))
    throw new InvalidOptionsError('key', 'must be a non-empty string');
  if (r.fencingToken !== undefined && !Number.isSafeInteger(r.fencingToken)) {
    throw new InvalidOptionsError('fencingToken', `must be a safe integer, got ${String(r.fencingToken)}`);
  }
  if (r.signal !== undefined && !(r.signal instanceof AbortSignal))
    throw new InvalidOptionsError('signal', 'must be an AbortSignal');
}

/**
 * Runs a {@link Dag}. Construct once per graph (and configuration), call {@link DagScheduler.run}
 * as often as needed; runs may overlap.
 */
export class DagScheduler {
  readonly #shape: SchedulerShape;
  readonly #options: DagSchedulerOptions;
  readonly #breakers = new CircuitBreakers();

  constructor(dag: Dag, options: DagSchedulerOptions = {}) {
    checkOptions(options);
    this.#options = options;
    const { analysis, nodes } = compiledOf(dag);
    const defaults: NodePolicy = options.defaultPolicy ?? {};
    const shared = resolvePolicy('', {}, defaults);
    const policies: ResolvedPolicy[] = nodes.map((node) => {
      const own =
        node.retry !== undefined || node.timeoutMs !== undefined || node.circuitBreaker !== undefined;
      const breakerKeyed = (node.circuitBreaker ?? defaults.circuitBreaker) !== undefined;
      // Nodes without a policy of their own share one object; a default breaker is keyed per node.
      if (!own && !breakerKeyed) return shared;
      const policy: NodePolicy = {
        ...(node.retry === undefined ? {} : { retry: node.retry }),
        ...(node.timeoutMs === undefined ? {} : { timeoutMs: node.timeoutMs }),
        ...(node.circuitBreaker === undefined ? {} : { circuitBreaker: node.circuitBreaker }),
      };
      return resolvePolicy(node.id, policy, defaults);
    });
    const predCount = new Int32Array(nodes.length);
    const remote = new Uint8Array(nodes.length);
    for (let i = 0; i < nodes.length; i++) {
      predCount[i] = (analysis.predecessors[i] as readonly number[]).length;
      if ((nodes[i] as (typeof nodes)[number]).placement.kind === 'remote') remote[i] = 1;
    }
    this.#shape = {
      ids: analysis.order,
      index: analysis.index,
      predecessors: analysis.predecessors,
      successors: analysis.successors,
      layerOf: analysis.layerOf,
      layers: analysis.layers,
      nodes,
      policies,
      predCount,
      remote,
      keys: nodes.map((n) => n.idempotencyKey),
    };
  }

  /** A copy of a circuit breaker's state (by its key: the node id unless the policy names one). */
  circuitBreaker(key: string): Readonly<BreakerState> | undefined {
    return this.#breakers.snapshot(key);
  }

  /**
   * Runs the graph once. Resolves with the report when every node succeeded. Rejects with
   * {@link ExecutionIncompleteError} when the run started and did not finish (its `cause` says
   * why, its `report` has what did finish); rejects with the specific error when the run could
   * not start ({@link InvalidOptionsError}, {@link RunInProgressError}, {@link RunGuardAcquireError},
   * {@link MissingFencingTokenError}, {@link RunStateError}, {@link RunAbortedError}).
   */
  async run(runOptions: DagRunOptions = {}): Promise<DagReport> {
    checkRunOptions(runOptions);
    const o = this.#options;
    const clock = o.clock ?? systemClock;
    const key = runOptions.key ?? o.key;
    if (key === undefined && (o.runGuard !== undefined || o.runState !== undefined)) {
      throw new InvalidOptionsError(
        'key',
        'is required (in the run or scheduler options) when runGuard or runState is configured',
      );
    }
    const resource = o.fencing?.resource ?? key;
    if (o.fencing !== undefined && resource === undefined) {
      throw new InvalidOptionsError('fencing.resource', 'is required when the run has no key');
    }
    if (o.fencing !== undefined && o.runGuard === undefined && runOptions.fencingToken === undefined) {
      throw new MissingFencingTokenError();
    }
    const signal = runOptions.signal;
    if (signal?.aborted) throw new RunAbortedError(runOptions.runId ?? '(not started)', signal.reason);

    let lease: RunGuardLease | undefined;
    const guard = o.runGuard;
    const ttlMs = guard?.ttlMs ?? DEFAULT_GUARD_TTL_MS;
    if (guard !== undefined) {
      const guardKey = key as string;
      const owner = guard.owner ?? runOptions.runId ?? randomUUID();
      try {
        lease = await guard.guard.acquire(guardKey, owner, ttlMs);
      } catch (cause) {
        const error = new RunGuardAcquireError(guardKey, cause);
        refused(o.eventSink, clock, runOptions.runId ?? owner, guardKey, error);
        throw error;
      }
      if (lease === undefined) {
        const error = new RunInProgressError(guardKey);
        refused(o.eventSink, clock, runOptions.runId ?? owner, guardKey, error);
        throw error;
      }
    }
    const fencingToken = runOptions.fencingToken ?? lease?.token;

    let checkpoint: RunCheckpoint | undefined;
    if (o.runState !== undefined) {
      try {
        checkpoint = await o.runState.store.load(key as string);
      } catch (cause) {
        if (lease !== undefined) await releaseQuietly(guard?.guard, lease, runOptions.runId);
        throw new RunStateError('load', key as string, cause);
      }
    }

    const config: RunConfig = {
      runId: runOptions.runId ?? checkpoint?.runId ?? randomUUID(),
      key,
      fencingToken,
      fencingResource: resource,
      signal,
      clock,
      random: o.random ?? Math.random,
      maxInFlight: o.maxInFlight ?? Number.POSITIVE_INFINITY,
      cancelInFlightOnFailure: o.cancelInFlightOnFailure ?? true,
      runTimeoutMs: o.runTimeoutMs,
      eventSink: o.eventSink,
      dispatcher: o.dispatcher,
      fencing: o.fencing?.store,
      runState: o.runState?.store,
      idempotency: o.idempotency?.store,
      claimTtlMs: o.idempotency?.claimTtlMs ?? DEFAULT_CLAIM_TTL_MS,
      guard:
        guard === undefined || lease === undefined
          ? undefined
          : {
              guard: guard.guard,
              lease,
              ttlMs,
              renewIntervalMs: guard.renewIntervalMs ?? Math.max(50, ttlMs / 3),
              renewJitter: guard.renewJitter ?? 0.2,
            },
      checkpoint,
      breakers: this.#breakers,
    };
    return new Run(this.#shape, config).execute();
  }
}

function refused(
  sink: EventSink | undefined,
  clock: Clock,
  runId: string,
  key: string,
  error: RunGuardAcquireError | RunInProgressError,
): void {
  emitRunEvent(sink, {
    type: 'run-guard-refused',
    runId,
    fencingToken: undefined,
    timestampMs: clock.now(),
    key,
    reason: error instanceof RunInProgressError ? 'held' : 'error',
    ...(error instanceof RunInProgressError ? {} : { error: serializeError(error) }),
  });
}

async function releaseQuietly(
  guard: { release(lease: RunGuardLease): Promise<boolean> } | undefined,
  lease: RunGuardLease,
  runId: string | undefined,
): Promise<void> {
  try {
    await guard?.release(lease);
  } catch (error) {
    if (storeErrorChannel.hasSubscribers)
      storeErrorChannel.publish({ error, runId, operation: 'run-guard-release' });
  }
}

/** Builds a scheduler for `dag` and runs it once: `await runDag(dag, { maxInFlight: 4 })`. */
export function runDag(dag: Dag, options: DagSchedulerOptions & DagRunOptions = {}): Promise<DagReport> {
  return new DagScheduler(dag, options).run(options);
}
