// The engine's database config provider: module config built from the ten database layers over
// config.toml and code (the higher layer wins), rebuilt when the change token moves; middleware
// selected by the relation rows (enabled relation and enabled middleware only, with the
// relation's config); tasks whose account × platform cannot run, and modules that select an
// unknown middleware, are reported with typed errors and failed task_result rows — not crashed on.
import diagnostics_channel from 'node:diagnostics_channel';
import type { ErrorEvent } from '@mocra/core';
import { DB_CHANNEL_NAMES, type ModuleSkippedMessage } from '@mocra/core/store';
import type { JsonValue } from '@mocra/store';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { type DataMiddleware, type DownloadMiddleware, defineModule, Mocra, Request } from 'mocra';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { openTestDatabase, type TestDatabase } from './e2e-store-harness.js';

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

const KEYS = [
  'shared',
  'k_module',
  'k_toml_module',
  'k_code',
  'k_mp',
  'k_ma',
  'k_mwrel',
  'k_ap',
  'k_plat',
  'k_account',
  'k_mw',
  'k_default',
  'login_max_attempts',
] as const;

type Seen = Record<string, { value: JsonValue | undefined; layer: string | undefined }>;

describe('module config through the database layers (SQLite)', () => {
  test('each key comes from the highest layer that has it; a change in the database is seen after the token moves', async () => {
    db = await openTestDatabase('sqlite');
    await db.store.seed({
      accounts: [
        {
          name: 'alice',
          config: { k_account: 'account', k_ap: 'account', k_plat: 'account', shared: 'account' },
        },
      ],
      platforms: [
        { name: 'shop', config: { k_plat: 'platform', k_ap: 'platform', shared: 'platform' } },
        { name: 'closed', enabled: false },
      ],
      modules: [{ name: 'layered', config: { k_module: 'db-module', shared: 'db-module' } }],
      download_middleware: [{ name: 'tagger', config: { k_mw: 'mw-own', k_mwrel: 'mw-own' } }],
      account_platforms: [
        {
          account: 'alice',
          platform: 'shop',
          config: { k_ap: 'account-platform', k_ma: 'account-platform' },
        },
        { account: 'alice', platform: 'closed' },
      ],
      module_accounts: [
        { module: 'layered', account: 'alice', config: { k_ma: 'module-account', k_mp: 'module-account' } },
      ],
      module_platforms: [
        { module: 'layered', platform: 'shop', config: { k_mp: 'module-platform' } },
        { module: 'layered', platform: 'closed' },
      ],
      module_download_middleware: [
        { module: 'layered', middleware: 'tagger', config: { k_mwrel: 'mw-relation' } },
      ],
    });

    const seen: Seen[] = [];
    const mwConfig: unknown[] = [];
    const errors: ErrorEvent[] = [];
    const tagger: DownloadMiddleware = { name: 'tagger', beforeRequest() {} };
    const engine = Mocra.builder()
      .module(
        defineModule({
          name: 'layered',
          config: { k_module: 'code', k_code: 'code' },
          nodes: [
            {
              id: 'n',
              generate(ctx) {
                const out: Seen = {};
                for (const k of KEYS)
                  out[k] = { value: ctx.config?.get(k), layer: ctx.config?.source(k)?.layer };
                seen.push(out);
                mwConfig.push(ctx.config?.middlewareConfig('download', 'tagger'));
                return [];
              },
              parse() {},
            },
          ],
        }),
        () => {},
      )
      .middleware(tagger, { global: false })
      .config({
        crawler: { auto_seed: false },
        module_defaults: { k_default: 'toml', k_code: 'toml', k_module: 'toml' },
        modules: { layered: { k_toml_module: 'toml-module', k_module: 'toml-module' } },
      })
      .store({ store: db.store, configCacheMs: 0 })
      .onError((event) => void errors.push(event))
      .engineOptions({ endWhenIdle: false })
      .handleSignals(false)
      .build();
    const run = engine.run();
    await engine.submit({ module: 'layered', account: 'alice', platform: 'shop', runId: 'r1' });
    await vi.waitFor(() => expect(seen).toHaveLength(1), { timeout: 10_000, interval: 10 });

    const layerOf = (s: Seen) => Object.fromEntries(KEYS.map((k) => [k, [s[k]!.value, s[k]!.layer]]));
    expect(layerOf(seen[0]!)).toEqual({
      shared: ['db-module', 'module'],
      k_module: ['db-module', 'module'], // database module row > config.toml [modules] > code
      k_toml_module: ['toml-module', 'module'],
      k_code: ['code', 'module'], // code > config.toml [module_defaults]
      k_mp: ['module-platform', 'modulePlatform'],
      k_ma: ['module-account', 'moduleAccount'],
      k_mwrel: ['mw-relation', 'moduleDownloadMiddleware'],
      k_ap: ['account-platform', 'accountPlatform'],
      k_plat: ['platform', 'platform'],
      k_account: ['account', 'account'],
      k_mw: ['mw-own', 'downloadMiddleware'],
      k_default: ['toml', 'defaults'],
      login_max_attempts: [3, 'defaults'], // built-in
    });
    expect(mwConfig[0]).toEqual({ k_mw: 'mw-own', k_mwrel: 'mw-relation' });

    // A change in the database moves the change token: the next task sees it.
    await db.store.upsert('module', { name: 'layered', config: { k_module: 'db-module-v2' } });
    await db.store.link('module_platform', { module: 'layered', platform: 'shop', config: {} });
    await engine.submit({ module: 'layered', account: 'alice', platform: 'shop', runId: 'r2' });
    await vi.waitFor(() => expect(seen).toHaveLength(2), { timeout: 10_000, interval: 10 });
    expect(seen[1]!.k_module).toEqual({ value: 'db-module-v2', layer: 'module' });
    expect(seen[1]!.shared).toEqual({ value: 'platform', layer: 'platform' });
    expect(seen[1]!.k_mp).toEqual({ value: 'module-account', layer: 'moduleAccount' });

    // An account × platform that cannot run is reported with a typed error, and the engine goes on.
    await engine.submit({ module: 'layered', account: 'alice', platform: 'closed', runId: 'closed-run' });
    await engine.submit({ module: 'layered', account: 'mallory', platform: 'shop', runId: 'mallory-run' });
    await vi.waitFor(() => expect(errors).toHaveLength(2), { timeout: 10_000, interval: 10 });
    expect(errors.map((e) => [e.code, e.stage, e.retryable])).toEqual([
      ['MOCRA_ERR_STORE_CONTEXT_UNAVAILABLE', 'task', false],
      ['MOCRA_ERR_STORE_CONTEXT_UNAVAILABLE', 'task', false],
    ]);
    expect(errors.map((e) => e.message).sort()).toEqual([
      "no task context for account 'alice' × platform 'closed': platform disabled",
      "no task context for account 'mallory' × platform 'shop': account not found",
    ]);
    await engine.submit({ module: 'layered', account: 'alice', platform: 'shop', runId: 'r3' });
    await vi.waitFor(() => expect(seen).toHaveLength(3), { timeout: 10_000, interval: 10 });
    const summary = await engine.stop();
    await run;
    expect(summary.deadLettered).toBe(2);

    const rejected = await db.store.listTaskResults({ runId: 'closed-run' });
    expect(rejected).toMatchObject([
      {
        status: 'failed',
        account: 'alice',
        platform: 'closed',
        module: null,
        errorCode: 'MOCRA_ERR_STORE_CONTEXT_UNAVAILABLE',
      },
    ]);
    const done = await db.store.listTaskResults({ status: 'succeeded' });
    expect(done.map((r) => [r.runId, r.account, r.platform, r.module, r.attempt]).sort()).toEqual([
      ['r1', 'alice', 'shop', 'layered', 1],
      ['r2', 'alice', 'shop', 'layered', 1],
      ['r3', 'alice', 'shop', 'layered', 1],
    ]);
  });
});

