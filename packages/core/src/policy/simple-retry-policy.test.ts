import { describe, expect, test } from 'vitest';
import {
  ConnectionError,
  CriticalError,
  InvalidUrlError,
  type MocraError,
  NonRetryableError,
  RetryLaterError,
} from '../errors.js';
import type { ErrorEvent } from '../model/events.js';
import { Request } from '../model/request.js';
import { Response } from '../model/response.js';
import { parseRetryAfter, SimpleRetryPolicy } from './simple-retry-policy.js';

function event(error: MocraError, attempt: number, extra: Partial<ErrorEvent> = {}): ErrorEvent {
  return {
    stage: 'download',
    topic: 'request',
    payload: undefined,
    error,
    code: error.code,
    message: error.message,
    retryable: error.retryable,
    attempt,
    at: 0,
    priority: 0,
    ...extra,
  };
}

const policy = new SimpleRetryPolicy({ maxRetries: 2, baseDelayMs: 100, maxDelayMs: 1000, jitter: false });

describe('SimpleRetryPolicy', () => {
  test('retries retryable errors with exponential backoff, then dead-letters', () => {
    const err = new ConnectionError('http://a/', 'connect', 'refused');
    expect(policy.decide(event(err, 1))).toEqual({ action: 'retry', delayMs: 100 });
    expect(policy.decide(event(err, 2))).toEqual({ action: 'retry', delayMs: 200 });
    expect(policy.decide(event(err, 3)).action).toBe('dead-letter');
  });

  test('non-retryable errors are dead-lettered at once; a critical one stops the run', () => {
    expect(policy.decide(event(new InvalidUrlError('x', 'bad'), 1)).action).toBe('dead-letter');
    expect(policy.decide(event(new NonRetryableError('no'), 1)).action).toBe('dead-letter');
    expect(policy.decide(event(new CriticalError('halt'), 1)).action).toBe('stop');
  });

  test('a requested delay wins, capped at maxDelayMs; decisions survive serialization', () => {
    const later = new RetryLaterError('later', 300);
    expect(policy.decide(event(later, 1, { retryAfterMs: 300 }))).toEqual({ action: 'retry', delayMs: 300 });
    expect(policy.decide(event(later, 1, { retryAfterMs: 60_000 }))).toEqual({
      action: 'retry',
      delayMs: 1000,
    });
    const wire = JSON.parse(JSON.stringify(event(new CriticalError('halt'), 1))) as ErrorEvent;
    expect(policy.decide(wire).action).toBe('stop');
  });

  test('jitter stays within ±20 %', () => {
    const jittery = new SimpleRetryPolicy({ baseDelayMs: 1000, maxDelayMs: 10_000 });
    const err = new ConnectionError('http://a/', 'connect', 'refused');
    for (let i = 0; i < 50; i++) {
      const d = jittery.decide(event(err, 1));
      expect(d.action).toBe('retry');
      const delay = d.action === 'retry' ? d.delayMs : -1;
      expect(delay).toBeGreaterThanOrEqual(800);
      expect(delay).toBeLessThanOrEqual(1200);
    }
  });

  test('retryStatus: listed statuses while retries remain', () => {
    const res = (status: number) =>
      new Response({
        url: 'http://a/',
        status,
        headers: {},
        body: new Uint8Array(),
        request: new Request('http://a/'),
      });
    expect(policy.retryStatus(res(503), 0)).toBe(true);
    expect(policy.retryStatus(res(503), 1)).toBe(true);
    expect(policy.retryStatus(res(503), 2)).toBe(false);
    expect(policy.retryStatus(res(404), 0)).toBe(false);
    expect(new SimpleRetryPolicy({ retryStatuses: [404] }).retryStatus(res(404), 0)).toBe(true);
  });

  test('rejects bad options', () => {
    expect(() => new SimpleRetryPolicy({ maxRetries: -1 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });
});

describe('parseRetryAfter', () => {
  test('delta-seconds and HTTP dates', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});
