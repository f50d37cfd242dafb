/**
 * The queue conformance suite. Every queue backend runs it from its own
 * `queue-<backend>.test.ts` with a {@link QueueHarness}; what a backend does not promise is
 * declared in its capabilities with the reason, and the test that checks it is skipped with
 * that reason in its title (so a skip is visible in the test output, never silent).
 *
 * Real time is kept small: leases of a few hundred milliseconds, every wait bounded.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, test } from 'vitest';
import type { QueueCodecFormat } from '../src/queue/codec.js';
import type { Delivery, LeaseQueue, QueueBackend, TopicOptions } from '../src/queue/types.js';

/** `true` when the backend promises it; otherwise the reason it does not (the test is skipped). */
export type Capability = true | string;

export interface QueueCapabilities {
  /** Payloads are encoded to bytes (codec, compression, size limit and poison apply). */
  encodes: Capability;
  /** Two backend instances opened on one namespace share the topic (two processes). */
  peers: Capability;
  /** Priority order holds between any two priorities, not only between the three lanes. */
  exactPriority: Capability;
  /** One consumer gets the first deliveries of one key (same priority) in publish order. */
  orderedPerKey: Capability;
  /** With two consumers, all messages of one key go to one of them. */
  keyAffinity: Capability;
  /** A consumer joining the topic leaves the leases other consumers hold alone. */
  peerJoinKeepsLeases: Capability;
  /** A delivery that a dead consumer held comes back with its attempt counted (2, not 1). */
  countsCrashedDeliveries: Capability;
  /** stats() is exact at the moment of the call (otherwise the suite only checks it eventually). */
  exactStats: Capability;
  /** Messages waiting after nack(delay) count as `delayed` (otherwise they count as inflight). */
  nackDelayInStats: Capability;
}

export interface HarnessOpenOptions {
  namespace: string;
  topicDefaults?: TopicOptions;
  codec?: { format?: QueueCodecFormat; compressThresholdBytes?: number };
  maxPayloadBytes?: number;
  /** Open as consumer `index` of `of` that split the topic's keys (key-affinity test). */
  member?: { index: number; of: number };
}

export interface QueueHarness {
  name: string;
  capabilities: QueueCapabilities;
  /** The short lease the suite uses; redelivery tests wait a few of these. */
  leaseMs: number;
  /** Upper bound for any one wait for a redelivery (lease lapse, consumer death, delay). */
  redeliveryTimeoutMs: number;
  /** A new backend instance. With `peers`, every call is a separate client/process view. */
  open(options: HarnessOpenOptions): Promise<QueueBackend>;
  /** Write raw, undecodable bytes to the topic directly in the broker. Required when `encodes`. */
  injectRaw?(backend: QueueBackend, topic: string, bytes: Buffer): Promise<void>;
  /** Make the backend die without settling or leaving (default: abandon it unclosed until cleanup). */
  crash?(backend: QueueBackend): Promise<void>;
  /** Delete everything the namespace left in the broker. */
  cleanup(namespace: string): Promise<void>;
}

const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
let seq = 0;

