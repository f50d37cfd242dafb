import { describe, expect, test } from 'vitest';
import type { JsonObject } from '../model/json.js';
import { buildModuleConfig, MODULE_CONFIG_PRECEDENCE, type ModuleConfigLayers } from './module-config.js';

const PER_MIDDLEWARE = new Set([
  'moduleDataMiddleware',
  'moduleDownloadMiddleware',
  'downloadMiddleware',
  'dataMiddleware',
]);

/** Every layer sets `k<r>` for r ≤ its own rank to its own name; `k<r>` must resolve to the rank-r layer. */
function everyLayer(): ModuleConfigLayers {
  const layers: Record<string, unknown> = {};
  MODULE_CONFIG_PRECEDENCE.forEach((layer, rank) => {
    const values: JsonObject = {};
    for (let r = 0; r <= rank; r++) values[`k${r}`] = layer;
    layers[layer] = PER_MIDDLEWARE.has(layer) ? [{ name: `${layer}-mw`, config: values }] : values;
  });
  return layers as ModuleConfigLayers;
}

describe('ModuleConfig precedence', () => {
  test('the order is module > rel_module_platform > rel_module_account > rel_module_data_mw > rel_module_download_mw > rel_account_platform > platform > account > download_mw > data_mw > defaults', () => {
    expect(MODULE_CONFIG_PRECEDENCE).toEqual([
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
      'defaults',
    ]);
  });

  test('each layer beats every layer below it', () => {
    const config = buildModuleConfig(everyLayer());
    MODULE_CONFIG_PRECEDENCE.forEach((layer, rank) => {
      expect(config.get(`k${rank}`), `k${rank}`).toBe(layer);
      const source = config.source(`k${rank}`);
      expect(source?.layer).toBe(layer);
      if (PER_MIDDLEWARE.has(layer)) expect(source?.middleware).toBe(`${layer}-mw`);
    });
  });

  test('removing the winning layer hands the key to the next one down', () => {
    const layers = everyLayer();
    for (const [i, layer] of MODULE_CONFIG_PRECEDENCE.entries()) {
      if (i === MODULE_CONFIG_PRECEDENCE.length - 1) break;
      const without = { ...layers, [layer]: undefined } as ModuleConfigLayers;
      expect(buildModuleConfig(without).get(`k${i}`)).toBe(MODULE_CONFIG_PRECEDENCE[i + 1]);
    }
  });

  test('inside a per-middleware layer the first listed middleware wins', () => {
    const config = buildModuleConfig({
      downloadMiddleware: [
        { name: 'high', config: { ua: 'high' } },
        { name: 'low', config: { ua: 'low', only_low: true } },
      ],
    });
    expect(config.get('ua')).toBe('high');
    expect(config.getBoolean('only_low')).toBe(true);
    expect(config.source('only_low')).toEqual({ layer: 'downloadMiddleware', middleware: 'low' });
  });

  test('merged() applies the same precedence, shallowly', () => {
    const config = buildModuleConfig({
      module: { headers: { a: '1' }, timeout: 5 },
      platform: { headers: { b: '2' }, retries: 3 },
      defaults: { timeout: 30, concurrency: 8 },
    });
    expect(config.merged()).toEqual({ headers: { a: '1' }, timeout: 5, retries: 3, concurrency: 8 });
    expect(config.getObject('headers')).toEqual({ a: '1' });
  });

  test('withDefaults adds the lowest layer without touching the others', () => {
    const base = buildModuleConfig({ account: { timeout: 5 } });
    const withToml = base.withDefaults({ timeout: 30, downloader: 'http' });
    expect(withToml.get('timeout')).toBe(5);
    expect(withToml.getString('downloader')).toBe('http');
    expect(base.has('downloader')).toBe(false);
  });
});

describe('ModuleConfig typed getters', () => {
  const config = buildModuleConfig({
    module: { s: 'x', n: 1.5, i: 3, b: false, o: { a: 1 }, arr: [1, 2], off: null },
    account: { off: 'account value' },
  });

  test('return the value, undefined, or the fallback', () => {
    expect(config.getString('s')).toBe('x');
    expect(config.getNumber('n')).toBe(1.5);
    expect(config.getInteger('i')).toBe(3);
    expect(config.getBoolean('b')).toBe(false);
    expect(config.getObject('o')).toEqual({ a: 1 });
    expect(config.getArray('arr')).toEqual([1, 2]);
    expect(config.getString('missing')).toBeUndefined();
    expect(config.getString('missing', 'fb')).toBe('fb');
    expect(config.getBoolean('missing', true)).toBe(true);
  });

  test('an explicit null at the winning layer switches the key off', () => {
    expect(config.get('off')).toBeNull();
    expect(config.getString('off')).toBeUndefined();
    expect(config.getString('off', 'fb')).toBe('fb');
  });

  test('a value of another type is a typed error naming key, layer and types', () => {
    expect(() => config.getNumber('s')).toThrowError(
      expect.objectContaining({
        code: 'MOCRA_ERR_STORE_CONFIG_TYPE',
        key: 's',
        expected: 'a number',
        actual: 'string',
      }),
    );
    expect(() => config.getInteger('n')).toThrowError(/from the module layer/);
    expect(() => config.getObject('arr')).toThrowError(/is array, expected an object/);
  });

  test('middlewareConfig merges the module relation over the middleware’s own config', () => {
    const c = buildModuleConfig({
      downloadMiddleware: [{ name: 'ua', config: { pool: ['a'], rotate: false } }],
      moduleDownloadMiddleware: [{ name: 'ua', config: { rotate: true } }],
    });
    expect(c.middlewareConfig('download', 'ua')).toEqual({ pool: ['a'], rotate: true });
    expect(c.middlewareConfig('data', 'ua')).toBeUndefined();
  });
});
