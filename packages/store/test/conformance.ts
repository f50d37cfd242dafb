// One conformance suite for every StoreRepository backend: each backend's test file calls
// `storeConformance(name, factory)` with a factory that opens a fresh, empty database.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import {
  type JsonObject,
  MIGRATIONS,
  migrationChecksum,
  type StoreError,
  type StoreOptions,
  type StoreRepository,
} from '../src/index.js';

export interface StoreHarness {
  /** A store on a fresh, unmigrated database. */
  store: StoreRepository;
  /** Runs SQL on a separate connection to the same database (tables resolve to the store's schema). */
  raw(sql: string): Promise<void>;
  /** Drops the database (schema or file) and closes everything. */
  cleanup(): Promise<void>;
}

/** Opens a fresh database; `options` are passed on to createStore (url and schema are the factory's). */
export type StoreFactory = (options?: Partial<Omit<StoreOptions, 'url'>>) => Promise<StoreHarness>;

const FIXTURES = path.join(import.meta.dirname, 'fixtures');

/** Settles a promise and returns the typed error it rejected with (fails if it resolved). */
async function failure(promise: Promise<unknown>): Promise<StoreError> {
  try {
    await promise;
  } catch (err) {
    return err as StoreError;
  }
  throw new Error('expected the call to fail, but it resolved');
}

/** A clock tests move by hand. */
function manualClock(start = Date.parse('2030-01-01T00:00:00.000Z')) {
  let now = start;
  return {
    now: () => new Date(now),
    advance(ms: number) {
      now += ms;
    },
  };
}

/**
 * Ten layers, highest precedence first. Key `k<r>` is set by the layer of rank r and by every
 * lower layer, each to its own name: the value read back must be the rank-r layer's name, so each
 * layer is shown to beat every layer below it.
 */
const LAYERS = [
  'module',
  'modulePlatform',
  'moduleAccount',
  'moduleDataMiddleware',
  'moduleDownloadMiddleware',
  'accountPlatform',
  'platform',
  'account',
  'downloadMiddleware',
  'dataMiddleware',
] as const;

export function layerConfig(layer: (typeof LAYERS)[number]): JsonObject {
  const rank = LAYERS.indexOf(layer);
  const out: JsonObject = {};
  for (let r = 0; r <= rank; r++) out[`k${r}`] = layer;
  return out;
}

