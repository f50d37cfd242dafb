/**
 * The coordination conformance suite. Every coordination backend (local, Redis,
 * and later Raft) runs it from its own `coordination-<backend>.test.ts` with a harness whose
 * `open` returns clients that share one cluster state per test (separate processes, in effect).
 * Leader election and partition ownership are the shared helpers, exercised on each backend.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, test } from 'vitest';
import { FencingGuard } from '../src/coordination/fencing.js';
import { createLeaderElection } from '../src/coordination/leader.js';
import { createPartitionOwnership } from '../src/coordination/partitions.js';
import type { Coordination } from '../src/coordination/types.js';

export interface CoordinationHarness {
  name: string;
  /** A client of the cluster named `scope`; clients of one scope share state. */
  open(scope: string, nodeId: string, options: { memberTtlMs: number }): Promise<Coordination>;
  /** The client's process dies: no more heartbeats or calls, and it does not leave. */
  crash(client: Coordination): Promise<void>;
  /** Remove what `scope` left behind. */
  cleanup(scope: string): Promise<void>;
}

const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
let seq = 0;

export function coordinationConformance(harness: CoordinationHarness): void {
  describe(`coordination conformance: ${harness.name}`, () => {
    const scopes: { scope: string; clients: Coordination[]; stops: (() => unknown)[] }[] = [];
    let current: (typeof scopes)[number];

    function scope(): string {
      current = { scope: `cc${runId}x${seq++}`, clients: [], stops: [] };
      scopes.push(current);
      return current.scope;
    }

    async function client(id: string, memberTtlMs = 400): Promise<Coordination> {
      const c = await harness.open(current.scope, id, { memberTtlMs });
      current.clients.push(c);
      return c;
    }

    afterEach(async () => {
      for (const s of scopes.splice(0)) {
        for (const stop of s.stops) await stop();
        for (const c of s.clients) await c.close().catch(() => {});
        await harness.cleanup(s.scope);
      }
    });

    // ── key-value ──────────────────────────────────────────────────────────────

    test('get / set / delete, and values are shared between clients', async () => {
      scope();
      const a = await client('a');
      const b = await client('b');
      expect(await a.get('k')).toBeUndefined();
      await a.set('k', 'v1');
      expect(await b.get('k')).toBe('v1');
      await b.set('k', 'v2 ✓');
      expect(await a.get('k')).toBe('v2 ✓');
      expect(await a.delete('k')).toBe(true);
      expect(await a.delete('k')).toBe(false);
      expect(await b.get('k')).toBeUndefined();
    });

    test('a TTL makes a value disappear; a later set without TTL keeps it', async () => {
      scope();
      const a = await client('a');
      await a.set('short', 'x', { ttlMs: 150 });
      await a.set('long', 'y', { ttlMs: 60_000 });
      expect(await a.get('short')).toBe('x');
      await sleep(300);
      expect(await a.get('short')).toBeUndefined();
      expect(await a.get('long')).toBe('y');
      await a.set('short', 'z');
      await sleep(200);
      expect(await a.get('short')).toBe('z');
    });

    test('compare-and-set: absent, match, mismatch, delete, TTL', async () => {
      scope();
      const a = await client('a');
      const b = await client('b');
      expect(await a.compareAndSet('c', 'nope', 'x')).toBe(false);
      expect(await a.compareAndSet('c', undefined, 'v1')).toBe(true);
      expect(await b.compareAndSet('c', undefined, 'other')).toBe(false);
      expect(await b.compareAndSet('c', 'v1', 'v2')).toBe(true);
      expect(await a.compareAndSet('c', 'v1', 'v3')).toBe(false);
      expect(await a.get('c')).toBe('v2');
      expect(await a.compareAndSet('c', 'v2', undefined)).toBe(true);
      expect(await a.get('c')).toBeUndefined();
      expect(await a.compareAndSet('t', undefined, 'temp', { ttlMs: 150 })).toBe(true);
      await sleep(300);
      expect(await a.compareAndSet('t', undefined, 'again')).toBe(true);
    });

    test('compare-and-set is atomic: of many racing writers exactly one wins', async () => {
      scope();
      const clients = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => client(id)));
      const results = await Promise.all(clients.map((c, i) => c.compareAndSet('race', undefined, `w${i}`)));
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    test('increment is atomic and keeps counting across clients', async () => {
      scope();
      const a = await client('a');
      const b = await client('b');
      expect(await a.increment('n')).toBe(1);
      expect(await b.increment('n', 5)).toBe(6);
      expect(await a.increment('n', -2)).toBe(4);
      const all = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).increment('m')));
      expect(all.sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      await a.set('text', 'not a number');
      await expect(a.increment('text')).rejects.toMatchObject({ code: 'MOCRA_ERR_INVALID_ARGUMENT' });
    });

    // ── locks and fencing ──────────────────────────────────────────────────────

    test('a lock is exclusive; its holder can take it again under a new, higher token', async () => {
      scope();
      const a = await client('a');
      const b = await client('b');
      const first = await a.acquireLock('L', { ttlMs: 5_000 });
      expect(first).toMatchObject({ name: 'L', owner: 'a' });
      expect(first!.expiresAt).toBeGreaterThan(Date.now() - 60_000);
      expect(await b.acquireLock('L', { ttlMs: 5_000 })).toBeUndefined();
      const again = await a.acquireLock('L', { ttlMs: 5_000 });
      expect(again!.token).toBeGreaterThan(first!.token);
      expect(await a.releaseLock(again!)).toBe(true);
      const bLease = await b.acquireLock('L', { ttlMs: 5_000 });
      expect(bLease!.token).toBeGreaterThan(again!.token);
    });

    test('of many racing clients exactly one gets the lock', async () => {
      scope();
      const clients = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((id) => client(id)));
      const leases = await Promise.all(clients.map((c) => c.acquireLock('race', { ttlMs: 5_000 })));
      expect(leases.filter(Boolean)).toHaveLength(1);
    });

    test('fencing tokens strictly increase across holders and lapses; a stale token is refused', async () => {
      scope();
      const a = await client('a');
      const b = await client('b');
      const guard = new FencingGuard();
      const aLease = await a.acquireLock('F', { ttlMs: 150 });
      guard.check('db', aLease!.token);
      await sleep(300); // a stalls; its lease lapses
      const bLease = await b.acquireLock('F', { ttlMs: 5_000 });
      expect(bLease!.token).toBeGreaterThan(aLease!.token);
      guard.check('db', bLease!.token);
      // The deposed holder wakes up: renew and release refuse its token; so does the resource.
      expect(await a.renewLock(aLease!, 5_000)).toBeUndefined();
      expect(await a.releaseLock(aLease!)).toBe(false);
      expect(() => guard.check('db', aLease!.token)).toThrow(
        expect.objectContaining({ code: 'MOCRA_ERR_FENCING_REJECTED' }),
      );
      expect(await a.acquireLock('F', { ttlMs: 5_000 })).toBeUndefined(); // b still holds it
      // Renewal keeps the token and pushes the expiry.
      await sleep(20);
      const renewed = await b.renewLock(bLease!, 10_000);
      expect(renewed).toMatchObject({ token: bLease!.token, owner: 'b' });
      expect(renewed!.expiresAt).toBeGreaterThan(bLease!.expiresAt);
      expect(await b.releaseLock(bLease!)).toBe(true);
      expect(await b.releaseLock(bLease!)).toBe(false);
      const cLease = await a.acquireLock('F', { ttlMs: 5_000 });
      expect(cLease!.token).toBeGreaterThan(bLease!.token);
      // Tokens are per lock name, but never reused within one.
      const other = await a.acquireLock('G', { ttlMs: 5_000 });
      expect(other!.token).toBeGreaterThanOrEqual(1);
    });

    test('bad TTLs are refused', async () => {
      scope();
      const a = await client('a');
      await expect(a.acquireLock('L', { ttlMs: 0 })).rejects.toMatchObject({
        code: 'MOCRA_ERR_INVALID_ARGUMENT',
      });
      await expect(a.set('k', 'v', { ttlMs: -5 })).rejects.toMatchObject({
        code: 'MOCRA_ERR_INVALID_ARGUMENT',
      });
    });

    // ── leader election ────────────────────────────────────────────────────────

    test('exactly one leader; when it stops renewing, another takes over with a higher token', async () => {
      scope();
      const clients = await Promise.all(['a', 'b', 'c'].map((id) => client(id)));
      const elections = clients.map((c) =>
        createLeaderElection(c, { name: 'cron', ttlMs: 400, renewEveryMs: 100 }),
      );
      for (const e of elections) current.stops.push(() => e.stop());
      const changes: string[] = [];
      elections.forEach((e, i) => {
        e.onChange((s) => {
          changes.push(`${i}:${s.leader}`);
        });
      });
      await Promise.all(elections.map((e) => e.start()));
      const leader = await waitFor(() => {
        const leaders = elections.filter((e) => e.isLeader());
        return leaders.length === 1 ? leaders[0] : undefined;
      }, 2_000);
      // Stay stable through several renewals.
      await sleep(350);
      expect(elections.filter((e) => e.isLeader())).toEqual([leader]);
      const firstToken = leader.token!;
      expect(firstToken).toBeGreaterThan(0);

      // The leader's process dies without releasing: the lease has to lapse first.
      const dead = clients[elections.indexOf(leader)]!;
      await leader.stop({ release: false });
      await harness.crash(dead);
      const next = await waitFor(() => elections.find((e) => e !== leader && e.isLeader()), 3_000);
      expect(next.token!).toBeGreaterThan(firstToken);
      expect(elections.filter((e) => e.isLeader())).toEqual([next]);
      expect(changes).toContain(`${elections.indexOf(next)}:true`);
    });

    test('a leader that stops gracefully hands over at once; one whose backend fails steps down', async () => {
      scope();
      const a = await client('a');
      const b = await client('b');
      const ea = createLeaderElection(a, { name: 'seed', ttlMs: 5_000, renewEveryMs: 100 });
      const eb = createLeaderElection(b, { name: 'seed', ttlMs: 5_000, renewEveryMs: 100 });
      current.stops.push(
        () => ea.stop(),
        () => eb.stop(),
      );
      await ea.start();
      await eb.start();
      expect(ea.isLeader()).toBe(true);
      expect(eb.isLeader()).toBe(false);
      await ea.stop(); // releases: b need not wait out the 5 s lease
      await waitFor(() => eb.isLeader() || undefined, 2_000);

      // b's backend goes away: the next renewal fails and b steps down.
      const lost: boolean[] = [];
      eb.onChange((s) => lost.push(s.leader));
      await b.close();
      await waitFor(() => !eb.isLeader() || undefined, 2_000);
      expect(lost).toEqual([false]);
      expect(eb.token).toBeUndefined();
    });

    // ── membership and partitions ──────────────────────────────────────────────

    test('membership: join with meta, leave at once, expire without heartbeats', async () => {
      scope();
      const a = await client('a', 400);
      const b = await client('b', 400);
      const c = await client('c', 400);
      await a.join({ addr: 'http://a:9000', meta: { role: 'worker' } });
      await b.join({});
      await c.join({ meta: { v: '1' } });
      const all = await a.members();
      expect(all.map((m) => m.id)).toEqual(['a', 'b', 'c']);
      expect(all[0]).toMatchObject({ id: 'a', addr: 'http://a:9000', meta: { role: 'worker' } });
      expect(all[0]!.lastSeen).toBeGreaterThan(Date.now() - 60_000);
      // Heartbeats keep members alive past their TTL.
      await sleep(600);
      expect((await b.members()).map((m) => m.id)).toEqual(['a', 'b', 'c']);
      await b.leave();
      expect((await a.members()).map((m) => m.id)).toEqual(['a', 'c']);
      await harness.crash(c);
      const left = await waitFor(async () => {
        const ids = (await a.members()).map((m) => m.id);
        return ids.length === 1 ? ids : undefined;
      }, 2_000);
      expect(left).toEqual(['a']);
    });

    test('partition ownership: every member agrees; a join moves about 1/N of keys, all to the joiner', async () => {
      scope();
      const clients = await Promise.all(['n1', 'n2', 'n3'].map((id) => client(id, 2_000)));
      for (const c of clients) await c.join({});
      const views = clients.map((c) => createPartitionOwnership(c, { refreshMs: 50 }));
      for (const v of views) {
        current.stops.push(() => v.stop());
        await v.refresh();
      }
      const keys = Array.from({ length: 600 }, (_, i) => `account-${i}`);
      const before = new Map(keys.map((k) => [k, views[0]!.ownerOf(k)!]));
      for (const k of keys) {
        expect(views.map((v) => v.ownerOf(k))).toEqual([before.get(k), before.get(k), before.get(k)]);
        expect(views.filter((v) => v.owns(k))).toHaveLength(1);
      }
      // Roughly even spread.
      for (const id of ['n1', 'n2', 'n3']) {
        const n = keys.filter((k) => before.get(k) === id).length;
        expect(n).toBeGreaterThan(120);
        expect(n).toBeLessThan(280);
      }

      const joiner = await client('n4', 2_000);
      await joiner.join({});
      const changed: (readonly string[])[] = [];
      views[0]!.onChange((m) => changed.push(m));
      await views[0]!.start();
      expect(changed.at(-1)).toEqual(['n1', 'n2', 'n3', 'n4']);
      const withJoiner = new Map(keys.map((k) => [k, views[0]!.ownerOf(k)!]));
      const moved = keys.filter((k) => withJoiner.get(k) !== before.get(k));
      for (const k of moved) expect(withJoiner.get(k)).toBe('n4');
      expect(moved.length / keys.length).toBeGreaterThan(0.15);
      expect(moved.length / keys.length).toBeLessThan(0.35);

      // A member leaves: only its keys move, and none of them to it.
      await clients[1]!.leave();
      await views[0]!.refresh();
      for (const k of keys) {
        const owner = views[0]!.ownerOf(k);
        expect(owner).not.toBe('n2');
        if (withJoiner.get(k) !== 'n2') expect(owner).toBe(withJoiner.get(k));
      }
      expect(views[0]!.ownedPartitions(16).every((p) => views[0]!.ownerOf(`partition:${p}`) === 'n1')).toBe(
        true,
      );
    });

    test('a closed client refuses calls', async () => {
      scope();
      const a = await client('a');
      await a.close();
      await expect(a.get('k')).rejects.toMatchObject({ code: 'MOCRA_ERR_COORDINATION_CLOSED' });
      await expect(a.acquireLock('L', { ttlMs: 1_000 })).rejects.toMatchObject({
        code: 'MOCRA_ERR_COORDINATION_CLOSED',
      });
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Poll `probe` until it returns a value (bounded), failing the test otherwise. */
async function waitFor<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(20);
  }
}
