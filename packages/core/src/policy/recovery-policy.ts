/**
 * The engine's default failure policy: the resolver, the error thresholds and the circuit
 * breakers behind the engine's {@link FailurePolicy} seam.
 *
 * ```
 *  admit(download, work) ── module / task terminated? ──────────────▶ { error }  (fails, dead-lettered)
 *                        ── host or module breaker open? ───────────▶ { deferMs } (put back, not a failure)
 *                        │    … exhausted, and the work was tried? ─▶ { error }  (CircuitOpenError, given up)
 *                        └─ otherwise (maybe as the half-open probe) ▶ run
 *
 *  decide(event) ── resolver: retry / give up / stop
 *                ── rule.tripsBreaker ─▶ breakers: failure of the host (network, timeouts, 5xx, 429)
 *                                        or of the module (store, middleware), about the work's URL
 *                ── rule.counted ──────▶ thresholds: continue | retry-later | skip | terminate-*
 *                └─ combined: stop > terminate/skip (give up) > give up > retry (cool-down if retry-later)
 *
 *  succeeded(download, status) ─▶ host breaker: success (a 5xx / 429 that reached parse is no success)
 *  succeeded(parse)            ─▶ module breaker: success; thresholds: success (request forgotten, scores decay)
 * ```
 *
 * Everything it reads from an error event is a plain field (code, kind, status, attempt,
 * payload fields), so it decides the same after the event crossed a serializing queue.
 */
import { CircuitOpenError } from '../errors.js';
import type { ErrorEvent, StageName } from '../model/events.js';
import type { Response } from '../model/response.js';
import {
  type BreakerPermit,
  type BreakerScope,
  type CircuitBreakerOptions,
  CircuitBreakers,
} from './circuit-breakers.js';
import { ErrorThresholds, type ErrorThresholdsOptions, type ThresholdVerdict } from './error-thresholds.js';
import {
  classifyCode,
  FAILURE_KINDS,
  type FailureKind,
  isHostFailure,
  type PolicyStage,
} from './failure-kind.js';
import { type FailureDecision, PolicyResolver } from './policy-resolver.js';
import type { PolicyOverride } from './policy-table.js';
import type { SimpleRetryPolicyOptions } from './simple-retry-policy.js';
import type { Admission, FailurePolicy, PolicyDecision, WorkScope } from './types.js';

export interface RecoveryPolicyOptions {
  /** `[[policy.overrides]]` entries (snake_case keys; see docs/error-handling.md). @default [] */
  overrides?: readonly PolicyOverride[];
  /** The simple retry options, applied before `overrides` (see `PolicyResolverOptions.retry`). @default {} */
  retry?: SimpleRetryPolicyOptions;
  /** Per-request / module / task error limits; `false` turns them off. @default the ErrorThresholds defaults */
  thresholds?: ErrorThresholdsOptions | false;
  /** Host and module circuit breakers; `false` turns them off. @default the CircuitBreakers defaults */
  breakers?: CircuitBreakerOptions | false;
  /** Random numbers in [0, 1) for jitter. @default Math.random */
  random?: () => number;
}

const KINDS: ReadonlySet<string> = new Set(FAILURE_KINDS);

function isKind(value: unknown): value is FailureKind {
  return typeof value === 'string' && KINDS.has(value);
}

/** The admission of work a breaker does not let through. */
function refused(scope: BreakerScope, key: string, permit: BreakerPermit & { allowed: false }): Admission {
  if (permit.exhausted) return { error: new CircuitOpenError(scope, key, permit.retryAfterMs, true) };
  return {
    deferMs: Math.max(1, permit.retryAfterMs),
    reason: `circuit breaker of ${scope} '${key}' is ${permit.state}`,
  };
}

export class RecoveryPolicy implements FailurePolicy {
  readonly resolver: PolicyResolver;
  readonly thresholds: ErrorThresholds | undefined;
  readonly breakers: CircuitBreakers | undefined;

