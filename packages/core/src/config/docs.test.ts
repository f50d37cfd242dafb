// docs/configuration.md and the config schema must list the same keys, with the same defaults,
// live flags and environment variables.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { configKeys } from './keys.js';
import { moduleSettingsShape } from './schema.js';

const doc = readFileSync(join(import.meta.dirname, '../../../../docs/configuration.md'), 'utf8');

/** `| \`key\` | type | default | live | \`ENV\` | description |` rows, by key. */
function rows(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of doc.split('\n')) {
    const m = /^\| `([a-z_.]+)` \|(.*)\|$/.exec(line);
    if (m)
      out.set(
        m[1]!,
        m[2]!.split(' | ').map((c) => c.trim()),
      );
  }
  return out;
}

test('every config key is documented with its default, live flag and environment variable', () => {
  const documented = rows();
  for (const key of configKeys()) {
    const row = documented.get(key.key);
    expect(row, `docs/configuration.md has no row for ${key.key}`).toBeDefined();
    const [, defaultCell, liveCell, envCell] = row!;
    expect(envCell, key.key).toBe(`\`${key.env}\``);
    expect(liveCell, key.key).toBe(key.live ? 'yes' : 'restart');
    expect(defaultCell, key.key).toBe(key.default === undefined ? '—' : `\`${JSON.stringify(key.default)}\``);
  }
});

test('every module-config key mocra reads is documented', () => {
  const documented = rows();
  for (const key of Object.keys(moduleSettingsShape)) {
    expect(documented.has(key), `docs/configuration.md has no row for module key ${key}`).toBe(true);
  }
});

test('the docs list no config key the schema does not have', () => {
  const known = new Set([...configKeys().map((k) => k.key), ...Object.keys(moduleSettingsShape)]);
  // Key tables have six columns; other tables (e.g. the keys of mocra for Rust not kept) are not key listings.
  const stray = [...rows().entries()]
    .filter(([k, cells]) => cells.length === 5 && (k.includes('.') || k === 'name') && !known.has(k))
    .map(([k]) => k);
  expect(stray).toEqual([]);
});
