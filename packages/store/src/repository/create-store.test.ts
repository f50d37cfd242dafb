import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { createStore, parseStoreUrl, type StoreOptions } from './create-store.js';

describe('parseStoreUrl', () => {
  test('recognises postgres and sqlite URLs', () => {
    expect(parseStoreUrl('postgres://u@h/db')).toEqual({
      backend: 'postgres',
      connectionString: 'postgres://u@h/db',
    });
    expect(parseStoreUrl('postgresql://u@h/db').backend).toBe('postgres');
    expect(parseStoreUrl('sqlite:./data/x.db')).toEqual({ backend: 'sqlite', filename: './data/x.db' });
    expect(parseStoreUrl('sqlite:///abs/x.db')).toEqual({ backend: 'sqlite', filename: '/abs/x.db' });
    expect(parseStoreUrl('sqlite::memory:')).toEqual({ backend: 'sqlite', filename: ':memory:' });
  });

  test('anything else is a typed error that hides credentials', () => {
    expect(() => parseStoreUrl('mysql://root:secret@h/db')).toThrowError(
      expect.objectContaining({ code: 'MOCRA_ERR_STORE_INVALID_INPUT', key: 'url' }),
    );
    expect(() => parseStoreUrl('mysql://root:secret@h/db')).toThrowError(/\/\/\*\*\*@h/);
    expect(() => parseStoreUrl('')).toThrowError(/url/);
  });
});

describe('createStore options', () => {
  const bad = (options: Partial<StoreOptions>) =>
    createStore({ url: 'sqlite::memory:', ...options } as StoreOptions).then(
      () => undefined,
      (e: unknown) => e as Error & { code: string; key: string },
    );

  test('invalid options are typed errors naming the option', async () => {
    expect(await bad({ schema: 'bad-schema; drop' })).toMatchObject({
      code: 'MOCRA_ERR_STORE_INVALID_INPUT',
      key: 'schema',
    });
    expect(await bad({ retry: { maxRetries: -1 } })).toMatchObject({ key: 'retry.maxRetries' });
    expect(await bad({ url: 'postgres://x@127.0.0.1/db', poolSize: 0 })).toMatchObject({ key: 'poolSize' });
    expect(await bad({ clock: 'now' as never })).toMatchObject({ key: 'clock' });
  });

  test('an in-memory SQLite store migrates on open when asked', async () => {
    const store = await createStore({ url: 'sqlite::memory:', migrate: true });
    try {
      expect((await store.migrationStatus()).pending).toBe(0);
      expect(store.backend).toBe('sqlite');
      expect(store.schema).toBeNull();
    } finally {
      await store.close();
    }
  });

  test('a SQLite file that cannot be opened is a typed connection error', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'mocra-store-'));
    try {
      const err = await bad({ url: `sqlite:${path.join(dir, 'missing-dir', 'x.db')}` });
      expect(err?.code).toBe('MOCRA_ERR_STORE_CONNECTION');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
