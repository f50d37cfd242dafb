// The three middleware chains inside a real crawl of the fixture site, registered through the
// builder: order by weight (and per-module overrides), drops of requests, responses and items,
// selection by name per module (code and config.toml) and per request, and the store lifecycle
// with its failure path (beforeStore fails → store/afterStore skipped → retried).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import {
  type DataMiddleware,
  type DownloadMiddleware,
  defineModule,
  type ErrorEvent,
  Mocra,
  type Module,
  type ModuleNode,
  Request,
  type StoreMiddleware,
} from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

let site: FixtureSite;
let dir: string;
beforeAll(async () => {
  site = await startFixtureSite();
  dir = await mkdtemp(join(tmpdir(), 'mocra-mw-'));
});
afterAll(async () => {
  await site?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A module that fetches /echo?n=1…count and emits the echoed request headers. */
type EchoItem = { n: number; headers: Record<string, string> };
function echoModule(name: string, count: number, extra: Partial<Module<EchoItem>> = {}) {
  const node: ModuleNode<EchoItem> = {
    id: 'echo',
    generate: () =>
      Array.from(
        { length: count },
        (_, i) => new Request(`${site.url}/echo?m=${name}&n=${i + 1}`, { meta: { n: i + 1 } }),
      ),
    parse(res, cx) {
      cx.emit({
        n: res.request.meta.n as number,
        headers: res.json<{ headers: Record<string, string> }>().headers,
      });
    },
  };
  return defineModule<EchoItem>({ name, nodes: [node], ...extra });
}

function tracer(name: string, log: string[], weight?: number): DownloadMiddleware {
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

describe('download middleware in a crawl', () => {
  test('beforeRequest by weight ascending, afterResponse descending; a module overrides weights', async () => {
    const log: string[] = [];
    const items: { headers: Record<string, string> }[] = [];
    await Mocra.builder()
      .module(echoModule('ordered', 1), (item) => void items.push(item))
      .middleware(tracer('c', log, 30))
      .middleware(tracer('a', log, 10))
      .middleware(tracer('b', log, 20))
      .handleSignals(false)
      .run();
    expect(log).toEqual(['before:a', 'before:b', 'before:c', 'after:c', 'after:b', 'after:a']);
    expect(items[0]!.headers).toMatchObject({ 'x-a': '1', 'x-b': '1', 'x-c': '1' });

    log.length = 0;
    await Mocra.builder()
      .module(echoModule('weighted', 1, { config: { middleware_weights: { a: 99 } } }), () => {})
      .middleware(tracer('c', log, 30))
      .middleware(tracer('a', log, 10))
      .middleware(tracer('b', log, 20))
      .handleSignals(false)
      .run();
    expect(log).toEqual(['before:b', 'before:c', 'before:a', 'after:a', 'after:c', 'after:b']);
  });

  test('a dropped request is never downloaded; a dropped response never parsed; both are counted', async () => {
    const parsed: number[] = [];
    site.resetStats();
    const summary = await Mocra.builder()
      .module(echoModule('drops', 6), (item) => void parsed.push(item.n))
      .middleware({
        name: 'no-odd-requests',
        beforeRequest: (r) => ((r.meta.n as number) % 2 === 1 ? null : undefined),
      })
      .middleware({
        name: 'no-six',
        afterResponse: (res) => (res.request.meta.n === 6 ? null : res),
      })
      .handleSignals(false)
      .run();
    expect(parsed.sort()).toEqual([2, 4]);
    expect(site.stats({ log: false }).requests).toBe(3); // 2, 4, 6 were downloaded
    expect(summary.modules.middlewareDrops).toBe(4);
    expect(summary.errors).toBe(0);
  });

  test('non-global middleware runs only where selected: by module (code, config.toml) or by request', async () => {
    const seen: string[] = [];
    const tag = (name: string): DownloadMiddleware => ({
      name,
      beforeRequest(r) {
        seen.push(`${name}@${r.module}:${r.meta.n as number}`);
      },
    });
    const file = join(dir, 'select.toml');
    await writeFile(file, '[modules.by-toml]\ndownload_middleware = ["from-toml"]\n');
    const perRequest = defineModule({
      name: 'by-request',
      nodes: [
        {
          id: 'n',
          generate: () => [
            new Request(`${site.url}/echo?r=1`, { meta: { n: 1 }, middleware: ['from-request'] }),
            new Request(`${site.url}/echo?r=2`, { meta: { n: 2 } }),
          ],
          parse() {},
        },
      ],
    });
    await Mocra.builder()
      .fromToml(file, { watch: false })
      .module(echoModule('by-code', 1, { config: { download_middleware: ['from-code'] } }), () => {})
      .module(echoModule('by-toml', 1), () => {})
      .module(perRequest, () => {})
      .middleware(tag('from-code'), { global: false })
      .middleware(tag('from-toml'), { global: false })
      .middleware(tag('from-request'), { global: false })
      .handleSignals(false)
      .run();
    expect(seen.sort()).toEqual(['from-code@by-code:1', 'from-request@by-request:1', 'from-toml@by-toml:1']);
  });

  test('a module that selects an unregistered middleware fails at start, naming it', async () => {
    const builder = Mocra.builder()
      .module(echoModule('typo', 1, { config: { download_middleware: ['rotate-uas'] } }), () => {})
      .middleware({ name: 'rotate-ua', beforeRequest: () => undefined }, { global: false });
    expect(() => builder.build()).toThrowError(
      expect.objectContaining({
        code: 'MOCRA_ERR_UNKNOWN_MIDDLEWARE',
        message: "module 'typo' selects download middleware 'rotate-uas', which is not registered",
      }),
    );
  });
});

describe('data and store middleware', () => {
  test('data middleware transforms and drops items; the sink sees what is left, ids unchanged', async () => {
    const items: { n: number; upper?: boolean }[] = [];
    const ids: string[] = [];
    const keepEven: DataMiddleware<{ n: number }> = {
      name: 'keep-even',
      weight: 1,
      handle: (item) => (item.n % 2 === 0 ? item : null),
    };
    const mark: DataMiddleware<{ n: number }> = {
      name: 'mark',
      weight: 2,
      handle: (item) => ({ ...item, upper: true }),
    };
    const summary = await Mocra.builder()
      .module(
        defineModule<{ n: number }>({
          name: 'data',
          nodes: [
            {
              id: 'n',
              generate: () => [new Request(`${site.url}/echo?d=1`)],
              parse: (_res, cx) => {
                for (let n = 0; n < 6; n++) cx.emit({ n });
              },
            },
          ],
        }),
        (item, meta) => {
          items.push(item);
          ids.push(meta.itemId.split(':')[1]!);
        },
      )
      .middleware(mark as DataMiddleware)
      .middleware(keepEven as DataMiddleware)
      .handleSignals(false)
      .run();
    expect(items).toEqual([
      { n: 0, upper: true },
      { n: 2, upper: true },
      { n: 4, upper: true },
    ]);
    expect(ids).toEqual(['0', '2', '4']);
    expect(summary.items).toBe(3);
    expect(summary.modules.middlewareDrops).toBe(3);
  });

  test('store lifecycle: beforeStore fails → store and afterStore skipped → retried → stored once, then the sink', async () => {
    const log: string[] = [];
    const sunk: number[] = [];
    const errors: ErrorEvent[] = [];
    let failures = 2;
    const db: StoreMiddleware<number> = {
      name: 'db',
      beforeStore(batch) {
        log.push(`beforeStore(${batch.items.length})`);
        if (failures > 0) {
          failures--;
          throw new Error('connection pool exhausted');
        }
      },
      store(item, meta) {
        log.push(`store(${item}@${meta.index})`);
      },
      afterStore() {
        log.push('afterStore');
      },
    };
    const summary = await Mocra.builder()
      .module(
        defineModule<number>({
          name: 'stored',
          nodes: [
            {
              id: 'n',
              generate: () => [new Request(`${site.url}/echo?s=1`)],
              parse: (_res, cx) => {
                cx.emit(10);
                cx.emit(20);
              },
            },
          ],
        }),
        (n) => void sunk.push(n),
      )
      .middleware(db as StoreMiddleware)
      .retry({ baseDelayMs: 1, maxDelayMs: 5, jitter: false })
      .onError((event) => void errors.push(event))
      .handleSignals(false)
      .run();
    expect(log).toEqual([
      'beforeStore(2)',
      'beforeStore(2)',
      'beforeStore(2)',
      'store(10@0)',
      'store(20@1)',
      'afterStore',
    ]);
    expect(sunk).toEqual([10, 20]);
    expect(errors.map((e) => [e.code, e.retryable])).toEqual([
      ['MOCRA_ERR_MIDDLEWARE_FAILED', true],
      ['MOCRA_ERR_MIDDLEWARE_FAILED', true],
    ]);
    expect(errors[0]!.message).toBe("store middleware 'db' failed in beforeStore: connection pool exhausted");
    expect(summary.items).toBe(2);
    expect(summary.deadLettered).toBe(0);
  });
});
