// The reference backend against the queue conformance suite.
import { createMemoryQueueBackend } from '../src/queue/memory-queue.js';
import { queueConformance } from './queue-conformance.js';

queueConformance({
  name: 'memory',
  capabilities: {
    encodes: 'payloads are passed by reference inside one process; there are no bytes to encode or corrupt',
    peers: 'one process: there is no second process to fail over to (a lapsed lease covers a stuck worker)',
    exactPriority: true,
    orderedPerKey: true,
    keyAffinity: 'one process: every key is consumed by it',
    peerJoinKeepsLeases: 'one process: there are no other consumers',
    countsCrashedDeliveries: true,
    exactStats: true,
    nackDelayInStats: true,
  },
  leaseMs: 200,
  redeliveryTimeoutMs: 2_000,
  async open({ namespace, topicDefaults }) {
    return createMemoryQueueBackend({ namespace, ...(topicDefaults ? { topicDefaults } : {}) });
  },
  async cleanup() {},
});
