// Leadership transfer (thesis §3.10): TimeoutNow, bypassing pre-vote and the leader lease.
import { describe, expect, test } from 'vitest';
import { CoreNetwork } from './harness/core-network.js';

describe('leadership transfer', () => {
  test('to an up-to-date follower: it wins at once, without an election timeout', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.tickAll();
    net.stabilize(); // everyone is inside the leader lease now
    expect(net.core('a').transferLeadership('c')).toBe(true);
    net.stabilize();
    expect(net.leaders()).toEqual(['c']);
    expect(net.core('c').term).toBe(3);
  });

  test('to a lagging follower: the leader catches it up first', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 5; i++) net.propose('a', `v${i}`);
    net.stabilize();
    net.heal();
    expect(net.core('a').transferLeadership('c')).toBe(true);
    net.stabilize();
    expect(net.leaders()).toEqual(['c']);
    expect(net.log('c').length).toBeGreaterThanOrEqual(7);
  });

  test('proposals are refused while a transfer is under way', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    net.core('a').transferLeadership('c');
    expect(net.core('a').propose('x')).toEqual({ ok: false, reason: 'transferring' });
  });

  test('a transfer to an unreachable node is abandoned after an election timeout', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    net.core('a').transferLeadership('c');
    for (let i = 0; i < 12; i++) {
      net.tick('a');
      net.tick('b');
      net.stabilize();
    }
    expect(net.core('a').role).toBe('leader');
    expect(net.core('a').propose('x').ok).toBe(true);
  });

  test('transfer targets must be voters', () => {
    const net = new CoreNetwork(['a', 'b'], { autoPromote: false }, ['l']);
    net.elect('a');
    expect(net.core('a').transferLeadership('l')).toBe(false);
    expect(net.core('a').transferLeadership('zz')).toBe(false);
    expect(net.core('b').transferLeadership('a')).toBe(false); // not the leader
  });
});
