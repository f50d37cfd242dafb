import { describe, expect, test } from 'vitest';
import { ConfigSyntaxError } from '../errors.js';
import { resolveConfig } from './load.js';
import { migrateRustConfig } from './migrate.js';

describe('migrateRustConfig', () => {
  test('a refused list item is dropped and the items after it keep their own report entries', () => {
    const r = migrateRustConfig(
      [
        '[[policy.overrides]]',
        'kind = "Download"',
        'backoff = { Exponential = { base_ms = 5000, max_ms = 100 } }', // max below base: refused here
        '[[policy.overrides]]',
        'kind = "Parser"',
        'max_retries = 2000', // above mocra's bound
        '[[policy.overrides]]',
        'kind = "DataStore"',
        'max_retries = 4',
      ].join('\n'),
    );
    expect(r.values.policy).toEqual({ overrides: [{ stage: 'store', max_retries: 4 }] });
    expect(r.dropped.map((d) => d.key)).toEqual(['policy.overrides[0]', 'policy.overrides[1]']);
    expect(r.dropped[0]!.reason).toMatch(/max_backoff_ms: must be at least backoff_ms/);
    expect(r.dropped[1]!.reason).toMatch(/max_retries: must be ≤ 1000/);
    expect(r.carried).toEqual([
      { key: 'policy.overrides[2]', to: ['policy.overrides[0]'], note: 'kind DataStore → stage store' },
    ]);
    expect(resolveConfig({ toml: r.toml, env: false }).policy.overrides).toHaveLength(1);
  });

  test('a table left empty by a refused value is not written', () => {
    const r = migrateRustConfig('[[proxy.direct]]\nurl = "ftp://nope"\n[proxy.pool_config]\nmax_size = 9\n');
    expect(r.values).toEqual({});
    expect(r.dropped.map((d) => d.key).sort()).toEqual(['proxy.direct[0]', 'proxy.pool_config.max_size']);
  });

  test('text that is not TOML is a ConfigSyntaxError naming the file', () => {
    expect(() => migrateRustConfig('[crawler', { file: 'old.toml' })).toThrow(ConfigSyntaxError);
    expect(() => migrateRustConfig('[crawler', { file: 'old.toml' })).toThrow(/old\.toml:1:/);
  });
});