  constructor(options: RecoveryPolicyOptions = {}) {
    this.resolver = new PolicyResolver({
      ...(options.overrides === undefined ? {} : { overrides: options.overrides }),
      ...(options.retry === undefined ? {} : { retry: options.retry }),
      ...(options.random === undefined ? {} : { random: options.random }),
    });
    this.thresholds = options.thresholds === false ? undefined : new ErrorThresholds(options.thresholds);
    this.breakers = options.breakers === false ? undefined : new CircuitBreakers(options.breakers);
  }

  admit(stage: StageName, work: WorkScope): Admission {
    const terminated = this.thresholds?.terminated({ module: work.module, task: work.runId });
    if (terminated) return { error: terminated };
    if (stage !== 'download' || !this.breakers) return undefined;
    const subject = requestKey(work);
    const ask = { subject, tried: work.attempt === undefined || work.attempt > 0 };
    // The host's breaker first, then the module's (once per download: no lists built per call).
    const host = hostOf(work);
    let hostProbe = false;
    if (host !== undefined) {
      const permit = this.breakers.check('host', host, ask);
      if (!permit.allowed) return refused('host', host, permit);
      hostProbe = permit.probe === true;
    }
    if (work.module !== undefined) {
      const permit = this.breakers.check('module', work.module, ask);
      if (!permit.allowed) {
        // The host's probe granted above is not going to run.
        if (hostProbe) this.breakers.release('host', host!);
        return refused('module', work.module, permit);
      }
    }
    return undefined;
  }

  succeeded(stage: StageName, work: WorkScope & { status?: number }): void {
    if (stage === 'download') {
      const host = hostOf(work);
      if (!this.breakers || host === undefined) return;
      // A 5xx or 429 that reached parse after its last retry says nothing good about the host.
      const failing = work.status !== undefined && (work.status >= 500 || work.status === 429);
      if (failing) this.breakers.release('host', host);
      else this.breakers.success('host', host, requestKey(work));
      return;
    }
    if (stage === 'parse') {
      // The page went all the way: parsed, middleware ran, items stored.
      if (work.module !== undefined) this.breakers?.success('module', work.module, requestKey(work));
      this.thresholds?.success({ request: requestKey(work), module: work.module, task: work.runId });
    }
  }

  released(stage: StageName, work: WorkScope): void {
    if (stage !== 'download' || !this.breakers) return;
    const host = hostOf(work);
    if (host !== undefined) this.breakers.release('host', host);
    if (work.module !== undefined) this.breakers.release('module', work.module);
  }

  retryStatus(response: Response, retriesSoFar: number): boolean {
    return this.resolver.retryStatus(response.status, retriesSoFar, { module: response.request.module });
  }

  decide(event: ErrorEvent): PolicyDecision {
    const failure = this.#failureOf(event);
    const decision = this.resolver.decide(failure.input);
    const { rule } = decision;
    const work = failure.work;
    if (this.breakers) this.#feedBreakers(failure.input.kind, rule.tripsBreaker, work);
    let verdict: ThresholdVerdict | undefined;
    if (rule.counted && this.thresholds) {
      verdict = this.thresholds.record({ request: requestKey(work), module: work.module, task: work.runId });
    }
    const out = combine(decision, verdict);
    if (out.action !== 'retry' && this.thresholds) {
      const key = requestKey(work);
      if (key !== undefined) this.thresholds.settle(key);
    }
    return out;
  }