describe('middleware selected by relation rows (PostgreSQL)', () => {
  test('an enabled relation to an enabled middleware selects it, with the relation config; others do not run', async () => {
    db = await openTestDatabase('postgres');
    await db.store.seed({
      accounts: [{ name: 'acme' }],
      platforms: [{ name: 'fixture', config: { base_url: site.url } }],
      modules: [{ name: 'echo' }, { name: 'ghostly' }],
      download_middleware: [
        { name: 'tag-a' },
        { name: 'tag-b' },
        { name: 'tag-c', enabled: false },
        { name: 'tag-d' },
        { name: 'ghost' },
      ],
      data_middleware: [{ name: 'suffix', config: { suffix: '?' } }],
      account_platforms: [{ account: 'acme', platform: 'fixture' }],
      module_accounts: [
        { module: 'echo', account: 'acme' },
        { module: 'ghostly', account: 'acme' },
      ],
      module_platforms: [
        { module: 'echo', platform: 'fixture' },
        { module: 'ghostly', platform: 'fixture' },
      ],
      module_download_middleware: [
        { module: 'echo', middleware: 'tag-a' },
        { module: 'echo', middleware: 'tag-b', enabled: false },
        { module: 'echo', middleware: 'tag-c' },
        { module: 'ghostly', middleware: 'ghost' },
      ],
      module_data_middleware: [{ module: 'echo', middleware: 'suffix', config: { suffix: '!' } }],
    });
    const tag = (name: string): DownloadMiddleware => ({
      name,
      beforeRequest(r) {
        r.headers[`x-${name}`] = '1';
      },
    });
    const suffix: DataMiddleware<{ tags: string[] }> = {
      name: 'suffix',
      handle(item, _meta, ctx) {
        const { suffix: s } = ctx.config!.middlewareConfig('data', 'suffix') as { suffix: string };
        return { tags: item.tags.map((t) => `${t}${s}`) };
      },
    };
    const items: { tags: string[] }[] = [];
    const skipped: ModuleSkippedMessage[] = [];
    const onSkip = (m: unknown) => skipped.push(m as ModuleSkippedMessage);
    diagnostics_channel.subscribe(DB_CHANNEL_NAMES.moduleSkipped, onSkip);
    const ghostlyGenerated: string[] = [];
    try {
      const summary = await Mocra.builder()
        .module(
          defineModule<{ tags: string[] }>({
            name: 'echo',
            nodes: [
              {
                id: 'n',
                generate: (ctx) => [new Request(`${ctx.config?.getString('base_url')}/echo?m=echo`)],
                parse(res, cx) {
                  const headers = res.json<{ headers: Record<string, string> }>().headers;
                  cx.emit({
                    tags: Object.keys(headers)
                      .filter((h) => h.startsWith('x-'))
                      .sort(),
                  });
                },
              },
            ],
          }),
          (item) => void items.push(item),
        )
        .module(
          defineModule({
            name: 'ghostly',
            nodes: [{ id: 'n', generate: () => void ghostlyGenerated.push('ran'), parse() {} }],
          }),
          () => {},
        )
        .middleware(tag('tag-a'), { global: false })
        .middleware(tag('tag-b'), { global: false })
        .middleware(tag('tag-c'), { global: false })
        .middleware(tag('tag-d'), { global: false })
        .middleware(tag('global-x'))
        .middleware(suffix, { global: false })
        .store({ store: db.store })
        .handleSignals(false)
        .run();
      expect(summary.errors).toBe(0);
    } finally {
      diagnostics_channel.unsubscribe(DB_CHANNEL_NAMES.moduleSkipped, onSkip);
    }
    expect(items).toEqual([{ tags: ['x-global-x!', 'x-tag-a!'] }]);
    // The module whose relation names an unregistered middleware does not run; the others do.
    expect(ghostlyGenerated).toEqual([]);
    expect(skipped).toEqual([
      { account: 'acme', platform: 'fixture', module: 'ghostly', reason: 'unknown_middleware' },
    ]);
    const rows = await db.store.listTaskResults();
    expect(rows.map((r) => [r.module, r.status, r.errorCode]).sort()).toEqual([
      ['echo', 'succeeded', null],
      ['ghostly', 'failed', 'MOCRA_ERR_UNKNOWN_MIDDLEWARE'],
    ]);
  });
});
