import { describe, expect, test } from 'vitest';
import { ConnectionError, HttpStatusError, type MocraError, ParseFailedError } from '../src/errors.js';
import type { ErrorEvent, StageName } from '../src/model/events.js';
import { Request } from '../src/model/request.js';
import { Response } from '../src/model/response.js';
import { classifyError } from '../src/policy/failure-kind.js';
import { policyStage, RecoveryPolicy } from '../src/policy/recovery-policy.js';
import { retryOverrides } from '../src/policy/retry-overrides.js';
import { ManualClock } from '../src/schedule/clock.js';

function request(
  url: string,
  extra: { module?: string; runId?: string; fingerprint?: string } = {},
): Request {
  const r = new Request(url);
  r.module = extra.module ?? 'shop';
  r.runId = extra.runId ?? 'run-1';
  r.fingerprint = extra.fingerprint ?? `fp:${url}`;
  return r;
}

function event(
  error: MocraError,
  payload: unknown,
  attempt: number,
  stage: StageName = 'download',
): ErrorEvent {
  const e: ErrorEvent = {
    stage,
    topic: stage === 'parse' ? 'response' : 'request',
    payload,
    error,
    code: error.code,
    message: error.message,
    retryable: error.retryable,
    attempt,
    at: 0,
    priority: 0,
    kind: classifyError(error),
  };
  const status = (error as { status?: unknown }).status;
  if (typeof status === 'number') e.status = status;
  return e;
}

/** Serializing queues hand the policy plain data: this is what it sees after one. */
function overTheWire(e: ErrorEvent): ErrorEvent {
  return JSON.parse(JSON.stringify(e)) as ErrorEvent;
}

