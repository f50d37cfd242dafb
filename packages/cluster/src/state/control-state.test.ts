import { describe, expect, test } from 'vitest';
import type { CommandEnvelope, Operation } from './commands.js';
import { ControlState, SESSION_TTL_MS } from './control-state.js';

let index = 10;
/** A command of term 1 whose leader's wall and monotonic clocks both read `t`. */
function cmd(sm: ControlState, op: Operation, t = 1000, c = 'client', s?: number, f = 0) {
  index++;
  const env: CommandEnvelope = { c, s: s ?? index, f, t, m: t, op };
  return { index, result: sm.apply(index, 1, JSON.stringify(env)) };
}

/** A command stamped by the leader of `term` with wall clock `t` and monotonic clock `m`. */
function led(sm: ControlState, term: number, op: Operation, t: number, m: number) {
  index++;
  const env: CommandEnvelope = { c: '', s: 0, f: 0, t, m, op };
  return { index, result: sm.apply(index, term, JSON.stringify(env)) };
}

describe('ControlState: key-value', () => {
  test('set, get, delete, compare-and-set with absent and present values', () => {
    const sm = new ControlState();
    cmd(sm, { type: 'set', key: 'k', value: 'v1' });
    expect(sm.get('k')).toBe('v1');
    expect(cmd(sm, { type: 'cas', key: 'k', expected: 'nope', next: 'v2' }).result).toEqual({
      type: 'swapped',
      swapped: false,
    });
    expect(cmd(sm, { type: 'cas', key: 'k', expected: 'v1', next: 'v2' }).result).toEqual({
      type: 'swapped',
      swapped: true,
    });
    expect(cmd(sm, { type: 'cas', key: 'new', expected: null, next: 'x' }).result).toMatchObject({
      swapped: true,
    });
    expect(cmd(sm, { type: 'cas', key: 'new', expected: null, next: 'y' }).result).toMatchObject({
      swapped: false,
    });
    expect(cmd(sm, { type: 'cas', key: 'new', expected: 'x', next: null }).result).toMatchObject({
      swapped: true,
    });
    expect(sm.get('new')).toBeUndefined();
    expect(cmd(sm, { type: 'delete', key: 'k' }).result).toEqual({ type: 'existed', existed: true });
    expect(cmd(sm, { type: 'delete', key: 'k' }).result).toEqual({ type: 'existed', existed: false });
  });

  test('TTLs are judged by cluster time in the commands, never by a local clock', () => {
    const sm = new ControlState();
    cmd(sm, { type: 'set', key: 'k', value: 'v', ttlMs: 100 }, 1000);
    expect(sm.get('k')).toBe('v');
    cmd(sm, { type: 'set', key: 'other', value: 'x' }, 1099);
    expect(sm.get('k')).toBe('v');
    cmd(sm, { type: 'set', key: 'other', value: 'x' }, 1100);
    expect(sm.get('k')).toBeUndefined();
    // An expired key is absent for CAS too.
    expect(cmd(sm, { type: 'cas', key: 'k', expected: null, next: 'fresh' }, 1101).result).toMatchObject({
      swapped: true,
    });
  });

  test('cluster time starts at the first wall clock, then moves only with the monotonic clock', () => {
    const sm = new ControlState();
    led(sm, 1, { type: 'set', key: 'k', value: 'v', ttlMs: 100 }, 50_000, 7);
    expect(sm.now).toBe(50_000);
    // The wall clock jumps a minute ahead; only the 60 monotonic ms count.
    led(sm, 1, { type: 'set', key: 'x', value: '1' }, 110_000, 67);
    expect(sm.now).toBe(50_060);
    expect(sm.get('k')).toBe('v');
    led(sm, 1, { type: 'set', key: 'x', value: '1' }, 0, 107);
    expect(sm.get('k')).toBeUndefined();
    expect(sm.timeAt(1, 200)).toBe(50_193);
    expect(sm.timeAt(2, 200)).toBe(50_100);
  });

  test('a new leader continues cluster time where the old one stopped, whatever its clocks say', () => {
    const sm = new ControlState();
    led(sm, 1, { type: 'lock-acquire', name: 'L', owner: 'a', ttlMs: 15_000 }, 1_000_000, 500);
    led(sm, 1, { type: 'set', key: 'k', value: 'v', ttlMs: 15_000 }, 1_000_000, 500);
    led(sm, 1, { type: 'set', key: 'x', value: '1' }, 1_001_000, 1_500);
    expect(sm.now).toBe(1_001_000);
    // The new leader's wall clock is 20 s ahead and its monotonic clock has another origin.
    sm.skip(++index, 2);
    const b = led(sm, 2, { type: 'lock-acquire', name: 'L', owner: 'b', ttlMs: 15_000 }, 1_023_000, 9);
    expect(b.result).toMatchObject({ acquired: false, owner: 'a' });
    expect(sm.now).toBe(1_001_000);
    expect(sm.get('k')).toBe('v');
  });

  test('a leader change extends every live lease, TTL key and member by its full TTL', () => {
    const sm = new ControlState();
    led(sm, 1, { type: 'lock-acquire', name: 'L', owner: 'a', ttlMs: 100 }, 1000, 0);
    led(sm, 1, { type: 'set', key: 'k', value: 'v', ttlMs: 100 }, 1000, 0);
    led(sm, 1, { type: 'set', key: 'gone', value: 'v', ttlMs: 10 }, 1000, 0);
    led(sm, 1, { type: 'member-register', id: 'w', meta: {}, ttlMs: 100 }, 1000, 0);
    led(sm, 1, { type: 'incr', key: 'n', by: 1 }, 1000, 90);
    expect(sm.now).toBe(1090);
    sm.skip(++index, 2); // the new leader's no-op
    expect(sm.getLock('L')?.expiresAt).toBe(1190);
    led(sm, 2, { type: 'set', key: 'x', value: '1' }, 0, 5000);
    led(sm, 2, { type: 'set', key: 'x', value: '1' }, 0, 5099);
    expect(sm.getLock('L')?.owner).toBe('a');
    expect(sm.get('k')).toBe('v');
    expect(sm.get('gone')).toBeUndefined(); // lapsed before the change: not brought back
    expect(sm.liveMembers().map((m) => m.id)).toEqual(['w']);
    led(sm, 2, { type: 'set', key: 'x', value: '1' }, 0, 5100);
    expect(sm.getLock('L')).toBeUndefined();
    expect(sm.get('k')).toBeUndefined();
    expect(sm.liveMembers()).toEqual([]);
    // A renew sets the TTL a later leader change extends by.
    const c = led(sm, 2, { type: 'lock-acquire', name: 'M', owner: 'c', ttlMs: 10 }, 0, 5100);
    led(sm, 2, { type: 'lock-renew', name: 'M', token: c.index, ttlMs: 1000 }, 0, 5105);
    sm.skip(++index, 3);
    expect(sm.getLock('M')?.expiresAt).toBe(2195);
  });

  test('increment counts from zero and refuses non-integers', () => {
    const sm = new ControlState();
    expect(cmd(sm, { type: 'incr', key: 'n', by: 1 }).result).toEqual({ type: 'value', value: 1 });
    expect(cmd(sm, { type: 'incr', key: 'n', by: 41 }).result).toEqual({ type: 'value', value: 42 });
    cmd(sm, { type: 'set', key: 's', value: 'abc' });
    expect(cmd(sm, { type: 'incr', key: 's', by: 1 }).result).toMatchObject({
      type: 'error',
      code: 'not-integer',
    });
  });
});

