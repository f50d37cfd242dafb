// The memory + LevelDB backend against the queue conformance suite, in four set-ups: spill
// only with the default head, spill only with a head of 2 (almost everything goes through
// disk), spill only with a head of 8 of which only 2 stay objects once the lane overflows (the
// rest encoded in memory), and persistent with a head of 2 (every message written, read back from disk).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { createLevelQueueBackend, LevelQueueBackend } from '../src/queue/leveldb-queue.js';
import { type QueueCapabilities, queueConformance } from './queue-conformance.js';

const root = await mkdtemp(path.join(tmpdir(), 'mocra-queue-leveldb-test-'));
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

let opened = 0;
const capabilities: QueueCapabilities = {
  encodes: true,
  peers: 'one process: LevelDB locks its directory to the process that opened it',
  exactPriority: true,
  orderedPerKey: true,
  keyAffinity: 'one process: every key is consumed by it',
  peerJoinKeepsLeases: 'one process: there are no other consumers',
  countsCrashedDeliveries: true,
  exactStats: true,
  nackDelayInStats: true,
};

for (const setup of [
  { name: 'leveldb (spill, default head)', persist: false, headSize: undefined },
  { name: 'leveldb (spill, head 2)', persist: false, headSize: 2 },
  // Once a lane overflows, head entries past the first 2 keep their payloads encoded until taken.
  { name: 'leveldb (spill, head 8, hot 2)', persist: false, headSize: 8, hotSize: 2 },
  { name: 'leveldb (persistent, head 2)', persist: true, headSize: 2 },
] as const) {
  queueConformance({
    name: setup.name,
    capabilities,
    leaseMs: 200,
    redeliveryTimeoutMs: 2_000,
    async open({ namespace, topicDefaults, codec, maxPayloadBytes }) {
      return createLevelQueueBackend({
        namespace,
        // Two backends of one namespace are two "processes": each needs its own directory.
        ...(setup.persist ? { dir: path.join(root, namespace, String(opened++)) } : {}),
        ...(setup.headSize === undefined ? {} : { headSize: setup.headSize }),
        ...('hotSize' in setup ? { hotSize: setup.hotSize } : {}),
        ...(topicDefaults ? { topicDefaults } : {}),
        ...(codec ? { codec } : {}),
        ...(maxPayloadBytes ? { maxPayloadBytes } : {}),
      });
    },
    async injectRaw(backend, topic, bytes) {
      await (backend as LevelQueueBackend).injectRaw(topic, bytes);
    },
    async cleanup(namespace) {
      await rm(path.join(root, namespace), { recursive: true, force: true });
    },
  });
}

test('spill only: once a lane overflows, its head past hotSize goes to disk too; order and values hold', async () => {
  const backend = await createLevelQueueBackend({ namespace: `hot-${Date.now()}`, headSize: 6, hotSize: 3 });
  type Payload = { n: number; tags?: string[]; self?: unknown };
  const topic = backend.topic<Payload>('t');
  const drain = async (count: number) => {
    const got: Payload[] = [];
    for (let i = 0; i < 50 && got.length < count; i++) {
      for (const d of await topic.consume({ max: 4, waitMs: 100 })) {
        got.push(d.payload);
        await d.ack();
      }
    }
    return got;
  };
  // A lane that fits its head: every payload by reference, nothing encoded.
  const small: Payload[] = Array.from({ length: 6 }, (_, n) => ({ n }));
  await topic.publish(small.map((payload) => ({ payload })));
  const gotSmall = await drain(6);
  for (let n = 0; n < 6; n++) expect(gotSmall[n]).toBe(small[n]);

  // Ten messages: 0–5 fill the head, 6–9 overflow to disk, and the head past 3 follows them:
  // 0–2 come back as the objects published, 3–9 as decoded copies, in order.
  const sent: Payload[] = Array.from({ length: 10 }, (_, n) => ({ n, tags: [`t${n}`] }));
  await topic.publish(sent.slice(0, 6).map((payload) => ({ payload })));
  await topic.publish(sent.slice(6).map((payload) => ({ payload })));
  const got = await drain(10);
  expect(got.map((p) => p.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  for (const n of [0, 1, 2]) expect(got[n]).toBe(sent[n]);
  for (const n of [3, 4, 5, 6, 7, 8, 9]) {
    expect(got[n]).not.toBe(sent[n]);
    expect(got[n]).toEqual(sent[n]);
  }

  // A payload in the head that cannot be encoded stays in memory, and so does every message
  // before it (the head holds exactly the oldest messages): 0–4 by reference, 5–9 from disk.
  const again: Payload[] = Array.from({ length: 10 }, (_, n) => ({ n }));
  const cyclic: Payload = { n: 4 };
  cyclic.self = cyclic;
  again[4] = cyclic;
  await topic.publish(again.slice(0, 6).map((payload) => ({ payload })));
  await topic.publish(again.slice(6).map((payload) => ({ payload })));
  const gotAgain = await drain(10);
  expect(gotAgain.map((p) => p.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  for (const n of [0, 1, 2, 3, 4]) expect(gotAgain[n]).toBe(again[n]);
  for (const n of [5, 6, 7, 8, 9]) {
    expect(gotAgain[n]).not.toBe(again[n]);
    expect(gotAgain[n]).toEqual(again[n]);
  }
  expect(await topic.stats()).toMatchObject({ ready: 0, inflight: 0, deadLettered: 0 });
  await backend.close();
});

test('hotSize must be a positive integer', () => {
  expect(() => new LevelQueueBackend({ hotSize: 0 })).toThrow(/hotSize must be an integer/);
});