describe('RecoveryPolicy', () => {
  test('retries with the resolver, opens the host breaker, defers work for the host while open', () => {
    const clock = new ManualClock(0);
    const policy = new RecoveryPolicy({
      random: () => 0,
      breakers: { failureThreshold: 3, openMs: 10_000, clock },
    });
    const r = request('http://a.test/p1');
    expect(policy.admit('download', { url: r.url, module: 'shop' })).toBeUndefined();
    // One URL failing again and again is that URL's trouble: the host stays open to others.
    for (let attempt = 1; attempt <= 3; attempt++) {
      const d = policy.decide(
        overTheWire(event(new ConnectionError(r.url, 'connect', 'refused'), r, attempt)),
      );
      expect(d.action).toBe('retry');
    }
    expect(policy.admit('download', { url: 'http://a.test/other', module: 'shop' })).toBeUndefined();
    // Two more URLs of the host fail: three in a row, the host's breaker opens.
    for (const path of ['p2', 'p3']) {
      const other = request(`http://a.test/${path}`);
      policy.decide(overTheWire(event(new ConnectionError(other.url, 'connect', 'refused'), other, 1)));
    }
    // Open for a.test, whatever the module; the module's own breaker is not tripped by a host.
    const admission = policy.admit('download', { url: 'http://a.test/other', module: 'other' });
    expect(admission).toMatchObject({ deferMs: 10_000 });
    expect(policy.admit('download', { url: 'http://b.test/x', module: 'shop' })).toBeUndefined();
    expect(policy.breakers?.list().map((b) => `${b.scope}:${b.key}:${b.state}`)).toEqual([
      'host:a.test:open',
    ]);
    // After the open time one probe goes — a URL that was not failing; its success closes both.
    clock.jump(10_000);
    const fresh = { url: 'http://a.test/fresh', fingerprint: 'fp:http://a.test/fresh', module: 'shop' };
    expect(policy.admit('download', { ...fresh, fingerprint: r.fingerprint, attempt: 3 })).toMatchObject({
      deferMs: 1_000,
    });
    expect(policy.admit('download', fresh)).toBeUndefined();
    expect(policy.admit('download', fresh)).toMatchObject({ deferMs: 1_000 });
    // A probe that did not run after all (the politeness gate deferred it) frees its slot.
    policy.released('download', fresh);
    expect(policy.admit('download', fresh)).toBeUndefined();
    policy.succeeded('download', { ...fresh, status: 200 });
    expect(policy.breakers?.list({ state: 'closed' })).toHaveLength(1);
    expect(policy.admit('download', { url: r.url, module: 'shop' })).toBeUndefined();
  });

  test('a host that keeps failing is given up: exhausted breaker → CircuitOpenError, not retryable', () => {
    const clock = new ManualClock(0);
    const policy = new RecoveryPolicy({ breakers: { failureThreshold: 1, openMs: 100, maxOpens: 2, clock } });
    const r = request('http://down.test/');
    policy.decide(event(new ConnectionError(r.url, 'connect', 'refused'), r, 1));
    clock.jump(100);
    expect(policy.admit('download', { url: r.url, attempt: 1 })).toBeUndefined(); // the probe
    policy.decide(event(new ConnectionError(r.url, 'connect', 'refused'), r, 2));
    const refused = policy.admit('download', { url: r.url, attempt: 2 });
    expect(refused).toMatchObject({
      error: { code: 'MOCRA_ERR_CIRCUIT_OPEN', retryable: false, exhausted: true },
    });
    // Failing the work with that error gives it up into the DLQ.
    if (refused === undefined || !('error' in refused)) throw new Error('expected an error');
    expect(policy.decide(event(refused.error, r, 3)).action).toBe('dead-letter');
    // A URL of that host that was never tried is not given up: it gets its own try.
    expect(policy.admit('download', { url: 'http://down.test/never-tried', attempt: 0 })).toBeUndefined();
  });

  test("store failures trip the module's breaker: its downloads wait until a page goes through", () => {
    const clock = new ManualClock(0);
    const policy = new RecoveryPolicy({
      random: () => 0,
      breakers: { failureThreshold: 2, openMs: 1_000, clock },
    });
    const storeDown = (url: string) => {
      const r = request(url);
      const res = new Response({ url, status: 200, headers: {}, body: new Uint8Array(), request: r });
      const e = event(
        new ParseFailedError({ module: 'shop', node: 'main' }, new Error('x')),
        res,
        1,
        'parse',
      );
      e.code = 'MOCRA_ERR_SINK_FAILED';
      e.kind = 'store';
      e.retryable = true;
      e.module = 'shop';
      return e;
    };
    policy.decide(storeDown('http://a.test/1'));
    policy.decide(storeDown('http://a.test/2'));
    expect(policy.admit('download', { url: 'http://b.test/', module: 'shop' })).toMatchObject({
      deferMs: 1_000,
    });
    expect(policy.admit('download', { url: 'http://b.test/', module: 'other' })).toBeUndefined();
    expect(policy.breakers?.get('host', 'a.test')).toBeUndefined();
    clock.jump(1_000);
    expect(policy.admit('download', { url: 'http://b.test/', module: 'shop' })).toBeUndefined(); // the probe
    policy.succeeded('download', { url: 'http://b.test/', module: 'shop', status: 200 });
    expect(policy.breakers?.get('module', 'shop')?.state).toBe('half-open'); // not until the store worked
    policy.succeeded('parse', { url: 'http://b.test/', module: 'shop' });
    expect(policy.breakers?.get('module', 'shop')?.state).toBe('closed');
  });

  test('a 5xx that reached parse after its last retry is no success for the breaker', () => {
    const clock = new ManualClock(0);
    const policy = new RecoveryPolicy({ breakers: { failureThreshold: 2, clock } });
    const r = request('http://flaky.test/a');
    const s = request('http://flaky.test/b');
    policy.decide(event(new HttpStatusError(r.url, 503, undefined), r, 1));
    policy.succeeded('download', { url: r.url, status: 503 });
    policy.decide(event(new HttpStatusError(s.url, 503, undefined), s, 1));
    expect(policy.breakers?.get('host', 'flaky.test')?.state).toBe('open');
  });

  test('thresholds: skip a request at its limit; a terminated module fails its remaining work', () => {
    const policy = new RecoveryPolicy({
      thresholds: { maxRequestErrors: 2, maxModuleErrors: 3, maxTaskErrors: 0, retryLaterRatio: 0 },
      breakers: false,
    });
    const r1 = request('http://a.test/1');
    expect(policy.decide(event(new ConnectionError(r1.url, 'connect', 'x'), r1, 1)).action).toBe('retry');
    const skipped = policy.decide(event(new ConnectionError(r1.url, 'connect', 'x'), r1, 2));
    expect(skipped).toMatchObject({ action: 'dead-letter' });
    expect(skipped.action === 'dead-letter' && skipped.reason).toMatch(/^MOCRA_ERR_REQUEST_SKIPPED/);
    const r2 = request('http://a.test/2');
    const terminated = policy.decide(event(new ConnectionError(r2.url, 'connect', 'x'), r2, 1));
    expect(terminated.action === 'dead-letter' && terminated.reason).toMatch(/^MOCRA_ERR_MODULE_TERMINATED/);
    const admission = policy.admit('download', { module: 'shop', url: 'http://a.test/3' });
    expect(admission).toMatchObject({ error: { code: 'MOCRA_ERR_MODULE_TERMINATED' } });
    expect(policy.admit('parse', { module: 'shop' })).toMatchObject({
      error: { code: 'MOCRA_ERR_MODULE_TERMINATED' },
    });
    expect(policy.admit('download', { module: 'other', url: 'http://a.test/3' })).toBeUndefined();
    // The termination error itself is not counted again and goes to the DLQ.
    if (admission === undefined || !('error' in admission)) throw new Error('expected an error');
    expect(policy.decide(event(admission.error, request('http://a.test/3'), 1)).action).toBe('dead-letter');
    expect(policy.thresholds?.decisions()).toMatchObject({ skip: 1, 'terminate-module': 1, continue: 1 });
  });

  test('retry-later stretches the delay to the cool-down', () => {
    const policy = new RecoveryPolicy({
      random: () => 0,
      thresholds: { maxModuleErrors: 4, retryLaterMs: 45_000 },
      breakers: false,
    });
    const d1 = policy.decide(
      event(new ConnectionError('http://a/1', 'connect', 'x'), request('http://a/1'), 1),
    );
    expect(d1).toMatchObject({ action: 'retry', delayMs: 500 });
    const d2 = policy.decide(
      event(new ConnectionError('http://a/2', 'connect', 'x'), request('http://a/2'), 1),
    );
    expect(d2).toMatchObject({ action: 'retry', delayMs: 45_000 });
  });

  test('successful parses decay the module score', () => {
    const policy = new RecoveryPolicy({
      thresholds: { maxModuleErrors: 10, retryLaterRatio: 0 },
      breakers: false,
    });
    for (let page = 0; page < 200; page++) {
      const r = request(`http://a/${page}`);
      expect(policy.decide(event(new ConnectionError(r.url, 'connect', 'x'), r, 1)).action).toBe('retry');
      policy.succeeded('parse', { module: 'shop', runId: 'run-1', url: r.url, fingerprint: r.fingerprint });
    }
    expect(policy.thresholds?.snapshot().trackedRequests).toBe(0);
  });

  test('dlq = never drops; parse failures go to the DLQ; payload fields survive JSON', () => {
    const policy = new RecoveryPolicy({ overrides: [{ stage: 'store', dlq: 'never' }], breakers: false });
    const r = request('http://a/');
    const res = new Response({ url: r.url, status: 200, headers: {}, body: new Uint8Array(), request: r });
    const parse = overTheWire(
      event(new ParseFailedError({ module: 'shop', node: 'main' }, new Error('x')), res, 1, 'parse'),
    );
    expect(policy.decide(parse)).toMatchObject({ action: 'dead-letter' });
    const sink = event(
      new ParseFailedError({ module: 'shop', node: 'main' }, new Error('x')),
      res,
      1,
      'parse',
    );
    sink.code = 'MOCRA_ERR_SINK_FAILED';
    sink.kind = 'store';
    sink.retryable = true;
    sink.attempt = 6;
    expect(policy.decide(sink)).toMatchObject({ action: 'drop' });
  });

  test('retryStatus follows the table and module overrides', () => {
    const policy = new RecoveryPolicy({
      overrides: [{ kind: 'http-4xx', status: 404, module: 'cdn', retryable: true, max_retries: 1 }],
      breakers: false,
    });
    const res = (status: number, module: string) => {
      const r = request('http://a/', { module });
      return new Response({ url: r.url, status, headers: {}, body: new Uint8Array(), request: r });
    };
    expect(policy.retryStatus(res(503, 'shop'), 0)).toBe(true);
    expect(policy.retryStatus(res(404, 'shop'), 0)).toBe(false);
    expect(policy.retryStatus(res(404, 'cdn'), 0)).toBe(true);
    expect(policy.retryStatus(res(404, 'cdn'), 1)).toBe(false);
  });

  test('policy stages refine the engine stage by what failed', () => {
    expect(policyStage('parse', 'store')).toBe('store');
    expect(policyStage('download', 'middleware')).toBe('middleware');
    expect(policyStage('task', 'parse')).toBe('generate');
    expect(policyStage('followUp', 'network')).toBe('generate');
    expect(policyStage('download', 'queue')).toBe('queue');
  });
});