describe('ControlState: fenced locks', () => {
  test('the token is the Raft index of the acquire; a re-acquire gets a new, larger token', () => {
    const sm = new ControlState();
    const first = cmd(sm, { type: 'lock-acquire', name: 'L', owner: 'w1', ttlMs: 1000 }, 1000);
    expect(first.result).toEqual({
      type: 'lock',
      acquired: true,
      owner: 'w1',
      token: first.index,
      expiresAt: 2000,
    });
    const other = cmd(sm, { type: 'lock-acquire', name: 'L', owner: 'w2', ttlMs: 1000 }, 1500);
    expect(other.result).toMatchObject({ acquired: false, owner: 'w1', expiresAt: 2000 });
    const again = cmd(sm, { type: 'lock-acquire', name: 'L', owner: 'w1', ttlMs: 1000 }, 1600);
    expect(again.result).toMatchObject({ acquired: true, token: again.index });
    expect(again.index).toBeGreaterThan(first.index);
  });

  test('a lapsed lock goes to the next asker; renew and release need the current token', () => {
    const sm = new ControlState();
    const a = cmd(sm, { type: 'lock-acquire', name: 'L', owner: 'w1', ttlMs: 100 }, 1000);
    expect(cmd(sm, { type: 'lock-renew', name: 'L', token: a.index, ttlMs: 100 }, 1050).result).toEqual({
      type: 'renewed',
      renewed: true,
      expiresAt: 1150,
    });
    const b = cmd(sm, { type: 'lock-acquire', name: 'L', owner: 'w2', ttlMs: 100 }, 1150);
    expect(b.result).toMatchObject({ acquired: true, owner: 'w2' });
    expect(cmd(sm, { type: 'lock-renew', name: 'L', token: a.index, ttlMs: 100 }, 1160).result).toMatchObject(
      {
        renewed: false,
      },
    );
    expect(cmd(sm, { type: 'lock-release', name: 'L', token: a.index }, 1160).result).toEqual({
      type: 'released',
      released: false,
    });
    expect(sm.getLock('L')?.owner).toBe('w2');
    expect(cmd(sm, { type: 'lock-release', name: 'L', token: b.index }, 1170).result).toEqual({
      type: 'released',
      released: true,
    });
    expect(sm.getLock('L')).toBeUndefined();
  });

  test('a fenced key refuses tokens lower than the highest seen, reads included', () => {
    const sm = new ControlState();
    expect(cmd(sm, { type: 'fenced', key: 'r', token: 5, value: 'a' }).result).toMatchObject({
      accepted: true,
    });
    expect(cmd(sm, { type: 'fenced', key: 'r', token: 7 }).result).toMatchObject({
      accepted: true,
      value: 'a',
    });
    expect(cmd(sm, { type: 'fenced', key: 'r', token: 5, value: 'stale' }).result).toMatchObject({
      accepted: false,
      maxToken: 7,
      value: 'a',
    });
    expect(sm.getFenced('r')).toEqual({ maxToken: 7, value: 'a' });
  });
});

