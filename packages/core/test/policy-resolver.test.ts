import diagnostics_channel from 'node:diagnostics_channel';
import { describe, expect, test } from 'vitest';
import {
  BodyTooLargeError,
  ConnectionError,
  CriticalError,
  HandlerTimeoutError,
  HttpStatusError,
  InternalError,
  MiddlewareFailedError,
  NonRetryableError,
  ParseFailedError,
  RetryLaterError,
  SessionExpiredError,
  SinkFailedError,
  TimeoutError,
} from '../src/errors.js';
import {
  classifyCode,
  classifyError,
  FAILURE_KINDS,
  isHostFailure,
  kindOfStatus,
  POLICY_STAGES,
  steeringCause,
} from '../src/policy/failure-kind.js';
import { POLICY_CHANNEL_NAMES, type PolicyDecisionMessage } from '../src/policy/policy-channels.js';
import { type FailureInput, PolicyResolver } from '../src/policy/policy-resolver.js';
import { DEFAULT_FAILURE_RULES, policyOverrideSchema } from '../src/policy/policy-table.js';

/** u = 0: jitter takes nothing off, so delays are the curve's exact values. */
const exact = new PolicyResolver({ random: () => 0 });

function fail(code: string, attempt: number, extra: Partial<FailureInput> = {}): FailureInput {
  return { code, stage: 'download', attempt, ...extra };
}

describe('classification', () => {
  test('codes, statuses and the cause chain', () => {
    expect(classifyError(new ConnectionError('http://a/', 'connect', 'refused'))).toBe('network');
    expect(classifyError(new TimeoutError('http://a/', 'headers', 1000))).toBe('timeout');
    expect(classifyError(new HandlerTimeoutError('parse x', 10))).toBe('timeout');
    expect(classifyError(new HttpStatusError('http://a/', 429, undefined))).toBe('http-429');
    expect(classifyError(new HttpStatusError('http://a/', 503, 1000))).toBe('http-503');
    expect(classifyError(new HttpStatusError('http://a/', 502, undefined))).toBe('http-5xx');
    expect(classifyError(new BodyTooLargeError('http://a/', 10, 11, false))).toBe('body-too-large');
    expect(classifyError(new ParseFailedError({ module: 'm', node: 'n' }, new Error('x')))).toBe('parse');
    expect(classifyError(new SinkFailedError({ module: 'm', itemId: 'i' }, new Error('db')))).toBe('store');
    expect(classifyError(new InternalError('bug'))).toBe('unknown');
    expect(classifyError(new Error('plain'))).toBe('unknown');
    expect(classifyError('a string')).toBe('unknown');
    expect([408, 429, 503, 500, 599, 404, 451, 302].map(kindOfStatus)).toEqual([
      'timeout',
      'http-429',
      'http-503',
      'http-5xx',
      'http-5xx',
      'http-4xx',
      'http-4xx',
      'unknown',
    ]);
    expect(classifyCode('MOCRA_ERR_HTTP_STATUS', 429)).toBe('http-429');
    expect(classifyCode('MOCRA_ERR_NOT_A_CODE')).toBe('unknown');
    // Store failures: a database that failed is retried; a write that can never succeed is not.
    expect(classifyCode('MOCRA_ERR_STORE_CONNECTION')).toBe('store');
    expect(classifyCode('MOCRA_ERR_STORE_SERIALIZATION')).toBe('store');
    expect(classifyCode('MOCRA_ERR_STORE_CONSTRAINT')).toBe('invalid-request');
    expect(classifyCode('MOCRA_ERR_STORE_MISSING_TABLE')).toBe('invalid-request');
    expect(isHostFailure('http-503')).toBe(true);
    expect(isHostFailure('parse')).toBe(false);
  });

  test('a steering error wins over what wraps it', () => {
    const later = new RetryLaterError('come back', 5_000);
    const wrapped = new MiddlewareFailedError('download', 'auth', 'beforeRequest', later);
    expect(classifyError(wrapped)).toBe('retry-later');
    expect(steeringCause(wrapped)).toBe(later);
    const deep = new MiddlewareFailedError(
      'store',
      'pg',
      'store',
      new Error('x', { cause: new CriticalError('halt') }),
    );
    expect(classifyError(deep)).toBe('critical');
    expect(classifyError(new ParseFailedError({ module: 'm', node: 'n' }, new SessionExpiredError()))).toBe(
      'session-expired',
    );
    expect(classifyError(new MiddlewareFailedError('data', 'x', 'handle', new Error('boom')))).toBe(
      'middleware',
    );
    const permanent = new MiddlewareFailedError(
      'data',
      'x',
      'handle',
      new NonRetryableError('not a product'),
    );
    expect(classifyError(permanent)).toBe('non-retryable');
    expect(permanent.retryable).toBe(false);
  });

  test('every kind has a default rule', () => {
    for (const kind of FAILURE_KINDS) expect(DEFAULT_FAILURE_RULES[kind]).toBeDefined();
  });
});

