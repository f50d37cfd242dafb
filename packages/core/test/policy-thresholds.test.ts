import diagnostics_channel from 'node:diagnostics_channel';
import { describe, expect, test } from 'vitest';
import { ErrorThresholds, type ThresholdVerdict } from '../src/policy/error-thresholds.js';
import { POLICY_CHANNEL_NAMES, type PolicyDecisionMessage } from '../src/policy/policy-channels.js';

describe('ErrorThresholds', () => {
  test('a request is skipped at its error limit, then forgotten', () => {
    const t = new ErrorThresholds({ maxRequestErrors: 3 });
    expect(t.record({ request: 'r1' }).decision).toBe('continue');
    expect(t.record({ request: 'r1' }).decision).toBe('continue');
    const third = t.record({ request: 'r1' });
    expect(third).toMatchObject({ decision: 'skip', requestErrors: 3 });
    expect(third.error?.code).toBe('MOCRA_ERR_REQUEST_SKIPPED');
    expect(t.requestErrors('r1')).toBe(0);
    expect(t.record({ request: 'r2' }).requestErrors).toBe(1);
  });

  test('a module reaches retry-later at half its limit, then is terminated and stays terminated', () => {
    const t = new ErrorThresholds({ maxModuleErrors: 10, maxTaskErrors: 0, retryLaterMs: 7_000 });
    const decisions: string[] = [];
    for (let i = 0; i < 12; i++) decisions.push(t.record({ module: 'm', request: `r${i}` }).decision);
    expect(decisions).toEqual([
      'continue',
      'continue',
      'continue',
      'continue',
      'retry-later',
      'retry-later',
      'retry-later',
      'retry-later',
      'retry-later',
      'terminate-module',
      'terminate-module',
      'terminate-module',
    ]);
    expect(t.record({ module: 'm' }).error?.code).toBe('MOCRA_ERR_MODULE_TERMINATED');
    expect(t.terminated({ module: 'm' })?.code).toBe('MOCRA_ERR_MODULE_TERMINATED');
    expect(t.terminated({ module: 'other' })).toBeUndefined();
    // Successes do not lift a termination; reset does.
    t.success({ module: 'm' });
    expect(t.record({ module: 'm' }).decision).toBe('terminate-module');
    t.reset({ module: 'm' });
    expect(t.record({ module: 'm' }).decision).toBe('continue');
  });

  test('retry-later carries the cool-down', () => {
    const t = new ErrorThresholds({ maxModuleErrors: 4, retryLaterMs: 7_000 });
    t.record({ module: 'm' });
    expect(t.record({ module: 'm' })).toMatchObject({ decision: 'retry-later', delayMs: 7_000 });
  });

  test('the task limit wins over the module limit', () => {
    const t = new ErrorThresholds({ maxTaskErrors: 3, maxModuleErrors: 3, retryLaterRatio: 0 });
    t.record({ module: 'm', task: 'run-1' });
    t.record({ module: 'm', task: 'run-1' });
    const v = t.record({ module: 'm', task: 'run-1' });
    expect(v.decision).toBe('terminate-task');
    expect(v.error?.code).toBe('MOCRA_ERR_TASK_TERMINATED');
    // The module is not terminated by the same failure; another run of it still gets its own count.
    expect(t.terminated({ module: 'm' })).toBeUndefined();
    expect(t.terminated({ module: 'm', task: 'run-1' })?.code).toBe('MOCRA_ERR_TASK_TERMINATED');
    expect(t.record({ module: 'm', task: 'run-2' }).decision).toBe('terminate-module');
  });

  test('successes decay the module score: a steadily flaky module is never terminated', () => {
    // Two failures per success for 10,000 pages: the score settles near 2 · 0.9 / 0.1 = 18.
    const t = new ErrorThresholds({ maxModuleErrors: 100, maxTaskErrors: 0 });
    let worst = 0;
    for (let page = 0; page < 10_000; page++) {
      for (let f = 0; f < 2; f++) {
        const v = t.record({ module: 'flaky', request: `p${page}` });
        expect(v.decision).toBe('continue');
        worst = Math.max(worst, v.moduleScore);
      }
      t.success({ module: 'flaky', request: `p${page}` });
    }
    expect(worst).toBeLessThan(21);
    expect(t.snapshot().trackedRequests).toBe(0);
  });

  test('a module that stops succeeding reaches its limit', () => {
    const t = new ErrorThresholds({ maxModuleErrors: 50, maxTaskErrors: 0, retryLaterRatio: 0 });
    for (let i = 0; i < 100; i++) t.success({ module: 'm' });
    let n = 0;
    while (t.record({ module: 'm' }).decision !== 'terminate-module') n++;
    expect(n).toBe(49);
  });

  test('memory is bounded: settled requests are dropped, at most maxTrackedRequests kept', () => {
    const t = new ErrorThresholds({ maxTrackedRequests: 100 });
    for (let i = 0; i < 1_000; i++) t.record({ request: `r${i}` });
    expect(t.snapshot().trackedRequests).toBe(100);
    // the most recently failed are the ones kept
    expect(t.requestErrors('r999')).toBe(1);
    expect(t.requestErrors('r0')).toBe(0);
    t.settle('r999');
    expect(t.snapshot().trackedRequests).toBe(99);
    // a fully decayed module is forgotten
    t.record({ module: 'm' });
    for (let i = 0; i < 60; i++) t.success({ module: 'm' });
    expect(t.snapshot().modules).toEqual({});
  });

  test('every decision is counted and published', () => {
    const seen: ThresholdVerdict[] = [];
    const onChannel: PolicyDecisionMessage[] = [];
    const listener = (m: unknown) => onChannel.push(m as PolicyDecisionMessage);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.decision, listener);
    try {
      const t = new ErrorThresholds({
        maxRequestErrors: 2,
        maxModuleErrors: 4,
        onDecision: (v) => seen.push(v),
      });
      t.record({ module: 'm', request: 'a' });
      t.record({ module: 'm', request: 'a' });
      t.record({ module: 'm', request: 'b' });
      t.record({ module: 'm', request: 'b' });
      expect(t.decisions()).toEqual({
        continue: 1,
        'retry-later': 1,
        skip: 1,
        'terminate-module': 1,
        'terminate-task': 0,
      });
      expect(seen.map((v) => v.decision)).toEqual(['continue', 'skip', 'retry-later', 'terminate-module']);
    } finally {
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.decision, listener);
    }
    expect(onChannel.map((m) => (m.source === 'thresholds' ? m.verdict.decision : m.source))).toEqual([
      'continue',
      'skip',
      'retry-later',
      'terminate-module',
    ]);
  });

  test('limits of 0 switch a check off; bad options are typed errors', () => {
    const t = new ErrorThresholds({ maxRequestErrors: 0, maxModuleErrors: 0, maxTaskErrors: 0 });
    for (let i = 0; i < 1_000; i++)
      expect(t.record({ request: 'r', module: 'm', task: 't' }).decision).toBe('continue');
    expect(() => new ErrorThresholds({ maxModuleErrors: -1 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => new ErrorThresholds({ successDecay: 2 })).toThrow(/successDecay/);
  });
});