  #failureOf(event: ErrorEvent): {
    input: Parameters<PolicyResolver['decide']>[0] & { kind: FailureKind };
    work: WorkScope;
  } {
    const work = workOf(event);
    const kind = isKind(event.kind) ? event.kind : classifyCode(event.code, event.status);
    return {
      input: {
        code: event.code,
        kind,
        stage: policyStage(event.stage, kind),
        attempt: event.attempt,
        retryable: event.retryable,
        ...(event.status === undefined ? {} : { status: event.status }),
        ...(event.retryAfterMs === undefined ? {} : { retryAfterMs: event.retryAfterMs }),
        ...(work.module === undefined ? {} : { module: work.module }),
        message: event.message,
      },
      work,
    };
  }

  /**
   * A failure that trips a breaker trips its target's: the host's for what the server or the
   * network did (network, timeouts, 5xx, 429, 503), the module's for what its own dependencies
   * did (store, middleware). Anything else says nothing about either, so a probe it may have
   * been frees its slot for the next one. The breakers count a URL that keeps failing once.
   */
  #feedBreakers(kind: FailureKind, trips: boolean, work: WorkScope): void {
    const breakers = this.breakers;
    if (!breakers) return;
    const host = hostOf(work);
    const module = work.module;
    const hostFailure = trips && isHostFailure(kind);
    const moduleFailure = trips && !hostFailure;
    const subject = requestKey(work);
    if (host !== undefined) {
      if (hostFailure) breakers.failure('host', host, subject);
      else if (!moduleFailure) breakers.release('host', host);
    }
    if (module !== undefined) {
      if (moduleFailure) breakers.failure('module', module, subject);
      else breakers.release('module', module);
    }
  }
}

export function createRecoveryPolicy(options: RecoveryPolicyOptions = {}): RecoveryPolicy {
  return new RecoveryPolicy(options);
}

/** The resolver's decision, with the thresholds' verdict folded in. */
function combine(decision: FailureDecision, verdict: ThresholdVerdict | undefined): PolicyDecision {
  if (decision.action === 'stop') return { action: 'stop', reason: decision.reason };
  const keep = decision.rule.deadLetter !== 'never';
  if (
    verdict !== undefined &&
    (verdict.decision === 'skip' ||
      verdict.decision === 'terminate-module' ||
      verdict.decision === 'terminate-task')
  ) {
    const reason = `${verdict.error?.code ?? verdict.decision}: ${verdict.reason} (last failure: ${decision.reason})`;
    return keep ? { action: 'dead-letter', reason } : { action: 'drop', reason };
  }
  if (decision.action === 'give-up') {
    return decision.deadLetter
      ? { action: 'dead-letter', reason: decision.reason }
      : { action: 'drop', reason: decision.reason };
  }
  if (
    verdict?.decision === 'retry-later' &&
    verdict.delayMs !== undefined &&
    verdict.delayMs > decision.delayMs
  ) {
    return { action: 'retry', delayMs: verdict.delayMs, reason: `${decision.reason}; ${verdict.reason}` };
  }
  return { action: 'retry', delayMs: decision.delayMs, reason: decision.reason };
}

/** The policy stage of a failure: the engine stage, refined by what failed. */
export function policyStage(stage: StageName, kind: FailureKind): PolicyStage {
  if (kind === 'middleware') return 'middleware';
  if (kind === 'store') return 'store';
  if (kind === 'queue') return 'queue';
  switch (stage) {
    case 'task':
    case 'followUp':
      return 'generate';
    case 'parse':
      return 'parse';
    case 'download':
      return 'download';
    default:
      return 'queue';
  }
}

/** Module, run, URL and fingerprint of the work an event is about, from its plain fields and payload. */
function workOf(event: ErrorEvent): WorkScope {
  const payload = event.payload as
    | {
        module?: unknown;
        runId?: unknown;
        url?: unknown;
        fingerprint?: unknown;
        request?: { module?: unknown; runId?: unknown; url?: unknown; fingerprint?: unknown };
      }
    | null
    | undefined;
  const source = payload !== null && typeof payload === 'object' ? (payload.request ?? payload) : undefined;
  const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  return {
    module: event.module ?? str(source?.module) ?? str(payload?.module),
    runId: str(source?.runId) ?? str(payload?.runId),
    url: event.url ?? str(source?.url),
    fingerprint: str(source?.fingerprint),
  };
}

function requestKey(work: WorkScope): string | undefined {
  return work.fingerprint ?? work.url;
}

function hostOf(work: WorkScope): string | undefined {
  if (work.host !== undefined) return work.host;
  const url = work.url;
  if (url === undefined) return undefined;
  try {
    const host = new URL(url).host.toLowerCase();
    return host === '' ? undefined : host;
  } catch {
    return undefined;
  }
}
