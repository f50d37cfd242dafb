import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { get } from '../__fixtures__/http.js';
import { FixtureListenError, FixtureOptionError, TESTKIT_ERROR_CODES } from '../errors.js';
import * as testkit from '../index.js';
import { resolveFixtureOptions } from './options.js';
import { startFixtureSite } from './start.js';

describe('options', () => {
  test('defaults', () => {
    const o = resolveFixtureOptions();
    expect(o).toMatchObject({
      port: 0,
      hosts: 1,
      seed: 1,
      catalog: { books: 1000, categories: 20, perPage: 20 },
      quotes: { count: 100, perPage: 10, authors: 20, tags: 12 },
      login: { users: { user: 'password' }, sessionTtlMs: 0 },
      robots: { disallow: ['/private/'], allow: ['/private/public/'], crawlDelay: undefined, status: 200 },
      sitemapUrlsPerFile: 500,
      latencyMs: 0,
      hugeBodyBytes: 200_000_000,
      bombBytes: 1_073_741_824,
      requestLogSize: 10_000,
      maxTrackedPaths: 10_000,
      controlRoutes: true,
    });
  });

  test.each([
    [{ port: 70_000 }, 'port'],
    [{ hosts: 0 }, 'hosts'],
    [{ hosts: 1.5 }, 'hosts'],
    [{ seed: -1 }, 'seed'],
    [{ catalog: { books: 0 } }, 'catalog.books'],
    [{ catalog: { books: 10, categories: 11 } }, 'catalog.categories'],
    [{ catalog: 'big' }, 'catalog'],
    [{ quotes: { authors: 5000, count: 10_000 } }, 'quotes.authors'],
    [{ quotes: { tags: 21 } }, 'quotes.tags'],
    [{ login: { users: {} } }, 'login.users'],
    [{ login: { users: { 'a b': 'x' } } }, 'login.users'],
    [{ login: { users: { ann: 5 } } }, 'login.users.ann'],
    [{ robots: { disallow: ['/a\nDisallow: /'] } }, 'robots.disallow'],
    [{ robots: { status: 99 } }, 'robots.status'],
    [{ latencyMs: '5' }, 'latencyMs'],
    [{ controlRoutes: 'yes' }, 'controlRoutes'],
  ])('%j is refused naming %s', async (bad, option) => {
    const call = () => resolveFixtureOptions(bad as never);
    expect(call).toThrow(FixtureOptionError);
    expect(call).toThrowError(expect.objectContaining({ code: 'MOCRA_ERR_TESTKIT_INVALID_OPTION', option }));
    await expect(startFixtureSite(bad as never)).rejects.toMatchObject({
      code: 'MOCRA_ERR_TESTKIT_INVALID_OPTION',
    });
  });
});

describe('lifecycle', () => {
  test('a fixed port; a taken port fails with MOCRA_ERR_TESTKIT_LISTEN_FAILED; close is idempotent', async () => {
    const a = await startFixtureSite();
    try {
      const err = await startFixtureSite({ port: a.port }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FixtureListenError);
      expect(err).toMatchObject({
        code: 'MOCRA_ERR_TESTKIT_LISTEN_FAILED',
        address: '127.0.0.1',
        port: a.port,
      });
    } finally {
      await a.close();
    }
    await a.close();
    const b = await startFixtureSite({ port: a.port, hosts: 2 });
    try {
      expect(b.urls).toEqual([`http://127.0.0.1:${a.port}`, `http://127.0.0.2:${a.port}`]);
      expect((await get(`${b.hostUrl(1)}/`)).status).toBe(200);
    } finally {
      await b.close();
    }
  });

  test('close cuts responses still streaming, and the port is free again', async () => {
    const s = await startFixtureSite();
    const pending = get(`${s.url}/trickle?bytes=100000&chunk=10&intervalMs=50`).then(
      () => 'finished',
      () => 'cut',
    );
    await new Promise((r) => setTimeout(r, 100));
    await s.close();
    expect(await pending).toBe('cut');
    const again = await startFixtureSite({ port: s.port });
    await again.close();
  });

  test('controlRoutes: false leaves /__fixture/ unserved (and counted like any 404)', async () => {
    const s = await startFixtureSite({ controlRoutes: false });
    try {
      expect((await get(`${s.url}/__fixture/stats`)).status).toBe(404);
      expect(s.stats({ log: false }).paths).toEqual({ '/__fixture/stats': 1 });
    } finally {
      await s.close();
    }
  });
});

describe('error codes', () => {
  test('TESTKIT_ERROR_CODES matches the @mocra/testkit section of docs/errors.md', () => {
    const doc = fs.readFileSync(path.resolve(import.meta.dirname, '../../../../docs/errors.md'), 'utf8');
    const section = doc.split(/^## /m).find((s) => s.startsWith('@mocra/testkit'));
    expect(section).toBeDefined();
    const rows = new Map(
      [...section!.matchAll(/^\|\s*`(MOCRA_ERR_[A-Z0-9_]+)`\s*\|\s*(.+?)\s*\|$/gm)].map((m) => [
        m[1]!,
        m[2]!,
      ]),
    );
    expect(Object.fromEntries(rows)).toEqual(TESTKIT_ERROR_CODES);
  });

  test('the package entry exports the public API', () => {
    for (const name of [
      'startFixtureSite',
      'catalogBooks',
      'catalogBook',
      'catalogCategories',
      'quoteList',
      'quoteAuthors',
      'quoteTags',
      'graphLinks',
      'graphPath',
      'graphPageCount',
      'fixtureSitemaps',
      'expectedCounts',
      'paddedPage',
      'maxRequestsInWindow',
      'TESTKIT_ERROR_CODES',
    ]) {
      expect(testkit, name).toHaveProperty(name);
    }
  });
});
