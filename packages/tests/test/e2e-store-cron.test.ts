// Cron contexts from the database (enabled module × account × platform) on a manual clock, with
// two engines sharing one coordination backend and one PostgreSQL schema: every scheduled time
// of every context fires exactly once between them, always on the node that owns the context's
// key; a context's config can change or switch off its schedule; a change in the database is
// picked up by the refresh (the change token moved), and each firing leaves a task_result row.
import { createLocalCoordination, LocalCoordinationStore, rendezvousOwner } from '@mocra/core';
import type { StoreCronRefresh } from '@mocra/core/store';
import { cron, defineModule, type Engine, ManualClock, Mocra } from 'mocra';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { openTestDatabase, type TestDatabase } from './e2e-store-harness.js';

const T0 = Date.UTC(2030, 0, 1, 0, 0, 0);

let db: TestDatabase | undefined;
afterEach(async () => {
  await db?.cleanup();
  db = undefined;
});

interface Fired {
  node: string;
  account: string;
  scheduledAt: number;
  runId: string;
}

describe('database cron contexts across two engines', () => {
  test('each context fires once per scheduled time, on its owner; refreshes follow the database', async () => {
    db = await openTestDatabase('postgres');
    await db.store.seed({
      accounts: [{ name: 'a1' }, { name: 'a2' }, { name: 'a3' }, { name: 'a4' }],
      platforms: [{ name: 'p' }],
      modules: [{ name: 'ticker' }],
      account_platforms: ['a1', 'a2', 'a3', 'a4'].map((account) => ({ account, platform: 'p' })),
      module_accounts: [
        { module: 'ticker', account: 'a1' },
        { module: 'ticker', account: 'a2' },
        { module: 'ticker', account: 'a3', config: { cron: '*/20 * * * * *' } },
        { module: 'ticker', account: 'a4', config: { cron: false } },
      ],
      module_platforms: [{ module: 'ticker', platform: 'p' }],
    });

    const clock = new ManualClock(T0);
    const shared = new LocalCoordinationStore();
    const fired: Fired[] = [];
    const nodes = ['node-a', 'node-b'];
    const engines: Engine[] = [];
    for (const nodeId of nodes) {
      const coordination = createLocalCoordination({ nodeId, store: shared });
      await coordination.join({});
      const ticker = defineModule({
        name: 'ticker',
        cron: cron('*/10 * * * * *', { timezone: 'UTC' }),
        nodes: [
          {
            id: 'n',
            generate(ctx) {
              const at = (ctx.params.cron as { scheduledAt: number }).scheduledAt;
              fired.push({ node: nodeId, account: ctx.account, scheduledAt: at - T0, runId: ctx.runId });
              return [];
            },
            parse() {},
          },
        ],
      });
      engines.push(
        Mocra.builder()
          .module(ticker, () => {})
          .cron({ clock })
          .engineOptions({ coordination })
          // The refresh is driven by hand here (refreshCron) so the test decides when it happens.
          .store({ store: await db.open(), cron: { refreshMs: 3_600_000 } })
          .handleSignals(false)
          .build(),
      );
    }
    const runs = engines.map((e) => e.run());
    await vi.waitFor(
      () => {
        for (const e of engines)
          expect(
            e.cron
              ?.jobs()
              .map((j) => j.id)
              .sort(),
          ).toEqual(['db:a1/p/ticker', 'db:a2/p/ticker', 'db:a3/p/ticker']);
      },
      { timeout: 10_000, interval: 10 },
    );

    await clock.advance(30_000);
    await vi.waitFor(() => expect(fired).toHaveLength(3 + 3 + 1), { timeout: 10_000, interval: 10 });

    // The database changes: a2 is disabled. Until the refresh nothing changes; after it, a2 is gone.
    await db.store.upsert('account', { name: 'a2', enabled: false });
    const refreshed: (StoreCronRefresh | undefined)[] = [];
    for (const e of engines) refreshed.push(await e.db!.refreshCron());
    expect(refreshed.map((r) => [r?.changed, r?.removed])).toEqual([
      [true, ['db:a2/p/ticker']],
      [true, ['db:a2/p/ticker']],
    ]);
    // A second refresh with nothing changed reads only the token.
    expect((await engines[0]!.db!.refreshCron())?.changed).toBe(false);
    await clock.advance(10_000);
    await vi.waitFor(() => expect(fired).toHaveLength(7 + 2), { timeout: 10_000, interval: 10 });

    for (const e of engines) await e.stop();
    await Promise.all(runs);

    const times = (account: string) =>
      fired
        .filter((f) => f.account === account)
        .map((f) => f.scheduledAt)
        .sort((x, y) => x - y);
    expect(times('a1')).toEqual([10_000, 20_000, 30_000, 40_000]);
    expect(times('a2')).toEqual([10_000, 20_000, 30_000]);
    expect(times('a3')).toEqual([20_000, 40_000]);
    expect(times('a4')).toEqual([]);
    // Each context fired only on the node that owns its key.
    for (const account of ['a1', 'a2', 'a3']) {
      const owner = rendezvousOwner(`${account}/p/ticker`, nodes);
      expect(new Set(fired.filter((f) => f.account === account).map((f) => f.node))).toEqual(
        new Set([owner]),
      );
    }
    // One task_result row per firing, finished, on the node that ran it.
    const rows = await db.store.listTaskResults({ limit: 100 });
    expect(rows).toHaveLength(fired.length);
    const byRun = new Map(fired.map((f) => [f.runId, f]));
    for (const row of rows) {
      const f = byRun.get(row.runId)!;
      expect(row).toMatchObject({
        status: 'succeeded',
        account: f.account,
        platform: 'p',
        module: 'ticker',
        nodeId: f.node,
      });
    }
  });
});
