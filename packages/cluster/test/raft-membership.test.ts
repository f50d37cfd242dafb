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

  describe('the opt-in dead-voter rule', () => {
    /** `n` leader ticks, each followed by delivering everything. */
    const beat = (net: CoreNetwork, n: number): void => {
      for (let i = 0; i < n; i++) {
        net.tick('a');
        net.stabilize();
      }
    };

    test('a voter silent for deadVoterTicks is removed, one at a time, never below minVoters', () => {
      const net = new CoreNetwork(['a', 'b', 'c', 'd', 'e'], { deadVoterTicks: 30, minVoters: 3 });
      const events: string[] = [];
      net.core('a').setListener((e) => {
        if (e.type === 'dead-voter') events.push(`${e.id}:${e.silentTicks}`);
      });
      net.elect('a');
      net.isolate('e');
      beat(net, 29);
      expect(voterIds(net.core('a').config)).toContain('e');
      beat(net, 2);
      expect(voterIds(net.core('a').config)).toEqual(['a', 'b', 'c', 'd']);
      expect(net.core('a').config.retired).toEqual(['e']);
      // Five voters became four; losing one more still leaves a quorum, and the rule shrinks to three.
      net.isolate('d');
      beat(net, 31);
      expect(voterIds(net.core('a').config)).toEqual(['a', 'b', 'c']);
      // Three is the floor: c goes silent too and stays a voter; a and b are still a quorum.
      net.isolate('c');
      beat(net, 200);
      expect(voterIds(net.core('a').config)).toEqual(['a', 'b', 'c']);
      const i = net.propose('a', 'after three failures');
      beat(net, 3);
      expect(net.core('a').commitIndex).toBeGreaterThanOrEqual(i);
      expect(net.core('b').commitIndex).toBeGreaterThanOrEqual(i);
      expect(events).toEqual(['e:30', 'd:30']);
    });

    test('voters that answer are never removed, and the rule is off by default', () => {
      const on = new CoreNetwork(['a', 'b', 'c', 'd'], { deadVoterTicks: 10, minVoters: 3 });
      on.elect('a');
      beat(on, 100);
      expect(voterIds(on.core('a').config)).toEqual(['a', 'b', 'c', 'd']);
      const off = new CoreNetwork(['a', 'b', 'c', 'd', 'e']);
      off.elect('a');
      off.isolate('e');
      beat(off, 500);
      expect(voterIds(off.core('a').config)).toEqual(['a', 'b', 'c', 'd', 'e']);
    });

    test('a leader that does not hear from a quorum removes nobody', () => {
      // Without check-quorum the cut-off leader keeps leading; the rule itself must hold back.
      const net = new CoreNetwork(['a', 'b', 'c', 'd', 'e'], {
        deadVoterTicks: 30,
        minVoters: 3,
        checkQuorum: false,
      });
      net.elect('a');
      for (const id of ['c', 'd', 'e']) net.isolate(id);
      beat(net, 100);
      expect(net.core('a').role).toBe('leader');
      expect(voterIds(net.core('a').config)).toHaveLength(5);
    });

    test('a new leader counts silence from its own election', () => {
      const net = new CoreNetwork(['a', 'b', 'c', 'd', 'e'], { deadVoterTicks: 30, minVoters: 3 });
      net.elect('a');
      net.isolate('e');
      beat(net, 20);
      expect(net.core('a').transferLeadership('b')).toBe(true);
      net.stabilize();
      expect(net.core('b').role).toBe('leader');
      const beatB = (n: number): void => {
        for (let i = 0; i < n; i++) {
          net.tick('b');
          net.stabilize();
        }
      };
      beatB(29);
      expect(voterIds(net.core('b').config)).toContain('e');
      beatB(2);
      expect(voterIds(net.core('b').config)).not.toContain('e');
    });
  });
});