describe('PolicyResolver defaults', () => {
  test('network failures: 5 retries, exponential from 500 ms, then dead-lettered', () => {
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 5; attempt++) {
      const d = exact.decide(fail('MOCRA_ERR_CONNECTION', attempt));
      expect(d.action).toBe('retry');
      if (d.action === 'retry') delays.push(d.delayMs);
    }
    expect(delays).toEqual([500, 1_000, 2_000, 4_000, 8_000]);
    const last = exact.decide(fail('MOCRA_ERR_CONNECTION', 6));
    expect(last).toMatchObject({ action: 'give-up', deadLetter: true, exhausted: true, kind: 'network' });
  });

  test('exponential delays stop growing at the cap', () => {
    const r = new PolicyResolver({ random: () => 0, overrides: [{ kind: 'network', max_retries: 20 }] });
    const d = r.decide(fail('MOCRA_ERR_CONNECTION', 15));
    expect(d).toMatchObject({ action: 'retry', delayMs: 60_000 });
  });

  test('429 and 503 honour Retry-After (seconds or a date, turned into ms), capped at 120 s', () => {
    const d429 = exact.decide(fail('MOCRA_ERR_HTTP_STATUS', 1, { status: 429, retryAfterMs: 3_000 }));
    expect(d429).toMatchObject({
      action: 'retry',
      delayMs: 3_000,
      delaySource: 'retry-after',
      kind: 'http-429',
    });
    const d503 = exact.decide(fail('MOCRA_ERR_HTTP_STATUS', 2, { status: 503, retryAfterMs: 3_600_000 }));
    expect(d503).toMatchObject({ action: 'retry', delayMs: 120_000, delaySource: 'retry-after' });
    // Without Retry-After the backoff applies: 2 s, 4 s, …
    const plain = exact.decide(fail('MOCRA_ERR_HTTP_STATUS', 2, { status: 429 }));
    expect(plain).toMatchObject({ action: 'retry', delayMs: 4_000, delaySource: 'backoff' });
    // 429 is retried 8 times, 503 six times
    expect(exact.decide(fail('MOCRA_ERR_HTTP_STATUS', 8, { status: 429 })).action).toBe('retry');
    expect(exact.decide(fail('MOCRA_ERR_HTTP_STATUS', 9, { status: 429 })).action).toBe('give-up');
    expect(exact.decide(fail('MOCRA_ERR_HTTP_STATUS', 7, { status: 503 })).action).toBe('give-up');
  });

  test('RetryLaterError: the asked delay, capped at 10 minutes; not limited by the error flag', () => {
    expect(
      exact.decide(fail('MOCRA_ERR_RETRY_LATER', 1, { stage: 'parse', retryAfterMs: 42_000 })),
    ).toMatchObject({
      action: 'retry',
      delayMs: 42_000,
    });
    expect(
      exact.decide(fail('MOCRA_ERR_RETRY_LATER', 1, { stage: 'parse', retryAfterMs: 3_600_000 })),
    ).toMatchObject({ action: 'retry', delayMs: 600_000 });
  });

  test('permanent failures are not retried and are kept in the DLQ', () => {
    for (const code of [
      'MOCRA_ERR_BODY_TOO_LARGE',
      'MOCRA_ERR_CONTENT_DECODING',
      'MOCRA_ERR_REDIRECT_LOOP',
      'MOCRA_ERR_INVALID_URL',
      'MOCRA_ERR_PARSE_FAILED',
      'MOCRA_ERR_NON_RETRYABLE',
    ]) {
      expect(exact.decide(fail(code, 1))).toMatchObject({
        action: 'give-up',
        deadLetter: true,
        exhausted: false,
      });
    }
  });

  test('a critical error stops the engine', () => {
    expect(exact.decide(fail('MOCRA_ERR_CRITICAL', 1, { stage: 'parse' }))).toMatchObject({
      action: 'stop',
      deadLetter: true,
      kind: 'critical',
    });
  });

  test("a default rule respects the error's own retryable flag", () => {
    // A middleware that failed with a non-retryable cause reports retryable: false.
    expect(exact.decide(fail('MOCRA_ERR_MIDDLEWARE_FAILED', 1, { retryable: false })).action).toBe('give-up');
    expect(exact.decide(fail('MOCRA_ERR_MIDDLEWARE_FAILED', 1, { retryable: true })).action).toBe('retry');
    // An internal error (a bug) is not retryable by itself.
    expect(exact.decide(fail('MOCRA_ERR_INTERNAL', 1, { retryable: false })).action).toBe('give-up');
  });

  test('store and middleware failures are retried; session expiry retries after 1 s', () => {
    expect(exact.decide(fail('MOCRA_ERR_SINK_FAILED', 1, { stage: 'store' }))).toMatchObject({
      action: 'retry',
      delayMs: 1_000,
      kind: 'store',
    });
    expect(exact.decide(fail('MOCRA_ERR_SINK_FAILED', 6, { stage: 'store' })).action).toBe('give-up');
    expect(exact.decide(fail('MOCRA_ERR_SESSION_EXPIRED', 2))).toMatchObject({
      action: 'retry',
      delayMs: 1_000,
    });
  });

  test('the kind given by the caller wins over the code', () => {
    expect(
      exact.decide(fail('MOCRA_ERR_INTERNAL', 1, { kind: 'retry-later', retryAfterMs: 10 })),
    ).toMatchObject({
      action: 'retry',
      delayMs: 10,
    });
  });
});

