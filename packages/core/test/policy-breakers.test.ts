import diagnostics_channel from 'node:diagnostics_channel';
import { describe, expect, test } from 'vitest';
import { CircuitOpenError } from '../src/errors.js';
import { type BreakerTransition, CircuitBreakers } from '../src/policy/circuit-breakers.js';
import { POLICY_CHANNEL_NAMES } from '../src/policy/policy-channels.js';
import { ManualClock } from '../src/schedule/clock.js';

function setup(options: ConstructorParameters<typeof CircuitBreakers>[0] = {}) {
  const clock = new ManualClock(1_000_000);
  const transitions: BreakerTransition[] = [];
  const breakers = new CircuitBreakers({
    failureThreshold: 3,
    openMs: 1_000,
    maxOpenMs: 5_000,
    clock,
    onTransition: (t) => transitions.push(t),
    ...options,
  });
  return { clock, breakers, transitions, path: () => transitions.map((t) => `${t.from}>${t.to}`) };
}

describe('CircuitBreakers', () => {
  test('opens after N failures in a row; a success in between resets the count', () => {
    const { breakers, clock } = setup();
    breakers.failure('host', 'a.test');
    breakers.failure('host', 'a.test');
    breakers.success('host', 'a.test');
    // A success this recent says the host is up: failures right after it open nothing yet.
    for (let i = 0; i < 5; i++) breakers.failure('host', 'a.test');
    expect(breakers.check('host', 'a.test')).toEqual({ allowed: true, state: 'closed', probe: false });
    clock.jump(5_000);
    breakers.failure('host', 'a.test');
    expect(breakers.check('host', 'a.test')).toEqual({
      allowed: false,
      state: 'open',
      retryAfterMs: 1_000,
      exhausted: false,
    });
    // Other targets are unaffected; an unknown target is closed.
    expect(breakers.check('host', 'b.test').allowed).toBe(true);
    expect(breakers.check('module', 'a.test').allowed).toBe(true);
  });

  test('one subject failing again and again is one failure; distinct subjects in a row open it', () => {
    const { breakers } = setup();
    for (let i = 0; i < 50; i++) breakers.failure('host', 'a.test', 'http://a.test/broken');
    expect(breakers.get('host', 'a.test')).toMatchObject({
      state: 'closed',
      consecutiveFailures: 1,
      failures: 50,
    });
    breakers.failure('host', 'a.test', 'http://a.test/x');
    expect(breakers.check('host', 'a.test').allowed).toBe(true);
    breakers.failure('host', 'a.test', 'http://a.test/y');
    expect(breakers.check('host', 'a.test')).toMatchObject({ allowed: false, state: 'open' });
  });

  test('a burst of failing URLs next to a good page opens nothing until the success is old', () => {
    const { breakers, clock } = setup({ recentSuccessMs: 2_000 });
    breakers.success('host', 'a.test', 'http://a.test/');
    // Never-failed targets stay out of the listings even though their success is remembered.
    expect(breakers.list()).toEqual([]);
    expect(breakers.get('host', 'a.test')).toBeUndefined();
    for (let i = 0; i < 20; i++) breakers.failure('host', 'a.test', `http://a.test/bad/${i}`);
    expect(breakers.check('host', 'a.test').allowed).toBe(true);
    // More good pages keep it closed; once nothing good came for 2 s, new failures open it.
    clock.jump(1_500);
    breakers.success('host', 'a.test', 'http://a.test/good');
    clock.jump(1_999);
    for (let i = 0; i < 3; i++) breakers.failure('host', 'a.test', `http://a.test/late/${i}`);
    expect(breakers.check('host', 'a.test').allowed).toBe(true);
    clock.jump(1);
    breakers.failure('host', 'a.test', 'http://a.test/late/3');
    expect(breakers.check('host', 'a.test')).toMatchObject({ allowed: false, state: 'open' });
  });

  test('half-open probes with a subject that was not failing; a failing one only after probeWaitMs', () => {
    const { breakers, clock, path } = setup();
    for (let i = 0; i < 3; i++) breakers.failure('host', 'a', `/bad/${i}`);
    clock.jump(1_000);
    expect(breakers.check('host', 'a', { subject: '/bad/0' })).toMatchObject({
      allowed: false,
      state: 'half-open',
      retryAfterMs: 1_000,
    });
    expect(breakers.check('host', 'a', { subject: '/fresh' })).toEqual({
      allowed: true,
      state: 'half-open',
      probe: true,
    });
    breakers.success('host', 'a', '/fresh');
    expect(path()).toEqual(['closed>open', 'open>half-open', 'half-open>closed']);
    // Only failing subjects wait: after probeWaitMs of half-open one of them probes.
    clock.jump(5_000);
    for (let i = 3; i < 6; i++) breakers.failure('host', 'a', `/bad/${i}`);
    clock.jump(1_000);
    expect(breakers.check('host', 'a', { subject: '/bad/3' }).allowed).toBe(false);
    clock.jump(1_000);
    expect(breakers.check('host', 'a', { subject: '/bad/3' })).toMatchObject({ allowed: true, probe: true });
  });

  test('an exhausted breaker gives up work that was tried, never work that was not', () => {
    const { breakers, clock } = setup({ maxOpens: 1 });
    for (let i = 0; i < 3; i++) breakers.failure('host', 'a', `/bad/${i}`);
    expect(breakers.check('host', 'a', { subject: '/bad/0', tried: true })).toMatchObject({
      allowed: false,
      exhausted: true,
    });
    // The target looks down for good, but this URL never had a try of its own: it gets one.
    expect(breakers.check('host', 'a', { subject: '/new', tried: false })).toEqual({
      allowed: true,
      state: 'open',
      probe: false,
    });
    expect(breakers.check('host', 'a')).toMatchObject({ allowed: false, exhausted: true });
    // Its success closes the breaker for everyone.
    clock.jump(10);
    breakers.success('host', 'a', '/new');
    expect(breakers.check('host', 'a', { subject: '/bad/0', tried: true }).allowed).toBe(true);
  });

  test('half-open lets exactly one probe through; its success closes the breaker', () => {
    const { breakers, clock, path } = setup();
    for (let i = 0; i < 3; i++) breakers.failure('host', 'a');
    clock.jump(400);
    expect(breakers.check('host', 'a')).toMatchObject({ allowed: false, retryAfterMs: 600 });
    clock.jump(600);
    expect(breakers.check('host', 'a')).toEqual({ allowed: true, state: 'half-open', probe: true });
    expect(breakers.check('host', 'a')).toMatchObject({
      allowed: false,
      state: 'half-open',
      retryAfterMs: 1_000,
    });
    expect(breakers.check('host', 'a')).toMatchObject({ allowed: false, state: 'half-open' });
    breakers.success('host', 'a');
    expect(breakers.check('host', 'a')).toEqual({ allowed: true, state: 'closed', probe: false });
    expect(path()).toEqual(['closed>open', 'open>half-open', 'half-open>closed']);
    expect(breakers.get('host', 'a')).toMatchObject({
      state: 'closed',
      openCount: 0,
      consecutiveFailures: 0,
    });
  });

  test('a failed probe reopens with a doubled open time, capped; exhausted after maxOpens', () => {
    const { breakers, clock } = setup({ maxOpens: 4 });
    for (let i = 0; i < 3; i++) breakers.failure('host', 'a');
    const opens: number[] = [];
    for (let round = 0; round < 4; round++) {
      const permit = breakers.check('host', 'a');
      if (permit.allowed) throw new Error('expected open');
      opens.push(permit.retryAfterMs);
      expect(permit.exhausted).toBe(round === 3);
      clock.jump(permit.retryAfterMs);
      expect(breakers.check('host', 'a')).toMatchObject({ allowed: true, probe: true });
      breakers.failure('host', 'a');
    }
    expect(opens).toEqual([1_000, 2_000, 4_000, 5_000]);
    expect(breakers.get('host', 'a')).toMatchObject({ state: 'open', openCount: 5 });
    // A success resets the backoff: the next open (once that success is old) is short again.
    clock.jump(5_000);
    breakers.check('host', 'a');
    breakers.success('host', 'a');
    clock.jump(5_000);
    for (let i = 0; i < 3; i++) breakers.failure('host', 'a');
    expect(breakers.check('host', 'a')).toMatchObject({
      allowed: false,
      retryAfterMs: 1_000,
      exhausted: false,
    });
  });

  test('a lost probe is replaced after probeTimeoutMs; release frees the slot at once', () => {
    const { breakers, clock } = setup({ probeTimeoutMs: 10_000 });
    for (let i = 0; i < 3; i++) breakers.failure('host', 'a');
    clock.jump(1_000);
    expect(breakers.check('host', 'a')).toMatchObject({ probe: true });
    clock.jump(9_999);
    expect(breakers.check('host', 'a').allowed).toBe(false);
    clock.jump(1);
    expect(breakers.check('host', 'a')).toMatchObject({ allowed: true, probe: true });
    breakers.release('host', 'a');
    expect(breakers.check('host', 'a')).toMatchObject({ allowed: true, probe: true });
  });

  test('failures of work that started before the breaker opened do not extend the open', () => {
    const { breakers, clock } = setup();
    for (let i = 0; i < 3; i++) breakers.failure('host', 'a');
    clock.jump(500);
    for (let i = 0; i < 10; i++) breakers.failure('host', 'a');
    expect(breakers.check('host', 'a')).toMatchObject({ allowed: false, retryAfterMs: 500 });
  });

  test('run() refuses with CircuitOpenError and reports outcomes', async () => {
    const { breakers } = setup();
    for (let i = 0; i < 3; i++) {
      await expect(
        breakers.run('module', 'm', () => {
          throw new Error('down');
        }),
      ).rejects.toThrow('down');
    }
    const refused = await breakers.run('module', 'm', () => 'never').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CircuitOpenError);
    expect(refused).toMatchObject({
      code: 'MOCRA_ERR_CIRCUIT_OPEN',
      scope: 'module',
      key: 'm',
      retryAfterMs: 1_000,
    });
    expect((refused as CircuitOpenError).retryable).toBe(true);
  });

  test('list() shows states, open first; transitions are published on mocra:policy:breaker', () => {
    const onChannel: BreakerTransition[] = [];
    const listener = (m: unknown) => onChannel.push(m as BreakerTransition);
    diagnostics_channel.subscribe(POLICY_CHANNEL_NAMES.breaker, listener);
    const { breakers, clock } = setup();
    try {
      breakers.failure('host', 'z-closed');
      for (let i = 0; i < 3; i++) breakers.failure('host', 'b-open');
      for (let i = 0; i < 3; i++) breakers.failure('module', 'c-half');
      clock.jump(1_000);
      breakers.check('module', 'c-half');
      // Both are due now: c-half gets its probe out, b-open's probe fails and it reopens.
      breakers.check('host', 'b-open');
      breakers.failure('host', 'b-open');
    } finally {
      diagnostics_channel.unsubscribe(POLICY_CHANNEL_NAMES.breaker, listener);
    }
    const list = breakers.list();
    expect(list.map((b) => `${b.scope}:${b.key}:${b.state}`)).toEqual([
      'host:b-open:open',
      'module:c-half:half-open',
      'host:z-closed:closed',
    ]);
    expect(list[0]).toMatchObject({ openCount: 2, retryAt: clock.now() + 2_000, failures: 4 });
    expect(list[1]).toMatchObject({ probeInFlight: true });
    expect(breakers.list({ scope: 'host' })).toHaveLength(2);
    expect(breakers.list({ state: 'open' })).toHaveLength(1);
    expect(onChannel.map((t) => `${t.key}:${t.from}>${t.to}`)).toEqual([
      'b-open:closed>open',
      'c-half:closed>open',
      'c-half:open>half-open',
      'b-open:open>half-open',
      'b-open:half-open>open',
    ]);
  });

  test('memory is bounded: closed breakers without failures are forgotten first', () => {
    const { breakers } = setup({ maxBreakers: 50 });
    for (let i = 0; i < 3; i++) breakers.failure('host', 'stays-open');
    for (let i = 0; i < 500; i++) {
      breakers.failure('host', `h${i}`);
      breakers.success('host', `h${i}`);
    }
    expect(breakers.size).toBeLessThanOrEqual(50);
    expect(breakers.get('host', 'stays-open')?.state).toBe('open');
    breakers.reset('host', 'stays-open');
    expect(breakers.check('host', 'stays-open').allowed).toBe(true);
    breakers.reset();
    expect(breakers.size).toBe(0);
  });

  test('bad options are typed errors', () => {
    expect(() => new CircuitBreakers({ failureThreshold: 0 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => new CircuitBreakers({ backoffFactor: 0.5 })).toThrow(/backoffFactor/);
  });
});
