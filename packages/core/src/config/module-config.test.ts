import type { ModuleConfigLayers } from '@mocra/store';
import { describe, expect, test } from 'vitest';
import { ConfigValidationError, InvalidArgumentError } from '../errors.js';
import { resolveConfig } from './load.js';
import {
  BUILT_IN_MODULE_DEFAULTS,
  createMemoryModuleConfigProvider,
  createModuleConfigResolver,
  type ModuleConfigProvider,
  moduleConfigOf,
} from './module-config.js';

const query = { module: 'catalog', account: 'alice', platform: 'shop' };

describe('ModuleConfigResolver precedence', () => {
  test('module/account/platform layers > config.toml defaults > built-in defaults', async () => {
    const provider = createMemoryModuleConfigProvider({
      modules: { catalog: { downloader: 'browser' } },
      platforms: { shop: { login_max_attempts: 5, timeout_ms: 1000 } },
      accounts: { alice: { timeout_ms: 2000, headers: { 'x-account': 'alice' } } },
    });
    const resolver = createModuleConfigResolver({
      provider,
      defaults: { downloader: 'http', login_statuses: [401, 403], mine: 'toml' },
    });
    const { config, settings } = await resolver.resolve(query);
    expect(settings).toEqual({
      downloader: 'browser', // module layer beats config.toml
      enableSession: false, // built-in
      stickyHeaders: [],
      headers: { 'x-account': 'alice' },
      timeoutMs: 1000, // platform beats account
      downloadMiddleware: [],
      dataMiddleware: [],
      storeMiddleware: [],
      middlewareWeights: {},
      loginStatuses: [401, 403], // config.toml beats built-in
      loginMaxAttempts: 5,
    });
    expect(config.getString('mine')).toBe('toml');
    expect(config.source('downloader')).toEqual({ layer: 'module' });
    expect(config.source('timeout_ms')).toEqual({ layer: 'platform' });
    expect(config.source('login_statuses')).toEqual({ layer: 'defaults' });
  });

  test('relation layers: module×platform > module×account > account×platform', async () => {
    const resolver = createModuleConfigResolver({
      provider: createMemoryModuleConfigProvider({
        modulePlatforms: { 'catalog/shop': { a: 'mp' } },
        moduleAccounts: { 'catalog/alice': { a: 'ma', b: 'ma' } },
        accountPlatforms: { 'alice/shop': { a: 'ap', b: 'ap', c: 'ap' } },
        platforms: { shop: { c: 'p', d: 'p' } },
        downloadMiddleware: { ua: { pool: ['x'] } },
      }),
    });
    const { config } = await resolver.resolve(query);
    expect([config.get('a'), config.get('b'), config.get('c'), config.get('d')]).toEqual([
      'mp',
      'ma',
      'ap',
      'p',
    ]);
    expect(config.middlewareConfig('download', 'ua')).toEqual({ pool: ['x'] });
    // another account × platform does not see alice's relations
    const other = await resolver.resolve({ ...query, account: 'bob' });
    expect(other.config.get('a')).toBe('mp');
    expect(other.config.get('b')).toBeUndefined();
  });

  test('built-in defaults are what a module gets with nothing configured', async () => {
    const { config, settings } = await createModuleConfigResolver().resolve(query);
    expect(config.merged()).toEqual(BUILT_IN_MODULE_DEFAULTS);
    expect(settings.downloader).toBeUndefined();
    expect(settings.loginStatuses).toEqual([401]);
    expect(settings.loginMaxAttempts).toBe(3);
  });

  test('config.toml tables feed the in-memory provider and the defaults layer', async () => {
    const loaded = resolveConfig({
      toml: '[module_defaults]\ndownloader = "http"\n[modules.catalog]\nenable_session = true\n[accounts.alice]\nk = 1\n',
      env: false,
    });
    const { data, defaults } = moduleConfigOf(loaded);
    const resolver = createModuleConfigResolver({
      provider: createMemoryModuleConfigProvider(data),
      defaults,
    });
    const { config, settings } = await resolver.resolve(query);
    expect(settings.downloader).toBe('http');
    expect(settings.enableSession).toBe(true);
    expect(config.getInteger('k')).toBe(1);
  });
});

