import { type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  compileSpider,
  defineSpider,
  Mocra,
  Request,
  type Response,
  Seeds,
  type Spider,
} from '../src/index.js';

let site: FixtureSite;
beforeAll(async () => {
  site = await startFixtureSite({ catalog: { books: 30, perPage: 10, categories: 3 } });
});
afterAll(async () => {
  await site.close();
});

describe('defineSpider', () => {
  test('rejects definitions it cannot run, with MOCRA_ERR_INVALID_ARGUMENT', () => {
    const invalid = (d: unknown) =>
      expect(() => defineSpider(d as Parameters<typeof defineSpider>[0])).toThrow(
        expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
      );
    invalid(null);
    invalid({ name: '', startUrls: [], parse() {} });
    invalid({ name: 'x', startUrls: [] });
    invalid({ name: 'x', parse() {} });
    invalid({ name: 'x', startUrls: 'http://a', parse() {} });
  });

  test('startUrls and start() both seed, in that order', async () => {
    const spider = defineSpider({
      name: 's',
      startUrls: ['http://a.test/1'],
      start(seeds) {
        seeds.get('http://a.test/2');
      },
      parse() {},
    });
    const seeds = new Seeds();
    await spider.start(seeds);
    expect(seeds.requests.map((r) => r.url)).toEqual(['http://a.test/1', 'http://a.test/2']);
  });

  test('a class-based spider keeps `this`', async () => {
    class Titles implements Spider<string> {
      readonly name = 'titles';
      readonly prefix = 'title:';
      start(seeds: Seeds) {
        seeds.get(`${site.url}/books/page/1`);
      }
      parse(res: Response, cx: { emit(item: string): void }) {
        cx.emit(this.prefix + res.$('title').text());
      }
    }
    const items: string[] = [];
    await Mocra.builder()
      .spider(new Titles(), (t) => void items.push(t))
      .run();
    expect(items).toEqual([expect.stringMatching(/^title:.*Page 1 of 3/)]);
  });

  test('compiles to a one-node module', () => {
    const mod = compileSpider(defineSpider({ name: 'one', startUrls: ['http://a.test/'], parse() {} }));
    expect(mod.name).toBe('one');
    expect(mod.nodes?.map((n) => n.id)).toEqual(['spider']);
  });
});

describe('Seeds', () => {
  test('get/add return the request to adjust; adjustments reach the server', async () => {
    const seen: unknown[] = [];
    const spider = defineSpider<unknown>({
      name: 'seeds',
      start(seeds) {
        seeds.get(`${site.url}/echo?from=get`).header('x-seed', 'one').withMeta({ n: 1 });
        const posted = seeds.add({ url: `${site.url}/echo?from=add`, method: 'POST', body: 'hello' });
        posted.headers['content-type'] = 'text/plain';
        posted.meta.n = 2;
      },
      parse(res, cx) {
        cx.emit({ meta: cx.meta, echo: res.json() });
      },
    });
    await Mocra.builder()
      .spider(spider, (item) => void seen.push(item))
      .run();
    expect(seen).toHaveLength(2);
    expect(seen).toContainEqual({
      meta: { n: 1 },
      echo: expect.objectContaining({ method: 'GET', headers: expect.objectContaining({ 'x-seed': 'one' }) }),
    });
    expect(seen).toContainEqual({
      meta: { n: 2 },
      echo: expect.objectContaining({ method: 'POST', body: 'hello', url: '/echo?from=add' }),
    });
  });

  test('add() accepts a Request instance as is', () => {
    const seeds = new Seeds();
    const r = new Request('http://a.test/');
    expect(seeds.add(r)).toBe(r);
  });
});

describe('Mocra.builder', () => {
  test('runs with no services and no config, auto-seeded, and returns a summary', async () => {
    const titles: string[] = [];
    const spider = defineSpider<string>({
      name: 'listing',
      startUrls: [`${site.url}/books/page/1`],
      parse(res, cx) {
        for (const el of res.$('article.product_pod h3 a').toArray()) cx.emit(res.$(el).text());
        const next = res.$('li.next a').attr('href');
        if (next) cx.follow(next);
      },
    });
    const summary = await Mocra.builder()
      .spider(spider, (t) => void titles.push(t))
      .concurrency(2)
      .run();
    expect(summary).toMatchObject({ reason: 'idle', pages: 3, items: 30, errors: 0, pending: 0 });
    expect(new Set(titles).size).toBe(30);
  });

  test('several spiders in one run', async () => {
    const got: string[] = [];
    const make = (name: string, path: string) =>
      defineSpider<string>({
        name,
        startUrls: [`${site.url}${path}`],
        parse: (res, cx) => cx.emit(`${name}:${res.status}`),
      });
    await Mocra.builder()
      .spider(make('a', '/books/page/1'), (s) => void got.push(s))
      .spider(make('b', '/status/404'), (s) => void got.push(s))
      .run();
    expect(got.sort()).toEqual(['a:200', 'b:404']);
  });

  test('misuse fails with MOCRA_ERR_INVALID_ARGUMENT', () => {
    const spider = defineSpider({ name: 'dup', startUrls: ['http://a.test/'], parse() {} });
    const code = expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' });
    expect(() =>
      Mocra.builder()
        .spider(spider, () => {})
        .spider(spider, () => {}),
    ).toThrow(code);
    expect(() => Mocra.builder().build()).toThrow(code);
    expect(() => Mocra.builder().spider(spider, {} as never)).toThrow(code);
    expect(() =>
      Mocra.builder()
        .spider(spider, () => {})
        .concurrency(0)
        .build(),
    ).toThrow(code);
  });

  test('build() gives the engine for control; signal() stops the run', async () => {
    const controller = new AbortController();
    const spider = defineSpider({
      name: 'slow',
      startUrls: [`${site.url}/delay/5000`, `${site.url}/books/page/1`],
      parse() {},
    });
    const engine = Mocra.builder()
      .spider(spider, () => {})
      .signal(controller.signal)
      .shutdownTimeout(50)
      .build();
    const running = engine.run();
    // Abort once the fast page is done and only the delayed one is in flight.
    for (;;) {
      const s = await engine.stats();
      if (s.pages === 1 && s.stages.download.inFlight === 1) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    controller.abort();
    const summary = await running;
    expect(summary.reason).toBe('aborted');
    // The delayed request was aborted and put back, not lost and not an error.
    expect(summary.pending).toBe(1);
    expect(summary.errors).toBe(0);
  });
});
