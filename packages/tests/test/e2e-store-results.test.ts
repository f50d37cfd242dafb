// task_result heartbeats and the zombie sweep (on its interval, and leader-gated across two
// engines), log rows that are batched and bounded (a full buffer drops rows instead of holding
// the crawl), and the whole integration switched on from a config file's `[db]` table.
import diagnostics_channel from 'node:diagnostics_channel';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalCoordination, LocalCoordinationStore } from '@mocra/core';
import { DB_CHANNEL_NAMES } from '@mocra/core/store';
import { createStore } from '@mocra/store';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineModule, type Engine, Mocra, Request } from 'mocra';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { openTestDatabase, quotesModule, type TestDatabase } from './e2e-store-harness.js';

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

/** A module whose generate waits until `release()`: its run stays running meanwhile. */
function heldModule(name: string) {
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let started = false;
  const module = defineModule({
    name,
    nodes: [
      {
        id: 'n',
        async generate() {
          started = true;
          await held;
          return [new Request(`${site.url}/echo?held=${name}`)];
        },
        parse() {},
      },
    ],
  });
  return { module, release: () => release(), started: () => started };
}

describe('task results and the zombie sweep (PostgreSQL)', () => {
  test('a run that stopped reporting is failed by the sweep; a live one keeps its heartbeat; one node sweeps per interval', async () => {
    db = await openTestDatabase('postgres');
    // A run left behind by a node that died ten minutes ago.
    const past = await db.open({ clock: () => new Date(Date.now() - 600_000) });
    const dead = await past.startTaskResult({
      runId: 'dead-run',
      account: 'x',
      platform: 'y',
      module: 'gone',
    });

    const shared = new LocalCoordinationStore();
    const holds = [heldModule('held-a'), heldModule('held-b')];
    const engines: Engine[] = [];
    for (const [i, nodeId] of ['node-a', 'node-b'].entries()) {
      engines.push(
        Mocra.builder()
          .module(holds[i]!.module, () => {})
          .engineOptions({ coordination: createLocalCoordination({ nodeId, store: shared }) })
          .store({
            store: await db.open(),
            taskResults: { staleAfterMs: 60_000, heartbeatMs: 30_000, sweepEveryMs: false },
          })
          .handleSignals(false)
          .build(),
      );
    }
    const runs = engines.map((e) => e.run());
    await vi.waitFor(() => expect(holds.every((h) => h.started())).toBe(true), {
      timeout: 10_000,
      interval: 10,
    });
    await vi.waitFor(
      async () => expect(await db!.store.listTaskResults({ status: 'running' })).toHaveLength(3),
      {
        timeout: 10_000,
        interval: 20,
      },
    );
    for (const e of engines) await e.db!.heartbeat();

    // Both engines sweep at once: the lock lets one of them do it; the other finds it taken.
    const swept = await Promise.all(engines.map((e) => e.db!.sweepZombies()));
    expect(swept.sort()).toEqual([0, 1]);
    expect(await db.store.getTaskResult(dead.id)).toMatchObject({
      status: 'failed',
      errorCode: 'MOCRA_ERR_STORE_ZOMBIE_RUN',
    });
    // The live runs kept their rows.
    expect((await db.store.listTaskResults({ status: 'running' })).map((r) => r.module).sort()).toEqual([
      'held-a',
      'held-b',
    ]);

    for (const h of holds) h.release();
    await Promise.all(runs);
    const finished = await db.store.listTaskResults({ status: 'succeeded' });
    expect(finished.map((r) => [r.module, r.counts.requests]).sort()).toEqual([
      ['held-a', 1],
      ['held-b', 1],
    ]);
  });

  test('the sweep runs on its interval', async () => {
    db = await openTestDatabase('postgres');
    const past = await db.open({ clock: () => new Date(Date.now() - 600_000) });
    const dead = await past.startTaskResult({ runId: 'dead-run', account: 'x', platform: 'y' });
    const hold = heldModule('held');
    const engine = Mocra.builder()
      .module(hold.module, () => {})
      .store({
        store: db.store,
        taskResults: { staleAfterMs: 60_000, heartbeatMs: 30_000, sweepEveryMs: 20 },
      })
      .handleSignals(false)
      .build();
    const run = engine.run();
    await vi.waitFor(async () => expect((await db!.store.getTaskResult(dead.id))?.status).toBe('failed'), {
      timeout: 10_000,
      interval: 20,
    });
    hold.release();
    expect((await run).reason).toBe('idle');
    expect((await db.store.listTaskResults({ status: 'succeeded' })).map((r) => r.module)).toEqual(['held']);
  });
});

