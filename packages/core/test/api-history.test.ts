// The server-side throughput history behind /observability/history: rates between readings,
// a bounded ring, and a restart of the totals (a new engine) that starts the rates over.
import { expect, test } from 'vitest';
import { ThroughputHistory, type ThroughputTotals } from '../src/api/throughput-history.js';

test('keeps the rates between readings, oldest first, for keepMs; totals that went down start over', async () => {
  let now = 10_000;
  let totals: ThroughputTotals = { pages: 0, items: 0, errors: 0, bytes: 0 };
  const history = new ThroughputHistory({
    read: async () => totals,
    intervalMs: 1000,
    keepMs: 3000,
    now: () => now,
  });
  await history.sample();
  expect(history.samples()).toEqual([]);
  for (let i = 1; i <= 5; i++) {
    now += 1000;
    totals = { pages: i * 4, items: i * 2, errors: i, bytes: i * 1024 };
    await history.sample();
  }
  expect(history.samples()).toEqual([
    { t: 13_000, pages: 4, items: 2, errors: 1, bytes: 1024 },
    { t: 14_000, pages: 4, items: 2, errors: 1, bytes: 1024 },
    { t: 15_000, pages: 4, items: 2, errors: 1, bytes: 1024 },
  ]);
  now += 2000;
  totals = { pages: 1, items: 0, errors: 0, bytes: 0 };
  await history.sample();
  now += 500;
  totals = { pages: 3, items: 0, errors: 0, bytes: 0 };
  await history.sample();
  expect(history.samples().at(-1)).toEqual({ t: 17_500, pages: 4, items: 0, errors: 0, bytes: 0 });
  expect(history.samples()).toHaveLength(3);
});

test('a reading that fails leaves a gap; start() and close() own their timer', async () => {
  let fail = true;
  const history = new ThroughputHistory({
    read: async () => {
      if (fail) throw new Error('backend down');
      return { pages: 1, items: 1, errors: 0, bytes: 1 };
    },
    intervalMs: 10,
  });
  await history.sample();
  fail = false;
  history.start();
  await new Promise((resolve) => setTimeout(resolve, 60));
  history.close();
  const kept = history.samples().length;
  expect(kept).toBeGreaterThan(0);
  await new Promise((resolve) => setTimeout(resolve, 40));
  expect(history.samples()).toHaveLength(kept);
});