describe('retry options as overrides', () => {
  test('only what is set changes the defaults', () => {
    expect(retryOverrides({})).toEqual([]);
    const o = retryOverrides({ maxRetries: 1, baseDelayMs: 10, maxDelayMs: 50, jitter: false });
    const policy = new RecoveryPolicy({ overrides: o, breakers: false, thresholds: false });
    const r = request('http://a/');
    const e = (attempt: number) => event(new ConnectionError(r.url, 'connect', 'x'), r, attempt);
    expect(policy.decide(e(1))).toEqual({ action: 'retry', delayMs: 10, reason: expect.any(String) });
    expect(policy.decide(e(2)).action).toBe('dead-letter');
    expect(
      policy.decide({ ...event(new HttpStatusError(r.url, 503, 60_000), r, 1), retryAfterMs: 60_000 }),
    ).toMatchObject({
      action: 'retry',
      delayMs: 50,
    });
  });

  test('retryStatuses: exactly the listed statuses are retried', () => {
    const policy = new RecoveryPolicy({
      overrides: retryOverrides({ retryStatuses: [503, 404] }),
      breakers: false,
    });
    const res = (status: number) => {
      const r = request('http://a/');
      return new Response({ url: r.url, status, headers: {}, body: new Uint8Array(), request: r });
    };
    expect([503, 404, 500, 429, 408, 400].map((s) => policy.retryStatus(res(s), 0))).toEqual([
      true,
      true,
      false,
      false,
      false,
      false,
    ]);
  });

  test('the retry options are checked, naming the option; a good one passes as the schema would', () => {
    const bad = (retry: Parameters<typeof retryOverrides>[0]) => () => new RecoveryPolicy({ retry });
    expect(bad({ maxRetries: -1 })).toThrow(/retry\.maxRetries must be an integer from 0 to 1000, got -1/);
    expect(bad({ maxRetries: 1.5 })).toThrow(/retry\.maxRetries/);
    expect(bad({ maxRetries: 1001 })).toThrow(/retry\.maxRetries/);
    expect(bad({ baseDelayMs: Number.NaN })).toThrow(/retry\.baseDelayMs/);
    expect(bad({ maxDelayMs: 86_400_001 })).toThrow(/retry\.maxDelayMs/);
    expect(bad({ baseDelayMs: 100, maxDelayMs: 50 })).toThrow(/at least retry\.baseDelayMs \(100\)/);
    expect(bad({ retryStatuses: [503, 700] })).toThrow(
      /retry\.retryStatuses\[\] must be an integer from 100 to 599, got 700/,
    );
    for (const retry of [
      { maxRetries: 0 },
      { maxRetries: 1000, baseDelayMs: 0, maxDelayMs: 86_400_000, jitter: false },
      { retryStatuses: [100, 599] },
    ]) {
      // What the options make is what `[[policy.overrides]]` accepts: the schema agrees.
      expect(() => new RecoveryPolicy({ overrides: retryOverrides(retry) })).not.toThrow();
    }
  });
});
