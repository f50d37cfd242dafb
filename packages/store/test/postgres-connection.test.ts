// Postgres-only failure modes: a backend killed under a running batch, an idle pooled connection
// killed, concurrent migrators, and a server that is not there.
import { randomBytes } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterEach, describe, expect, test } from 'vitest';
import {
  ConnectionError,
  createStore,
  STORE_CHANNELS,
  type StoreError,
  type StoreRepository,
} from '../src/index.js';
import { PG_URL, pgRaw, uniqueSchema } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function openStore(maxRetries: number, poolSize = 3) {
  const schema = uniqueSchema();
  const applicationName = `mocra-test-${randomBytes(4).toString('hex')}`;
  const store = await createStore({
    url: PG_URL,
    schema,
    applicationName,
    poolSize,
    retry: { maxRetries, baseDelayMs: 20 },
    migrate: true,
  });
  cleanups.push(async () => {
    await store.close();
    await pgRaw('public', `DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });
  return { store, schema, applicationName };
}

async function client(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  cleanups.push(() => c.end());
  return c;
}

/** Waits (bounded) until a backend of `app` is blocked on a lock, then terminates it. */
async function terminateWhenBlocked(admin: pg.Client, app: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const res = await admin.query(
      "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
      [app],
    );
    if (res.rowCount && res.rowCount > 0) return;
    await sleep(25);
  }
  throw new Error(`no backend of ${app} ever blocked on a lock`);
}

/** Holds a row lock on `items.z` from another connection, so the store's batch blocks on it. */
async function lockRow(schema: string): Promise<pg.Client> {
  const locker = await client();
  await locker.query('BEGIN');
  await locker.query(`SELECT * FROM "${schema}".items WHERE item_id = 'z' FOR UPDATE`);
  return locker;
}

async function seededItems(store: StoreRepository) {
  const items = store.createItemStore({ mode: 'json', maxRowsPerStatement: 1 });
  await items.init();
  await items.writeBatch([{ itemId: 'z', type: 't', data: { v: 0 } }]);
  return items;
}

// 'a0' sorts before 'z': the first statement inserts it, the second blocks on z's lock.
const BATCH = [
  { itemId: 'z', type: 't', data: { v: 1 } },
  { itemId: 'a0', type: 't', data: { v: 1 } },
];

describe('postgres: lost connections', () => {
  test('a backend terminated mid-batch is a typed retryable error, and nothing of the batch is written', async () => {
    const { store, schema, applicationName } = await openStore(0);
    const items = await seededItems(store);
    const admin = await client();
    const locker = await lockRow(schema);

    const pending = items.writeBatch(BATCH).then(
      () => undefined,
      (err: unknown) => err as StoreError,
    );
    await terminateWhenBlocked(admin, applicationName);
    const err = await pending;
    await locker.query('ROLLBACK');

    expect(err).toBeInstanceOf(ConnectionError);
    expect(err?.code).toBe('MOCRA_ERR_STORE_CONNECTION');
    expect(err?.retryable).toBe(true);
    expect(await items.count()).toBe(1);
    expect(await items.get('t', 'a0')).toBeNull();
    expect((await items.get('t', 'z'))?.data).toEqual({ v: 0 });
    // The pool replaced the dead connection: the store keeps working.
    expect(await items.writeBatch(BATCH)).toEqual({ written: 2 });
    expect(await items.count()).toBe(2);
  });

  test('with retries on, the same loss is retried and the batch lands exactly once', async () => {
    const { store, schema, applicationName } = await openStore(2);
    const items = await seededItems(store);
    const admin = await client();
    const locker = await lockRow(schema);
    const retries: unknown[] = [];
    const onRetry = (msg: unknown) => retries.push(msg);
    diagnostics.subscribe(STORE_CHANNELS.retry, onRetry);
    try {
      const pending = items.writeBatch(BATCH);
      await terminateWhenBlocked(admin, applicationName);
      await locker.query('ROLLBACK');
      expect(await pending).toEqual({ written: 2 });
    } finally {
      diagnostics.unsubscribe(STORE_CHANNELS.retry, onRetry);
    }
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ operation: 'items.writeBatch', attempt: 1 });
    expect(await items.count()).toBe(2);
    expect(await items.get('t', 'z')).toMatchObject({ data: { v: 1 }, writeCount: 2 });
    expect(await items.get('t', 'a0')).toMatchObject({ data: { v: 1 }, writeCount: 1 });
  });

  test('an idle pooled connection that dies does not crash the process; the next call reconnects', async () => {
    const { store, applicationName } = await openStore(0, 1);
    await store.upsert('account', { name: 'acme' });
    const seen: unknown[] = [];
    const onError = (msg: unknown) => seen.push(msg);
    diagnostics.subscribe(STORE_CHANNELS.connectionError, onError);
    try {
      const admin = await client();
      await admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1',
        [applicationName],
      );
      for (let i = 0; i < 100 && seen.length === 0; i++) await sleep(20);
    } finally {
      diagnostics.unsubscribe(STORE_CHANNELS.connectionError, onError);
    }
    expect(seen.length).toBeGreaterThan(0);
    expect((await store.get('account', 'acme'))?.name).toBe('acme');
  });

  test('a server that is not there is a typed retryable connection error', async () => {
    const store = await createStore({
      url: 'postgres://postgres@127.0.0.1:1/test',
      retry: { maxRetries: 0 },
      connectTimeoutMs: 2000,
    });
    cleanups.push(() => store.close());
    const err = await store.list('account').then(
      () => undefined,
      (e: unknown) => e as StoreError,
    );
    expect(err?.code).toBe('MOCRA_ERR_STORE_CONNECTION');
    expect(err?.retryable).toBe(true);
  });
});

describe('postgres: concurrent migrators', () => {
  test('two nodes migrating one schema at once apply each migration exactly once', async () => {
    const schema = uniqueSchema();
    const a = await createStore({ url: PG_URL, schema, poolSize: 2 });
    const b = await createStore({ url: PG_URL, schema, poolSize: 2 });
    cleanups.push(async () => {
      await a.close();
      await b.close();
      await pgRaw('public', `DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    });
    const [ra, rb] = await Promise.all([a.migrate(), b.migrate()]);
    expect([...ra.applied, ...rb.applied].map((m) => m.version)).toEqual([1]);
    expect((await a.migrationStatus()).pending).toBe(0);
  });
});
