/**
 * Error thresholds: how many failures a request, a module and a task (one run of a module) may
 * have before the engine stops spending effort on them, with bounded memory and every decision
 * counted.
 *
 * ```
 *  record(failure) ─▶ request errors ≥ maxRequestErrors ─────────────▶ skip             (give the request up)
 *                     task score     ≥ maxTaskErrors ────────────────▶ terminate-task   (its remaining work is given up)
 *                     module score   ≥ maxModuleErrors ──────────────▶ terminate-module (no more work for it)
 *                     module/task score ≥ retryLaterRatio · its max ─▶ retry-later      (cool down before retrying)
 *                     otherwise ─────────────────────────────────────▶ continue         (the resolver decides)
 *  success(...)     ─▶ module and task scores shrink by successDecay (a fraction); request state is dropped
 *  settle(request)  ─▶ request state is dropped (given up, or acknowledged elsewhere)
 * ```
 *
 * Why a decaying *score* rather than a plain count for modules and tasks: a plain count only
 * grows, so a long crawl of a site that fails now and then would eventually be terminated for
 * no reason. With each success forgiving a fraction of the score, a steady state with `f`
 * failures per success settles near `f · (1 − d) / d` (about `9 f` at the default d = 0.1), so
 * only a module that fails far more than it succeeds — or stops succeeding at all — reaches
 * its limit. The limits are generous on purpose: before the first success a whole wave of
 * concurrent requests may fail together (the host breaker bounds that wave), and a crawl of a
 * flaky site must not be terminated for it. The per-request count does not decay: a request either succeeds (and is forgotten)
 * or keeps failing.
 *
 * Memory: one small record per request that has failed and not yet settled (least recently
 * failed forgotten beyond `maxTrackedRequests`), one per module and task with a score above
 * zero; terminated modules and tasks are remembered until `reset`.
 */
import {
  InvalidArgumentError,
  type MocraError,
  ModuleTerminatedError,
  RequestSkippedError,
  TaskTerminatedError,
} from '../errors.js';
import { type PolicyDecisionMessage, policyChannels } from './policy-channels.js';

export const THRESHOLD_DECISIONS = [
  'continue',
  'retry-later',
  'skip',
  'terminate-module',
  'terminate-task',
] as const;

export type ThresholdDecision = (typeof THRESHOLD_DECISIONS)[number];

/** Which request, module and task a failure or success belongs to. Each is optional. */
export interface ThresholdScope {
  /** A stable id of the request (its fingerprint). */
  request?: string | undefined;
  module?: string | undefined;
  /** The task: one run of a module (the engine uses the run id). */
  task?: string | undefined;
}

export interface ThresholdVerdict {
  decision: ThresholdDecision;
  scope: ThresholdScope;
  /** Failures of the request so far (0 when no request was given). */
  requestErrors: number;
  /** Decayed error scores after this failure. */
  moduleScore: number;
  taskScore: number;
  /** For `retry-later`: how long to cool down. */
  delayMs?: number;
  /** For skip / terminate: the typed error to record with the given-up work. */
  error?: MocraError;
  reason: string;
}

export interface ErrorThresholdsOptions {
  /** Failures of one request before it is skipped (0: no limit). @default 10 */
  maxRequestErrors?: number;
  /**
   * Error score of a module at which it is terminated (0: no limit). Above the task limit, so a
   * bad run ends first and a module is only terminated when runs keep failing. @default 1000
   */
  maxModuleErrors?: number;
  /** Error score of a task (one run) at which it is terminated (0: no limit). @default 500 */
  maxTaskErrors?: number;
  /** Fraction (0 … 1) of a module's and a task's score each success forgives. @default 0.1 */
  successDecay?: number;
  /** A module or task whose score reaches this fraction of its limit gets `retry-later`. @default 0.5 */
  retryLaterRatio?: number;
  /** The cool-down of a `retry-later` decision. @default 30000 */
  retryLaterMs?: number;
  /** Requests tracked at once; beyond it the least recently failed are forgotten. @default 100000 */
  maxTrackedRequests?: number;
  /** Called with every verdict (also published on `mocra:policy:decision`). */
  onDecision?: (verdict: ThresholdVerdict) => void;
}

