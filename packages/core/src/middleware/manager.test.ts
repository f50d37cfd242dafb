import diagnostics_channel from 'node:diagnostics_channel';
import { describe, expect, test } from 'vitest';
import {
  InvalidArgumentError,
  MiddlewareFailedError,
  NonRetryableError,
  UnknownMiddlewareError,
} from '../errors.js';
import type { ItemMeta } from '../model/item.js';
import { Request } from '../model/request.js';
import { Response } from '../model/response.js';
import { createMiddlewareManager, MIDDLEWARE_CHANNEL_NAMES, type MiddlewareDropMessage } from './manager.js';
import type { DataMiddleware, DownloadMiddleware, MiddlewareContext, StoreMiddleware } from './types.js';

const ctx: MiddlewareContext = {
  module: 'm',
  node: 'n',
  runId: 'r',
  account: undefined,
  platform: undefined,
  config: undefined,
  signal: new AbortController().signal,
};

const meta = (index: number): ItemMeta => ({
  itemId: `fp:${index}`,
  index,
  url: 'http://x/',
  module: 'm',
  node: 'n',
  runId: 'r',
});

function response(request: Request): Response {
  return new Response({ url: request.url, status: 200, headers: {}, body: new Uint8Array(), request });
}

/** A download middleware that records the order its hooks ran in. */
function tracing(name: string, log: string[], weight?: number): DownloadMiddleware {
  return {
    name,
    ...(weight === undefined ? {} : { weight }),
    beforeRequest(request) {
      log.push(`before:${name}`);
      request.headers[`x-${name}`] = '1';
    },
    afterResponse() {
      log.push(`after:${name}`);
    },
  };
}

describe('ordering', () => {
  test('before by weight ascending, after by weight descending, ties by registration order', async () => {
    const log: string[] = [];
    const manager = createMiddlewareManager()
      .register(tracing('c', log, 10))
      .register(tracing('a', log, -5))
      .register(tracing('b1', log))
      .register(tracing('b2', log));
    const plan = manager.plan();
    const before = await manager.beforeRequest(new Request('http://x/'), ctx, plan);
    await manager.afterResponse(response(before.value!), ctx, plan);
    expect(log).toEqual([
      'before:a',
      'before:b1',
      'before:b2',
      'before:c',
      'after:c',
      'after:b2',
      'after:b1',
      'after:a',
    ]);
    expect(Object.keys(before.value!.headers)).toEqual(['x-a', 'x-b1', 'x-b2', 'x-c']);
  });

  test('a module overrides weights per middleware', async () => {
    const log: string[] = [];
    const manager = createMiddlewareManager()
      .register(tracing('a', log, 1))
      .register(tracing('b', log, 2));
    const plan = manager.plan({ weights: { a: 3 } });
    await manager.beforeRequest(new Request('http://x/'), ctx, plan);
    expect(log).toEqual(['before:b', 'before:a']);
    expect(manager.plan().beforeRequest.map((m) => m.name)).toEqual(['a', 'b']);
  });

  test('data and store chains run by weight ascending', async () => {
    const log: string[] = [];
    const data = (name: string, weight: number): DataMiddleware<number> => ({
      name,
      weight,
      handle(item) {
        log.push(`data:${name}`);
        return item * 10;
      },
    });
    const store = (name: string, weight: number): StoreMiddleware<number> => ({
      name,
      weight,
      beforeStore: () => void log.push(`beforeStore:${name}`),
      store: (item) => void log.push(`store:${name}:${item}`),
      afterStore: () => void log.push(`afterStore:${name}`),
    });
    const manager = createMiddlewareManager()
      .register(data('d2', 2) as DataMiddleware)
      .register(data('d1', 1) as DataMiddleware)
      .register(store('s2', 2) as StoreMiddleware)
      .register(store('s1', 1) as StoreMiddleware);
    const plan = manager.plan();
    const { kept } = await manager.handleItems([{ item: 1, meta: meta(0) }], ctx, plan);
    expect(kept.map((k) => k.item)).toEqual([100]);
    await manager.store({ items: kept }, ctx, plan);
    expect(log).toEqual([
      'data:d1',
      'data:d2',
      'beforeStore:s1',
      'store:s1:100',
      'afterStore:s1',
      'beforeStore:s2',
      'store:s2:100',
      'afterStore:s2',
    ]);
  });
});

