/**
 * The policy table: what happens to each kind of failure by default, and the shape of the
 * overrides that change it (`[[policy.overrides]]` in config.toml, or the same objects in code).
 *
 * The defaults are chosen so that a crawl of a flaky site finishes without any configuration:
 * transient trouble (the network, timeouts, 5xx, 429/503) is retried with growing, jittered
 * delays long enough to ride out a restart or a rate-limit window; failures that cannot get
 * better by waiting (a body over the cap, a bad URL, a parser bug) are not retried but kept in
 * the dead-letter queue, so they can be inspected and replayed once fixed. docs/error-handling.md
 * has the table and the reasoning for each row.
 */
import type { z } from 'zod';
import { builtOnFirstUse, lazyRequire } from '../optional-dependency.js';
import { BACKOFF_STRATEGIES, type Backoff } from './backoff.js';
import { FAILURE_KINDS, type FailureKind, POLICY_STAGES } from './failure-kind.js';

export const DEAD_LETTER_MODES = ['never', 'on-exhaustion', 'always'] as const;

/** What happens to the work once the policy gives up on it (or, for `always`, at its first failure). */
export type DeadLetterMode = (typeof DEAD_LETTER_MODES)[number];

/** The resolved handling of one kind of failure at one stage. */
export interface FailureRule {
  /**
   * Whether the work is retried at all. A default rule also needs the error itself to be
   * retryable (a `MiddlewareFailedError` wrapping a non-retryable error is not); an override
   * that sets `retryable` decides alone.
   */
  retryable: boolean;
  /** Retries after the first failure: the work runs at most `maxRetries + 1` times. */
  maxRetries: number;
  backoff: Backoff;
  /** Use the delay the failure asked for (Retry-After, `RetryLaterError.delayMs`) instead of the backoff. */
  honorRetryAfter: boolean;
  /** The longest asked-for delay honoured; longer ones are cut to this. */
  retryAfterCapMs: number;
  /**
   * `never`: given-up work is dropped (counted and logged only); `on-exhaustion`: given-up work
   * goes to the dead-letter queue; `always`: the work goes to the dead-letter queue at its first
   * failure, without retries.
   */
  deadLetter: DeadLetterMode;
  /** Counts toward the per-request / module / task error limits. */
  counted: boolean;
  /**
   * Counts toward a circuit breaker: the host's for network, timeout and 5xx/429/503 failures,
   * the module's for store and middleware failures (its own dependencies).
   */
  tripsBreaker: boolean;
}

function exponential(baseMs: number, maxMs: number, jitter = 0.5): Backoff {
  return { strategy: 'exponential', baseMs, maxMs, factor: 2, jitter };
}

const NO_BACKOFF: Backoff = { strategy: 'none', baseMs: 0, maxMs: 0, factor: 2, jitter: 0 };

function rule(overrides: Partial<FailureRule> & Pick<FailureRule, 'retryable'>): FailureRule {
  return {
    maxRetries: 0,
    backoff: NO_BACKOFF,
    honorRetryAfter: false,
    retryAfterCapMs: 120_000,
    deadLetter: 'on-exhaustion',
    counted: true,
    tripsBreaker: false,
    ...overrides,
  };
}

/** The built-in handling of every failure kind (the same at every stage unless an override says otherwise). */
export const DEFAULT_FAILURE_RULES: Readonly<Record<FailureKind, Readonly<FailureRule>>> = Object.freeze({
  network: rule({ retryable: true, maxRetries: 5, backoff: exponential(500, 60_000), tripsBreaker: true }),
  timeout: rule({ retryable: true, maxRetries: 4, backoff: exponential(1_000, 60_000), tripsBreaker: true }),
  'http-429': rule({
    retryable: true,
    maxRetries: 8,
    backoff: exponential(2_000, 120_000),
    honorRetryAfter: true,
    tripsBreaker: true,
  }),
  'http-503': rule({
    retryable: true,
    maxRetries: 6,
    backoff: exponential(2_000, 120_000),
    honorRetryAfter: true,
    tripsBreaker: true,
  }),
  'http-5xx': rule({
    retryable: true,
    maxRetries: 4,
    backoff: exponential(1_000, 60_000),
    honorRetryAfter: true,
    tripsBreaker: true,
  }),
  'http-4xx': rule({
    retryable: false,
    maxRetries: 2,
    backoff: exponential(1_000, 30_000),
    honorRetryAfter: true,
  }),
  'body-too-large': rule({ retryable: false }),
  decode: rule({ retryable: false }),
  redirect: rule({ retryable: false }),
  'invalid-request': rule({ retryable: false, counted: false }),
  parse: rule({ retryable: false }),
  middleware: rule({
    retryable: true,
    maxRetries: 3,
    backoff: exponential(1_000, 30_000),
    tripsBreaker: true,
  }),
  store: rule({ retryable: true, maxRetries: 5, backoff: exponential(1_000, 60_000), tripsBreaker: true }),
  queue: rule({ retryable: true, maxRetries: 5, backoff: exponential(500, 30_000), counted: false }),
  'session-expired': rule({
    retryable: true,
    maxRetries: 3,
    backoff: { strategy: 'fixed', baseMs: 1_000, maxMs: 1_000, factor: 2, jitter: 0 },
  }),
  'non-retryable': rule({ retryable: false }),
  'retry-later': rule({
    retryable: true,
    maxRetries: 10,
    backoff: exponential(1_000, 60_000),
    honorRetryAfter: true,
    retryAfterCapMs: 600_000,
    counted: false,
  }),
  critical: rule({ retryable: false }),
  aborted: rule({ retryable: true, maxRetries: 20, counted: false }),
  'circuit-open': rule({
    retryable: true,
    maxRetries: 100,
    backoff: exponential(5_000, 300_000, 0.2),
    honorRetryAfter: true,
    retryAfterCapMs: 600_000,
    counted: false,
  }),
  terminated: rule({ retryable: false, counted: false }),
  unknown: rule({ retryable: true, maxRetries: 2, backoff: exponential(1_000, 30_000) }),
});

