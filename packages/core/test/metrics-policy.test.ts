// Failure-policy outcomes reach /metrics: every failure of a run against the real fixture site
// gets a resolver decision (mocra_policy_decisions_total) and an error-threshold verdict
// (mocra_error_task_threshold_decision_total).
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createEngine, createErrorThresholds, type Module, Request, startEngineApi } from '../src/index.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(async () => {
  await site.close();
});

function sample(text: string, family: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${family}{`) && l.includes(labels));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

test('policy decisions and threshold verdicts are counted per failure', async () => {
  const parsed: number[] = [];
  const module: Module<never> = {
    name: 'broken',
    nodes: [
      {
        id: 'page',
        generate: () => [new Request(`${site.url}/status/500`)],
        parse(res) {
          parsed.push(res.status);
        },
      },
    ],
  };
  const engine = createEngine({
    concurrency: 1,
    namespace: `metrics-policy-${process.pid}`,
    // Two quick retries; the third 500 is no longer a failure: it reaches parse with its status.
    recovery: {
      overrides: [{ kind: 'http-5xx', max_retries: 2, backoff: 'fixed', backoff_ms: 1, jitter: 0 }],
    },
  });
  engine.register(module, { write() {} });
  const api = await startEngineApi(engine, { port: 0 });
  try {
    const summary = await engine.run();
    expect(summary.reason).toBe('idle');
    const text = await (await fetch(`${api.url}/metrics`)).text();
    expect(parsed).toEqual([500]);
    expect(sample(text, 'mocra_policy_decisions_total', 'action="retry"')).toBe(2);
    expect(sample(text, 'mocra_policy_decisions_total', 'action="dead_letter"')).toBe(0);
    expect(sample(text, 'mocra_error_task_threshold_decision_total', 'decision="continue"')).toBe(2);
  } finally {
    await api.close();
  }
});

test('a cool-down verdict is counted as decision="retry_after" (the Rust project\'s label value)', async () => {
  const engine = createEngine({ namespace: `metrics-retry-after-${process.pid}` });
  const api = await startEngineApi(engine, { port: 0 });
  try {
    // Half of maxTaskErrors reached: the task is failing often, the next failure cools down.
    const thresholds = createErrorThresholds({ maxTaskErrors: 4, maxModuleErrors: 0, maxRequestErrors: 0 });
    const decisions = [1, 2, 3].map((i) => thresholds.record({ task: 'run-1', request: `r${i}` }).decision);
    expect(decisions).toEqual(['continue', 'retry-later', 'retry-later']);
    const text = await (await fetch(`${api.url}/metrics`)).text();
    expect(sample(text, 'mocra_error_task_threshold_decision_total', 'decision="retry_after"')).toBe(2);
    expect(text).not.toContain('decision="retry_later"');
  } finally {
    await api.close();
  }
});