describe('ControlState: sessions (exactly-once retries)', () => {
  test('a retried request returns the first answer and is not applied twice', () => {
    const sm = new ControlState();
    const first = cmd(sm, { type: 'incr', key: 'n', by: 1 }, 1000, 'c1', 1);
    const retry = cmd(sm, { type: 'incr', key: 'n', by: 1 }, 1001, 'c1', 1);
    expect(first.result).toEqual({ type: 'value', value: 1 });
    expect(retry.result).toEqual({ type: 'value', value: 1 });
    expect(sm.get('n')).toBe('1');
    // A retried acquire keeps its token instead of taking the lock again.
    const acq = cmd(sm, { type: 'lock-acquire', name: 'L', owner: 'w', ttlMs: 100 }, 1002, 'c1', 2);
    const dup = cmd(sm, { type: 'lock-acquire', name: 'L', owner: 'w', ttlMs: 100 }, 1003, 'c1', 2);
    expect(dup.result).toEqual(acq.result);
  });

  test('answers below the client floor are forgotten; a retry of one is refused, not re-applied', () => {
    const sm = new ControlState();
    cmd(sm, { type: 'incr', key: 'n', by: 1 }, 1000, 'c1', 1, 1);
    cmd(sm, { type: 'incr', key: 'n', by: 1 }, 1000, 'c1', 2, 2); // floor 2: seq 1 is answered
    expect(cmd(sm, { type: 'incr', key: 'n', by: 1 }, 1000, 'c1', 1).result).toMatchObject({
      type: 'error',
      code: 'stale-request',
    });
    expect(sm.get('n')).toBe('2');
  });

  test('idle sessions are swept after the session TTL', () => {
    const sm = new ControlState();
    cmd(sm, { type: 'set', key: 'k', value: 'v' }, 1000, 'c1', 1);
    expect(sm.sessionCount()).toBe(1);
    const t = 1000 + SESSION_TTL_MS;
    const sweep: CommandEnvelope = { c: '', s: 0, f: 0, t, m: t, op: { type: 'sweep' } };
    sm.apply(999, 1, JSON.stringify(sweep));
    expect(sm.sessionCount()).toBe(0);
  });
});

