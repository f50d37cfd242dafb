// A stop made on one process reaches another through coordination, and the per-handler
// `stoppedReason` check does not cost a coordination round trip each time (real Redis).
import { afterAll, expect, test } from 'vitest';
import { createRedisCoordination } from '../src/coordination/redis-coordination.js';
import type { Coordination } from '../src/coordination/types.js';
import { RunLedger } from '../src/module/run-ledger.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const namespace = `ledger-stop-${process.pid}-${Date.now()}`;
const a = await createRedisCoordination({ url: REDIS_URL, namespace, nodeId: 'a' });
const b = await createRedisCoordination({ url: REDIS_URL, namespace, nodeId: 'b' });
afterAll(async () => {
  for (const run of ['run-1', 'run-3']) await a.delete(`${namespace}:dag:stop:${run}:m`);
  await a.close();
  await b.close();
});

/** Counts the `get` calls that reach the coordination backend. */
function counted(coordination: Coordination): { coordination: Coordination; gets: () => number } {
  let gets = 0;
  const get = coordination.get.bind(coordination);
  coordination.get = (key: string) => {
    gets++;
    return get(key);
  };
  return { coordination, gets: () => gets };
}

test('a remote stop is seen within stopRecheckMs, and lookups in between are answered locally', async () => {
  const watched = counted(a);
  const here = new RunLedger({ coordination: watched.coordination, namespace, stopRecheckMs: 300 });
  const there = new RunLedger({ coordination: b, namespace });

  // Concurrent checks share one lookup; checks right after it use its answer.
  const first = await Promise.all(Array.from({ length: 20 }, () => here.stoppedReason('run-1', 'm')));
  expect(first.every((r) => r === undefined)).toBe(true);
  expect(watched.gets()).toBe(1);
  for (let i = 0; i < 50; i++) expect(await here.stoppedReason('run-1', 'm')).toBeUndefined();
  expect(watched.gets()).toBe(1);

  await there.stop('run-1', 'm', 'enough');
  // Bounded wait (at most 3 s) for the recheck to see the stop made by the other ledger.
  const deadline = Date.now() + 3_000;
  let seen: string | undefined;
  while (seen === undefined && Date.now() < deadline) {
    seen = await here.stoppedReason('run-1', 'm');
    if (seen === undefined) await new Promise((r) => setTimeout(r, 20));
  }
  expect(seen).toBe('enough');
  // Once seen, a stop is remembered: no more lookups.
  const after = watched.gets();
  expect(await here.stoppedReason('run-1', 'm')).toBe('enough');
  expect(watched.gets()).toBe(after);
  // Another run of the module is not stopped.
  expect(await here.stoppedReason('run-2', 'm')).toBeUndefined();
});

test('a local stop is seen at once', async () => {
  const ledger = new RunLedger({ coordination: a, namespace, stopRecheckMs: 60_000 });
  expect(await ledger.stoppedReason('run-3', 'm')).toBeUndefined();
  await ledger.stop('run-3', 'm', 'done here');
  expect(await ledger.stoppedReason('run-3', 'm')).toBe('done here');
});
