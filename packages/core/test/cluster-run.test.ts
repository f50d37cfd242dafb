// Cluster-wide seeding and completion detection (distributed/cluster-run.ts). Members are
// ClusterRuns on their own coordination clients — local ones sharing one store (as separate
// processes share a server), and Redis for the crash case; activity and topic emptiness are
// scripted, so every race is reproduced on purpose rather than hoped for.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect, test } from 'vitest';
import { createLocalCoordination, LocalCoordinationStore } from '../src/coordination/local-coordination.js';
import { createRedisCoordination, type RedisCoordination } from '../src/coordination/redis-coordination.js';
import type { Coordination } from '../src/coordination/types.js';
import { type ClusterRun, createClusterRun, type MemberActivity } from '../src/distributed/cluster-run.js';
import { connectRedis } from '../src/queue/redis-connection.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const runs: ClusterRun[] = [];
const clients: Coordination[] = [];

const redisNamespaces: string[] = [];

afterEach(async () => {
  for (const r of runs.splice(0)) await r.close();
  for (const c of clients.splice(0)) await c.close();
  if (redisNamespaces.length === 0) return;
  const redis = await connectRedis({ url: REDIS_URL, feature: 'cluster-run.test' });
  for (const ns of redisNamespaces.splice(0)) {
    const keys = await redis.keys(`mocra-test:coord:${ns}:*`);
    if (keys.length > 0) await redis.unlink(...keys);
  }
  await redis.quit();
});

interface Member {
  run: ClusterRun;
  activity: MemberActivity;
  done: number;
}

/** A scripted world: what every member reports, and whether the topics read empty. */
function world() {
  return { topicsEmpty: true, reads: 0 };
}

async function member(
  coordination: Coordination,
  w: ReturnType<typeof world>,
  runId = 'r1',
  start = true,
  service = false,
): Promise<Member> {
  clients.push(coordination);
  const m: Member = { activity: { idle: true, started: 0 }, done: 0 } as Member;
  m.run = createClusterRun({
    coordination,
    runId,
    activity: () => ({ ...m.activity }),
    topicsEmpty: async () => {
      w.reads++;
      return w.topicsEmpty;
    },
    onDone: () => {
      m.done++;
    },
    pollMs: 10,
    checkEveryMs: 30,
    probeTimeoutMs: 1_000,
    lockTtlMs: 600,
    service,
  });
  runs.push(m.run);
  if (start) await m.run.start();
  return m;
}

async function until(what: string, ok: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(10);
  }
}

const local = (store: LocalCoordinationStore, id: string) =>
  createLocalCoordination({ store, nodeId: id, memberTtlMs: 500 });

test('the run is seeded once across members racing, and never again by a restarted member', async () => {
  const store = new LocalCoordinationStore();
  const w = world();
  w.topicsEmpty = false; // the seeds' work is pending: the run must not end under the test
  const members = await Promise.all(['a', 'b', 'c'].map((id) => member(local(store, id), w)));
  let seeds = 0;
  const outcomes = await Promise.all(
    members.map((m) =>
      m.run.seedOnce(async () => {
        seeds++;
        await sleep(50);
      }),
    ),
  );
  expect(seeds).toBe(1);
  expect(outcomes.filter((o) => o === 'seeded')).toHaveLength(1);
  expect(outcomes.filter((o) => o === 'already-seeded')).toHaveLength(2);
  // "a" restarts (a new process with the same id and run): the marker keeps it from seeding.
  await members[0]!.run.close();
  const again = await member(local(store, 'a'), w);
  expect(await again.run.seedOnce(async () => void seeds++)).toBe('already-seeded');
  expect(seeds).toBe(1);
});

test('a seeder that dies before finishing lets another member seed (Redis)', async () => {
  const ns = `cr${randomBytes(4).toString('hex')}`;
  const open = (id: string) =>
    createRedisCoordination({
      url: REDIS_URL,
      namespace: ns,
      keyPrefix: 'mocra-test:coord:',
      nodeId: id,
      memberTtlMs: 500,
    });
  const w = world();
  const a = await member(await open('a'), w);
  const b = await member(await open('b'), w);
  let started!: () => void;
  const seeding = new Promise<void>((resolve) => {
    started = resolve;
  });
  void a.run.seedOnce(async () => {
    started();
    await new Promise(() => {}); // hangs: the process is about to die
  });
  await seeding;
  // "a" dies: its connection closes without releasing anything.
  await a.run.close().catch(() => undefined);
  await (clients[0] as RedisCoordination).close({ leave: false });
  let seeded = 0;
  expect(await b.run.seedOnce(async () => void seeded++)).toBe('seeded');
  expect(seeded).toBe(1);
  const admin = await open('admin');
  clients.push(admin);
  expect(await admin.get('run:r1:seeded')).toBe('b');
  redisNamespaces.push(ns);
});