export function queueConformance(harness: QueueHarness): void {
  const caps = harness.capabilities;
  const L = harness.leaseMs;
  const R = harness.redeliveryTimeoutMs;

  /** `test`, or a skip whose title says why the backend does not promise it. */
  function testIf(cap: Capability, title: string, fn: () => Promise<void>, timeout?: number): void {
    if (cap === true) test(title, fn, timeout);
    else test.skip(`${title} — not promised by ${harness.name}: ${cap}`, fn);
  }

  describe(`queue conformance: ${harness.name}`, () => {
    const opened: { ns: string; backends: QueueBackend[] }[] = [];
    let current: { ns: string; backends: QueueBackend[] } | undefined;

    function namespace(): string {
      current = { ns: `ct${runId}x${seq++}`, backends: [] };
      opened.push(current);
      return current.ns;
    }

    async function open(options: Partial<HarnessOpenOptions> & { namespace: string }): Promise<QueueBackend> {
      const backend = await harness.open(options);
      current?.backends.push(backend);
      return backend;
    }

    async function setup<T>(
      topicOptions: TopicOptions = {},
      extra: Partial<HarnessOpenOptions> = {},
    ): Promise<{ ns: string; backend: QueueBackend; q: LeaseQueue<T> }> {
      const ns = namespace();
      const backend = await open({ ...extra, namespace: ns });
      return { ns, backend, q: backend.topic<T>('jobs', topicOptions) };
    }

    afterEach(async () => {
      for (const { ns, backends } of opened.splice(0)) {
        for (const b of backends) await b.close().catch(() => {});
        await harness.cleanup(ns);
      }
    });

    // ── publish / consume / ack ────────────────────────────────────────────────

    test('publish → consume → ack carries payload, key, priority, headers and attempt', async () => {
      const { q } = await setup<{ n: number; s: string; nested: { list: number[] } }>();
      const before = Date.now();
      await q.publish([
        {
          payload: { n: 1, s: 'héllo ✓', nested: { list: [1, 2, 3] } },
          key: 'acct-1',
          headers: { trace: 't1' },
        },
      ]);
      const got = await collect(q, 1, R);
      expect(got).toHaveLength(1);
      const d = got[0]!;
      expect(d.payload).toEqual({ n: 1, s: 'héllo ✓', nested: { list: [1, 2, 3] } });
      expect(d.key).toBe('acct-1');
      expect(d.priority).toBe(0);
      expect(d.headers).toMatchObject({ trace: 't1' });
      expect(d.attempt).toBe(1);
      expect(d.topic).toBe('jobs');
      expect(typeof d.id).toBe('string');
      expect(d.publishedAt).toBeGreaterThanOrEqual(before - 5_000);
      expect(d.leaseDeadline).toBeGreaterThan(Date.now() - 1_000);
      await d.ack();
      expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
      await eventually(q, (s) => s.ready === 0 && s.inflight === 0 && s.delayed === 0, R);
      // Settling twice is refused: the lease is gone.
      await expect(d.ack()).rejects.toMatchObject({ code: 'MOCRA_ERR_LEASE_EXPIRED' });
    });

    test('an empty topic: waitMs 0 returns [] at once, waitMs > 0 returns [] after waiting', async () => {
      const { q } = await setup<number>();
      expect(await q.consume({ max: 5, waitMs: 0 })).toEqual([]);
      expect(await q.consume({ max: 5, waitMs: 150 })).toEqual([]);
    });

    test('bad input is refused with MOCRA_ERR_INVALID_ARGUMENT and nothing of the batch goes in', async () => {
      const { q } = await setup<number>();
      const refused = (p: Promise<unknown>) =>
        expect(p).rejects.toMatchObject({ code: 'MOCRA_ERR_INVALID_ARGUMENT' });
      await refused(q.publish([{ payload: 1 }, { payload: 2, priority: Number.NaN }]));
      await refused(q.publish([{ payload: 3, delayMs: -5 }]));
      await refused(q.publish([{ payload: 4, priority: Number.POSITIVE_INFINITY }]));
      await refused(q.consume({ max: 0, waitMs: 0 }));
      // A bad message refuses its whole batch: the good one before it was not published either.
      expect(await q.consume({ max: 5, waitMs: 0 })).toEqual([]);
    });

    test('a waiting consumer is woken by a publish', async () => {
      const { q } = await setup<number>();
      const pending = collect(q, 1, R);
      await sleep(50);
      await q.publish([{ payload: 42 }]);
      const [d] = await pending;
      expect(d?.payload).toBe(42);
      await d!.ack();
    });

    test('consume returns at most max and messages are not handed out twice', async () => {
      const { q } = await setup<number>();
      await q.publish(Array.from({ length: 30 }, (_, i) => ({ payload: i })));
      const seen = new Set<number>();
      const first = await collect(q, 10, R, 10);
      expect(first.length).toBeLessThanOrEqual(10);
      for (const d of first) seen.add(d.payload);
      const rest = await collect(q, 30 - first.length, R);
      for (const d of rest) {
        expect(seen.has(d.payload)).toBe(false);
        seen.add(d.payload);
      }
      expect(seen.size).toBe(30);
      await Promise.all([...first, ...rest].map((d) => d.ack()));
      await eventually(q, (s) => s.ready + s.inflight === 0, R);
    });

    test('higher priority lanes are consumed first (5 before 0 before -3)', async () => {
      const { q } = await setup<string>();
      await q.publish([
        { payload: 'low', priority: -3 },
        { payload: 'mid-1' },
        { payload: 'high', priority: 5 },
        { payload: 'mid-2' },
      ]);
      // Let every lane receive its message before the first consume looks at them.
      await eventually(q, (s) => s.ready + s.inflight >= 4, R);
      const got = await collect(q, 4, R);
      expect(got.map((d) => d.payload)).toEqual(['high', 'mid-1', 'mid-2', 'low']);
      expect(got.map((d) => d.priority)).toEqual([5, 0, 0, -3]);
      await Promise.all(got.map((d) => d.ack()));
    });

    testIf(
      caps.exactPriority,
      'exact priority order between priorities of one lane (9 before 2)',
      async () => {
        const { q } = await setup<string>();
        await q.publish([
          { payload: 'two', priority: 2 },
          { payload: 'nine', priority: 9 },
        ]);
        const got = await collect(q, 2, R);
        expect(got.map((d) => d.payload)).toEqual(['nine', 'two']);
      },
    );

    // ── nack, delays, leases ───────────────────────────────────────────────────

    test('nack without a delay redelivers at once with attempt + 1 and the same id', async () => {
      const { q } = await setup<string>();
      await q.publish([{ payload: 'x', key: 'k' }]);
      const [first] = await collect(q, 1, R);
      await first!.nack({ reason: 'try again' });
      const [second] = await collect(q, 1, R);
      expect(second).toMatchObject({ id: first!.id, payload: 'x', key: 'k', attempt: 2 });
      await second!.ack();
    });

    test('nack with a delay holds the message back for the delay, then redelivers it', async () => {
      const { q } = await setup<string>();
      await q.publish([{ payload: 'later' }]);
      const [first] = await collect(q, 1, R);
      const delay = 3 * L;
      const nackedAt = Date.now();
      await first!.nack({ delayMs: delay, reason: 'backoff' });
      expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
      const s = await q.stats();
      if (caps.exactStats === true && caps.nackDelayInStats === true) {
        expect(s).toMatchObject({ ready: 0, delayed: 1, inflight: 0 });
      } else {
        expect(s.ready + s.delayed + s.inflight).toBeGreaterThanOrEqual(1);
      }
      const [second] = await collect(q, 1, delay + R);
      // A clock check with generous slack: redelivery must not come before the delay.
      expect(Date.now() - nackedAt).toBeGreaterThanOrEqual(delay - 50);
      expect(second).toMatchObject({ id: first!.id, payload: 'later', attempt: 2 });
      await second!.ack();
    });

    test('publish with delayMs holds the message back, then delivers it as attempt 1', async () => {
      const { q } = await setup<string>();
      const delay = 3 * L;
      const at = Date.now();
      await q.publish([{ payload: 'scheduled', delayMs: delay }, { payload: 'now' }]);
      const [now] = await collect(q, 1, R);
      expect(now?.payload).toBe('now');
      await now!.ack();
      const [later] = await collect(q, 1, delay + R);
      expect(Date.now() - at).toBeGreaterThanOrEqual(delay - 50);
      expect(later).toMatchObject({ payload: 'scheduled', attempt: 1 });
      await later!.ack();
    });

    test('extendLease keeps a delivery past its original lease', async () => {
      const { ns, q } = await setup<string>({ leaseMs: L });
      await q.publish([{ payload: 'slow' }]);
      const [d] = await collect(q, 1, R);
      // Keep extending across three lease lengths; meanwhile nobody may get the message.
      const other =
        caps.peers === true && caps.peerJoinKeepsLeases === true
          ? (await open({ namespace: ns })).topic<string>('jobs', { leaseMs: L })
          : q;
      for (let i = 0; i < 3; i++) {
        await sleep(L / 2);
        await d!.extendLease(L * 2);
      }
      expect(await other.consume({ max: 1, waitMs: L / 2 })).toEqual([]);
      await d!.ack();
    });

    test('a consume with a leaseMs longer than the topic’s holds the message that long', async () => {
      const { ns, q } = await setup<string>({ leaseMs: L });
      await q.publish([{ payload: 'long' }]);
      const deadline = Date.now() + R;
      let d: Delivery<string> | undefined;
      while (!d && Date.now() < deadline) [d] = await q.consume({ max: 1, waitMs: 200, leaseMs: 5 * L });
      expect(d!.leaseDeadline).toBeGreaterThanOrEqual(Date.now() + 3 * L);
      const other =
        caps.peers === true && caps.peerJoinKeepsLeases === true
          ? (await open({ namespace: ns })).topic<string>('jobs', { leaseMs: L })
          : q;
      await sleep(2.5 * L);
      expect(await other.consume({ max: 1, waitMs: L })).toEqual([]);
      await d!.ack();
    });

    test('a lapsed lease is redelivered (same id, attempt 2) and the stale delivery can no longer settle', async () => {
      const { q } = await setup<string>({ leaseMs: L });
      await q.publish([{ payload: 'forgotten' }]);
      const [stale] = await collect(q, 1, R);
      const [fresh] = await collect(q, 1, L + R);
      expect(fresh).toMatchObject({ id: stale!.id, payload: 'forgotten', attempt: 2 });
      await expect(stale!.ack()).rejects.toMatchObject({ code: 'MOCRA_ERR_LEASE_EXPIRED' });
      await expect(stale!.nack()).rejects.toMatchObject({ code: 'MOCRA_ERR_LEASE_EXPIRED' });
      await fresh!.ack();
      await eventually(q, (s) => s.ready + s.inflight === 0, R);
    });

    testIf(caps.peers, 'a consumer that dies mid-work: its messages go to another consumer', async () => {
      const ns = namespace();
      const a = await open({ namespace: ns });
      const b = await open({ namespace: ns });
      const qa = a.topic<number>('jobs', { leaseMs: L });
      const qb = b.topic<number>('jobs', { leaseMs: L });
      // Make b a live member first, so a group-based backend has both consumers before a dies.
      expect(await qb.consume({ max: 1, waitMs: 50 })).toEqual([]);
      await qa.publish([{ payload: 7, key: 'only' }]);
      const held = await collect(qa, 1, R);
      if (held.length === 0) {
        // A group-based backend may have given the key's partition to b: then b is "a".
        const [d] = await collect(qb, 1, R);
        expect(d?.payload).toBe(7);
        return;
      }
      expect(held[0]!.payload).toBe(7);
      if (harness.crash) await harness.crash(a);
      const [again] = await collect(qb, 1, L + R);
      expect(again).toMatchObject({ id: held[0]!.id, payload: 7 });
      expect(again!.attempt).toBeGreaterThanOrEqual(caps.countsCrashedDeliveries === true ? 2 : 1);
      await again!.ack();
    });

    testIf(caps.peerJoinKeepsLeases, 'a consumer joining leaves the leases of others alone', async () => {
      const ns = namespace();
      const a = await open({ namespace: ns });
      const qa = a.topic<number>('jobs', { leaseMs: 4 * L });
      await qa.publish([1, 2, 3, 4].map((payload) => ({ payload, key: `k${payload}` })));
      const held = await collect(qa, 4, R);
      expect(held).toHaveLength(4);
      const qb = (await open({ namespace: ns })).topic<number>('jobs', { leaseMs: 4 * L });
      expect(await qb.consume({ max: 4, waitMs: L })).toEqual([]);
      await Promise.all(held.map((d) => d.ack()));
    });

    testIf(caps.peers, 'a consumer that closes without settling hands its leases over at once', async () => {
      const ns = namespace();
      const a = await open({ namespace: ns });
      const b = await open({ namespace: ns });
      // Leases far longer than the wait below: only an immediate hand-over can pass.
      const qa = a.topic<number>('jobs', { leaseMs: 60_000 });
      const qb = b.topic<number>('jobs', { leaseMs: 60_000 });
      expect(await qb.consume({ max: 1, waitMs: 50 })).toEqual([]);
      await qa.publish([{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
      const heldByA = await collect(qa, 3, R / 2);
      await a.close();
      const rest = await collect(qb, 3, R);
      expect(rest.map((d) => d.payload).sort()).toEqual([1, 2, 3]);
      for (const d of heldByA)
        await expect(d.ack()).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_CLOSED' });
      await Promise.all(rest.map((d) => d.ack()));
    });

    // ── dead letters ───────────────────────────────────────────────────────────

    test('maxDeliveries nacks move the message to the DLQ; replay starts its attempts over', async () => {
      const { q } = await setup<{ url: string }>({ maxDeliveries: 2 });
      const since = Date.now() - 1_000;
      await q.publish([{ payload: { url: 'https://a.example/' }, key: 'acct', headers: { stage: 'fetch' } }]);
      let messageId = '';
      for (let i = 1; i <= 2; i++) {
        const [d] = await collect(q, 1, R);
        expect(d!.attempt).toBe(i);
        messageId = d!.id;
        await d!.nack({ reason: `boom ${i}` });
      }
      expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
      await eventually(q, (s) => s.deadLettered === 1 && s.ready + s.inflight + s.delayed === 0, R);
      const letters = await q.deadLetters.list();
      expect(letters).toHaveLength(1);
      const letter = letters[0]!;
      expect(letter).toMatchObject({
        topic: 'jobs',
        messageId,
        payload: { url: 'https://a.example/' },
        key: 'acct',
        priority: 0,
        attempts: 2,
      });
      expect(letter.headers).toMatchObject({ stage: 'fetch' });
      expect(letter.reason).toContain('boom 2');
      expect(letter.deadLetteredAt).toBeGreaterThanOrEqual(since);
      expect(await q.deadLetters.get(letter.id)).toMatchObject({ id: letter.id, messageId });
      expect(await q.deadLetters.get('no-such-entry')).toBeUndefined();
      expect(await q.deadLetters.size()).toBe(1);

      expect(await q.deadLetters.replay()).toBe(1);
      expect(await q.deadLetters.size()).toBe(0);
      const [again] = await collect(q, 1, R);
      expect(again).toMatchObject({ payload: { url: 'https://a.example/' }, key: 'acct', attempt: 1 });
      await again!.ack();
    });

    test('a lease that lapses on the last allowed delivery dead-letters the message', async () => {
      const { q } = await setup<string>({ maxDeliveries: 1, leaseMs: L });
      await q.publish([{ payload: 'hangs' }]);
      const [d] = await collect(q, 1, R);
      expect(d!.attempt).toBe(1);
      // Nobody settles it. Consumers keep polling (bounded) until it shows up in the DLQ.
      const deadline = Date.now() + L + R;
      while ((await q.deadLetters.size()) === 0 && Date.now() < deadline) {
        expect(await q.consume({ max: 1, waitMs: Math.min(L, 200) })).toEqual([]);
      }
      const [letter] = await q.deadLetters.list();
      expect(letter).toMatchObject({ payload: 'hangs', attempts: 1 });
      expect(letter!.reason).toContain('lease');
      await expect(d!.ack()).rejects.toMatchObject({ code: 'MOCRA_ERR_LEASE_EXPIRED' });
    });

    test('deadLetter(reason) sends a delivery straight to the DLQ', async () => {
      const { q } = await setup<string>({ maxDeliveries: 10 });
      await q.publish([{ payload: 'not-a-product', priority: 3 }]);
      const [d] = await collect(q, 1, R);
      await d!.deadLetter('parse failed: not a product page');
      expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
      const [letter] = await q.deadLetters.list();
      expect(letter).toMatchObject({ payload: 'not-a-product', priority: 3, attempts: 1, messageId: d!.id });
      expect(letter!.reason).toBe('parse failed: not a product page');
    });

    test('DLQ list, replay and purge honour filters, limit and offset', async () => {
      const { q } = await setup<string>({ maxDeliveries: 1 });
      const reasons = ['a: timeout', 'b: parse', 'c: timeout', 'd: 404'];
      await q.publish(reasons.map((r) => ({ payload: r })));
      const got = await collect(q, 4, R);
      for (const d of got) await d.deadLetter(d.payload);
      await eventually(q, (s) => s.deadLettered === 4, R);
      const all = await q.deadLetters.list();
      expect(all.map((l) => l.reason).sort()).toEqual([...reasons].sort());
      expect((await q.deadLetters.list({ limit: 2 })).map((l) => l.id)).toEqual(
        all.slice(0, 2).map((l) => l.id),
      );
      expect((await q.deadLetters.list({ offset: 3 })).map((l) => l.id)).toEqual([all[3]!.id]);
      const timeouts = await q.deadLetters.list({ filter: { reasonIncludes: 'timeout' } });
      expect(timeouts.map((l) => l.payload).sort()).toEqual(['a: timeout', 'c: timeout']);
      expect(await q.deadLetters.list({ filter: { since: Date.now() + 60_000 } })).toEqual([]);

      const parse = all.find((l) => l.reason === 'b: parse')!;
      expect(await q.deadLetters.replay({ ids: [parse.id] })).toBe(1);
      const [replayed] = await collect(q, 1, R);
      expect(replayed).toMatchObject({ payload: 'b: parse', attempt: 1 });
      await replayed!.ack();

      expect(await q.deadLetters.purge({ reasonIncludes: 'timeout' })).toBe(2);
      expect((await q.deadLetters.list()).map((l) => l.reason)).toEqual(['d: 404']);
      expect(await q.deadLetters.purge()).toBe(1);
      expect(await q.deadLetters.size()).toBe(0);
      expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
    });

    testIf(caps.encodes, 'poison: undecodable bytes go to the DLQ, the consumer keeps going', async () => {
      const { backend, q } = await setup<string>({ maxDeliveries: 3 });
      const garbage = Buffer.from([0xff, 0x00, 0x13, 0x37, 0xc1, 0xde]);
      await harness.injectRaw!(backend, 'jobs', garbage);
      await q.publish([{ payload: 'good' }]);
      const got = await collect(q, 1, R);
      expect(got.map((d) => d.payload)).toEqual(['good']);
      await got[0]!.ack();
      // The poison message never reached a worker and does not come back.
      expect(await q.consume({ max: 5, waitMs: 100 })).toEqual([]);
      await eventually(q, (s) => s.deadLettered === 1 && s.ready + s.inflight === 0, R);
      const [letter] = await q.deadLetters.list();
      expect(letter!.payload).toBeUndefined();
      expect(Buffer.from(letter!.raw!, 'base64')).toEqual(garbage);
      expect(letter!.reason).toMatch(/decode/i);
    });

    // ── order, affinity ────────────────────────────────────────────────────────

    testIf(caps.orderedPerKey, 'one consumer sees each key in publish order', async () => {
      const { q } = await setup<{ key: string; n: number }>();
      const keys = ['acct-a', 'acct-b', 'acct-c'];
      const messages = [];
      for (let n = 0; n < 8; n++) for (const key of keys) messages.push({ payload: { key, n }, key });
      await q.publish(messages.slice(0, 12));
      await q.publish(messages.slice(12));
      const got = await collect(q, messages.length, R, 5);
      for (const d of got) await d.ack();
      for (const key of keys) {
        const order = got.filter((d) => d.key === key).map((d) => d.payload.n);
        expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      }
    });

    testIf(caps.keyAffinity, 'two consumers: every key is consumed by exactly one of them', async () => {
      const ns = namespace();
      const members = [
        await open({ namespace: ns, member: { index: 0, of: 2 } }),
        await open({ namespace: ns, member: { index: 1, of: 2 } }),
      ];
      const qs = members.map((m) => m.topic<{ key: string; n: number }>('jobs'));
      // Both consumers are live before anything is published (group backends rebalance on join).
      await Promise.all(qs.map((q) => q.consume({ max: 1, waitMs: 50 })));
      const keys = Array.from({ length: 12 }, (_, i) => `account-${i}`);
      await qs[0]!.publish(keys.flatMap((key) => [0, 1, 2].map((n) => ({ payload: { key, n }, key }))));
      const owner = new Map<string, number>();
      const total = keys.length * 3;
      let seen = 0;
      const deadline = Date.now() + R * 2;
      while (seen < total && Date.now() < deadline) {
        for (let i = 0; i < qs.length; i++) {
          for (const d of await qs[i]!.consume({ max: 10, waitMs: 50 })) {
            seen++;
            const prev = owner.get(d.key!);
            expect(prev === undefined || prev === i, `key ${d.key} went to both consumers`).toBe(true);
            owner.set(d.key!, i);
            await d.ack();
          }
        }
      }
      expect(seen).toBe(total);
      expect(new Set(owner.values()).size).toBe(2);
    });

    // ── codec, size ────────────────────────────────────────────────────────────

    testIf(caps.encodes, 'msgpack keeps bytes and dates; json round-trips plain data', async () => {
      const ns = namespace();
      const mp = (await open({ namespace: ns, codec: { format: 'msgpack' } })).topic<{
        body: Uint8Array;
        at: Date;
      }>('mp');
      const body = new Uint8Array([0, 1, 2, 250, 255]);
      const at = new Date('2024-05-06T07:08:09.010Z');
      await mp.publish([{ payload: { body, at } }]);
      const [m] = await collect(mp, 1, R);
      expect(new Uint8Array(m!.payload.body)).toEqual(body);
      expect(m!.payload.at).toBeInstanceOf(Date);
      expect(m!.payload.at.getTime()).toBe(at.getTime());
      await m!.ack();

      const json = (await open({ namespace: ns, codec: { format: 'json' } })).topic<unknown>('js');
      const doc = { a: [1, 'two', null, true], b: { c: 'ü' } };
      await json.publish([{ payload: doc }]);
      const [j] = await collect(json, 1, R);
      expect(j!.payload).toEqual(doc);
      await j!.ack();
    });

    testIf(caps.encodes, 'payloads above the compression threshold round-trip', async () => {
      const { q } = await setup<{ html: string }>({}, { codec: { compressThresholdBytes: 1024 } });
      const html = '<li class="product">Item</li>\n'.repeat(20_000); // ~600 KB, compresses well
      await q.publish([{ payload: { html } }, { payload: { html: 'tiny' } }]);
      const got = await collect(q, 2, R);
      expect(got.map((d) => d.payload.html.length).sort((a, b) => a - b)).toEqual([4, html.length]);
      expect(got.find((d) => d.payload.html.length > 4)!.payload.html).toBe(html);
      await Promise.all(got.map((d) => d.ack()));
    });

    testIf(caps.encodes, 'a payload over the size limit is refused with PayloadTooLargeError', async () => {
      const { q } = await setup<{ blob: string }>({}, { maxPayloadBytes: 4096 });
      const blob = randomBytes(8192).toString('base64'); // incompressible
      await expect(q.publish([{ payload: { blob: 'ok' } }, { payload: { blob } }])).rejects.toMatchObject({
        code: 'MOCRA_ERR_PAYLOAD_TOO_LARGE',
        topic: 'jobs',
        limit: 4096,
      });
      // The batch is refused whole: not even its small first message went out.
      expect(await q.consume({ max: 2, waitMs: 100 })).toEqual([]);
      await q.publish([{ payload: { blob: 'ok' } }]);
      const [d] = await collect(q, 1, R);
      expect(d!.payload.blob).toBe('ok');
      await d!.ack();
    });

    // ── backpressure, stats, close ─────────────────────────────────────────────

    test('publish waits while the topic is at capacity and goes on once there is room', async () => {
      const { q } = await setup<number>({ capacity: 4 });
      await q.publish([1, 2, 3, 4].map((payload) => ({ payload })));
      let done = false;
      const blocked = q.publish([{ payload: 5 }]).then(() => {
        done = true;
      });
      await sleep(300);
      expect(done).toBe(false);
      const got = await collect(q, 2, R, 2);
      await Promise.all(got.map((d) => d.ack()));
      await Promise.race([blocked, sleep(R)]);
      expect(done).toBe(true);
      const rest = await collect(q, 3, R);
      expect(rest.map((d) => d.payload).sort()).toEqual(
        [1, 2, 3, 4, 5].filter((n) => !got.some((d) => d.payload === n)),
      );
      await Promise.all(rest.map((d) => d.ack()));
    });

    test('stats count ready, inflight, delayed and dead-lettered messages', async () => {
      const { q } = await setup<number>({ maxDeliveries: 1 });
      await q.publish([1, 2, 3, 4].map((payload) => ({ payload })));
      await q.publish([{ payload: 5, delayMs: 60_000 }]);
      await eventually(q, (s) => s.ready === 4 && s.delayed === 1, R);
      const got = await collect(q, 2, R, 2);
      await got[0]!.deadLetter('bad');
      const s = await eventually(q, (st) => st.deadLettered === 1 && st.ready === 2, R);
      if (caps.exactStats === true) expect(s).toEqual({ ready: 2, inflight: 1, delayed: 1, deadLettered: 1 });
      await got[1]!.ack();
      await eventually(q, (st) => st.inflight === 0 && st.ready === 2, R);
    });

    test('close: waiting consumers return [], and publish, topic() and settling are refused', async () => {
      const { backend, q } = await setup<number>();
      await q.publish([{ payload: 1 }]);
      const [held] = await collect(q, 1, R);
      const waiting = q.consume({ max: 1, waitMs: 10_000 });
      await sleep(50);
      await backend.close();
      expect(await waiting).toEqual([]);
      await expect(q.publish([{ payload: 2 }])).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_CLOSED' });
      expect(() => backend.topic('other')).toThrow(
        expect.objectContaining({ code: 'MOCRA_ERR_QUEUE_CLOSED' }),
      );
      await expect(held!.ack()).rejects.toMatchObject({ code: 'MOCRA_ERR_QUEUE_CLOSED' });
      expect(await q.consume({ max: 1, waitMs: 0 })).toEqual([]);
      await backend.close(); // idempotent
    });

    test('an abort signal ends a waiting consume with what it has', async () => {
      const { q } = await setup<number>();
      const controller = new AbortController();
      const waiting = q.consume({ max: 1, waitMs: 10_000, signal: controller.signal });
      await sleep(50);
      controller.abort();
      expect(await waiting).toEqual([]);
    });

    test('200 messages in batches: every one delivered once while acked as it goes', async () => {
      const { q } = await setup<number>();
      for (let b = 0; b < 4; b++) {
        await q.publish(Array.from({ length: 50 }, (_, i) => ({ payload: b * 50 + i, key: `k${i % 7}` })));
      }
      const seen: number[] = [];
      const deadline = Date.now() + R * 3;
      while (seen.length < 200 && Date.now() < deadline) {
        const batch = await q.consume({ max: 32, waitMs: 200 });
        for (const d of batch) {
          seen.push(d.payload);
          await d.ack();
        }
      }
      expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i));
      await eventually(q, (s) => s.ready + s.inflight === 0, R);
    });
  });
}

// ── helpers ─────────────────────────────────────────────────────────────────────

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Consume until `n` deliveries arrived or `timeoutMs` passed (bounded; never acks). */
export async function collect<T>(
  q: LeaseQueue<T>,
  n: number,
  timeoutMs: number,
  perCall = n,
): Promise<Delivery<T>[]> {
  const out: Delivery<T>[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    const got = await q.consume({ max: Math.min(perCall, n - out.length), waitMs: Math.min(left, 500) });
    out.push(...got);
  }
  return out;
}

/** Poll stats until `ok` holds (bounded), then return the last stats; fails with them otherwise. */
export async function eventually<T>(
  q: LeaseQueue<T>,
  ok: (s: Awaited<ReturnType<LeaseQueue<T>['stats']>>) => boolean,
  timeoutMs: number,
): Promise<Awaited<ReturnType<LeaseQueue<T>['stats']>>> {
  const deadline = Date.now() + timeoutMs;
  let s = await q.stats();
  while (!ok(s) && Date.now() < deadline) {
    await sleep(25);
    s = await q.stats();
  }
  expect(ok(s), `stats never matched: ${JSON.stringify(s)}`).toBe(true);
  return s;
}