/** Scores below this are dropped: the module or task is as good as clean. */
const FORGET_BELOW = 0.01;

export class ErrorThresholds {
  readonly #maxRequest: number;
  readonly #maxModule: number;
  readonly #maxTask: number;
  readonly #decay: number;
  readonly #ratio: number;
  readonly #retryLaterMs: number;
  readonly #maxTracked: number;
  readonly #onDecision: ((verdict: ThresholdVerdict) => void) | undefined;
  /** request → failures; Map order is recency of the last failure (re-inserted on each). */
  readonly #requests = new Map<string, number>();
  readonly #modules = new Map<string, number>();
  readonly #tasks = new Map<string, number>();
  readonly #terminatedModules = new Map<string, ModuleTerminatedError>();
  readonly #terminatedTasks = new Map<string, TaskTerminatedError>();
  readonly #counts: Record<ThresholdDecision, number> = {
    continue: 0,
    'retry-later': 0,
    skip: 0,
    'terminate-module': 0,
    'terminate-task': 0,
  };

  constructor(options: ErrorThresholdsOptions = {}) {
    this.#maxRequest = limit('maxRequestErrors', options.maxRequestErrors, 10);
    this.#maxModule = limit('maxModuleErrors', options.maxModuleErrors, 1000);
    this.#maxTask = limit('maxTaskErrors', options.maxTaskErrors, 500);
    this.#decay = fraction('successDecay', options.successDecay, 0.1);
    this.#ratio = fraction('retryLaterRatio', options.retryLaterRatio, 0.5);
    this.#retryLaterMs = limit('retryLaterMs', options.retryLaterMs, 30_000);
    this.#maxTracked = limit('maxTrackedRequests', options.maxTrackedRequests, 100_000) || 1;
    this.#onDecision = options.onDecision;
  }

  /** Count one failure and decide. Every verdict is counted and published. */
  record(scope: ThresholdScope): ThresholdVerdict {
    let requestErrors = 0;
    if (scope.request !== undefined) {
      requestErrors = (this.#requests.get(scope.request) ?? 0) + 1;
      this.#requests.delete(scope.request);
      this.#requests.set(scope.request, requestErrors);
      if (this.#requests.size > this.#maxTracked) {
        const oldest = this.#requests.keys().next().value;
        if (oldest !== undefined) this.#requests.delete(oldest);
      }
    }
    const moduleScore = scope.module === undefined ? 0 : bump(this.#modules, scope.module);
    const taskScore = scope.task === undefined ? 0 : bump(this.#tasks, scope.task);
    const base = { scope, requestErrors, moduleScore, taskScore };

    let verdict: ThresholdVerdict;
    const task = scope.task;
    const module = scope.module;
    const taskDone = task === undefined ? undefined : this.#terminatedTasks.get(task);
    const moduleDone = module === undefined ? undefined : this.#terminatedModules.get(module);
    if (taskDone) {
      verdict = { ...base, decision: 'terminate-task', error: taskDone, reason: taskDone.message };
    } else if (task !== undefined && this.#maxTask > 0 && taskScore >= this.#maxTask) {
      const error = new TaskTerminatedError(task, Math.round(taskScore), this.#maxTask);
      this.#terminatedTasks.set(task, error);
      verdict = { ...base, decision: 'terminate-task', error, reason: error.message };
    } else if (moduleDone) {
      verdict = { ...base, decision: 'terminate-module', error: moduleDone, reason: moduleDone.message };
    } else if (module !== undefined && this.#maxModule > 0 && moduleScore >= this.#maxModule) {
      const error = new ModuleTerminatedError(module, Math.round(moduleScore), this.#maxModule);
      this.#terminatedModules.set(module, error);
      verdict = { ...base, decision: 'terminate-module', error, reason: error.message };
    } else if (scope.request !== undefined && this.#maxRequest > 0 && requestErrors >= this.#maxRequest) {
      const error = new RequestSkippedError(scope.request, requestErrors, this.#maxRequest);
      this.#requests.delete(scope.request);
      verdict = { ...base, decision: 'skip', error, reason: error.message };
    } else if (this.#coolDown(moduleScore, this.#maxModule) || this.#coolDown(taskScore, this.#maxTask)) {
      const which = this.#coolDown(moduleScore, this.#maxModule) ? `module '${module}'` : `task '${task}'`;
      verdict = {
        ...base,
        decision: 'retry-later',
        delayMs: this.#retryLaterMs,
        reason: `${which} is failing often; cooling down ${this.#retryLaterMs} ms before retrying`,
      };
    } else {
      verdict = { ...base, decision: 'continue', reason: 'under every error limit' };
    }
    this.#counts[verdict.decision]++;
    if (policyChannels.decision.hasSubscribers) {
      const message: PolicyDecisionMessage = { source: 'thresholds', verdict };
      policyChannels.decision.publish(message);
    }
    this.#onDecision?.(verdict);
    return verdict;
  }

  /** A piece of work succeeded: the request is forgotten, the module and task scores decay. */
  success(scope: ThresholdScope): void {
    if (scope.request !== undefined) this.#requests.delete(scope.request);
    if (scope.module !== undefined) decay(this.#modules, scope.module, this.#decay);
    if (scope.task !== undefined) decay(this.#tasks, scope.task, this.#decay);
  }

  /** The request settled some other way (given up, dropped): forget its count. */
  settle(request: string): void {
    this.#requests.delete(request);
  }

  /** Whether the module or the task of a piece of work was terminated, and the error to give it up with. */
  terminated(scope: ThresholdScope): ModuleTerminatedError | TaskTerminatedError | undefined {
    return (
      (scope.task === undefined ? undefined : this.#terminatedTasks.get(scope.task)) ??
      (scope.module === undefined ? undefined : this.#terminatedModules.get(scope.module))
    );
  }

  /** Lift a termination (an operator fixed the cause) and zero the score. */
  reset(scope: { module?: string; task?: string }): void {
    if (scope.module !== undefined) {
      this.#terminatedModules.delete(scope.module);
      this.#modules.delete(scope.module);
    }
    if (scope.task !== undefined) {
      this.#terminatedTasks.delete(scope.task);
      this.#tasks.delete(scope.task);
    }
  }

  /** How many times each decision was taken. */
  decisions(): Record<ThresholdDecision, number> {
    return { ...this.#counts };
  }

  /** For dashboards and tests: current scores and what is tracked. */
  snapshot(): {
    trackedRequests: number;
    modules: Record<string, number>;
    tasks: Record<string, number>;
    terminatedModules: string[];
    terminatedTasks: string[];
  } {
    return {
      trackedRequests: this.#requests.size,
      modules: Object.fromEntries(this.#modules),
      tasks: Object.fromEntries(this.#tasks),
      terminatedModules: [...this.#terminatedModules.keys()],
      terminatedTasks: [...this.#terminatedTasks.keys()],
    };
  }

  /** Failures of a request so far (0 when not tracked). */
  requestErrors(request: string): number {
    return this.#requests.get(request) ?? 0;
  }

  #coolDown(score: number, max: number): boolean {
    return max > 0 && this.#ratio > 0 && score >= this.#ratio * max;
  }
}

export function createErrorThresholds(options: ErrorThresholdsOptions = {}): ErrorThresholds {
  return new ErrorThresholds(options);
}

function bump(map: Map<string, number>, key: string): number {
  const next = (map.get(key) ?? 0) + 1;
  map.set(key, next);
  return next;
}

function decay(map: Map<string, number>, key: string, by: number): void {
  const current = map.get(key);
  if (current === undefined) return;
  const next = current * (1 - by);
  if (next < FORGET_BELOW) map.delete(key);
  else map.set(key, next);
}

function limit(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${name} must be an integer ≥ 0, got ${value}`);
  }
  return value;
}

function fraction(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!(value >= 0 && value <= 1))
    throw new InvalidArgumentError(`${name} must be between 0 and 1, got ${value}`);
  return value;
}