describe('selection', () => {
  const manager = createMiddlewareManager()
    .register({ name: 'global', beforeRequest: () => undefined })
    .register({ name: 'proxy', beforeRequest: () => undefined }, { global: false })
    .register({ name: 'ua', beforeRequest: () => undefined }, { global: false })
    .register({ name: 'clean', handle: (i: unknown) => i }, { global: false })
    .register({ name: 'db', store: () => undefined }, { global: false });

  test('non-global middleware runs only where a module or a request selects it', () => {
    expect(manager.plan().beforeRequest.map((m) => m.name)).toEqual(['global']);
    const byModule = manager.plan({
      download: ['ua'],
      data: ['clean'],
      store: ['db'],
      selectedBy: "module 'm'",
    });
    expect(byModule.beforeRequest.map((m) => m.name)).toEqual(['global', 'ua']);
    expect(byModule.data.map((m) => m.name)).toEqual(['clean']);
    expect(byModule.store.map((m) => m.name)).toEqual(['db']);
    const byRequest = manager.plan({ download: ['ua'], request: ['proxy', 'clean'] });
    expect(byRequest.beforeRequest.map((m) => m.name)).toEqual(['global', 'proxy', 'ua']);
    expect(byRequest.data.map((m) => m.name)).toEqual(['clean']);
  });

  test('the same selection (its arrays) gets the same plan until a middleware is registered', () => {
    const m = createMiddlewareManager().register({ name: 'a', beforeRequest: () => undefined });
    const download = ['a'];
    const first = m.plan({ download, selectedBy: "module 'm'" });
    expect(m.plan({ download, selectedBy: "module 'm'" })).toBe(first);
    // Other arrays with the same names: the same plan, found by its key.
    expect(m.plan({ download: ['a'], selectedBy: "module 'm'" })).toBe(first);
    expect(m.plan({ download, request: ['a'], selectedBy: "module 'm'" })).not.toBe(first);
    m.register({ name: 'b', beforeRequest: () => undefined });
    const after = m.plan({ download, selectedBy: "module 'm'" });
    expect(after).not.toBe(first);
    expect(after.beforeRequest.map((x) => x.name)).toEqual(['a', 'b']);
  });

  test('selecting an unknown name is UnknownMiddlewareError naming who selected it', () => {
    expect(() => manager.plan({ download: ['nope'], selectedBy: "module 'catalog'" })).toThrowError(
      new UnknownMiddlewareError('download', 'nope', "module 'catalog'"),
    );
    expect(() => manager.plan({ store: ['clean'] })).toThrowError(UnknownMiddlewareError);
    expect(() => manager.plan({ request: ['ghost'] })).toThrowError(/'ghost', which is not registered/);
  });

  test('registration checks: name, kind, duplicates', () => {
    const m = createMiddlewareManager();
    expect(() => m.register({ name: '', beforeRequest: () => undefined })).toThrowError(InvalidArgumentError);
    expect(() => m.register({ name: 'x' } as DownloadMiddleware)).toThrowError(/none of beforeRequest/);
    expect(() => m.register({ name: 'x', kind: 'store' } as unknown as StoreMiddleware)).toThrowError(
      /has no store\(\)/,
    );
    expect(() => m.register({ name: 'x', weight: Number.NaN, beforeRequest: () => undefined })).toThrowError(
      /weight/,
    );
    m.register({ name: 'x', beforeRequest: () => undefined });
    expect(() => m.register({ name: 'x', afterResponse: () => undefined })).toThrowError(
      /already registered/,
    );
    // the same name may exist once per kind
    m.register({ name: 'x', handle: (i: unknown) => i });
    expect(m.names('data')).toEqual(['x']);
  });
});