describe('log rows (SQLite)', () => {
  test('failures are written in batches at warn and above; a full buffer drops rows, counted, without holding the crawl', async () => {
    db = await openTestDatabase('sqlite');
    const drops: { count: number; reason: string }[] = [];
    const onDrop = (m: unknown) => drops.push(m as { count: number; reason: string });
    diagnostics_channel.subscribe(DB_CHANNEL_NAMES.logDropped, onDrop);
    try {
      const engine = Mocra.builder()
        .module(
          defineModule({
            name: 'bad-urls',
            nodes: [
              {
                id: 'n',
                generate: () => [1, 2, 3, 4, 5].map((n) => new Request(`ftp://nowhere/${n}`)),
                parse() {},
              },
            ],
          }),
          () => {},
        )
        .store({ store: db.store, logs: { maxBuffered: 2, flushMs: 60_000, batchSize: 100 } })
        .handleSignals(false)
        .build();
      const summary = await engine.run();
      expect(summary.errors).toBe(5);
      expect(engine.db!.logStats()).toEqual({ written: 2, dropped: 3, buffered: 0 });
    } finally {
      diagnostics_channel.unsubscribe(DB_CHANNEL_NAMES.logDropped, onDrop);
    }
    expect(drops).toEqual([
      { count: 1, reason: 'buffer-full' },
      { count: 1, reason: 'buffer-full' },
      { count: 1, reason: 'buffer-full' },
    ]);
    const rows = await db.store.listLogs();
    expect(rows).toHaveLength(2); // level warn: the runs' info rows are not written
    for (const row of rows) {
      expect(row).toMatchObject({
        level: 'error',
        status: 'dead-letter',
        module: 'bad-urls',
        taskId: 'default-default',
      });
      expect(row.message).toMatch(/^MOCRA_ERR_INVALID_URL: /);
    }
  });
});

describe('[db] in a config file', () => {
  test('opens and migrates the database, writes items, task results and logs, and closes it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mocra-e2e-db-toml-'));
    try {
      const file = join(dir, 'mocra.toml');
      const url = `sqlite:${join(dir, 'crawl.db')}`;
      await writeFile(
        file,
        [
          '[db]',
          `url = "${url}"`,
          'migrate = true',
          'items = true',
          'items_table = "quotes"',
          'log_level = "info"',
          'log_flush_ms = 10',
          '',
          '[modules.quotes-api]',
          `base_url = "${site.url}"`,
          'pages = [1, 2]',
        ].join('\n'),
      );
      const summary = await Mocra.builder()
        .module(quotesModule(), () => {})
        .fromToml(file, { watch: false })
        .handleSignals(false)
        .run();
      expect(summary.errors).toBe(0);
      const store = await createStore({ url });
      try {
        const items = store.createItemStore({ mode: 'json', table: 'quotes' });
        expect(await items.count('quotes-api')).toBe(summary.items);
        expect(summary.items).toBeGreaterThan(0);
        expect(await store.listTaskResults()).toMatchObject([
          {
            status: 'succeeded',
            account: 'default',
            platform: 'default',
            module: 'quotes-api',
            counts: { requests: 2 },
          },
        ]);
        expect((await store.listLogs()).map((l) => l.message).sort()).toEqual([
          'run finished',
          'run started',
        ]);
      } finally {
        await store.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
