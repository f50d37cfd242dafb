// The memory + LevelDB backend against the queue conformance suite, in three set-ups: spill
// only with the default head, spill only with a head of 2 (almost everything goes through
// disk), and persistent with a head of 2 (every message written, read back from disk).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { createLevelQueueBackend, type LevelQueueBackend } from '../src/queue/leveldb-queue.js';
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
