// The local backend against the coordination conformance suite: clients of one test share a
// LocalCoordinationStore, the way processes share a Redis.
import { describe, expect, test } from 'vitest';
import { createLeaderElection } from '../src/coordination/leader.js';
import { LocalCoordination, LocalCoordinationStore } from '../src/coordination/local-coordination.js';
import { createPartitionOwnership } from '../src/coordination/partitions.js';
import { coordinationConformance } from './coordination-conformance.js';

const stores = new Map<string, LocalCoordinationStore>();

coordinationConformance({
  name: 'local',
  async open(scope, nodeId, { memberTtlMs }) {
    let store = stores.get(scope);
    if (!store) {
      store = new LocalCoordinationStore();
      stores.set(scope, store);
    }
    return new LocalCoordination({ nodeId, store, memberTtlMs });
  },
  async crash(client) {
    await (client as LocalCoordination).close({ leave: false });
  },
  async cleanup(scope) {
    stores.delete(scope);
  },
});

describe('local coordination, alone', () => {
  test('a process on its own is its cluster: the leader, owning every partition', async () => {
    const c = new LocalCoordination({ nodeId: 'solo' });
    await c.join({});
    const election = createLeaderElection(c, { ttlMs: 1_000, renewEveryMs: 200 });
    await election.start();
    expect(election.isLeader()).toBe(true);
    const ownership = createPartitionOwnership(c);
    await ownership.refresh();
    expect(ownership.ownedPartitions(8)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(ownership.owns('any-account')).toBe(true);
    await election.stop();
    await c.close();
  });
});
