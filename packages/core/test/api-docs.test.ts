// docs/api-reference.md lists every route (method, path, key, rate limit, success status) and the
// whole code → status table.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { API_ERROR_STATUS, API_ROUTES } from '../src/api/index.js';
import { CORE_ERROR_CODES } from '../src/index.js';

const doc = readFileSync(join(import.meta.dirname, '../../../docs/api-reference.md'), 'utf8');

test('every route is in the summary table with its auth, rate limit and success status, and has a section', () => {
  for (const route of API_ROUTES) {
    const row = doc.split('\n').find((line) => line.startsWith(`| ${route.method} | \`${route.url}\` |`));
    expect(row, `${route.method} ${route.url}`).toBeDefined();
    const [, , , key, limited, success] = row!.split('|').map((c) => c.trim());
    expect(key, route.url).toBe(route.auth ? 'yes' : '–');
    expect(limited, route.url).toBe(route.rateLimited ? 'yes' : 'no');
    expect(success, route.url).toContain(String(route.status));
    expect(doc, route.url).toContain(`### \`${route.method} ${route.url}\``);
  }
});

test('the code → status table matches API_ERROR_STATUS and covers every API code', () => {
  const table = new Map<string, number>();
  for (const m of doc.matchAll(/^\| `(MOCRA_ERR_[A-Z_]+)` \| (\d{3}) \|$/gm)) table.set(m[1]!, Number(m[2]));
  expect(Object.fromEntries(table)).toEqual(API_ERROR_STATUS);
  const apiCodes = Object.keys(CORE_ERROR_CODES).filter(
    (c) => c.startsWith('MOCRA_ERR_API_') && c !== 'MOCRA_ERR_API_BIND',
  );
  for (const code of apiCodes) expect(table.has(code), code).toBe(true);
});
