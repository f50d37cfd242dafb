/**
 * The policy resolver: given a failure (its kind, stage, module, status, attempt), which rule
 * applies and what happens now — retry after a delay, give up (dead-letter or drop), or stop.
 *
 * ```
 *  failure ──classify──▶ kind ──▶ DEFAULT_FAILURE_RULES[kind]
 *                                   │  overrides that match (kind, stage, module, status), in order
 *                                   ▼
 *                                 rule ──▶ critical?            → stop (dead-lettered too)
 *                                          dlq = always?        → give up, dead-letter
 *                                          not retryable?       → give up (dead-letter unless dlq = never)
 *                                          attempt > maxRetries → give up, exhausted (same)
 *                                          otherwise            → retry after Retry-After (capped) or backoff
 * ```
 *
 * It reads only plain fields, so an error event decides the same after a serializing queue.
 * It keeps no state: counting across failures is the thresholds' job (`error-thresholds.ts`).
 */
import { InvalidArgumentError } from '../errors.js';
import { type Backoff, backoffDelayMs } from './backoff.js';
import { classifyCode, type FailureKind, kindOfStatus, type PolicyStage } from './failure-kind.js';
import { type PolicyDecisionMessage, policyChannels } from './policy-channels.js';
import {
  DEFAULT_FAILURE_RULES,
  type FailureRule,
  type PolicyOverride,
  policyOverrideSchema,
} from './policy-table.js';
import { retryOverrides } from './retry-overrides.js';
import type { SimpleRetryPolicyOptions } from './simple-retry-policy.js';

/** One failure as the resolver sees it: plain, serializable fields only. */
export interface FailureInput {
  /** The error code (`MOCRA_ERR_…`); classifies the failure when `kind` is not given. */
  code: string;
  /** The kind, when the caller classified the live error already (see `classifyError`). */
  kind?: FailureKind;
  stage: PolicyStage;
  /** Failures of this piece of work so far, this one included (1 on the first failure). */
  attempt: number;
  /** The error's own `retryable` flag. @default true */
  retryable?: boolean;
  /** HTTP status, for status failures. */
  status?: number;
  /** The delay the failure asked for (Retry-After, `RetryLaterError.delayMs`). */
  retryAfterMs?: number;
  module?: string;
  message?: string;
}

/** What happens to one failure. */
export type FailureDecision =
  | {
      action: 'retry';
      delayMs: number;
      /** `retry-after`: the delay the failure asked for (capped); `backoff`: the rule's curve. */
      delaySource: 'retry-after' | 'backoff';
      kind: FailureKind;
      rule: FailureRule;
      reason: string;
    }
  | {
      action: 'give-up';
      /** Keep the work in the dead-letter queue (false: drop it, `dlq = never`). */
      deadLetter: boolean;
      /** True when retries ran out (false: not retryable, or `dlq = always`). */
      exhausted: boolean;
      kind: FailureKind;
      rule: FailureRule;
      reason: string;
    }
  | {
      /** A CriticalError: stop the engine cleanly. The work is dead-lettered unless `dlq = never`. */
      action: 'stop';
      deadLetter: boolean;
      kind: FailureKind;
      rule: FailureRule;
      reason: string;
    };

export interface PolicyResolverOptions {
  /**
   * Changes to the default table, as written in `[[policy.overrides]]` (snake_case keys).
   * Validated here: a bad entry throws `MOCRA_ERR_INVALID_ARGUMENT` naming the entry and key.
   * @default []
   */
  overrides?: readonly PolicyOverride[];
  /**
   * The simple retry options (`maxRetries`, delays, statuses, jitter), applied before
   * `overrides`. Checked here: a bad value throws `MOCRA_ERR_INVALID_ARGUMENT` naming the option.
   * @default {}
   */
  retry?: SimpleRetryPolicyOptions;
  /** Random numbers in [0, 1) for jitter; injectable so tests get exact delays. @default Math.random */
  random?: () => number;
}

/** A validated override with its matchers turned into sets. */
interface CompiledOverride {
  kinds: ReadonlySet<string> | undefined;
  stages: ReadonlySet<string> | undefined;
  modules: ReadonlySet<string> | undefined;
  statuses: ReadonlySet<number> | undefined;
  entry: PolicyOverride;
}

