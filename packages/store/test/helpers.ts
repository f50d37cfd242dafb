// Factories that open a fresh database per test for the conformance suite.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createStore } from '../src/index.js';
import type { StoreFactory } from './conformance.js';

/** The local PostgreSQL of the workspace (trust auth, database `test`). Override with MOCRA_TEST_PG_URL. */
export const PG_URL = process.env.MOCRA_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A schema name unique to this process and call, so parallel runs never collide. */
export function uniqueSchema(): string {
  return `mocra_t_${process.pid}_${randomBytes(4).toString('hex')}`;
}

/** Runs SQL on a short-lived connection with `search_path` set to `schema`. */
export async function pgRaw(schema: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`SET search_path TO "${schema}"; ${sql}`);
  } finally {
    await client.end();
  }
}

export const postgresFactory: StoreFactory = async (options = {}) => {
  const schema = uniqueSchema();
  const store = await createStore({ poolSize: 3, ...options, url: PG_URL, schema });
  return {
    store,
    raw: (sql) => pgRaw(schema, sql),
    async cleanup() {
      await store.close();
      await pgRaw('public', `DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
  };
};

export function sqliteFactory(): StoreFactory {
  return async (options = {}) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'mocra-store-'));
    const file = path.join(dir, 'store.db');
    const store = await createStore({ ...options, url: `sqlite:${file}` });
    return {
      store,
      async raw(sql) {
        const db = new Database(file);
        try {
          db.exec(sql);
        } finally {
          db.close();
        }
      },
      async cleanup() {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  };
}
