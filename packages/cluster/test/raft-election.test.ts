// Raft paper §5.2 (election) with pre-vote and check-quorum (thesis §9.6), on the in-memory network.
import { describe, expect, test } from 'vitest';
import { CoreNetwork } from './harness/core-network.js';

describe('leader election (§5.2)', () => {
  test('a campaign wins a majority, bumps the term once, and everyone follows', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    expect(net.leaders()).toEqual(['a']);
    expect(net.core('a').term).toBe(2);
    for (const id of ['b', 'c']) {
      expect(net.core(id).role).toBe('follower');
      expect(net.core(id).leader).toBe('a');
      expect(net.core(id).term).toBe(2);
    }
  });

  test('followers campaign on their own after an election timeout and one leader emerges', () => {
    const net = new CoreNetwork(['a', 'b', 'c', 'd', 'e']);
    for (let i = 0; i < 40 && net.leaders().length === 0; i++) {
      net.tickAll();
      net.stabilize();
    }
    expect(net.leaders()).toHaveLength(1);
  });

  test('a new leader appends a no-op of its own term and commits it (§5.4.2)', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('b');
    expect(net.log('b')).toEqual([
      [1, 1, 'config'],
      [2, 2, 'noop'],
    ]);
    expect(net.core('b').commitIndex).toBe(2);
    expect(net.core('b').committedInTerm).toBe(true);
  });

  test('a candidate whose log is behind is refused (§5.4.1)', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    net.propose('a', 'x');
    net.stabilize();
    net.heal();
    // c missed entry 3; it may not win against a and b.
    net.core('c').campaign();
    net.stabilize();
    expect(net.core('c').role).not.toBe('leader');
  });

  test('at most one vote per term: a node that voted refuses a second candidate of that term', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { preVote: false, checkQuorum: false });
    net.core('a').campaign();
    net.core('b').campaign();
    net.flush();
    // Deliver a's request to c first, then b's.
    const votes = net.take((m) => m.type === 'vote');
    for (const m of votes.filter((v) => v.from === 'a')) net.deliver(m);
    for (const m of votes.filter((v) => v.from === 'b')) net.deliver(m);
    net.stabilize();
    expect(net.leaders()).toEqual(['a']);
  });

  test('votes and terms are persisted before the vote is sent', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { preVote: false });
    net.node('b').holdWrites = true;
    net.core('a').campaign();
    net.stabilize();
    // b's grant is held with its write; a has only its own vote and cannot win yet...
    const grantsFromB = net.delivered.filter((m) => m.type === 'vote-resp' && m.from === 'b');
    expect(grantsFromB).toHaveLength(0);
    net.release('b');
    net.stabilize();
    expect(net.delivered.some((m) => m.type === 'vote-resp' && m.from === 'b')).toBe(true);
  });
});

describe('pre-vote and check-quorum', () => {
  test('an isolated follower does not raise its term (pre-vote fails) and does not disrupt on return', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 50; i++) {
      net.tickAll();
      net.stabilize();
    }
    expect(net.core('c').term).toBe(2);
    expect(net.core('c').role).toBe('pre-candidate');
    net.heal();
    for (let i = 0; i < 3; i++) {
      net.tickAll();
      net.stabilize();
    }
    expect(net.leaders()).toEqual(['a']);
    expect(net.core('a').term).toBe(2);
    expect(net.core('c').leader).toBe('a');
  });

  test('a leader that cannot hear from a quorum steps down after an election timeout', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('a');
    for (let i = 0; i < 25 && net.core('a').role === 'leader'; i++) {
      net.tick('a');
      net.stabilize();
    }
    expect(net.core('a').role).toBe('follower');
  });

  test('followers that heard from the leader recently ignore a campaign (leader lease)', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { preVote: false });
    net.elect('a');
    net.tickAll(); // heartbeat round
    net.stabilize();
    // c forces a real election without pre-vote: b and a are in the lease and ignore it.
    net.core('c').campaign();
    net.stabilize();
    expect(net.leaders()).toEqual(['a']);
    expect(net.core('b').term).toBe(2);
  });

  test('partial partition: a node cut off from the leader only cannot win while others hear the leader', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.cut.add('a->c');
    net.cut.add('c->a');
    for (let i = 0; i < 60; i++) {
      net.tickAll();
      net.stabilize();
    }
    expect(net.leaders()).toEqual(['a']);
    expect(net.core('b').leader).toBe('a');
    expect(net.core('a').term).toBe(2);
  });

  test('a stale leader back from a partition learns the new term from a lower-term reply and steps down', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { checkQuorum: false });
    net.elect('a');
    net.isolate('a');
    net.elect('b');
    expect(net.core('b').term).toBe(3);
    expect(net.core('a').role).toBe('leader');
    net.heal();
    net.propose('a', 'stale');
    net.tickAll();
    net.stabilize();
    expect(net.leaders()).toEqual(['b']);
    expect(net.core('a').term).toBe(3);
    expect(net.log('a').some(([, , d]) => d === 'stale')).toBe(false);
  });
});
