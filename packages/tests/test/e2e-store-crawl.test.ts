// A database-defined account × platform × module set drives a crawl of the fixture site, on the
// real local PostgreSQL and on SQLite: the catalog is seeded with `seed`, auto-seed starts one
// run per enabled account × platform, the module's pages come from its layered config, the
// item store and a store middleware that fails once after the items were written are selected
// by relation rows (their order by the rows' weights), and the items land in the database
// exactly once despite the forced redelivery. task_result and log rows show the runs.
import type { ItemMeta, StoreMiddleware } from '@mocra/core';
import { createItemStoreMiddleware } from '@mocra/core/store';
import type { StoreRepository } from '@mocra/store';
import { type ApiQuotesPage, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { Mocra } from 'mocra';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import {
  type Backend,
  openTestDatabase,
  type QuoteItem,
  quotesModule,
  type TestDatabase,
} from './e2e-store-harness.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(async () => {
  await site?.close();
});

let db: TestDatabase | undefined;
afterEach(async () => {
  await db?.cleanup();
  db = undefined;
});

async function quotesOn(pages: number[]): Promise<number[]> {
  const ids: number[] = [];
  for (const p of pages) {
    const body = (await (await fetch(`${site.url}/api/quotes?page=${p}`)).json()) as ApiQuotesPage;
    ids.push(...body.quotes.map((q) => q.id));
  }
  return ids;
}

function seedCatalog(store: StoreRepository) {
  return store.seed({
    accounts: [{ name: 'acme', priority: 5 }, { name: 'globex' }, { name: 'initech' }],
    platforms: [{ name: 'fixture', config: { base_url: site.url } }],
    modules: [{ name: 'quotes-api', config: { path: '/api/quotes' } }],
    data_middleware: [
      // Registered in code with the opposite weights: the rows' weights decide the order.
      { name: 'item-store', weight: 1 },
      { name: 'fail-once', weight: 20 },
    ],
    account_platforms: [
      { account: 'acme', platform: 'fixture' },
      { account: 'globex', platform: 'fixture' },
      { account: 'initech', platform: 'fixture', enabled: false },
    ],
    module_accounts: [
      { module: 'quotes-api', account: 'acme', config: { pages: [1, 2] } },
      { module: 'quotes-api', account: 'globex', config: { pages: [3] } },
      { module: 'quotes-api', account: 'initech', config: { pages: [4] } },
    ],
    module_platforms: [{ module: 'quotes-api', platform: 'fixture' }],
    module_data_middleware: [
      { module: 'quotes-api', middleware: 'item-store' },
      { module: 'quotes-api', middleware: 'fail-once' },
    ],
  });
}

describe.each<Backend>(['postgres', 'sqlite'])('a database-driven crawl on %s', (backend) => {
  test('items land exactly once despite a forced redelivery; task_result and log rows show the runs', async () => {
    db = await openTestDatabase(backend);
    const report = await seedCatalog(db.store);
    expect(report.accounts).toBe(3);

    const items = db.store.createItemStore({ mode: 'json' });
    const sunk: { item: QuoteItem; meta: ItemMeta; durable: boolean }[] = [];
    const failed: string[] = [];
    const failOnce: StoreMiddleware = {
      name: 'fail-once',
      weight: -10,
      store() {},
      afterStore(batch) {
        if (failed.length > 0) return;
        failed.push(...batch.items.map((i) => i.meta.itemId));
        throw new Error('forced failure after the items were written');
      },
    };
    const summary = await Mocra.builder()
      .module(quotesModule(), {
        // The sink runs after the store chain: by then the item must be committed.
        async write(item, meta) {
          sunk.push({ item, meta, durable: (await items.get('quotes-api', meta.itemId)) !== null });
        },
      })
      .middleware(createItemStoreMiddleware({ store: db.store, weight: 10 }), { global: false })
      .middleware(failOnce, { global: false })
      .store({ store: db.store, logs: { level: 'info', flushMs: 10 } })
      .retry({ baseDelayMs: 10, maxDelayMs: 50 })
      .handleSignals(false)
      .run();

    const acmeIds = await quotesOn([1, 2]);
    const globexIds = await quotesOn([3]);
    const expected = acmeIds.length + globexIds.length;
    expect(summary.reason).toBe('idle');
    expect(summary.errors).toBe(1);
    expect(summary.deadLettered).toBe(0);

    // Every item once in the database; the redelivered parse's items were written twice, as updates.
    expect(await items.count('quotes-api')).toBe(expected);
    expect(failed.length).toBeGreaterThan(0);
    for (const itemId of failed) expect((await items.get('quotes-api', itemId))?.writeCount).toBe(2);
    const once = sunk.filter((s) => !failed.includes(s.meta.itemId));
    for (const s of once.slice(0, 5))
      expect((await items.get('quotes-api', s.meta.itemId))?.writeCount).toBe(1);
    // The sink saw each item once, each already durable; the disabled account × platform never ran.
    expect(sunk).toHaveLength(expected);
    expect(new Set(sunk.map((s) => s.meta.itemId)).size).toBe(expected);
    expect(sunk.every((s) => s.durable)).toBe(true);
    expect(
      sunk
        .filter((s) => s.item.account === 'acme')
        .map((s) => s.item.id)
        .sort((a, b) => a - b),
    ).toEqual([...acmeIds].sort((a, b) => a - b));
    expect(sunk.filter((s) => s.item.account === 'globex').map((s) => s.item.id)).toEqual(globexIds);
    expect(sunk.some((s) => s.item.account === 'initech')).toBe(false);

    // One task_result row per account × platform run, finished with its counts.
    const runs = await db.store.listTaskResults();
    expect(runs).toHaveLength(2);
    const byAccount = new Map(runs.map((r) => [r.account, r]));
    const acme = byAccount.get('acme')!;
    const globex = byAccount.get('globex')!;
    for (const run of [acme, globex]) {
      expect(run).toMatchObject({
        status: 'succeeded',
        platform: 'fixture',
        module: 'quotes-api',
        attempt: 1,
      });
      expect(run.endTime).toBeInstanceOf(Date);
      expect(run.runId).toBe(`${summary.runId}/${run.account}/fixture`);
    }
    expect(acme.counts).toMatchObject({ requests: 2, items: acmeIds.length });
    expect(globex.counts).toMatchObject({ requests: 1, items: globexIds.length });
    expect(acme.counts.errors + globex.counts.errors).toBe(1);

    // Log rows: the retried failure (warn) and each run's start and end (info).
    const logs = await db.store.listLogs({ limit: 50 });
    const warn = logs.filter((l) => l.level === 'warn');
    expect(warn).toHaveLength(1);
    expect(warn[0]).toMatchObject({ status: 'retry', module: 'quotes-api' });
    expect(warn[0]!.message).toMatch(
      /^MOCRA_ERR_MIDDLEWARE_FAILED: store middleware 'fail-once' failed in afterStore/,
    );
    expect(warn[0]!.traceback).toMatch(/MiddlewareFailedError/);
    expect(logs.filter((l) => l.message === 'run started')).toHaveLength(2);
    expect(logs.filter((l) => l.message === 'run finished')).toHaveLength(2);
  });
});