/** Where to look a rule up: the stage, and the module and status when known. */
export interface RuleContext {
  module?: string | undefined;
  status?: number | undefined;
}

export class PolicyResolver {
  readonly #overrides: readonly CompiledOverride[];
  readonly #random: () => number;
  /** (kind, stage, module, status) → rule; the table is small and lookups are per failure. */
  readonly #cache = new Map<string, FailureRule & { retryableSet: boolean }>();

  constructor(options: PolicyResolverOptions = {}) {
    // The retry options' overrides are valid by construction; only the written ones meet the schema.
    const fromRetry = options.retry === undefined ? [] : retryOverrides(options.retry).map(compiled);
    this.#overrides = [
      ...fromRetry,
      ...(options.overrides ?? []).map((entry, i) => compiled(checked(entry, i))),
    ];
    this.#random = options.random ?? Math.random;
  }

  /** The rule for a kind of failure at a stage (and module / status when given). */
  rule(kind: FailureKind, stage: PolicyStage, context: RuleContext = {}): FailureRule {
    const { retryableSet: _, ...rule } = this.#resolve(kind, stage, context);
    return rule;
  }

  /** Decide what happens to one failure; published on `mocra:policy:decision`. */
  decide(failure: FailureInput): FailureDecision {
    const kind = failure.kind ?? classifyCode(failure.code, failure.status);
    const resolved = this.#resolve(kind, failure.stage, { module: failure.module, status: failure.status });
    const { retryableSet, ...rule } = resolved;
    const decision = this.#decide(failure, kind, rule, retryableSet);
    if (policyChannels.decision.hasSubscribers) {
      const message: PolicyDecisionMessage = { source: 'resolver', failure, decision };
      policyChannels.decision.publish(message);
    }
    return decision;
  }

  /**
   * Whether a response with this status takes the retry path instead of reaching parse:
   * its kind's rule is retryable (statuses only fail when the policy says so) and retries
   * remain. `retriesSoFar` is 0 on the first download.
   */
  retryStatus(status: number, retriesSoFar: number, context: { module?: string | undefined } = {}): boolean {
    if (status < 400) return false;
    const kind = kindOfStatus(status);
    const rule = this.#resolve(kind, 'download', { module: context.module, status });
    return rule.retryable && rule.deadLetter !== 'always' && retriesSoFar < rule.maxRetries;
  }

  #decide(
    failure: FailureInput,
    kind: FailureKind,
    rule: FailureRule,
    retryableSet: boolean,
  ): FailureDecision {
    const what = `${failure.code}${failure.status === undefined ? '' : ` (HTTP ${failure.status})`} in ${failure.stage}`;
    const keep = rule.deadLetter !== 'never';
    if (kind === 'critical') {
      return {
        action: 'stop',
        deadLetter: keep,
        kind,
        rule,
        reason: `${what}: critical, stopping the engine`,
      };
    }
    if (rule.deadLetter === 'always') {
      return {
        action: 'give-up',
        deadLetter: true,
        exhausted: false,
        kind,
        rule,
        reason: `${what}: dead-lettered at once (dlq = always)`,
      };
    }
    const retryable = retryableSet ? rule.retryable : rule.retryable && failure.retryable !== false;
    if (!retryable) {
      return {
        action: 'give-up',
        deadLetter: keep,
        exhausted: false,
        kind,
        rule,
        reason: `${what}: not retryable`,
      };
    }
    const attempt = Math.max(1, Math.floor(failure.attempt));
    if (attempt > rule.maxRetries) {
      return {
        action: 'give-up',
        deadLetter: keep,
        exhausted: true,
        kind,
        rule,
        reason: `${what}: gave up after ${attempt} attempt${attempt === 1 ? '' : 's'} (max_retries ${rule.maxRetries})`,
      };
    }
    if (rule.honorRetryAfter && failure.retryAfterMs !== undefined && failure.retryAfterMs >= 0) {
      const delayMs = Math.min(Math.round(failure.retryAfterMs), rule.retryAfterCapMs);
      return {
        action: 'retry',
        delayMs,
        delaySource: 'retry-after',
        kind,
        rule,
        reason: `${what}: retry ${attempt}/${rule.maxRetries} after ${delayMs} ms (asked for ${failure.retryAfterMs} ms)`,
      };
    }
    const delayMs = backoffDelayMs(rule.backoff, attempt, this.#random);
    return {
      action: 'retry',
      delayMs,
      delaySource: 'backoff',
      kind,
      rule,
      reason: `${what}: retry ${attempt}/${rule.maxRetries} after ${delayMs} ms (${rule.backoff.strategy} backoff)`,
    };
  }

  #resolve(
    kind: FailureKind,
    stage: PolicyStage,
    context: RuleContext,
  ): FailureRule & { retryableSet: boolean } {
    const cacheKey = `${kind}|${stage}|${context.module ?? ''}|${context.status ?? ''}`;
    const cached = this.#cache.get(cacheKey);
    if (cached) return cached;
    const base = DEFAULT_FAILURE_RULES[kind];
    const rule: FailureRule & { retryableSet: boolean } = {
      ...base,
      backoff: { ...base.backoff },
      retryableSet: false,
    };
    // Writable while the overrides apply; frozen once cached.
    for (const o of this.#overrides) {
      if (o.kinds && !o.kinds.has(kind)) continue;
      if (o.stages && !o.stages.has(stage)) continue;
      if (o.modules && (context.module === undefined || !o.modules.has(context.module))) continue;
      if (o.statuses && (context.status === undefined || !o.statuses.has(context.status))) continue;
      apply(rule, o.entry);
    }
    // Bounded: kinds × stages × (modules + statuses that occur) — small, but guard anyway.
    if (this.#cache.size >= 4096) this.#cache.clear();
    Object.freeze(rule.backoff);
    this.#cache.set(cacheKey, Object.freeze(rule));
    return rule;
  }
}

