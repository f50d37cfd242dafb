// Raft paper §5.3–§5.4 (log replication, commit rules) plus batching and pipelining.
import { describe, expect, test } from 'vitest';
import type { RaftMessage } from '../src/internal.js';
import { CoreNetwork } from './harness/core-network.js';

type Append = Extract<RaftMessage, { type: 'append' }>;

describe('log replication (§5.3)', () => {
  test('proposals reach every follower, commit on a majority, and apply in order', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    for (let i = 0; i < 10; i++) net.propose('a', `cmd-${i}`);
    net.stabilize();
    net.tickAll();
    net.stabilize();
    const expected = net.log('a');
    expect(expected).toHaveLength(12);
    for (const id of ['b', 'c']) {
      expect(net.log(id)).toEqual(expected);
      expect(net.core(id).commitIndex).toBe(12);
      expect(net.node(id).applied.map((e) => e.index)).toEqual(expected.map(([i]) => i));
    }
  });

  test('a minority cannot commit', () => {
    const net = new CoreNetwork(['a', 'b', 'c', 'd', 'e']);
    net.elect('a');
    net.isolate('c');
    net.isolate('d');
    net.isolate('e');
    net.propose('a', 'x');
    net.stabilize();
    expect(net.core('a').commitIndex).toBe(2);
    net.heal();
    net.tickAll();
    net.stabilize();
    expect(net.core('a').commitIndex).toBe(3);
  });

  test('proposals made in one turn travel in one AppendEntries (batching)', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    for (let i = 0; i < 50; i++) net.propose('a', `b${i}`);
    const appends = net.take((m) => m.type === 'append' && m.to === 'b') as Append[];
    expect(appends).toHaveLength(1);
    expect(appends[0]!.entries).toHaveLength(50);
  });

  test('the leader pipelines appends without waiting for acks, up to maxInflight', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { maxInflight: 3 });
    net.elect('a');
    const sent: Append[] = [];
    for (let i = 0; i < 5; i++) {
      net.propose('a', `p${i}`);
      sent.push(...(net.take((m) => m.type === 'append' && m.to === 'b') as Append[]));
    }
    expect(sent.map((m) => m.entries.length)).toEqual([1, 1, 1]);
    for (const m of sent) net.deliver(m);
    net.stabilize();
    expect(net.log('b')).toEqual(net.log('a'));
  });

  test('a lost append in the pipeline is detected and resent', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.propose('a', 'one');
    net.take((m) => m.type === 'append' && m.to === 'b'); // dropped on the floor
    net.propose('a', 'two');
    net.stabilize();
    net.tickAll();
    net.stabilize();
    expect(net.log('b')).toEqual(net.log('a'));
    expect(net.core('b').commitIndex).toBe(4);
  });

  test('a stale or reordered AppendEntries never cuts off newer entries', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.propose('a', 'x');
    const first = net.take((m) => m.type === 'append' && m.to === 'b') as Append[];
    net.propose('a', 'y');
    const second = net.take((m) => m.type === 'append' && m.to === 'b') as Append[];
    for (const m of [...first, ...second]) net.deliver(m);
    net.stabilize();
    const before = net.log('b');
    expect(before.map(([, , d]) => d)).toEqual(['config', 'noop', 'x', 'y']);
    // The first message again, late and duplicated: it matches a prefix and must change nothing.
    net.deliver(first[0]!);
    net.deliver(first[0]!);
    net.stabilize();
    expect(net.log('b')).toEqual(before);
  });

  test('conflicting uncommitted entries of an old leader are overwritten (§5.3)', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { checkQuorum: false });
    net.elect('a');
    net.isolate('a');
    net.propose('a', 'lost-1');
    net.propose('a', 'lost-2');
    net.stabilize();
    net.elect('b');
    net.propose('b', 'kept');
    net.stabilize();
    net.heal();
    net.tickAll();
    net.stabilize();
    expect(net.log('a')).toEqual(net.log('b'));
    expect(net.log('a').map(([, , d]) => d)).toEqual(['config', 'noop', 'noop', 'kept']);
  });

  test('fast backtracking skips a divergent term per round trip', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { checkQuorum: false });
    net.elect('a');
    net.isolate('a');
    for (let i = 0; i < 40; i++) net.propose('a', `dead-${i}`);
    net.stabilize();
    net.elect('b');
    for (let i = 0; i < 40; i++) net.propose('b', `live-${i}`);
    net.stabilize();
    net.heal();
    const before = net.delivered.length;
    net.tickAll();
    net.stabilize();
    const rejects = net.delivered
      .slice(before)
      .filter((m) => m.type === 'append-resp' && m.from === 'a' && m.reject && m.term === 3);
    expect(rejects.length).toBeLessThanOrEqual(3);
    expect(net.log('a')).toEqual(net.log('b'));
  });

  test('a follower never commits past what it is known to match (heartbeat commit is bounded)', () => {
    const net = new CoreNetwork(['a', 'b', 'c'], { checkQuorum: false });
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 3; i++) net.propose('a', `x${i}`);
    net.stabilize();
    // c holds an uncommitted divergent tail from a short-lived leadership of its own.
    net.heal();
    net.dropTypes.add('append');
    net.tick('a');
    net.stabilize();
    const hb = net.delivered.filter((m) => m.type === 'heartbeat' && m.to === 'c').at(-1);
    expect(hb && hb.type === 'heartbeat' ? hb.commit : -1).toBeLessThanOrEqual(2);
    expect(net.core('c').commitIndex).toBeLessThanOrEqual(2);
  });
});

