// The downloader registry: selection by name (request, then module, then default) with no
// database, health checks and close on shutdown. The downloaders are real: the undici HTTP
// downloader against the fixture site, the browser downloader, and small in-memory ones of the
// kind a user writes.
import diagnostics_channel from 'node:diagnostics_channel';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createBrowserDownloader } from '../src/downloader/browser/index.js';
import { createHttpDownloader } from '../src/downloader/http-downloader.js';
import {
  createDownloaderRegistry,
  type DownloaderHealth,
  DownloaderRegistry,
} from '../src/downloader/registry.js';
import type { Downloader } from '../src/downloader/types.js';
import { Request } from '../src/model/request.js';
import { Response } from '../src/model/response.js';
import { importOptional } from '../src/optional-dependency.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite();
});
afterAll(() => site.close());

const never = new AbortController().signal;

/** Serves pages from a map: what `examples/custom-downloader.ts` shows users. */
function memoryDownloader(name: string, pages: Record<string, string>): Downloader & { closed: number } {
  return {
    name,
    closed: 0,
    async download(request: Request) {
      const body = pages[request.url];
      return new Response({
        url: request.url,
        status: body === undefined ? 404 : 200,
        headers: { 'content-type': 'text/html; charset=utf-8' },
        body: Buffer.from(body ?? 'not found'),
        request,
      });
    },
    async close() {
      this.closed++;
    },
  };
}

describe('downloader registry', () => {
  test('selects the request’s choice, else the module’s, else the default', async () => {
    const http = createHttpDownloader();
    const memory = memoryDownloader('memory', { 'https://offline.example/': '<h1>from memory</h1>' });
    const registry = createDownloaderRegistry(http).register(memory);
    try {
      expect(registry.select({})).toBe(http);
      expect(registry.select({ module: 'memory' })).toBe(memory);
      expect(registry.select({ request: 'default', module: 'memory' })).toBe(http);
      expect(registry.select({ request: 'http' })).toBe(http); // the default's own name
      expect(registry.names()).toEqual(['default', 'http', 'memory']);

      const offline = new Request('https://offline.example/');
      const fromMemory = await registry.select({ request: 'memory' }).download(offline, never);
      expect(fromMemory.$('h1').text()).toBe('from memory');
      const fromSite = await registry.select({}).download(new Request(`${site.url}/quotes/page/1`), never);
      expect(fromSite.$('div.quote')).toHaveLength(10);
    } finally {
      await registry.close();
    }
  });

  test('an unknown name is a typed error naming who chose it, never a silent fallback', () => {
    const registry = createDownloaderRegistry(memoryDownloader('m', {}));
    const err = (() => {
      try {
        registry.select({ module: 'browsr' }, { module: 'shop' });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toMatchObject({
      code: 'MOCRA_ERR_UNKNOWN_DOWNLOADER',
      downloader: 'browsr',
      selectedBy: "module 'shop'",
      retryable: false,
    });
    expect(() => registry.select({ request: 'ws' }, { url: 'https://x.example/' })).toThrow(
      /request https:\/\/x.example\/ selects downloader 'ws'/,
    );
    expect(() =>
      registry.validate([
        ['a', undefined],
        ['b', 'default'],
        ['c', 'nope'],
      ]),
    ).toThrow(/module 'c'/);
  });

  test('bad registrations are typed errors', () => {
    const registry = new DownloaderRegistry(memoryDownloader('m', {}));
    registry.register(memoryDownloader('a', {}));
    expect(() => registry.register(memoryDownloader('a', {}))).toThrow(/already registered/);
    expect(() => registry.register(memoryDownloader('default', {}))).toThrow(/reserved/);
    expect(() => registry.register(memoryDownloader('', {}))).toThrow(/non-empty/);
    expect(() => registry.register({ name: 'x' } as unknown as Downloader)).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => createDownloaderRegistry(null as unknown as Downloader)).toThrow(/default downloader/);
  });

  test('health checks: passing, failing (Chromium missing), slow, and downloaders without one', async () => {
    const rounds: DownloaderHealth[][] = [];
    const onHealth = (msg: unknown): void => {
      rounds.push(msg as DownloaderHealth[]);
    };
    diagnostics_channel.subscribe('mocra:downloader:health', onHealth);
    // Load playwright-core before the clock starts: the first import alone can take 100 ms.
    await importOptional('playwright-core', 'this test');
    const stuck = { ...memoryDownloader('stuck', {}), healthCheck: () => new Promise<void>(() => undefined) };
    const fine = { ...memoryDownloader('fine', {}), healthCheck: async () => undefined };
    const registry = createDownloaderRegistry(memoryDownloader('plain', {}), { healthCheckTimeoutMs: 100 })
      .register(createBrowserDownloader({ name: 'browser', executablePath: '/nonexistent/chromium' }))
      .register(stuck)
      .register(fine);
    try {
      const results = await registry.checkHealth();
      const byName = Object.fromEntries(results.map((r) => [r.name, r]));
      expect(byName.default).toMatchObject({ downloader: 'plain', healthy: true, checked: false });
      expect(byName.fine).toMatchObject({ healthy: true, checked: true });
      expect(byName.browser).toMatchObject({ healthy: false, checked: true });
      expect(byName.browser?.error).toMatchObject({ code: 'MOCRA_ERR_BROWSER_LAUNCH' });
      expect(byName.stuck?.healthy).toBe(false);
      expect(byName.stuck?.error?.message).toMatch(/longer than 100 ms/);
      expect(registry.lastHealth).toBe(results);
      expect(rounds).toEqual([results]);

      registry.startHealthChecks(20);
      for (let i = 0; i < 100 && rounds.length < 3; i++) await new Promise((r) => setTimeout(r, 20));
      expect(rounds.length).toBeGreaterThanOrEqual(3);
    } finally {
      diagnostics_channel.unsubscribe('mocra:downloader:health', onHealth);
      await registry.close();
    }
  });

  test('close() closes each downloader once, all of them even if one fails, and only once', async () => {
    const shared = memoryDownloader('shared', {});
    const broken = {
      ...memoryDownloader('broken', {}),
      close: async () => Promise.reject(new Error('stuck socket')),
    };
    const def = memoryDownloader('def', {});
    const registry = createDownloaderRegistry(def)
      .register(shared)
      .register(shared, 'alias')
      .register(broken);
    const first = registry.close();
    expect(registry.close()).toBe(first);
    const err = await first.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AggregateError);
    expect((err as AggregateError).errors).toHaveLength(1);
    expect((err as AggregateError).errors[0]).toMatchObject({
      message: 'stuck socket',
      downloader: 'broken',
    });
    expect(shared.closed).toBe(1);
    expect(def.closed).toBe(1);
    expect(() => registry.register(memoryDownloader('late', {}))).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_DOWNLOADER_CLOSED' }),
    );
  });
});
