// The item-store middleware on bad days: items of concurrent parses share one transaction
// (group commit); a parse with a bad item fails alone and writes nothing (a table-per-type store
// with a NOT NULL column), the others commit; a connection lost mid-crawl takes the retry path
// and every item still lands exactly once; a database without tables fails the start with a
// typed error that says to migrate.
import diagnostics_channel from 'node:diagnostics_channel';
import type { DownloadMiddleware, ErrorEvent } from '@mocra/core';
import { createItemStoreMiddleware, DB_CHANNEL_NAMES } from '@mocra/core/store';
import { createStore } from '@mocra/store';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import Database from 'better-sqlite3';
import { Mocra } from 'mocra';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import {
  openTestDatabase,
  PG_URL,
  pgQuery,
  type QuoteItem,
  quotesModule,
  startCuttableProxy,
  type TestDatabase,
  uniqueSchema,
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

/** Holds every response until `n` have arrived, so their parses run at the same time. */
function barrier(n: number): DownloadMiddleware {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return {
    name: 'barrier',
    async afterResponse() {
      if (++arrived >= n) open();
      await opened;
    },
  };
}

const perPage = 10;

describe('item-store middleware', () => {
  test('items of concurrent parses are committed in one transaction (PostgreSQL)', async () => {
    db = await openTestDatabase('postgres');
    const written: { items: number; parses: number }[] = [];
    const onWritten = (m: unknown) => written.push(m as { items: number; parses: number });
    diagnostics_channel.subscribe(DB_CHANNEL_NAMES.itemsWritten, onWritten);
    const middleware = createItemStoreMiddleware({
      store: db.store,
      batchSize: 4 * perPage,
      flushMs: 60_000,
    });
    try {
      const summary = await Mocra.builder()
        .module(quotesModule(), () => {})
        .moduleConfig({ modules: { 'quotes-api': { base_url: site.url, pages: [1, 2, 3, 4] } } })
        .middleware(barrier(4))
        .middleware(middleware)
        .handleSignals(false)
        .run();
      expect(summary.items).toBe(4 * perPage);
    } finally {
      diagnostics_channel.unsubscribe(DB_CHANNEL_NAMES.itemsWritten, onWritten);
    }
    expect(written.map(({ items, parses }) => ({ items, parses }))).toEqual([
      { items: 4 * perPage, parses: 4 },
    ]);
    expect(middleware.stats()).toEqual({ batches: 1, items: 4 * perPage, failedParses: 0, splits: 0 });
    expect(await db.store.createItemStore({ mode: 'json' }).count('quotes-api')).toBe(4 * perPage);
  });

  test('a parse with a bad item or a constraint violation fails alone and writes nothing; the parses it shared a batch with commit (SQLite)', async () => {
    db = await openTestDatabase('sqlite');
    const middleware = createItemStoreMiddleware({
      store: db.store,
      itemStore: {
        mode: 'table-per-type',
        types: {
          quote: {
            columns: { qid: { type: 'integer', unique: true }, text: { type: 'text', nullable: false } },
          },
        },
      },
      type: 'quote',
      data: (item) => {
        const q = item as QuoteItem;
        return { qid: q.id, text: q.text };
      },
      batchSize: 3 * perPage,
      flushMs: 60_000,
    });
    const errors: ErrorEvent[] = [];
    const module = quotesModule('quotes-api', {});
    const poisoned = {
      ...module,
      nodes: module.nodes!.map((node) => ({
        ...node,
        parse: async (res: Parameters<typeof node.parse>[0], cx: Parameters<typeof node.parse>[1]) => {
          await node.parse(res, cx);
          // Page 2 carries an item without its required text (refused before the database is
          // touched); page 3 two items with the same unique qid (refused by the database's index).
          if (res.url.endsWith('page=2')) (cx.items[0] as QuoteItem).text = null as unknown as string;
          if (res.url.endsWith('page=3')) (cx.items[1] as QuoteItem).id = (cx.items[0] as QuoteItem).id;
        },
      })),
    };
    const summary = await Mocra.builder()
      .module(poisoned, () => {})
      .moduleConfig({ modules: { 'quotes-api': { base_url: site.url, pages: [1, 2, 3] } } })
      .middleware(barrier(3))
      .middleware(middleware)
      .onError((e) => void errors.push(e))
      .handleSignals(false)
      .run();
    expect(summary.deadLettered).toBe(2);
    const causes = errors.map((e) => [e.code, e.retryable, (e.error.cause as { code?: string }).code]);
    expect(causes.sort()).toEqual([
      ['MOCRA_ERR_MIDDLEWARE_FAILED', false, 'MOCRA_ERR_STORE_CONSTRAINT'],
      ['MOCRA_ERR_MIDDLEWARE_FAILED', false, 'MOCRA_ERR_STORE_INVALID_INPUT'],
    ]);
    expect(middleware.stats()).toMatchObject({ splits: 1, failedParses: 2, items: perPage });
    // Exactly page 1 is stored: nothing of pages 2 and 3, not even their good items.
    const page1 = (
      (await (await fetch(`${site.url}/api/quotes?page=1`)).json()) as { quotes: { id: number }[] }
    ).quotes;
    const sqlite = new Database(db.url.slice('sqlite:'.length), { readonly: true });
    try {
      const rows = sqlite.prepare('SELECT qid FROM item_quote ORDER BY qid').all() as { qid: number }[];
      expect(rows.map((r) => r.qid)).toEqual(page1.map((q) => q.id).sort((x, y) => x - y));
    } finally {
      sqlite.close();
    }
  });

  test('a connection lost mid-crawl takes the retry path; every item lands exactly once (PostgreSQL)', async () => {
    db = await openTestDatabase('postgres');
    const proxy = await startCuttableProxy();
    // The store does not retry by itself here: the engine's failure policy must.
    const proxied = await db.open({ url: proxy.url, retry: { maxRetries: 0 } });
    const errors: ErrorEvent[] = [];
    const module = quotesModule();
    let cut = false;
    const cutting = {
      ...module,
      nodes: module.nodes!.map((node) => ({
        ...node,
        parse: async (res: Parameters<typeof node.parse>[0], cx: Parameters<typeof node.parse>[1]) => {
          if (res.url.endsWith('page=3') && !cut) {
            cut = true;
            proxy.cut(1); // every open connection dies, and the next one is refused
          }
          await node.parse(res, cx);
        },
      })),
    };
    try {
      const summary = await Mocra.builder()
        .module(cutting, () => {})
        .moduleConfig({ modules: { 'quotes-api': { base_url: site.url, pages: [1, 2, 3, 4, 5, 6] } } })
        .middleware(createItemStoreMiddleware({ store: proxied, flushMs: 5 }))
        .retry({ baseDelayMs: 10, maxDelayMs: 50 })
        .stages({ parse: 1 })
        .onError((e) => void errors.push(e))
        .handleSignals(false)
        .run();
      expect(summary.deadLettered).toBe(0);
      expect(summary.retries).toBeGreaterThanOrEqual(1);
      expect(summary.items).toBe(6 * perPage);
    } finally {
      await proxy.close();
    }
    expect(proxy.cuts).toBe(1);
    expect(errors.length).toBeGreaterThanOrEqual(1);
    for (const e of errors) {
      expect(e.code).toBe('MOCRA_ERR_MIDDLEWARE_FAILED');
      expect(e.retryable).toBe(true);
      expect((e.error.cause as { code?: string }).code).toBe('MOCRA_ERR_STORE_CONNECTION');
    }
    expect(await db.store.createItemStore({ mode: 'json' }).count('quotes-api')).toBe(6 * perPage);
  });

  test('a database without tables fails the start with MOCRA_ERR_STORE_MISSING_TABLE; migrate: true fixes it', async () => {
    const schema = uniqueSchema();
    const store = await createStore({ url: PG_URL, schema, poolSize: 2 });
    try {
      const build = (migrate: boolean) =>
        Mocra.builder()
          .module(quotesModule(), () => {})
          .moduleConfig({ modules: { 'quotes-api': { base_url: site.url, pages: [1] } } })
          .store({ store, migrate })
          .handleSignals(false);
      await expect(build(false).run()).rejects.toMatchObject({
        code: 'MOCRA_ERR_STORE_MISSING_TABLE',
        message: expect.stringMatching(/migrate/),
      });
      const summary = await build(true).run();
      expect(summary.items).toBe(perPage);
      expect(await store.listTaskResults()).toMatchObject([{ status: 'succeeded', module: 'quotes-api' }]);
    } finally {
      await store.close();
      await pgQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
  });
});