export function storeConformance(name: string, factory: StoreFactory): void {
  describe(`StoreRepository conformance: ${name}`, () => {
    const harnesses: StoreHarness[] = [];
    afterEach(async () => {
      await Promise.all(harnesses.splice(0).map((h) => h.cleanup()));
    });
    async function open(options?: Partial<Omit<StoreOptions, 'url'>>): Promise<StoreHarness> {
      const h = await factory(options);
      harnesses.push(h);
      return h;
    }
    async function migrated(options?: Partial<Omit<StoreOptions, 'url'>>): Promise<StoreHarness> {
      const h = await open(options);
      await h.store.migrate();
      return h;
    }

    // ── migrations ─────────────────────────────────────────────────────────────────────────────

    describe('migrations', () => {
      test('a fresh database reports every migration pending, then migrate applies them all', async () => {
        const { store } = await open();
        const before = await store.migrationStatus();
        expect(before.ok).toBe(true);
        expect(before.applied).toBe(0);
        expect(before.pending).toBe(MIGRATIONS.length);
        expect(before.migrations.map((m) => m.state)).toEqual(MIGRATIONS.map(() => 'pending'));

        const result = await store.migrate();
        expect(result.applied.map((m) => m.version)).toEqual(MIGRATIONS.map((m) => m.version));
        const after = await store.migrationStatus();
        expect(after).toMatchObject({
          ok: true,
          applied: MIGRATIONS.length,
          pending: 0,
          backend: store.backend,
        });
        for (const [i, m] of after.migrations.entries()) {
          expect(m.state).toBe('applied');
          expect(m.checksum).toBe(migrationChecksum(MIGRATIONS[i]!, store.backend));
          expect(m.appliedChecksum).toBe(m.checksum);
          expect(m.appliedAt).toBeInstanceOf(Date);
        }
      });

      test('re-running migrate is a no-op', async () => {
        const { store } = await migrated();
        await store.upsert('account', { name: 'kept' });
        const again = await store.migrate();
        expect(again.applied).toEqual([]);
        expect(again.status.pending).toBe(0);
        expect((await store.get('account', 'kept'))?.name).toBe('kept');
      });

      test('refuses to migrate when an applied migration’s checksum changed', async () => {
        const h = await migrated();
        await h.raw("UPDATE mocra_migrations SET checksum = 'tampered' WHERE version = 1");
        const status = await h.store.migrationStatus();
        expect(status.ok).toBe(false);
        expect(status.migrations[0]).toMatchObject({ state: 'changed', appliedChecksum: 'tampered' });
        const err = await failure(h.store.migrate());
        expect(err.code).toBe('MOCRA_ERR_STORE_MIGRATION_CHECKSUM');
        expect(err.message).toContain('migration 1');
      });

      test('reports a migration recorded by a newer version as unknown', async () => {
        const h = await migrated();
        await h.raw(
          "INSERT INTO mocra_migrations (version, name, checksum, applied_at) VALUES (999, 'future', 'abc', CURRENT_TIMESTAMP)",
        );
        const status = await h.store.migrationStatus();
        expect(status.migrations.at(-1)).toMatchObject({ version: 999, state: 'unknown', checksum: null });
        expect(status.ok).toBe(true);
      });

      test('using an unmigrated database is a typed missing-table error', async () => {
        const { store } = await open();
        const err = await failure(store.list('account'));
        expect(err.code).toBe('MOCRA_ERR_STORE_MISSING_TABLE');
        expect(err.retryable).toBe(false);
      });
    });

    // ── catalog ────────────────────────────────────────────────────────────────────────────────

    describe('catalog', () => {
      test('entities round-trip with defaults, update by name and delete', async () => {
        const { store } = await migrated();
        const created = await store.upsert('account', { name: 'acme' });
        expect(created).toMatchObject({ name: 'acme', enabled: true, priority: 0, config: {}, modules: [] });
        expect(created.id).toBeGreaterThan(0);
        expect(created.createdAt).toBeInstanceOf(Date);

        const updated = await store.upsert('account', {
          name: 'acme',
          enabled: false,
          priority: 7,
          modules: ['quotes'],
          config: { nested: { a: [1, 'two', null, true] } },
        });
        expect(updated).toMatchObject({
          id: created.id,
          enabled: false,
          priority: 7,
          modules: ['quotes'],
          config: { nested: { a: [1, 'two', null, true] } },
        });

        const platform = await store.upsert('platform', {
          name: 'shop',
          baseUrl: 'https://shop.test',
          description: 'a shop',
        });
        expect(platform).toMatchObject({
          baseUrl: 'https://shop.test',
          description: 'a shop',
          enabled: true,
        });
        const mod = await store.upsert('module', { name: 'quotes', version: 3 });
        expect(mod).toMatchObject({ version: 3, priority: 0 });
        const mw = await store.upsert('download_middleware', { name: 'ua', weight: 4 });
        expect(mw).toMatchObject({ weight: 4, enabled: true });
        await store.upsert('data_middleware', { name: 'clean' });

        await store.upsert('account', { name: 'beta' });
        expect((await store.list('account')).map((a) => a.name)).toEqual(['acme', 'beta']);
        expect(await store.get('module', 'nope')).toBeNull();
        expect(await store.remove('account', 'beta')).toBe(true);
        expect(await store.remove('account', 'beta')).toBe(false);
        expect((await store.list('account')).map((a) => a.name)).toEqual(['acme']);
      });

      test('links round-trip, update in place, cascade on delete, and name missing rows', async () => {
        const { store } = await migrated();
        await store.upsert('account', { name: 'acme' });
        await store.upsert('platform', { name: 'shop' });
        await store.upsert('module', { name: 'quotes' });
        await store.upsert('download_middleware', { name: 'ua' });

        const link = await store.link('account_platform', {
          account: 'acme',
          platform: 'shop',
          config: { region: 'eu' },
        });
        expect(link).toMatchObject({
          account: 'acme',
          platform: 'shop',
          enabled: true,
          priority: 0,
          config: { region: 'eu' },
        });
        const again = await store.link('account_platform', {
          account: 'acme',
          platform: 'shop',
          priority: 3,
        });
        expect(again).toMatchObject({ priority: 3, config: {} });
        expect(await store.listLinks('account_platform')).toHaveLength(1);

        await store.link('module_download_middleware', {
          module: 'quotes',
          middleware: 'ua',
          enabled: false,
        });
        expect(
          await store.getLink('module_download_middleware', { module: 'quotes', middleware: 'ua' }),
        ).toMatchObject({
          module: 'quotes',
          middleware: 'ua',
          enabled: false,
        });

        const missing = await failure(store.link('module_account', { module: 'quotes', account: 'ghost' }));
        expect(missing.code).toBe('MOCRA_ERR_STORE_NOT_FOUND');
        expect(missing.message).toContain("account 'ghost'");

        expect(await store.unlink('account_platform', { account: 'acme', platform: 'shop' })).toBe(true);
        expect(await store.getLink('account_platform', { account: 'acme', platform: 'shop' })).toBeNull();

        await store.remove('module', 'quotes');
        expect(await store.listLinks('module_download_middleware')).toEqual([]);
      });

      test('bad entity input is rejected with the key named, and nothing is written', async () => {
        const { store } = await migrated();
        const badConfig = await failure(
          store.upsert('account', { name: 'x', config: [1] as unknown as JsonObject }),
        );
        expect(badConfig.code).toBe('MOCRA_ERR_STORE_INVALID_INPUT');
        expect(badConfig.message).toContain('config');
        const badPriority = await failure(store.upsert('module', { name: 'm', priority: 1.5 }));
        expect(badPriority.message).toContain('priority');
        const badName = await failure(store.upsert('platform', { name: '' }));
        expect(badName.message).toContain('name');
        const badKind = await failure(
          store.upsert('nope' as 'account', { name: 'x' }).catch((e) => Promise.reject(e)),
        );
        expect(badKind.code).toBe('MOCRA_ERR_STORE_INVALID_INPUT');
        const nan = await failure(store.upsert('account', { name: 'x', config: { n: Number.NaN } }));
        expect(nan.message).toContain('config.n');
        expect(await store.list('account')).toEqual([]);
      });

      test('the change token moves on every catalog change, also by hand in SQL, and not on a no-op', async () => {
        const h = await migrated();
        const { store } = h;
        const t0 = await store.changeToken();
        await store.upsert('account', { name: 'acme', config: { a: 1 } });
        const t1 = await store.changeToken();
        expect(t1).not.toBe(t0);
        const before = await store.get('account', 'acme');
        await store.upsert('account', { name: 'acme', config: { a: 1 } });
        expect(await store.changeToken()).toBe(t1);
        expect((await store.get('account', 'acme'))?.updatedAt).toEqual(before?.updatedAt);

        await store.upsert('platform', { name: 'shop' });
        await store.link('account_platform', { account: 'acme', platform: 'shop' });
        const t2 = await store.changeToken();
        expect(t2).not.toBe(t1);
        await h.raw("UPDATE account SET priority = 9 WHERE name = 'acme'");
        const t3 = await store.changeToken();
        expect(t3).not.toBe(t2);
        expect((await store.get('account', 'acme'))?.priority).toBe(9);
        await store.unlink('account_platform', { account: 'acme', platform: 'shop' });
        expect(await store.changeToken()).not.toBe(t3);
      });
    });

    // ── task contexts ──────────────────────────────────────────────────────────────────────────

    /** acme × shop with modules m1 (priority 5) and m2, two download and one data middleware on m1. */
    async function catalog(store: StoreRepository): Promise<void> {
      await store.seed({
        accounts: [{ name: 'acme', config: layerConfig('account') }],
        platforms: [{ name: 'shop', config: layerConfig('platform') }],
        modules: [
          { name: 'm1', priority: 5, config: layerConfig('module') },
          { name: 'm2', config: { only: 'm2' } },
        ],
        download_middleware: [
          { name: 'dl-a', weight: 1, config: layerConfig('downloadMiddleware') },
          { name: 'dl-b', weight: 9, config: { b: 1 } },
          { name: 'dl-off', enabled: false },
        ],
        data_middleware: [{ name: 'data-a', config: layerConfig('dataMiddleware') }],
        account_platforms: [{ account: 'acme', platform: 'shop', config: layerConfig('accountPlatform') }],
        module_accounts: [
          { module: 'm1', account: 'acme', config: layerConfig('moduleAccount') },
          { module: 'm2', account: 'acme' },
        ],
        module_platforms: [
          { module: 'm1', platform: 'shop', config: layerConfig('modulePlatform') },
          { module: 'm2', platform: 'shop' },
        ],
        module_download_middleware: [
          { module: 'm1', middleware: 'dl-a', priority: 5, config: layerConfig('moduleDownloadMiddleware') },
          { module: 'm1', middleware: 'dl-b', priority: 1 },
          { module: 'm1', middleware: 'dl-off', priority: 9 },
        ],
        module_data_middleware: [
          { module: 'm1', middleware: 'data-a', config: layerConfig('moduleDataMiddleware') },
        ],
      });
    }

    describe('task contexts', () => {
      test('loads the account, platform, relation and linked modules with layered config and middleware', async () => {
        const { store } = await migrated();
        await catalog(store);
        const ctx = await store.loadTaskContext({ account: 'acme', platform: 'shop' });
        expect(ctx.account.name).toBe('acme');
        expect(ctx.platform.name).toBe('shop');
        expect(ctx.accountPlatform).toMatchObject({ account: 'acme', platform: 'shop', enabled: true });
        expect(ctx.modules.map((m) => m.module.name)).toEqual(['m1', 'm2']);
        expect(ctx.skipped).toEqual([]);
        expect(ctx.token).toBe(await store.changeToken());

        const m1 = ctx.modules[0]!;
        // dl-off is disabled; dl-a has the higher relation priority.
        expect(m1.downloadMiddleware.map((b) => [b.name, b.priority, b.weight])).toEqual([
          ['dl-a', 5, 1],
          ['dl-b', 1, 9],
        ]);
        expect(m1.dataMiddleware.map((b) => b.name)).toEqual(['data-a']);
        // Every layer beats every layer below it, read through the database.
        LAYERS.forEach((layer, rank) => {
          expect(m1.config.get(`k${rank}`), `k${rank}`).toBe(layer);
          expect(m1.config.source(`k${rank}`)?.layer).toBe(layer);
        });
        expect(m1.config.middlewareConfig('download', 'dl-b')).toEqual({ b: 1 });
        expect(ctx.modules[1]!.config.getString('only')).toBe('m2');
        expect(ctx.modules[1]!.config.getString('k7')).toBe('account');
        expect(ctx.modules[1]!.config.getString('k6')).toBe('platform');
        expect(ctx.modules[1]!.config.has('k8')).toBe(false);
      });

      test('a listed subset runs only those modules and says why the others were skipped', async () => {
        const { store } = await migrated();
        await catalog(store);
        await store.upsert('module', { name: 'm3' });
        await store.link('module_account', { module: 'm3', account: 'acme' });
        await store.upsert('module', { name: 'm4' });
        await store.link('module_account', { module: 'm4', account: 'acme' });
        await store.link('module_platform', { module: 'm4', platform: 'shop', enabled: false });
        await store.upsert('module', { name: 'm5', enabled: false });

        const ctx = await store.loadTaskContext({
          account: 'acme',
          platform: 'shop',
          modules: ['m2', 'm3', 'm4', 'm5', 'ghost'],
        });
        expect(ctx.modules.map((m) => m.module.name)).toEqual(['m2']);
        expect(ctx.skipped).toEqual(
          expect.arrayContaining([
            { module: 'm3', reason: 'not_linked_to_platform' },
            { module: 'm4', reason: 'platform_link_disabled' },
            { module: 'm5', reason: 'disabled' },
            { module: 'ghost', reason: 'not_found' },
          ]),
        );
        expect(ctx.skipped).toHaveLength(4);
        // Without a list, the unlinked / disabled ones are simply not there.
        const all = await store.loadTaskContext({ account: 'acme', platform: 'shop' });
        expect(all.modules.map((m) => m.module.name)).toEqual(['m1', 'm2']);
      });

      test('an account × platform that cannot run is a typed error with the reason', async () => {
        const { store } = await migrated();
        await catalog(store);
        const reason = async (account: string, platform: string) => {
          const err = (await failure(store.loadTaskContext({ account, platform }))) as StoreError & {
            reason?: string;
          };
          expect(err.code).toBe('MOCRA_ERR_STORE_CONTEXT_UNAVAILABLE');
          return err.reason;
        };
        expect(await reason('ghost', 'shop')).toBe('account_not_found');
        expect(await reason('acme', 'ghost')).toBe('platform_not_found');
        await store.upsert('platform', { name: 'other' });
        expect(await reason('acme', 'other')).toBe('account_platform_not_linked');
        await store.link('account_platform', { account: 'acme', platform: 'shop', enabled: false });
        expect(await reason('acme', 'shop')).toBe('account_platform_disabled');
        await store.upsert('platform', { name: 'shop', enabled: false });
        expect(await reason('acme', 'shop')).toBe('platform_disabled');
        await store.upsert('account', { name: 'acme', enabled: false });
        expect(await reason('acme', 'shop')).toBe('account_disabled');
      });

      test('cron contexts list every all-enabled combination; a disabled row at any level removes it', async () => {
        const { store } = await migrated();
        await catalog(store);
        await store.upsert('account', { name: 'beta' });
        await store.link('account_platform', { account: 'beta', platform: 'shop' });
        await store.link('module_account', { module: 'm2', account: 'beta' });

        const first = await store.listCronContexts();
        expect(first.contexts.map((c) => c.key)).toEqual(['acme/shop/m1', 'acme/shop/m2', 'beta/shop/m2']);
        expect(first.token).toBe(await store.changeToken());
        const m1 = first.contexts[0]!;
        expect(m1.downloadMiddleware.map((b) => b.name)).toEqual(['dl-a', 'dl-b']);
        expect(m1.config.get('k0')).toBe('module');
        expect(m1.config.get('k7')).toBe('account');

        const keys = async () => (await store.listCronContexts()).contexts.map((c) => c.key);
        // Each of the six rows on the join path, disabled in turn, drops the contexts through it.
        const cases: [() => Promise<unknown>, () => Promise<unknown>, string[]][] = [
          [
            () => store.upsert('module', { name: 'm2', enabled: false, config: { only: 'm2' } }),
            () => store.upsert('module', { name: 'm2', config: { only: 'm2' } }),
            ['acme/shop/m1'],
          ],
          [
            () => store.link('module_account', { module: 'm2', account: 'beta', enabled: false }),
            () => store.link('module_account', { module: 'm2', account: 'beta' }),
            ['acme/shop/m1', 'acme/shop/m2'],
          ],
          [
            () => store.upsert('account', { name: 'acme', enabled: false, config: layerConfig('account') }),
            () => store.upsert('account', { name: 'acme', config: layerConfig('account') }),
            ['beta/shop/m2'],
          ],
          [
            () => store.link('account_platform', { account: 'beta', platform: 'shop', enabled: false }),
            () => store.link('account_platform', { account: 'beta', platform: 'shop' }),
            ['acme/shop/m1', 'acme/shop/m2'],
          ],
          [
            () => store.upsert('platform', { name: 'shop', enabled: false, config: layerConfig('platform') }),
            () => store.upsert('platform', { name: 'shop', config: layerConfig('platform') }),
            [],
          ],
          [
            () =>
              store.link('module_platform', {
                module: 'm1',
                platform: 'shop',
                enabled: false,
                config: layerConfig('modulePlatform'),
              }),
            () =>
              store.link('module_platform', {
                module: 'm1',
                platform: 'shop',
                config: layerConfig('modulePlatform'),
              }),
            ['acme/shop/m2', 'beta/shop/m2'],
          ],
        ];
        let token = first.token;
        for (const [disable, enable, expected] of cases) {
          await disable();
          const list = await store.listCronContexts();
          expect(list.contexts.map((c) => c.key)).toEqual(expected);
          expect(list.token).not.toBe(token);
          token = list.token;
          await enable();
          expect(await keys()).toEqual(['acme/shop/m1', 'acme/shop/m2', 'beta/shop/m2']);
        }
      });
    });

    // ── task results and logs ──────────────────────────────────────────────────────────────────

    describe('task results', () => {
      test('start, heartbeat with counts, finish; a redelivered start reopens the same row', async () => {
        const clock = manualClock();
        const { store } = await migrated({ clock: clock.now });
        const run = await store.startTaskResult({
          runId: 'run-1',
          account: 'acme',
          platform: 'shop',
          module: 'm1',
          nodeId: 'n1',
        });
        expect(run).toMatchObject({
          taskId: 'acme-shop',
          runId: 'run-1',
          module: 'm1',
          nodeId: 'n1',
          status: 'running',
          attempt: 1,
          endTime: null,
          counts: { requests: 0, items: 0, errors: 0 },
        });
        expect(run.startTime.toISOString()).toBe('2030-01-01T00:00:00.000Z');

        clock.advance(5000);
        expect(await store.heartbeatTaskResult(run.id, { requests: 10, items: 4 })).toBe(true);
        const beat = await store.getTaskResult(run.id);
        expect(beat?.heartbeatAt.toISOString()).toBe('2030-01-01T00:00:05.000Z');
        expect(beat?.counts).toEqual({ requests: 10, items: 4, errors: 0 });

        const again = await store.startTaskResult({
          runId: 'run-1',
          account: 'acme',
          platform: 'shop',
          module: 'm1',
          nodeId: 'n2',
        });
        expect(again).toMatchObject({ id: run.id, attempt: 2, nodeId: 'n2', status: 'running' });
        expect(again.startTime).toEqual(run.startTime);

        clock.advance(1000);
        const done = await store.finishTaskResult(run.id, {
          status: 'succeeded',
          counts: { requests: 12, errors: 1 },
          result: { pages: 3 },
        });
        expect(done).toMatchObject({
          status: 'succeeded',
          counts: { requests: 12, items: 4, errors: 1 },
          result: { pages: 3 },
          error: null,
        });
        expect(done.endTime?.toISOString()).toBe('2030-01-01T00:00:06.000Z');
        expect(await store.heartbeatTaskResult(run.id)).toBe(false);

        const other = await store.startTaskResult({ runId: 'run-2', account: 'acme', platform: 'shop' });
        expect(other.module).toBeNull();
        const boom = Object.assign(new Error('parser exploded'), { code: 'MOCRA_ERR_PARSE' });
        const failed = await store.finishTaskResult(other.id, { status: 'failed', error: boom });
        expect(failed).toMatchObject({
          status: 'failed',
          error: 'parser exploded',
          errorCode: 'MOCRA_ERR_PARSE',
        });

        expect((await store.listTaskResults({ runId: 'run-1' })).map((r) => r.id)).toEqual([run.id]);
        expect((await store.listTaskResults({ status: 'failed' })).map((r) => r.id)).toEqual([other.id]);
        expect((await store.listTaskResults()).length).toBe(2);
        expect((await failure(store.finishTaskResult(999_999, { status: 'failed' }))).code).toBe(
          'MOCRA_ERR_STORE_NOT_FOUND',
        );
        expect((await failure(store.finishTaskResult(run.id, { status: 'running' as 'failed' }))).code).toBe(
          'MOCRA_ERR_STORE_INVALID_INPUT',
        );
      });

      test('the zombie sweep fails runs that stopped heartbeating and leaves live ones alone', async () => {
        const clock = manualClock();
        const { store } = await migrated({ clock: clock.now });
        const stale = await store.startTaskResult({ runId: 'r-stale', account: 'a', platform: 'p' });
        const live = await store.startTaskResult({ runId: 'r-live', account: 'a', platform: 'p' });
        const finished = await store.startTaskResult({ runId: 'r-done', account: 'a', platform: 'p' });
        await store.finishTaskResult(finished.id, { status: 'succeeded' });

        clock.advance(30_000);
        await store.heartbeatTaskResult(live.id);
        clock.advance(40_000); // stale: last beat 70 s ago; live: 40 s ago
        expect(await store.sweepZombies({ staleAfterMs: 120_000 })).toEqual([]);
        const swept = await store.sweepZombies({ staleAfterMs: 60_000 });
        expect(swept.map((r) => r.runId)).toEqual(['r-stale']);
        expect(swept[0]).toMatchObject({ status: 'failed', errorCode: 'MOCRA_ERR_STORE_ZOMBIE_RUN' });
        expect(swept[0]!.error).toContain('zombie');
        expect((await store.getTaskResult(live.id))?.status).toBe('running');
        expect((await store.getTaskResult(finished.id))?.status).toBe('succeeded');
        // A second sweep finds nothing new; the zombie's own heartbeat is refused.
        expect(await store.sweepZombies({ staleAfterMs: 60_000 })).toEqual([]);
        expect(await store.heartbeatTaskResult(stale.id)).toBe(false);
        // If the "zombie" was only slow, its real outcome still lands.
        const late = await store.finishTaskResult(stale.id, { status: 'succeeded' });
        expect(late).toMatchObject({ status: 'succeeded', error: null, errorCode: null });
      });

      test('logs are written in one batch, listed newest first, filtered and pruned', async () => {
        const { store } = await migrated();
        const t = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));
        expect(
          await store.writeLogs([
            { taskId: 'acme-shop', runId: 'r1', level: 'info', message: 'start', timestamp: t(1) },
            {
              taskId: 'acme-shop',
              runId: 'r1',
              level: 'error',
              message: 'boom',
              traceback: 'at x',
              timestamp: t(2),
            },
            {
              taskId: 'other',
              level: 'warn',
              message: 'hm',
              requestId: 'req-1',
              module: 'm',
              status: '503',
              timestamp: t(3),
            },
          ]),
        ).toBe(3);
        const all = await store.listLogs();
        expect(all.map((l) => l.message)).toEqual(['hm', 'boom', 'start']);
        expect(all[0]).toMatchObject({ requestId: 'req-1', module: 'm', status: '503', runId: null });
        expect((await store.listLogs({ runId: 'r1', level: 'error' })).map((l) => l.traceback)).toEqual([
          'at x',
        ]);
        expect((await store.listLogs({ taskId: 'acme-shop', limit: 1 })).map((l) => l.message)).toEqual([
          'boom',
        ]);

        const bad = await failure(
          store.writeLogs([
            { taskId: 'x', level: 'info', message: 'fine' },
            { taskId: 'x', level: 'loud' as 'info', message: 'nope' },
          ]),
        );
        expect(bad.code).toBe('MOCRA_ERR_STORE_INVALID_INPUT');
        expect(bad.message).toContain('entries[1].level');
        expect(await store.listLogs({ taskId: 'x' })).toEqual([]);

        expect(await store.pruneLogs(t(3))).toBe(2);
        expect((await store.listLogs()).map((l) => l.message)).toEqual(['hm']);
      });
    });

    // ── item stores ────────────────────────────────────────────────────────────────────────────

    describe('item stores', () => {
      test('json mode: a redelivered batch updates rows instead of duplicating them', async () => {
        const { store } = await migrated();
        const items = store.createItemStore({ mode: 'json' });
        await items.init();
        await items.init();
        const batch = [
          { itemId: 'q1', type: 'quote', data: { text: 'a', tags: ['x'] } },
          { itemId: 'q2', type: 'quote', data: { text: 'b' } },
          { itemId: 'q1', type: 'author', data: { name: 'Ann' } },
        ];
        expect(await items.writeBatch(batch)).toEqual({ written: 3 });
        expect(
          await items.writeBatch([{ itemId: 'q1', type: 'quote', data: { text: 'a2' } }, ...batch.slice(1)]),
        ).toEqual({
          written: 3,
        });
        expect(await items.count()).toBe(3);
        expect(await items.count('quote')).toBe(2);
        const q1 = await items.get('quote', 'q1');
        expect(q1).toMatchObject({ itemId: 'q1', type: 'quote', data: { text: 'a2' }, writeCount: 2 });
        expect((await items.get('author', 'q1'))?.data).toEqual({ name: 'Ann' });
        expect(await items.get('quote', 'nope')).toBeNull();

        // The same item twice in one batch: one row, the later value wins.
        await items.writeBatch([
          { itemId: 'q3', type: 'quote', data: { v: 1 } },
          { itemId: 'q3', type: 'quote', data: { v: 2 } },
        ]);
        expect((await items.get('quote', 'q3'))?.data).toEqual({ v: 2 });
        expect(await items.count('quote')).toBe(3);
        expect(await items.writeBatch([])).toEqual({ written: 0 });
      });

      test('table-per-type mode: typed columns round-trip and upsert by itemId', async () => {
        const { store } = await migrated();
        const items = store.createItemStore({
          mode: 'table-per-type',
          types: {
            product: {
              columns: {
                title: { type: 'text', nullable: false },
                price: 'real',
                stock: 'integer',
                active: 'boolean',
                meta: 'json',
                seen_at: 'timestamp',
              },
            },
            review: { table: 'reviews', columns: { body: 'text' } },
          },
        });
        await items.init();
        const seen = new Date('2030-02-03T04:05:06.789Z');
        await items.writeBatch([
          {
            itemId: 'p1',
            type: 'product',
            data: {
              title: 'Lamp',
              price: 12.5,
              stock: 3,
              active: true,
              meta: { color: 'red' },
              seen_at: seen,
            },
          },
          { itemId: 'r1', type: 'review', data: { body: 'great' } },
        ]);
        await items.writeBatch([
          {
            itemId: 'p1',
            type: 'product',
            data: { title: 'Lamp', price: 11, stock: 2, active: false, meta: null, seen_at: seen },
          },
        ]);
        expect(await items.count('product')).toBe(1);
        expect(await items.count()).toBe(2);
        const p1 = await items.get('product', 'p1');
        expect(p1).toMatchObject({
          writeCount: 2,
          data: { title: 'Lamp', price: 11, stock: 2, active: false, meta: null, seen_at: seen },
        });
        expect((await items.get('review', 'r1'))?.data).toEqual({ body: 'great' });

        // A column declared later is added to the existing table.
        const wider = store.createItemStore({
          mode: 'table-per-type',
          types: { review: { table: 'reviews', columns: { body: 'text', stars: 'integer' } } },
        });
        await wider.init();
        await wider.writeBatch([{ itemId: 'r2', type: 'review', data: { body: 'ok', stars: 4 } }]);
        expect((await wider.get('review', 'r2'))?.data).toEqual({ body: 'ok', stars: 4 });
        expect((await wider.get('review', 'r1'))?.data).toEqual({ body: 'great', stars: null });
      });

      test('a bad item fails the whole batch before anything is written', async () => {
        const { store } = await migrated();
        const items = store.createItemStore({
          mode: 'table-per-type',
          types: { product: { columns: { title: { type: 'text', nullable: false }, stock: 'integer' } } },
        });
        await items.init();
        const good = Array.from({ length: 5 }, (_, i) => ({
          itemId: `p${i}`,
          type: 'product',
          data: { title: `t${i}` },
        }));
        const cases: [unknown, string][] = [
          [{ itemId: 'bad', type: 'product', data: { title: 'x', stock: 'many' } }, 'items[5].data.stock'],
          [{ itemId: 'bad', type: 'product', data: { stock: 1 } }, 'items[5].data.title'],
          [{ itemId: 'bad', type: 'product', data: { title: 'x', colour: 'red' } }, 'items[5].data.colour'],
          [{ itemId: 'bad', type: 'gadget', data: {} }, 'items[5].type'],
          [{ itemId: '', type: 'product', data: { title: 'x' } }, 'items[5].itemId'],
          [{ itemId: 'bad', type: 'product', data: 'text' }, 'items[5].data'],
        ];
        for (const [bad, key] of cases) {
          const err = await failure(items.writeBatch([...good, bad] as never));
          expect(err.code).toBe('MOCRA_ERR_STORE_INVALID_INPUT');
          expect(err.message).toContain(key);
        }
        expect(await items.count()).toBe(0);
      });

      test('a database-level failure in a later statement rolls back the earlier ones (one transaction)', async () => {
        const { store } = await migrated();
        const items = store.createItemStore({
          mode: 'table-per-type',
          maxRowsPerStatement: 2,
          types: { user: { columns: { email: { type: 'text', unique: true } } } },
        });
        await items.init();
        await items.writeBatch([{ itemId: 'u0', type: 'user', data: { email: 'zed@x' } }]);
        // u1..u4 are fine and go in the first two statements; u5 clashes with u0's unique email.
        const batch = [1, 2, 3, 4].map((i) => ({ itemId: `u${i}`, type: 'user', data: { email: `${i}@x` } }));
        batch.push({ itemId: 'u5', type: 'user', data: { email: 'zed@x' } });
        const err = await failure(items.writeBatch(batch));
        expect(err.code).toBe('MOCRA_ERR_STORE_CONSTRAINT');
        expect(err.retryable).toBe(false);
        expect(await items.count()).toBe(1);
        expect(await items.get('user', 'u1')).toBeNull();
      });

      test('concurrent batches and catalog writes on one store keep their transactions apart', async () => {
        const { store } = await migrated();
        const items = store.createItemStore({ mode: 'json', maxRowsPerStatement: 3 });
        await items.init();
        // Ten overlapping batches of ten: 30 distinct items, 100 writes in all.
        const batches = Array.from({ length: 10 }, (_, b) =>
          Array.from({ length: 10 }, (_, i) => ({ itemId: `i${(b * 5 + i) % 30}`, type: 't', data: { b } })),
        );
        await Promise.all([
          ...batches.map((batch) => items.writeBatch(batch)),
          ...Array.from({ length: 5 }, (_, i) => store.upsert('account', { name: `a${i}` })),
          store.writeLogs([{ taskId: 't', level: 'info', message: 'concurrent' }]),
        ]);
        expect(await items.count()).toBe(30);
        let writes = 0;
        for (let i = 0; i < 30; i++) writes += (await items.get('t', `i${i}`))?.writeCount ?? 0;
        expect(writes).toBe(100);
        expect(await store.list('account')).toHaveLength(5);
      });

      test('writing to a missing table is a typed error', async () => {
        const h = await migrated();
        const items = h.store.createItemStore({ mode: 'json', table: 'never_created' });
        const err = await failure(items.writeBatch([{ itemId: 'a', type: 't', data: {} }]));
        expect(err.code).toBe('MOCRA_ERR_STORE_MISSING_TABLE');
        const init = h.store.createItemStore({ mode: 'json', table: 'dropped' });
        await init.init();
        await h.raw('DROP TABLE dropped');
        expect((await failure(init.count())).code).toBe('MOCRA_ERR_STORE_MISSING_TABLE');
      });

      test('bad item store options are rejected', async () => {
        const { store } = await migrated();
        const bad = (options: unknown) => {
          try {
            store.createItemStore(options as never);
          } catch (err) {
            return (err as StoreError).message;
          }
          throw new Error('expected createItemStore to throw');
        };
        expect(bad({ mode: 'nope' })).toContain('mode');
        expect(bad({ mode: 'json', table: 'bad name' })).toContain('table');
        expect(bad({ mode: 'table-per-type', types: {} })).toContain('types');
        expect(bad({ mode: 'table-per-type', types: { a: { columns: { item_id: 'text' } } } })).toContain(
          'reserved',
        );
        expect(bad({ mode: 'table-per-type', types: { a: { columns: { x: 'money' } } } })).toContain(
          'types.a.columns.x.type',
        );
      });
    });

    // ── seeding ────────────────────────────────────────────────────────────────────────────────

    describe('seed', () => {
      test('seeds from TOML and JSON files, idempotently', async () => {
        const { store } = await migrated();
        const report = await store.seedFromFile(path.join(FIXTURES, 'catalog.toml'));
        expect(report).toMatchObject({
          accounts: 1,
          platforms: 1,
          modules: 2,
          module_accounts: 2,
          module_platforms: 2,
        });
        const ctx = await store.loadTaskContext({ account: 'acme', platform: 'fixture' });
        expect(ctx.modules.map((m) => m.module.name)).toEqual(['quotes', 'authors']);
        const quotes = ctx.modules[0]!;
        expect(quotes.module.version).toBe(2);
        expect(quotes.config.getInteger('timeout')).toBe(30);
        expect(quotes.config.getString('start_url')).toBe('/quotes');
        expect(quotes.config.getString('region')).toBe('eu');
        expect(quotes.config.getBoolean('rotate')).toBe(true);
        expect(ctx.platform.baseUrl).toBe('http://127.0.0.1:3000');
        expect(ctx.account.modules).toEqual(['quotes', 'authors']);

        const token = await store.changeToken();
        const ids = (await store.list('module')).map((m) => m.id);
        await store.seedFromFile(path.join(FIXTURES, 'catalog.toml'));
        expect(await store.changeToken()).toBe(token);
        expect((await store.list('module')).map((m) => m.id)).toEqual(ids);

        await store.seedFromFile(path.join(FIXTURES, 'catalog.json'));
        const beta = await store.loadTaskContext({ account: 'beta', platform: 'shop' });
        expect(beta.modules[0]!.config.getString('category')).toBe('books');
        expect(beta.platform.baseUrl).toBeNull();
        expect((await store.list('account')).map((a) => a.name)).toEqual(['acme', 'beta']);
      });

      test('bad seed input names the key, and a failed seed writes nothing', async () => {
        const { store } = await migrated();
        const err = async (data: unknown) => failure(store.seed(data as never));
        expect((await err({ acounts: [] })).message).toContain('acounts');
        expect((await err({ accounts: [{ name: 'a', nmae: 'b' }] })).message).toContain('accounts[0].nmae');
        expect((await err({ modules: [{ name: 'm', priority: 'high' }] })).message).toContain(
          'modules[0].priority',
        );
        expect((await err({ platforms: [{ description: 'x' }] })).message).toContain('platforms[0].name');
        expect((await err({ accounts: [{ name: 'a' }, { name: 'a' }] })).message).toContain('accounts[1]');
        expect((await err({ accounts: { name: 'a' } })).message).toContain('accounts');
        expect((await err({ modules: [{ name: 'm', config: 'x' }] })).code).toBe(
          'MOCRA_ERR_STORE_INVALID_INPUT',
        );

        const missing = await err({
          accounts: [{ name: 'solo' }],
          module_accounts: [{ module: 'ghost', account: 'solo' }],
        });
        expect(missing.code).toBe('MOCRA_ERR_STORE_NOT_FOUND');
        expect(missing.message).toContain('module_accounts[0].module');
        expect(await store.get('account', 'solo')).toBeNull();

        const dir = await mkdtemp(path.join(tmpdir(), 'mocra-seed-'));
        try {
          const broken = path.join(dir, 'broken.toml');
          await writeFile(broken, '[[accounts]]\nname = "a\n');
          const parse = await failure(store.seedFromFile(broken));
          expect(parse.code).toBe('MOCRA_ERR_STORE_SEED_FILE');
          expect(parse.message).toContain('TOML');
          const json = path.join(dir, 'broken.json');
          await writeFile(json, '{"accounts": [');
          expect((await failure(store.seedFromFile(json))).code).toBe('MOCRA_ERR_STORE_SEED_FILE');
          const absent = await failure(store.seedFromFile(path.join(dir, 'absent.toml')));
          expect(absent.code).toBe('MOCRA_ERR_STORE_SEED_FILE');
          expect(absent.message).toContain('ENOENT');
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
        expect(await store.list('account')).toEqual([]);
      });
    });

    test('a closed store refuses work with a typed error', async () => {
      const { store } = await migrated();
      await store.close();
      await store.close();
      expect((await failure(store.list('account'))).code).toBe('MOCRA_ERR_STORE_CLOSED');
      expect((await failure(store.writeLogs([{ taskId: 't', level: 'info', message: 'm' }]))).code).toBe(
        'MOCRA_ERR_STORE_CLOSED',
      );
    });
  });
}