describe('commit rules (§5.4.2) and the durable leader', () => {
  test('an old-term entry on a majority is not committed until an entry of the current term is', () => {
    // Figure 8 of the Raft paper, with the new leader's own disk write held back.
    const net = new CoreNetwork(['a', 'b', 'c', 'd', 'e'], { preVote: false, checkQuorum: false });
    net.elect('a');
    for (const to of ['c', 'd', 'e']) net.cut.add(`a->${to}`);
    net.propose('a', 'X'); // index 3, term 2: reaches a and b only
    net.stabilize();
    expect(net.core('b').termAt(3)).toBe(2);
    net.heal();
    net.isolate('a');
    net.isolate('b');
    net.dropTypes.add('append');
    net.elect('c'); // term 3 with c, d, e; its no-op never leaves c
    expect(net.leaders()).toContain('c');
    net.heal();
    net.isolate('c');
    net.restart('a');
    net.core('a').campaign(); // term 3: d and e already voted for c
    net.stabilize();
    expect(net.core('a').role).not.toBe('leader');
    net.cut.add('a->e');
    net.cut.add('e->a');
    net.core('a').campaign(); // term 4: a, b, d
    net.flush();
    for (const m of net.take((m) => m.type === 'vote')) net.deliver(m);
    net.flush();
    net.node('a').holdWrites = true;
    for (const m of net.take((m) => m.type === 'vote-resp')) net.deliver(m);
    expect(net.core('a').role).toBe('leader');
    expect(net.core('a').term).toBe(4);
    net.stabilize();
    // X (term 2) is now on a, b and d — a majority — and must still not count as committed...
    for (const id of ['a', 'b', 'd']) expect(net.core(id).termAt(3)).toBe(2);
    expect(net.core('a').commitIndex).toBe(2);
    // ...until a's term-4 no-op is durable on a itself and on a majority.
    net.release('a');
    net.stabilize();
    expect(net.core('a').commitIndex).toBe(4);
    net.tick('a');
    net.stabilize();
    expect(net.core('b').commitIndex).toBe(4);
  });

  test('a single-node leader commits only after its own write is durable', () => {
    const net = new CoreNetwork(['solo']);
    net.elect('solo');
    expect(net.core('solo').commitIndex).toBe(2);
    net.node('solo').holdWrites = true;
    net.propose('solo', 'x');
    net.stabilize();
    expect(net.core('solo').commitIndex).toBe(2);
    net.release('solo');
    expect(net.core('solo').commitIndex).toBe(3);
  });

  test('a follower acknowledges entries only after writing them', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.node('b').holdWrites = true;
    net.node('c').holdWrites = true;
    net.propose('a', 'x');
    net.stabilize();
    expect(net.delivered.filter((m) => m.type === 'append-resp' && m.index === 3)).toHaveLength(0);
    expect(net.core('a').commitIndex).toBe(2);
    net.release('b');
    net.stabilize();
    expect(net.core('a').commitIndex).toBe(3);
  });

  test('a restarted node recovers exactly what it persisted', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    for (let i = 0; i < 5; i++) net.propose('a', `v${i}`);
    net.stabilize();
    const before = net.log('b');
    const term = net.core('b').term;
    net.restart('b');
    expect(net.log('b')).toEqual(before);
    expect(net.core('b').term).toBe(term);
    net.tickAll();
    net.stabilize();
    expect(net.node('b').applied.map((e) => e.index)).toEqual(before.map(([i]) => i));
  });
});