describe('ModuleConfigResolver validation and caching', () => {
  test('a typed key with a bad value in a provider layer is an error naming the layer', async () => {
    const resolver = createModuleConfigResolver({
      provider: createMemoryModuleConfigProvider({
        platforms: { shop: { login_statuses: [401, 'x'] as never } },
        modules: { catalog: { middleware_weights: { a: 1.5 } } },
      }),
    });
    const error = await resolver.resolve(query).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigValidationError);
    expect((error as ConfigValidationError).issues).toEqual([
      {
        kind: 'type',
        key: 'middleware_weights.a',
        message: 'expected an integer, got the number 1.5',
        source: { kind: 'layer', layer: 'module' },
      },
      {
        kind: 'type',
        key: 'login_statuses[1]',
        message: 'expected a number, got the string "x"',
        source: { kind: 'layer', layer: 'platform' },
      },
    ]);
    expect((error as Error).message).toContain('module config (platform) login_statuses[1]');
  });

  test('bad defaults are rejected up front; bad queries are InvalidArgumentError', async () => {
    expect(() => createModuleConfigResolver({ defaults: { enable_session: 'yes' } })).toThrowError(
      /module config \(config\.toml \[module_defaults\]\) enable_session: expected a boolean/,
    );
    await expect(createModuleConfigResolver().resolve({ ...query, account: '' })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
  });

  test('built configs are cached until the provider version or the defaults change', async () => {
    const provider = createMemoryModuleConfigProvider({ modules: { catalog: { downloader: 'a' } } });
    const resolver = createModuleConfigResolver({ provider });
    const first = await resolver.resolve(query);
    expect(await resolver.resolve(query)).toBe(first);
    provider.setModule('catalog', { downloader: 'b' });
    const second = await resolver.resolve(query);
    expect(second).not.toBe(first);
    expect(second.settings.downloader).toBe('b');
    resolver.setDefaults({ timeout_ms: 5 });
    const third = await resolver.resolve(query);
    expect(third.settings.timeoutMs).toBe(5);
  });

  test('cached() answers without a promise what resolve() has cached, and nothing once it is stale', async () => {
    const provider = createMemoryModuleConfigProvider({ modules: { catalog: { downloader: 'a' } } });
    const resolver = createModuleConfigResolver({ provider });
    expect(resolver.cached(query)).toBeUndefined();
    const first = await resolver.resolve(query);
    expect(resolver.cached(query)).toBe(first);
    expect(resolver.cached({ ...query, account: 'bob' })).toBeUndefined();
    provider.setModule('catalog', { downloader: 'b' });
    expect(resolver.cached(query)).toBeUndefined();
    await resolver.resolve(query);
    resolver.setDefaults({ timeout_ms: 5 });
    expect(resolver.cached(query)).toBeUndefined();
  });

  test('any provider (a database later) feeds the same typed getters; without a version nothing is cached', async () => {
    let reads = 0;
    const provider: ModuleConfigProvider = {
      async layers(q): Promise<ModuleConfigLayers> {
        reads++;
        return {
          module: { downloader: `${q.module}-dl` },
          moduleDownloadMiddleware: [{ name: 'ua', config: { rotate: true } }],
          downloadMiddleware: [{ name: 'ua', config: { rotate: false, pool: ['a'] } }],
        };
      },
    };
    const resolver = createModuleConfigResolver({ provider });
    const { config, settings } = await resolver.resolve(query);
    await resolver.resolve(query);
    expect(reads).toBe(2);
    expect(settings.downloader).toBe('catalog-dl');
    expect(config.middlewareConfig('download', 'ua')).toEqual({ rotate: true, pool: ['a'] });
  });
});