describe('PolicyResolver overrides', () => {
  test('match by kind, stage, module and status; later entries win', () => {
    const r = new PolicyResolver({
      random: () => 0,
      overrides: [
        { kind: ['network', 'timeout'], max_retries: 1, backoff: 'fixed', backoff_ms: 250 },
        { kind: 'network', module: 'slow', max_retries: 9 },
        { stage: 'store', dlq: 'never' },
        {
          kind: 'http-4xx',
          status: [404, 410],
          retryable: true,
          max_retries: 2,
          backoff: 'linear',
          backoff_ms: 100,
        },
        { kind: 'parse', dlq: 'always' },
      ],
    });
    expect(r.decide(fail('MOCRA_ERR_TIMEOUT', 1))).toMatchObject({ action: 'retry', delayMs: 250 });
    expect(r.decide(fail('MOCRA_ERR_TIMEOUT', 2)).action).toBe('give-up');
    expect(r.decide(fail('MOCRA_ERR_CONNECTION', 2)).action).toBe('give-up');
    expect(r.decide(fail('MOCRA_ERR_CONNECTION', 5, { module: 'slow' }))).toMatchObject({
      action: 'retry',
      delayMs: 250,
    });
    expect(r.decide(fail('MOCRA_ERR_SINK_FAILED', 6, { stage: 'store' }))).toMatchObject({
      action: 'give-up',
      deadLetter: false,
    });
    // 404 retried (status matched), 403 not
    expect(r.decide(fail('MOCRA_ERR_HTTP_STATUS', 2, { status: 404 }))).toMatchObject({
      action: 'retry',
      delayMs: 200,
    });
    expect(r.decide(fail('MOCRA_ERR_HTTP_STATUS', 1, { status: 403 })).action).toBe('give-up');
    expect(r.retryStatus(404, 0)).toBe(true);
    expect(r.retryStatus(404, 2)).toBe(false);
    expect(r.retryStatus(403, 0)).toBe(false);
    expect(r.rule('parse', 'parse').deadLetter).toBe('always');
  });

  test('dlq = always dead-letters retryable work at its first failure', () => {
    const r = new PolicyResolver({ overrides: [{ kind: 'middleware', dlq: 'always' }] });
    expect(r.decide(fail('MOCRA_ERR_MIDDLEWARE_FAILED', 1, { stage: 'middleware' }))).toMatchObject({
      action: 'give-up',
      deadLetter: true,
      exhausted: false,
    });
  });

  test('an override that sets retryable decides alone (a parse that depends on live data)', () => {
    const r = new PolicyResolver({
      random: () => 0,
      overrides: [{ kind: 'parse', retryable: true, max_retries: 1, backoff: 'fixed', backoff_ms: 10 }],
    });
    expect(r.decide(fail('MOCRA_ERR_PARSE_FAILED', 1, { stage: 'parse', retryable: false }))).toMatchObject({
      action: 'retry',
      delayMs: 10,
    });
  });

  test('a base above the default cap raises the cap; retry_after = false ignores Retry-After', () => {
    const r = new PolicyResolver({
      random: () => 0,
      overrides: [{ kind: 'http-503', backoff: 'fixed', backoff_ms: 200_000, retry_after: false }],
    });
    expect(r.decide(fail('MOCRA_ERR_HTTP_STATUS', 1, { status: 503, retryAfterMs: 5 }))).toMatchObject({
      action: 'retry',
      delayMs: 200_000,
      delaySource: 'backoff',
    });
  });

  test('status codes: 5xx, 429, 408 retried by default; 4xx and 2xx/3xx not', () => {
    expect([500, 502, 503, 504, 429, 408].map((s) => exact.retryStatus(s, 0))).toEqual([
      true,
      true,
      true,
      true,
      true,
      true,
    ]);
    expect([200, 301, 400, 401, 403, 404].map((s) => exact.retryStatus(s, 0))).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(exact.retryStatus(503, 5)).toBe(true);
    expect(exact.retryStatus(503, 6)).toBe(false);
  });

  test('bad overrides are rejected with a typed error naming the entry and key', () => {
    const bad = (o: unknown) => () =>
      new PolicyResolver({ overrides: [{ kind: 'network', max_retries: 1 }, o as never] });
    expect(bad({ kind: 'nope', max_retries: 1 })).toThrow(/policy override #2 is invalid: kind/);
    expect(bad({ kind: 'network', max_retries: -1 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(bad({ kind: 'network', retries: 3 })).toThrow(/retries/);
    expect(bad({ kind: 'network' })).toThrow(/must change something/);
    expect(bad({ backoff_ms: 500, max_backoff_ms: 100 })).toThrow(
      /max_backoff_ms: must be at least backoff_ms/,
    );
    expect(bad({ stage: 'download', dlq: 'sometimes' })).toThrow(/dlq/);
    expect(policyOverrideSchema.safeParse({ stage: [...POLICY_STAGES], jitter: 0.3 }).success).toBe(true);
  });
});

test('every decision is published on mocra:policy:decision', () => {
  const seen: PolicyDecisionMessage[] = [];
  const listener = (m: unknown) => seen.push(m as PolicyDecisionMessage);
  diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.decision, listener);
  try {
    exact.decide(fail('MOCRA_ERR_CONNECTION', 1, { module: 'm' }));
  } finally {
    diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.decision, listener);
  }
  expect(seen).toHaveLength(1);
  expect(seen[0]).toMatchObject({ source: 'resolver', decision: { action: 'retry', kind: 'network' } });
});