describe('ControlState: members, sweep and snapshots', () => {
  test('members are live while their heartbeats are within the TTL', () => {
    const sm = new ControlState();
    cmd(sm, { type: 'member-register', id: 'w1', addr: 'h:1', meta: { v: '1' }, ttlMs: 100 }, 1000);
    cmd(sm, { type: 'member-register', id: 'w2', meta: {}, ttlMs: 100 }, 1000);
    cmd(sm, { type: 'member-heartbeat', id: 'w1' }, 1090);
    cmd(sm, { type: 'set', key: 'tick', value: '' }, 1150);
    expect(sm.liveMembers().map((m) => m.id)).toEqual(['w1']);
    expect(cmd(sm, { type: 'member-heartbeat', id: 'w2' }, 1150).result).toEqual({
      type: 'known',
      known: false,
    });
  });

  test('sweep drops expired keys, locks and members; nextExpiry tells the leader when to sweep', () => {
    const sm = new ControlState();
    cmd(sm, { type: 'set', key: 'k', value: 'v', ttlMs: 10 }, 1000);
    cmd(sm, { type: 'lock-acquire', name: 'L', owner: 'w', ttlMs: 20 }, 1000);
    expect(sm.nextExpiry()).toBe(1010);
    const sweep: CommandEnvelope = { c: '', s: 0, f: 0, t: 1030, m: 1030, op: { type: 'sweep' } };
    expect(sm.apply(100, 1, JSON.stringify(sweep))).toEqual({ type: 'swept', removed: 2 });
  });

  test('malformed commands give an error result on every replica instead of throwing', () => {
    const sm = new ControlState();
    expect(sm.apply(1, 1, 'not json')).toMatchObject({ type: 'error', code: 'invalid-command' });
    expect(
      sm.apply(2, 1, JSON.stringify({ c: 'x', s: 1, f: 0, t: 0, m: 0, op: { type: 'launch' } })),
    ).toMatchObject({
      code: 'invalid-command',
    });
  });

  test('serialize/deserialize round-trips and is canonical', () => {
    const a = new ControlState();
    cmd(a, { type: 'set', key: 'z', value: '1' }, 1000, 'c', 1);
    cmd(a, { type: 'set', key: 'a', value: '2', ttlMs: 5000 }, 1000, 'c', 2);
    cmd(a, { type: 'lock-acquire', name: 'L', owner: 'w', ttlMs: 100 }, 1000, 'c', 3);
    cmd(a, { type: 'fenced', key: 'r', token: 3, value: 'x' }, 1000, 'c', 4);
    cmd(a, { type: 'member-register', id: 'm', meta: { k: 'v' }, ttlMs: 100 }, 1000, 'c', 5);
    const b = ControlState.deserialize(a.serialize());
    expect(b.serialize()).toBe(a.serialize());
    expect(b.get('a')).toBe('2');
    expect(b.getLock('L')?.owner).toBe('w');
    // Dedup survives a snapshot.
    expect(cmd(b, { type: 'set', key: 'z', value: 'changed' }, 1001, 'c', 1).result).toEqual({ type: 'ok' });
    expect(b.get('z')).toBe('1');
  });
});
