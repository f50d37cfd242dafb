// Single-server membership changes (thesis §4), learners and leader removal.
import { describe, expect, test } from 'vitest';
import { voterIds } from '../src/internal.js';
import { CoreNetwork } from './harness/core-network.js';

function settle(net: CoreNetwork, rounds = 5): void {
  for (let i = 0; i < rounds; i++) {
    net.tickAll();
    net.stabilize();
  }
}

describe('membership changes', () => {
  test('a new node joins as a learner, catches up, and is promoted to voter automatically', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    for (let i = 0; i < 10; i++) net.propose('a', `v${i}`);
    net.stabilize();
    net.addNode('d');
    const r = net.core('a').proposeConfigChange({ op: 'add-learner', id: 'd', addr: 'd:1' });
    expect(r.ok).toBe(true);
    net.stabilize();
    settle(net);
    expect(voterIds(net.core('a').config)).toEqual(['a', 'b', 'c', 'd']);
    expect(net.log('d')).toEqual(net.log('a'));
    expect(voterIds(net.core('d').config)).toEqual(['a', 'b', 'c', 'd']);
  });

  test('learners neither vote nor count toward commit', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { autoPromote: false }, ['l']);
    net.elect('a');
    net.isolate('b');
    net.isolate('c');
    net.propose('a', 'x');
    net.stabilize();
    expect(net.core('l').lastIndex).toBe(3);
    expect(net.core('a').commitIndex).toBe(2); // a + learner is not a quorum of {a, b, c}
    for (let i = 0; i < 50; i++) net.tick('l');
    net.stabilize();
    expect(net.core('l').role).toBe('follower'); // never campaigns
  });

  test('only one configuration change may be uncommitted at a time', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('b');
    net.isolate('c');
    expect(net.core('a').proposeConfigChange({ op: 'add-learner', id: 'd', addr: 'd:1' }).ok).toBe(true);
    expect(net.core('a').proposeConfigChange({ op: 'add-learner', id: 'e', addr: 'e:1' })).toEqual({
      ok: false,
      reason: 'config-pending',
    });
  });

  test('a leader refuses configuration changes until it has committed an entry of its term', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.core('a').campaign();
    net.flush();
    for (let i = 0; i < 4; i++) {
      for (const m of net.take()) net.deliver(m);
      net.flush();
      if (net.core('a').role === 'leader') break;
    }
    expect(net.core('a').role).toBe('leader');
    expect(net.core('a').committedInTerm).toBe(false);
    expect(net.core('a').proposeConfigChange({ op: 'remove', id: 'c' })).toEqual({
      ok: false,
      reason: 'not-committed-in-term',
    });
  });

  test('removing a follower shrinks the quorum; the cluster keeps committing', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    expect(net.core('a').proposeConfigChange({ op: 'remove', id: 'c' }).ok).toBe(true);
    net.stabilize();
    expect(voterIds(net.core('a').config)).toEqual(['a', 'b']);
    net.isolate('c');
    net.propose('a', 'after');
    net.stabilize();
    expect(net.core('a').commitIndex).toBe(4);
    expect(net.core('a').config.retired).toEqual(['c']);
  });

  test('a retired id cannot come back, and the last voter cannot be removed', () => {
    const net = new CoreNetwork(['a', 'b']);
    net.elect('a');
    expect(net.core('a').proposeConfigChange({ op: 'remove', id: 'b' }).ok).toBe(true);
    net.stabilize();
    expect(net.core('a').proposeConfigChange({ op: 'add-learner', id: 'b', addr: 'b:2' })).toEqual({
      ok: false,
      reason: 'retired',
    });
    expect(net.core('a').proposeConfigChange({ op: 'remove', id: 'a' })).toEqual({
      ok: false,
      reason: 'last-voter',
    });
  });

  test('the leader can remove itself: it commits the change without counting itself, then hands off', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.propose('a', 'x');
    net.stabilize();
    expect(net.core('a').proposeConfigChange({ op: 'remove', id: 'a' }).ok).toBe(true);
    net.stabilize();
    // The change committed (b and c form the new quorum), a stepped down and sent TimeoutNow.
    expect(net.core('a').role).toBe('follower');
    expect(net.delivered.some((m) => m.type === 'timeout-now' && m.from === 'a')).toBe(true);
    const leaders = net.leaders();
    expect(leaders).toHaveLength(1);
    expect(['b', 'c']).toContain(leaders[0]);
    expect(voterIds(net.core(leaders[0]!).config)).toEqual(['b', 'c']);
    // The removed node never campaigns again.
    for (let i = 0; i < 60; i++) net.tick('a');
    net.stabilize();
    expect(net.core('a').role).toBe('follower');
    net.propose(leaders[0]!, 'after');
    net.stabilize();
    expect(net.core(leaders[0]!).commitIndex).toBe(6); // config, no-op, x, removal, no-op, after
  });

  test('an uncommitted configuration is undone when its entry is truncated (config active on append)', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { checkQuorum: false });
    net.elect('a');
    net.isolate('a');
    expect(net.core('a').proposeConfigChange({ op: 'remove', id: 'c' }).ok).toBe(true);
    expect(voterIds(net.core('a').config)).toEqual(['a', 'b']);
    net.elect('b');
    net.propose('b', 'y');
    net.stabilize();
    net.heal();
    settle(net, 3);
    expect(voterIds(net.core('a').config)).toEqual(['a', 'b', 'c']);
    expect(net.log('a')).toEqual(net.log('b'));
  });

  test('a known member that comes back on a new address keeps its role', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    expect(net.core('a').proposeConfigChange({ op: 'add-learner', id: 'b', addr: 'b:9' }).ok).toBe(true);
    net.stabilize();
    const b = net.core('a').config.members.find((m) => m.id === 'b');
    expect(b).toEqual({ id: 'b', addr: 'b:9', voter: true });
  });
});
