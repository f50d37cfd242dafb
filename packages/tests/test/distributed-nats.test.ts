// One crawl across three worker processes on NATS JetStream (queue) with the NATS KV dedup set,
// coordinated through Redis (membership, seeding, completion, host budget), one of them
// SIGKILLed mid-crawl. See distributed-harness.ts for the scenario.
import { afterAll, expect, test } from 'vitest';
import {
  assertCluster,
  type ClusterOutcome,
  cleanup,
  NATS_URL,
  REDIS_URL,
  runCluster,
} from './distributed-harness.js';

let outcome: ClusterOutcome | undefined;
afterAll(async () => {
  await outcome?.site.close();
  if (outcome) await cleanup(outcome.namespace);
});

test('nats: 3 workers, one SIGKILLed, crawl the catalog as one cluster within the host budget', {
  timeout: 180_000,
}, async () => {
  const scenario = {
    env: { MOCRA_QUEUE: NATS_URL, MOCRA_COORDINATION: REDIS_URL },
    hostMax: 4,
    hostGapMs: 8,
  };
  outcome = await runCluster(scenario);
  const figures = assertCluster(outcome, scenario);
  console.log(`distributed e2e (nats): ${JSON.stringify(figures)}`);
  expect(figures.items).toBe(1000);
});