test('the run ends on every member only when all are idle, stable across two probes, and topics are empty', async () => {
  const store = new LocalCoordinationStore();
  const w = world();
  const a = await member(local(store, 'a'), w);
  const b = await member(local(store, 'b'), w);
  const c = await member(local(store, 'c'), w);
  const all = [a, b, c];

  // Not seeded yet: never done, however idle everything is.
  await sleep(150);
  expect(all.every((m) => m.done === 0)).toBe(true);
  await a.run.seedOnce(async () => {});

  // One member busy: not done.
  b.activity = { idle: false, started: 5 };
  await sleep(200);
  expect(all.every((m) => m.done === 0)).toBe(true);

  // Topics not empty: not done.
  b.activity = { idle: true, started: 5 };
  w.topicsEmpty = false;
  await sleep(200);
  expect(all.every((m) => m.done === 0)).toBe(true);

  // Everything quiet: the leader confirms, and every member ends.
  w.topicsEmpty = true;
  await until('every member ends', () => all.every((m) => m.done === 1));
  expect(all.filter((m) => m.run.isLeader())).toHaveLength(1);

  // A member that starts after the end ends at once.
  const late = await member(local(store, 'd'), w);
  await until('the late member ends', () => late.done === 1);
});

test('the race: a member idle at both probes but busy in between (its count moved) is caught', async () => {
  const store = new LocalCoordinationStore();
  const w = world();
  const a = await member(local(store, 'a'), w);
  const b = await member(local(store, 'b'), w, 'r1', false);
  await b.run.start();
  await a.run.seedOnce(async () => {});
  // "b" keeps running short handlers: whenever it answers a probe it is idle, but its started
  // count moves between the first probe and the second, so no check can confirm the end.
  let moves = 0;
  const stop = setInterval(() => {
    b.activity = { idle: true, started: b.activity.started + 1 };
    moves++;
  }, 5);
  await sleep(400);
  clearInterval(stop);
  expect(moves).toBeGreaterThan(10);
  expect(a.done + b.done).toBe(0);
  // Once "b" stays still, the run ends.
  await until('both end', () => a.done === 1 && b.done === 1);
});

test('a member that joins while the others are idle, and is busy, holds the end back', async () => {
  const store = new LocalCoordinationStore();
  const w = world();
  w.topicsEmpty = false;
  const a = await member(local(store, 'a'), w);
  await a.run.seedOnce(async () => {});
  await until('the leader has started checking', () => w.reads >= 1, 2_000);
  const late = await member(local(store, 'z'), w, 'r1', false);
  late.activity = { idle: false, started: 1 };
  await late.run.start();
  // "a" is idle and the topics read empty while "z" is about to publish.
  w.topicsEmpty = true;
  await sleep(200);
  expect(a.done + late.done).toBe(0);
  late.activity = { idle: true, started: 1 };
  await until('both end', () => a.done === 1 && late.done === 1);
});

test('a service member never lets the run end, and an end marker left by a finite run does not stop it', async () => {
  const store = new LocalCoordinationStore();
  const w = world();
  const a = await member(local(store, 'a'), w);
  const s = await member(local(store, 's'), w, 'r1', true, true);
  await a.run.seedOnce(async () => {});
  // Everything is idle and empty, and the checks keep running — but "s" is a service member.
  await until('several checks', () => a.run.probes + s.run.probes >= 3, 3_000);
  await sleep(150);
  expect(a.done + s.done).toBe(0);
  // Without it, the finite member ends.
  await s.run.close();
  await until('the finite member ends once the service member left', () => a.done === 1);
  // A service member started on the finished run stays up.
  const coordination = local(store, 'late');
  const late = await member(coordination, w, 'r1', true, true);
  await sleep(200);
  expect(late.done).toBe(0);
  expect(await coordination.members()).toContainEqual(
    expect.objectContaining({ id: 'late', meta: expect.objectContaining({ mode: 'service' }) }),
  );
});
