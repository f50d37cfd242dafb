// ReadIndex (thesis §6.4): linearizable reads without writing to the log.
import { describe, expect, test } from 'vitest';
import { CoreNetwork } from './harness/core-network.js';

describe('ReadIndex reads', () => {
  test('the leader answers with its commit index once a quorum confirms its leadership', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.propose('a', 'x');
    net.stabilize();
    net.core('a').readIndex('r1');
    net.flush();
    expect(net.node('a').readStates).toEqual([]); // needs a heartbeat round first
    net.stabilize();
    expect(net.node('a').readStates).toEqual([{ ctx: 'r1', index: 3 }]);
  });

  test('a leader cut off from the quorum cannot answer a read, and fails it when it steps down', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('a');
    net.core('a').readIndex('r1');
    net.stabilize();
    expect(net.node('a').readStates).toEqual([]);
    for (let i = 0; i < 25 && net.core('a').role === 'leader'; i++) {
      net.tick('a');
      net.stabilize();
    }
    expect(net.node('a').readStates).toEqual([{ ctx: 'r1', index: -1 }]);
  });

  test('a deposed leader that does not know it yet cannot serve a stale read', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { checkQuorum: false });
    net.elect('a');
    net.isolate('a');
    net.elect('b');
    net.propose('b', 'newer');
    net.stabilize();
    net.core('a').readIndex('stale?');
    net.stabilize();
    expect(net.node('a').readStates).toEqual([]);
    net.heal();
    net.tickAll();
    net.stabilize();
    // a learns of term 3 and steps down; its pending read fails rather than returning index 2.
    expect(net.node('a').readStates).toEqual([{ ctx: 'stale?', index: -1 }]);
  });

  test('a new leader defers reads until it has committed an entry of its term', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { preVote: false, checkQuorum: false });
    net.elect('a');
    net.propose('a', 'x');
    net.stabilize();
    net.core('a').readIndex('warm');
    net.stabilize();
    net.isolate('a');
    net.core('b').campaign();
    net.flush();
    for (const m of net.take((m) => m.type === 'vote')) net.deliver(m);
    net.flush();
    for (const m of net.take((m) => m.type === 'vote-resp')) net.deliver(m);
    expect(net.core('b').role).toBe('leader');
    // b's no-op is not committed yet: the read must wait for it.
    net.core('b').readIndex('early');
    net.flush();
    expect(net.node('b').readStates).toEqual([]);
    net.stabilize();
    expect(net.node('b').readStates).toEqual([{ ctx: 'early', index: 4 }]);
  });

  test('followers and learners read through the leader and wait to apply the answer', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { autoPromote: false }, ['l']);
    net.elect('a');
    net.propose('a', 'x');
    net.stabilize();
    net.core('c').readIndex('from-c');
    net.core('l').readIndex('from-l');
    net.stabilize();
    expect(net.node('c').readStates).toEqual([{ ctx: 'from-c', index: 3 }]);
    expect(net.node('l').readStates).toEqual([{ ctx: 'from-l', index: 3 }]);
  });

  test('a follower with no known leader fails the read at once', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.core('b').readIndex('nobody');
    net.flush();
    expect(net.node('b').readStates).toEqual([{ ctx: 'nobody', index: -1 }]);
  });

  test('a single-voter leader answers at once', () => {
    const net = new CoreNetwork(['solo']);
    net.elect('solo');
    net.core('solo').readIndex('r');
    net.flush();
    expect(net.node('solo').readStates).toEqual([{ ctx: 'r', index: 2 }]);
  });
});
