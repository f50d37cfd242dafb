// The join credit record (distributed/credit-store.ts) on real coordination backends: Redis on
// the local server, and Raft on a real 3-node cluster in this process. Concurrent writers race
// with compare-and-set; exactly one is told it completed the phase, and units written twice
// (a redelivery whose ack was lost) count once.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createRaftCoordination } from '../src/coordination/raft-coordination.js';
import { createRedisCoordination } from '../src/coordination/redis-coordination.js';
import type { Coordination } from '../src/coordination/types.js';
import { childCredit, type UnitCredit } from '../src/distributed/credit.js';
import { CreditStore } from '../src/distributed/credit-store.js';
import { type InProcessCluster, startInProcessCluster } from './cluster-harness.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const scope = `credit-${process.pid}-${Date.now()}`;

/** A seed's 300 children spread over three writers in batches, each unit once, plus the seed's rest. */
function batches(): Map<string, number>[] {
  const seed: UnitCredit = { phase: 0, exp: 0, id: 'seed' };
  const units = Array.from({ length: 300 }, (_, i) => childCredit(seed, i + 1));
  const out: Map<string, number>[] = [];
  for (let b = 0; b < 30; b++) out.push(new Map(units.slice(b * 10, b * 10 + 10).map((u) => [u.id, u.exp])));
  out[0]!.set('seed', 300);
  return out;
}

async function race(clients: Coordination[], key: string): Promise<void> {
  const stores = clients.map((coordination) => new CreditStore({ coordination }));
  const all = batches();
  const results = await Promise.all(
    stores.map(async (store, w) => {
      const mine = all.filter((_, i) => i % stores.length === w);
      const out = [];
      for (const batch of mine) out.push(await store.return(key, batch));
      return out;
    }),
  );
  const flat = results.flat();
  expect(flat.filter((r) => r.completed)).toHaveLength(1);
  expect(flat.filter((r) => r.wrote)).toHaveLength(all.length);
  // Only the very last write can see the whole sum.
  expect(flat.filter((r) => r.whole)).toHaveLength(1);
  expect(await stores[0]!.read(key)).toEqual({ whole: true, units: 301 });
  // A redelivered batch: nothing written, still whole, nobody completes again.
  const again = await stores[1]!.return(key, all[3]!);
  expect(again).toMatchObject({ wrote: false, completed: false, whole: true, duplicates: 10 });
}

async function partial(client: Coordination, key: string): Promise<void> {
  const store = new CreditStore({ coordination: client });
  const all = batches();
  for (const batch of all.slice(0, -1)) expect((await store.return(key, batch)).whole).toBe(false);
  // Half new, half already covered: only the new half counts, and the sum is not 1 yet.
  const last = [...all.at(-1)!];
  const mixed = new Map([...last.slice(0, 5), ...[...all[2]!].slice(0, 5)]);
  expect(await store.return(key, mixed)).toMatchObject({ whole: false, duplicates: 5, wrote: true });
  expect(await store.return(key, new Map(last.slice(5)))).toMatchObject({ whole: true, completed: true });
}

describe('join credit on Redis', () => {
  const clients: Coordination[] = [];
  beforeAll(async () => {
    for (const nodeId of ['w1', 'w2', 'w3'])
      clients.push(await createRedisCoordination({ url: REDIS_URL, namespace: scope, nodeId }));
  });
  afterAll(async () => {
    for (const c of clients) {
      for (const k of ['race', 'partial']) await c.delete(`${scope}:${k}`);
      await c.close();
    }
  });
  test('three writers racing: one completes, redeliveries count once', () => race(clients, `${scope}:race`));
  test('a batch mixing new and counted units', () => partial(clients[0]!, `${scope}:partial`));
});

describe('join credit on Raft', () => {
  let cluster: InProcessCluster;
  const clients: Coordination[] = [];
  beforeAll(async () => {
    cluster = await startInProcessCluster();
    for (const [i, nodeId] of ['w1', 'w2', 'w3'].entries())
      clients.push(await createRaftCoordination({ node: cluster.nodes[i]!, nodeId, namespace: scope }));
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) await c.close();
    await cluster?.close();
  });
  test(
    'three writers racing on three nodes: one completes, redeliveries count once',
    () => race(clients, 'race'),
    60_000,
  );
  test('a batch mixing new and counted units', () => partial(clients[1]!, 'partial'), 60_000);
});