// ── overrides ──────────────────────────────────────────────────────────────────

const DAY_MS = 86_400_000;
const zod = lazyRequire<typeof import('zod')>('zod');

/** The override schemas, built with zod on first use: a crawl without config never loads it. */
function buildPolicySchemas() {
  const { z } = zod();
  const durationMs = () => z.int().min(0).max(DAY_MS);
  const statusCode = z.int().min(100).max(599);
  const oneOrMany = <T extends z.ZodType>(item: T) => z.union([item, z.array(item).min(1)]);

  /**
   * One `[[policy.overrides]]` entry. Keys are snake_case, as everywhere in mocra's config. The
   * matchers (`kind`, `stage`, `module`, `status`) select failures — an absent matcher matches
   * everything — and the other keys change the rule of what they select. Overrides apply in
   * order; a later one wins where two set the same key.
   *
   * ```toml
   * [[policy.overrides]]
   * kind = "http-429"
   * max_retries = 12
   * retry_after_cap_ms = 300000
   *
   * [[policy.overrides]]
   * kind = "http-4xx"
   * status = [404]          # retry 404s of this flaky CDN twice, 5 s apart
   * module = "catalog"
   * retryable = true
   * max_retries = 2
   * backoff = "fixed"
   * backoff_ms = 5000
   * ```
   */
  const policyOverrideSchema = z
    .strictObject({
      kind: oneOrMany(z.enum(FAILURE_KINDS)).optional(),
      stage: oneOrMany(z.enum(POLICY_STAGES)).optional(),
      module: oneOrMany(z.string().min(1)).optional(),
      status: oneOrMany(statusCode).optional(),
      retryable: z.boolean().optional(),
      max_retries: z.int().min(0).max(1000).optional(),
      backoff: z.enum(BACKOFF_STRATEGIES).optional(),
      backoff_ms: durationMs().optional(),
      max_backoff_ms: durationMs().optional(),
      backoff_factor: z.number().min(1).max(10).optional(),
      jitter: z.number().min(0).max(1).optional(),
      retry_after: z.boolean().optional(),
      retry_after_cap_ms: durationMs().optional(),
      dlq: z.enum(DEAD_LETTER_MODES).optional(),
      count: z.boolean().optional(),
      breaker: z.boolean().optional(),
    })
    .check((ctx) => {
      const v = ctx.value;
      if (v.backoff_ms !== undefined && v.max_backoff_ms !== undefined && v.max_backoff_ms < v.backoff_ms) {
        ctx.issues.push({
          code: 'custom',
          input: v.max_backoff_ms,
          path: ['max_backoff_ms'],
          message: `must be at least backoff_ms (${v.backoff_ms})`,
        });
      }
      const matchers = ['kind', 'stage', 'module', 'status'] as const;
      const settings = Object.keys(v).filter((k) => !(matchers as readonly string[]).includes(k));
      if (settings.length === 0) {
        ctx.issues.push({
          code: 'custom',
          input: v,
          path: [],
          message:
            'an override must change something: retryable, max_retries, backoff, backoff_ms, max_backoff_ms, backoff_factor, jitter, retry_after, retry_after_cap_ms, dlq, count or breaker',
        });
      }
    });

  /** The `[policy]` overrides list, as the config schema embeds it. */
  const policyOverridesSchema = z.array(policyOverrideSchema);
  return { policyOverrideSchema, policyOverridesSchema };
}

let policySchemas: ReturnType<typeof buildPolicySchemas> | undefined;
/** The override schemas, built on the first call. */
export function policyOverrideSchemas(): ReturnType<typeof buildPolicySchemas> {
  policySchemas ??= buildPolicySchemas();
  return policySchemas;
}

/** One `[[policy.overrides]]` entry (see `policyOverrideSchemas`); built on first use. */
export const policyOverrideSchema = builtOnFirstUse(() => policyOverrideSchemas().policyOverrideSchema);
/** The `[policy]` overrides list, as the config schema embeds it; built on first use. */
export const policyOverridesSchema = builtOnFirstUse(() => policyOverrideSchemas().policyOverridesSchema);

/** One override entry as written (TOML, environment or code). */
export type PolicyOverride = z.input<typeof policyOverrideSchema>;