describe('drops, replacements and failures', () => {
  test('beforeRequest may replace or drop; a drop stops the chain and is published', async () => {
    const seen: string[] = [];
    const drops: MiddlewareDropMessage[] = [];
    const onDrop = (m: unknown) => drops.push(m as MiddlewareDropMessage);
    const manager = createMiddlewareManager()
      .register({ name: 'rewrite', weight: 1, beforeRequest: (r) => r.clone({ url: `${r.url}?page=2` }) })
      .register({
        name: 'block',
        weight: 2,
        beforeRequest: (r) => (r.url.includes('private') ? null : undefined),
      })
      .register({ name: 'last', weight: 3, beforeRequest: (r) => void seen.push(r.url) });
    diagnostics_channel.subscribe(MIDDLEWARE_CHANNEL_NAMES.drop, onDrop);
    try {
      const kept = await manager.beforeRequest(new Request('http://x/a'), ctx, manager.plan());
      expect(kept.value?.url).toBe('http://x/a?page=2');
      const dropped = await manager.beforeRequest(new Request('http://x/private'), ctx, manager.plan());
      expect(dropped).toEqual({ droppedBy: 'block' });
    } finally {
      diagnostics_channel.unsubscribe(MIDDLEWARE_CHANNEL_NAMES.drop, onDrop);
    }
    expect(seen).toEqual(['http://x/a?page=2']);
    expect(drops).toEqual([
      {
        kind: 'download',
        middleware: 'block',
        phase: 'beforeRequest',
        module: 'm',
        runId: 'r',
        url: 'http://x/private?page=2',
      },
    ]);
  });

  test('afterResponse may drop a response', async () => {
    const manager = createMiddlewareManager().register({
      name: 'only-ok',
      afterResponse: (res) => (res.status === 200 ? res : null),
    });
    const request = new Request('http://x/');
    expect((await manager.afterResponse(response(request), ctx, manager.plan())).value?.status).toBe(200);
    const notFound = new Response({
      url: 'http://x/',
      status: 404,
      headers: {},
      body: new Uint8Array(),
      request,
    });
    expect(await manager.afterResponse(notFound, ctx, manager.plan())).toEqual({ droppedBy: 'only-ok' });
  });

  test('data middleware transforms, drops items (later ones never see them) and keeps order', async () => {
    const later: number[] = [];
    const manager = createMiddlewareManager()
      .register({ name: 'odd-only', weight: 1, handle: (i: unknown) => ((i as number) % 2 === 1 ? i : null) })
      .register({ name: 'double', weight: 2, handle: (i: unknown) => (i as number) * 2 })
      .register({ name: 'spy', weight: 3, handle: (i: unknown) => void later.push(i as number) });
    const items = [1, 2, 3, 4, 5].map((item, index) => ({ item, meta: meta(index) }));
    const result = await manager.handleItems(items, ctx, manager.plan());
    expect(result.kept.map((k) => [k.item, k.meta.index])).toEqual([
      [2, 0],
      [6, 2],
      [10, 4],
    ]);
    expect(result.dropped.map((d) => [d.meta.itemId, d.droppedBy])).toEqual([
      ['fp:1', 'odd-only'],
      ['fp:3', 'odd-only'],
    ]);
    expect(later).toEqual([2, 6, 10]);
  });

  test('a throwing hook becomes MiddlewareFailedError (retryable unless it threw a non-retryable error)', async () => {
    const manager = createMiddlewareManager()
      .register({
        name: 'boom',
        beforeRequest: () => {
          throw new Error('kaput');
        },
      })
      .register({
        name: 'final',
        handle: () => {
          throw new NonRetryableError('never');
        },
      });
    const error = await manager
      .beforeRequest(new Request('http://x/'), ctx, manager.plan())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MiddlewareFailedError);
    expect(error).toMatchObject({
      code: 'MOCRA_ERR_MIDDLEWARE_FAILED',
      kind: 'download',
      middleware: 'boom',
      phase: 'beforeRequest',
      retryable: true,
    });
    const dataError = await manager
      .handleItems([{ item: 1, meta: meta(0) }], ctx, manager.plan())
      .catch((e: unknown) => e);
    expect(dataError).toMatchObject({ middleware: 'final', phase: 'handle', retryable: false });
  });
});

describe('store lifecycle', () => {
  function recorder(
    name: string,
    log: string[],
    fail?: 'beforeStore' | 'store' | 'afterStore',
  ): StoreMiddleware {
    const maybeFail = (phase: string) => {
      if (fail === phase) throw new Error(`${name} ${phase} failed`);
    };
    return {
      name,
      beforeStore(batch) {
        log.push(`${name}.beforeStore(${batch.items.length})`);
        maybeFail('beforeStore');
      },
      store(item) {
        log.push(`${name}.store(${String(item)})`);
        maybeFail('store');
      },
      afterStore() {
        log.push(`${name}.afterStore`);
        maybeFail('afterStore');
      },
    };
  }
  const batch = {
    items: [
      { item: 'a', meta: meta(0) },
      { item: 'b', meta: meta(1) },
    ],
  };

  test('beforeStore → store per item → afterStore', async () => {
    const log: string[] = [];
    const manager = createMiddlewareManager().register(recorder('db', log));
    await manager.store(batch, ctx, manager.plan());
    expect(log).toEqual(['db.beforeStore(2)', 'db.store(a)', 'db.store(b)', 'db.afterStore']);
  });

  test('a failing beforeStore skips store and afterStore and surfaces a retryable error', async () => {
    const log: string[] = [];
    const manager = createMiddlewareManager()
      .register(recorder('db', log, 'beforeStore'))
      .register({ ...recorder('next', log), weight: 1 });
    const error = await manager.store(batch, ctx, manager.plan()).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 'MOCRA_ERR_MIDDLEWARE_FAILED',
      middleware: 'db',
      phase: 'beforeStore',
      retryable: true,
    });
    expect(log).toEqual(['db.beforeStore(2)']);
  });

  test('a failing store skips the rest of the batch and afterStore', async () => {
    const log: string[] = [];
    const manager = createMiddlewareManager().register(recorder('db', log, 'store'));
    const error = await manager.store(batch, ctx, manager.plan()).catch((e: unknown) => e);
    expect(error).toMatchObject({ phase: 'store' });
    expect(log).toEqual(['db.beforeStore(2)', 'db.store(a)']);
  });

  test('an empty batch runs nothing', async () => {
    const log: string[] = [];
    const manager = createMiddlewareManager().register(recorder('db', log));
    await manager.store({ items: [] }, ctx, manager.plan());
    expect(log).toEqual([]);
  });
});
