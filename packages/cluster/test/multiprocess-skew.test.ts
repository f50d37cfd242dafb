// L4: leases and TTLs under clock skew, with real nodes as child processes whose `Date.now` is
// skewed. Client A takes a 15 s lock on the leader (and writes a key with a 15 s TTL), the
// leader is SIGKILLed, and a node whose wall clock is 20 s off becomes leader. Lease time is the
// leaders' monotonic time, so another client must not get the lock — and the key must not read
// as missing — before 15 s have passed in real time (the test's own clock), whichever way the
// new leader's wall clock is off. Fencing stays the last line of defence and is not needed here.
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, test } from 'vitest';
import { eventually, ProcessCluster, TEST_NODE_OPTIONS } from './harness/process-cluster.js';
import { sleep } from './harness/workload.js';

const TTL_MS = 15_000;
let cluster: ProcessCluster | undefined;
afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

async function failoverUnderSkew(skewMs: number): Promise<void> {
  const c = new ProcessCluster({ nodeOptions: TEST_NODE_OPTIONS });
  cluster = c;
  await c.init();
  const skewed = { MOCRA_TEST_CLOCK_SKEW_MS: String(skewMs) };
  const n1 = await c.start('n1');
  await eventually('n1 to lead', async () => (await c.status('n1'))?.role === 'leader');
  await c.start('n2', [n1.raftAddr], skewed);
  await c.start('n3', [n1.raftAddr], skewed);
  await eventually('three voters', async () => (await c.status('n1'))?.voters.length === 3, 30_000);
  await eventually('n1 to lead the three', async () => (await c.agreedLeader()) === 'n1');

  // Client A, on the leader (whose clock is right): a 15 s lock and a 15 s TTL key.
  const asked = performance.now();
  const lease = await c.op('n1', { op: 'acquire', name: 'L', ttlMs: TTL_MS, owner: 'A' });
  expect(lease).toMatchObject({ ok: true, value: { owner: 'A' } });
  const written = performance.now();
  expect(await c.op('n1', { op: 'set', key: 'ttl-key', value: 'v', ttlMs: TTL_MS })).toMatchObject({
    ok: true,
  });
  c.kill('n1');

  // Client B asks for the lock on a survivor every 200 ms; a reader watches the key.
  let granted: number | undefined;
  let missing: number | undefined;
  const deadline = performance.now() + 4 * TTL_MS;
  while ((granted === undefined || missing === undefined) && performance.now() < deadline) {
    if (granted === undefined) {
      const r = await c.op('n2', { op: 'acquire', name: 'L', ttlMs: 1000, owner: 'B' });
      if (r.ok && r.value !== null) granted = performance.now();
    }
    if (missing === undefined) {
      const r = await c.op('n3', { op: 'get', key: 'ttl-key' });
      if (r.ok && r.value === null) missing = performance.now();
      else if (r.ok) expect(r.value).toBe('v');
    }
    await sleep(200);
  }
  const leader = await c.agreedLeader();
  console.log(
    `skew ${skewMs / 1000} s on n2 and n3, new leader ${leader}: the lock went to B ${((granted! - asked) / 1000).toFixed(1)} s ` +
      `after A asked for it, the key read as missing ${((missing! - written) / 1000).toFixed(1)} s after it was written`,
  );
  // B's grant and the missing read happened before they returned, and A's lease and the key's
  // TTL started after A's calls began: not early means returned at least a TTL later.
  expect(granted, 'B never got the lock').toBeDefined();
  expect(missing, 'the key never lapsed').toBeDefined();
  expect(granted! - asked).toBeGreaterThanOrEqual(TTL_MS);
  expect(missing! - written).toBeGreaterThanOrEqual(TTL_MS);
}

describe('leases and TTLs under clock skew, across processes', () => {
  test('a new leader 20 s ahead frees neither a 15 s lock nor a 15 s key early', async () => {
    await failoverUnderSkew(20_000);
  }, 150_000);

  test('a new leader 20 s behind does not free them early either, and they do lapse', async () => {
    await failoverUnderSkew(-20_000);
  }, 150_000);
});
