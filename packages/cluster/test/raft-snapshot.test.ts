// Snapshots, log compaction and InstallSnapshot (Raft §7).
import { describe, expect, test } from 'vitest';
import type { Snapshot } from '../src/internal.js';
import { CoreNetwork } from './harness/core-network.js';

function snapshotAt(net: CoreNetwork, id: string, index: number): Snapshot {
  const core = net.core(id);
  return { meta: core.snapshotMetaAt(index), data: `state@${index}` };
}

describe('snapshots and InstallSnapshot', () => {
  test('a follower that fell behind the compacted log catches up from a snapshot', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 20; i++) net.propose('a', `v${i}`);
    net.stabilize();
    const snap = snapshotAt(net, 'a', 15);
    net.core('a').compact(snap, 15);
    expect(net.core('a').firstIndex).toBe(16);
    net.heal();
    net.tickAll();
    net.stabilize();
    expect(net.delivered.some((m) => m.type === 'snapshot' && m.to === 'c')).toBe(true);
    expect(net.node('c').disk.snapshot?.meta.index).toBe(15);
    expect(net.log('c')).toEqual(net.log('a'));
    expect(net.core('c').commitIndex).toBe(22);
    // c's state machine was replaced by the snapshot, then entries after it were applied.
    const applied = net.node('c').applied.map((e) => e.data);
    expect(applied).toContain('SNAPSHOT');
    expect(net.node('c').applied.at(-1)?.index).toBe(22);
  });

  test('the snapshot carries the configuration in force at its index', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 5; i++) net.propose('a', `v${i}`);
    net.stabilize();
    const snap = snapshotAt(net, 'a', 6);
    expect(snap.meta.config.members.map((m) => m.id)).toEqual(['a', 'b', 'c']);
    net.core('a').compact(snap, 6);
    net.heal();
    net.tickAll();
    net.stabilize();
    expect(net.core('c').config.members.map((m) => m.id)).toEqual(['a', 'b', 'c']);
  });

  test('a lost snapshot is sent again', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 10; i++) net.propose('a', `v${i}`);
    net.stabilize();
    net.core('a').compact(snapshotAt(net, 'a', 10), 10);
    net.heal();
    net.dropTypes.add('snapshot');
    net.tickAll();
    net.stabilize();
    expect(net.node('c').disk.snapshot).toBeUndefined();
    net.dropTypes.delete('snapshot');
    for (let i = 0; i < 15 && net.node('c').disk.snapshot === undefined; i++) {
      net.tickAll();
      net.stabilize();
    }
    expect(net.node('c').disk.snapshot?.meta.index).toBe(10);
    expect(net.log('c')).toEqual(net.log('a'));
  });

  test('a snapshot the follower already has a matching entry for only advances its commit', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    for (let i = 0; i < 5; i++) net.propose('a', `v${i}`);
    net.stabilize();
    const snap = snapshotAt(net, 'a', 5);
    net.core('b').step({ type: 'snapshot', from: 'a', to: 'b', term: net.core('a').term, snapshot: snap });
    net.stabilize();
    expect(net.node('b').disk.snapshot).toBeUndefined();
    expect(net.log('b')).toEqual(net.log('a'));
  });

  test('a node restarted from a snapshot plus log recovers the same state', () => {
    const net = new CoreNetwork(['a', 'b', 'c']);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 8; i++) net.propose('a', `v${i}`);
    net.stabilize();
    net.core('a').compact(snapshotAt(net, 'a', 8), 8);
    net.heal();
    net.tickAll();
    net.stabilize();
    net.propose('a', 'after');
    net.stabilize();
    const before = net.log('c');
    net.restart('c');
    expect(net.log('c')).toEqual(before);
    expect(net.core('c').firstIndex).toBe(9);
  });
});
