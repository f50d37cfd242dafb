// Shared setup of the e2e-store-* tests: a fresh database per test (a unique PostgreSQL schema,
// dropped after; or a temporary SQLite file), and the fixture site's quotes API as a module.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createStore, type StoreOptions, type StoreRepository } from '@mocra/store';
import type { ApiQuotesPage } from '@mocra/testkit';
import { defineModule, type Module, Request } from 'mocra';
import pg from 'pg';

/** The local PostgreSQL of the workspace (trust auth, database `test`). */
export const PG_URL = process.env.MOCRA_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export type Backend = 'postgres' | 'sqlite';

export interface TestDatabase {
  backend: Backend;
  url: string;
  /** Postgres schema (undefined for SQLite). */
  schema: string | undefined;
  /** A store on it, migrated. */
  store: StoreRepository;
  /** Another handle on the same database (own pool / connection). */
  open(options?: Partial<StoreOptions>): Promise<StoreRepository>;
  cleanup(): Promise<void>;
}

export function uniqueSchema(): string {
  return `mocra_e2e_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export async function pgQuery<T = Record<string, unknown>>(
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

/** A migrated database: a unique schema on the local PostgreSQL, or a SQLite file in a temp dir. */
export async function openTestDatabase(backend: Backend): Promise<TestDatabase> {
  const handles: StoreRepository[] = [];
  if (backend === 'postgres') {
    const schema = uniqueSchema();
    const open = async (options: Partial<StoreOptions> = {}) => {
      const store = await createStore({ poolSize: 4, ...options, url: options.url ?? PG_URL, schema });
      handles.push(store);
      return store;
    };
    const store = await open();
    await store.migrate();
    return {
      backend,
      url: PG_URL,
      schema,
      store,
      open,
      async cleanup() {
        for (const h of handles) await h.close().catch(() => undefined);
        await pgQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      },
    };
  }
  const dir = await mkdtemp(join(tmpdir(), 'mocra-e2e-store-'));
  const url = `sqlite:${join(dir, 'mocra.db')}`;
  const open = async (options: Partial<StoreOptions> = {}) => {
    const store = await createStore({ ...options, url });
    handles.push(store);
    return store;
  };
  const store = await open();
  await store.migrate();
  return {
    backend,
    url,
    schema: undefined,
    store,
    open,
    async cleanup() {
      for (const h of handles) await h.close().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface QuoteItem {
  id: number;
  text: string;
  author: string;
  account: string;
}

/**
 * A module driven by its layered config: `base_url` (platform), `path` (module) and `pages`
 * (module × account) say which pages of the fixture's `/api/quotes` it fetches.
 */
export function quotesModule(name = 'quotes-api', extra: Partial<Module<QuoteItem>> = {}): Module<QuoteItem> {
  return defineModule<QuoteItem>({
    name,
    nodes: [
      {
        id: 'page',
        generate(ctx) {
          const base = ctx.config?.getString('base_url');
          const path = ctx.config?.getString('path', '/api/quotes');
          const pages = (ctx.config?.getArray('pages') ?? [1]) as number[];
          return pages.map((p) => new Request(`${base}${path}?page=${p}`));
        },
        parse(res, cx) {
          for (const q of res.json<ApiQuotesPage>().quotes) {
            cx.emit({ id: q.id, text: q.text, author: q.author.name, account: cx.account });
          }
        },
      },
    ],
    ...extra,
  });
}

/**
 * A TCP proxy in front of PostgreSQL whose connections can be cut: `cut(n)` destroys every open
 * connection and refuses the next `n` new ones — a lost connection, on demand.
 */
export async function startCuttableProxy(target = { host: '127.0.0.1', port: 5432 }) {
  const sockets = new Set<net.Socket>();
  let refuse = 0;
  let cuts = 0;
  const server = net.createServer((client) => {
    if (refuse > 0) {
      refuse--;
      client.destroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: PG_URL.replace(/127\.0\.0\.1:5432/, `127.0.0.1:${port}`),
    get cuts() {
      return cuts;
    },
    cut(refuseNext = 0) {
      cuts++;
      refuse = refuseNext;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
