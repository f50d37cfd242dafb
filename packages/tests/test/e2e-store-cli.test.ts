// `mocra store migrate | status | seed` end to end: the real `mocra` bin (run from its sources)
// against a fresh PostgreSQL schema and a SQLite file named in a config file's [db] table, with
// exit codes for a changed migration, a bad seed file and a missing database.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createStore } from '@mocra/store';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PG_URL, pgQuery, uniqueSchema } from './e2e-store-harness.js';

/** The `mocra` bin, run from its TypeScript sources. */
const MAIN = resolve(import.meta.dirname, '../../mocra/src/cli/main.ts');

function mocra(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MOCRA_')));
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', '--conditions=@mocra/source', MAIN, ...args],
      { env: { ...clean, ...env, MOCRA_DISABLE_LOGS: '1' }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
        done({ code, stdout, stderr });
      },
    );
  });
}

let dir: string;
const schema = uniqueSchema();
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mocra-e2e-store-cli-'));
});
afterAll(async () => {
  await pgQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await rm(dir, { recursive: true, force: true });
});

describe('mocra store', () => {
  test('status, migrate, status, seed on PostgreSQL; a changed migration and a bad seed file exit 1', async () => {
    const db = ['--url', PG_URL, '--schema', schema];
    const fresh = await mocra(['store', 'status', ...db]);
    expect(fresh).toMatchObject({ code: 0 });
    expect(fresh.stdout).toContain(`postgres schema ${schema}: ok (0 applied, 1 pending)`);
    expect(fresh.stdout).toMatch(/\s1\s+pending\s+[0-9a-f]{12}\s+catalog, log and task_result/);

    const migrated = await mocra(['store', 'migrate', ...db]);
    expect(migrated).toMatchObject({ code: 0, stdout: 'applied 1 catalog, log and task_result\n' });
    const again = await mocra(['store', 'migrate', ...db]);
    expect(again).toMatchObject({ code: 0, stdout: `postgres schema ${schema}: up to date (1 applied)\n` });
    const json = await mocra(['store', 'status', ...db, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({
      backend: 'postgres',
      schema,
      applied: 1,
      pending: 0,
      ok: true,
    });

    const seedFile = join(dir, 'catalog.toml');
    await writeFile(
      seedFile,
      [
        '[[accounts]]',
        'name = "acme"',
        '[[platforms]]',
        'name = "shop"',
        '[[modules]]',
        'name = "products"',
        'config = { pages = [1, 2] }',
        '[[account_platforms]]',
        'account = "acme"',
        'platform = "shop"',
        '[[module_accounts]]',
        'module = "products"',
        'account = "acme"',
        '[[module_platforms]]',
        'module = "products"',
        'platform = "shop"',
      ].join('\n'),
    );
    const seeded = await mocra(['store', 'seed', seedFile, ...db]);
    expect(seeded).toMatchObject({ code: 0 });
    expect(seeded.stdout).toBe(
      `seeded ${seedFile}: accounts 1, platforms 1, modules 1, account_platforms 1, module_accounts 1, module_platforms 1\n`,
    );
    const store = await createStore({ url: PG_URL, schema, poolSize: 1 });
    try {
      const context = await store.loadTaskContext({ account: 'acme', platform: 'shop' });
      expect(context.modules.map((m) => [m.module.name, m.config.getArray('pages')])).toEqual([
        ['products', [1, 2]],
      ]);
    } finally {
      await store.close();
    }

    const badSeed = join(dir, 'bad.json');
    await writeFile(badSeed, JSON.stringify({ modules: [{ name: 'x', priorty: 1 }] }));
    const bad = await mocra(['store', 'seed', badSeed, ...db]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/modules\[0\]\.priorty.*\(MOCRA_ERR_STORE_INVALID_INPUT\)/);

    await pgQuery(`UPDATE "${schema}".mocra_migrations SET checksum = 'tampered' WHERE version = 1`);
    const changed = await mocra(['store', 'status', ...db]);
    expect(changed.code).toBe(1);
    expect(changed.stdout).toContain('CHANGED MIGRATIONS');
    const refused = await mocra(['store', 'migrate', ...db]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('(MOCRA_ERR_STORE_MIGRATION_CHECKSUM)');
  }, 180_000); // eight processes of the real bin, each compiling its TypeScript

  test('the database from a config file, or MOCRA_DB__URL; none at all is a usage error', async () => {
    const file = join(dir, 'mocra.toml');
    const sqlite = `sqlite:${join(dir, 'cli.db')}`;
    await writeFile(file, `[db]\nurl = "${sqlite}"\n`);
    const migrated = await mocra(['store', 'migrate', '--config', file]);
    expect(migrated).toMatchObject({ code: 0, stdout: 'applied 1 catalog, log and task_result\n' });
    const fromEnv = await mocra(['store', 'status'], { MOCRA_DB__URL: sqlite });
    expect(fromEnv).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('sqlite: ok (1 applied, 0 pending)'),
    });
    const none = await mocra(['store', 'status']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('no database');
  }, 120_000);
});