export function createPolicyResolver(options: PolicyResolverOptions = {}): PolicyResolver {
  return new PolicyResolver(options);
}

function checked(entry: PolicyOverride, index: number): PolicyOverride {
  const parsed = policyOverrideSchema.safeParse(entry);
  if (!parsed.success) {
    const issues = parsed.error.issues.map(
      (i) => `${i.path.length > 0 ? i.path.join('.') : '(entry)'}: ${i.message}`,
    );
    throw new InvalidArgumentError(`policy override #${index + 1} is invalid: ${issues.join('; ')}`);
  }
  return parsed.data;
}

function compiled(e: PolicyOverride): CompiledOverride {
  return {
    kinds: setOf<string>(e.kind),
    stages: setOf<string>(e.stage),
    modules: setOf<string>(e.module),
    statuses: setOf<number>(e.status),
    entry: e,
  };
}

function setOf<T>(value: T | readonly T[] | undefined): ReadonlySet<T> | undefined {
  if (value === undefined) return undefined;
  return new Set(Array.isArray(value) ? (value as readonly T[]) : [value as T]);
}

function apply(rule: FailureRule & { retryableSet: boolean }, o: PolicyOverride): void {
  if (o.retryable !== undefined) {
    rule.retryable = o.retryable;
    rule.retryableSet = true;
  }
  if (o.max_retries !== undefined) rule.maxRetries = o.max_retries;
  const b: Backoff = rule.backoff;
  if (o.backoff !== undefined) b.strategy = o.backoff;
  if (o.backoff_ms !== undefined) {
    b.baseMs = o.backoff_ms;
    // A base above the current cap would be cut to it; raise the cap unless it is set too.
    if (o.max_backoff_ms === undefined && b.maxMs < b.baseMs) b.maxMs = b.baseMs;
  }
  if (o.max_backoff_ms !== undefined) b.maxMs = o.max_backoff_ms;
  if (o.backoff_factor !== undefined) b.factor = o.backoff_factor;
  if (o.jitter !== undefined) b.jitter = o.jitter;
  if (o.retry_after !== undefined) rule.honorRetryAfter = o.retry_after;
  if (o.retry_after_cap_ms !== undefined) rule.retryAfterCapMs = o.retry_after_cap_ms;
  if (o.dlq !== undefined) rule.deadLetter = o.dlq;
  if (o.count !== undefined) rule.counted = o.count;
  if (o.breaker !== undefined) rule.tripsBreaker = o.breaker;
}
