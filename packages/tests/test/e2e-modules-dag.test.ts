// Multi-node modules on the fixture site, end to end through the facade: a list → detail → JSON
// API pipeline with fan-out and a join (exact item counts), every entry node starting, the
// advance gate once per run, the stop signal, meta handed from a parse to the next generate, and
// a parse starting another module's run.
import diagnostics_channel from 'node:diagnostics_channel';
import {
  createEngine,
  MODULE_CHANNEL_NAMES,
  type ModuleDropMessage,
  type ModuleFlowMessage,
} from '@mocra/core';
import { catalogBook, type FixtureSite, startFixtureSite } from '@mocra/testkit';
import { defineModule, graph, Mocra, type ModuleNode, Request, type RunSummary } from 'mocra';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

const BOOKS = 45; // 3 listing pages of 20, 20 and 5
const SITE_OPTIONS = { catalog: { books: BOOKS, perPage: 20, categories: 3 } };
let site: FixtureSite;

beforeAll(async () => {
  site = await startFixtureSite(SITE_OPTIONS);
});
afterAll(async () => {
  await site?.close();
});

type Item =
  | { kind: 'detail'; id: number; title: string }
  | { kind: 'api'; id: number; price: number }
  | { kind: 'echo'; id: number; path: string }
  | { kind: 'summary'; inputs: number; fromApi: number; fromEcho: number };

function collector<T>() {
  const items: T[] = [];
  return { items, sink: (item: T) => void items.push(item) };
}

/**
 *   list ─▶ detail ─┬─▶ api ──┐
 *                   └─▶ echo ─┴─▶ summary (join)
 */
function catalogPipeline() {
  const list: ModuleNode<Item> = {
    id: 'list',
    generate: () => [new Request(`${site.url}/books/page/1`)],
    parse(res, cx) {
      for (const a of res.$('.product_pod h3 a').toArray()) cx.follow(a.attribs.href!, { node: 'detail' });
      const next = res.$('ul.pager li.next a').attr('href');
      if (next) cx.follow(next); // same node: pagination
    },
  };
  const detail: ModuleNode<Item> = {
    id: 'detail',
    parse(res, cx) {
      const book = res.$('article.product');
      const id = Number(book.attr('data-id'));
      cx.emit({ kind: 'detail', id, title: book.find('h1').text() });
      cx.next({ id }); // fan-out: api and echo each get { id }
    },
  };
  const api: ModuleNode<Item> = {
    id: 'api',
    generate: (ctx) => [new Request(`${site.url}/api/books/${String(ctx.params.id)}`)],
    parse(res, cx) {
      const book = res.json<{ id: number; priceCents: number }>();
      cx.emit({ kind: 'api', id: book.id, price: book.priceCents });
      cx.next({ id: book.id, via: 'api' });
    },
  };
  const echo: ModuleNode<Item> = {
    id: 'echo',
    generate: (ctx) => [new Request(`${site.url}/echo?book=${String(ctx.params.id)}`)],
    parse(res, cx) {
      const { url } = res.json<{ url: string }>();
      cx.emit({ kind: 'echo', id: Number(new URL(url, site.url).searchParams.get('book')), path: url });
      cx.next({ id: 0, via: 'echo' });
    },
  };
  const summary: ModuleNode<Item> = {
    id: 'summary',
    join: true,
    generate: (ctx) => [
      new Request(`${site.url}/echo?summary=1`, {
        meta: { inputs: ctx.params.inputs, trigger: ctx.trigger },
      }),
    ],
    parse(res, cx) {
      const inputs = res.request.meta.inputs as { from: string }[];
      expect(res.request.meta.trigger).toBe('join');
      cx.emit({
        kind: 'summary',
        inputs: inputs.length,
        fromApi: inputs.filter((i) => i.from === 'api').length,
        fromEcho: inputs.filter((i) => i.from === 'echo').length,
      });
    },
  };
  return defineModule<Item>({
    name: 'catalog',
    graph: graph<Item>()
      .edge(list, detail)
      .edge(detail, api)
      .edge(detail, echo)
      .edge(api, summary)
      .edge(echo, summary)
      .build(),
  });
}

describe('a list → detail → JSON API pipeline', () => {
  test('fan-out to every successor, a join after both finished, exact item counts', async () => {
    const { items, sink } = collector<Item>();
    const joins: ModuleFlowMessage[] = [];
    const onJoin = (m: unknown) => joins.push(m as ModuleFlowMessage);
    diagnostics_channel.subscribe(MODULE_CHANNEL_NAMES.join, onJoin);
    site.resetStats();
    let summary: RunSummary;
    try {
      summary = await Mocra.builder()
        .module(catalogPipeline(), sink)
        .concurrency(8)
        .handleSignals(false)
        .run();
    } finally {
      diagnostics_channel.unsubscribe(MODULE_CHANNEL_NAMES.join, onJoin);
    }
    const of = (kind: Item['kind']) => items.filter((i) => i.kind === kind);
    expect(of('detail')).toHaveLength(BOOKS);
    expect(of('api')).toHaveLength(BOOKS);
    expect(of('echo')).toHaveLength(BOOKS);
    expect(of('summary')).toEqual([{ kind: 'summary', inputs: 2 * BOOKS, fromApi: BOOKS, fromEcho: BOOKS }]);
    expect(items).toHaveLength(3 * BOOKS + 1);
    // Meta flowed from the detail parse to the api generate: each book's API record is its own.
    for (const item of of('api') as Extract<Item, { kind: 'api' }>[]) {
      expect(item.price).toBe(catalogBook(item.id, SITE_OPTIONS)!.priceCents);
    }
    const idsOf = (kind: Item['kind']) => new Set((of(kind) as { id: number }[]).map((i) => i.id));
    expect(idsOf('api')).toEqual(idsOf('detail'));
    expect(joins).toEqual([{ runId: summary.runId, module: 'catalog', from: undefined, to: 'summary' }]);
    expect(summary.modules.joins).toBe(1);
    expect(summary.modules.handoffs).toBe(2 * BOOKS); // detail → api and detail → echo; api/echo → summary are collected
    expect(summary.pages).toBe(3 + BOOKS * 3 + 1);
    expect(summary.errors).toBe(0);
  });

  test('without a join, a merge node runs once per incoming hand-off', async () => {
    const generated: unknown[] = [];
    const a: ModuleNode = {
      id: 'a',
      generate: () => [1, 2, 3].map((n) => new Request(`${site.url}/echo?a=${n}`)),
      parse: (_res, cx) => cx.next({ from: 'a' }),
    };
    const b: ModuleNode = {
      id: 'b',
      generate: () => [new Request(`${site.url}/echo?b=1`)],
      parse: (_res, cx) => cx.next({ from: 'b' }),
    };
    const merge: ModuleNode = {
      id: 'merge',
      generate(ctx) {
        generated.push(ctx.params.from);
        return [];
      },
      parse() {},
    };
    await Mocra.builder()
      .module(
        defineModule({ name: 'fan-in', graph: graph().edge(a, merge).edge(b, merge).build() }),
        () => {},
      )
      .handleSignals(false)
      .run();
    expect(generated.sort()).toEqual(['a', 'a', 'a', 'b']);
  });
});

describe('entry nodes, the advance gate, meta', () => {
  test('every entry node of a graph starts (upstream started only the first)', async () => {
    const { items, sink } = collector<string>();
    const root = (id: string): ModuleNode<string> => ({
      id,
      generate: () => [new Request(`${site.url}/echo?root=${id}`)],
      parse: (_res, cx) => cx.emit(id),
    });
    const end: ModuleNode<string> = { id: 'end', parse() {} };
    const mod = defineModule<string>({
      name: 'roots',
      graph: graph<string>().edge(root('r1'), end).edge(root('r2'), end).edge(root('r3'), end).build(),
    });
    await Mocra.builder().module(mod, sink).handleSignals(false).run();
    expect(items.sort()).toEqual(['r1', 'r2', 'r3']);
  });

  test('a node with no follow-ups advances its run to the successors exactly once per run', async () => {
    const advances: unknown[] = [];
    const onAdvance = (m: unknown) => advances.push(m);
    const step2Calls: { runId: string; trigger: string; page: unknown }[] = [];
    const step1: ModuleNode = {
      id: 'step1',
      // five pages, none of which follows anything: five chances to advance, one advance
      generate: (ctx) =>
        [1, 2, 3, 4, 5].map(
          (n) => new Request(`${site.url}/books/page/${n}?run=${ctx.runId}`, { meta: { page: n } }),
        ),
      parse() {},
    };
    const step2: ModuleNode = {
      id: 'step2',
      generate(ctx) {
        step2Calls.push({ runId: ctx.runId, trigger: ctx.trigger, page: ctx.params.page });
        return [];
      },
      parse() {},
    };
    const engine = createEngine({ handleSignals: false, autoSeed: false, endWhenIdle: true });
    engine.register(defineModule({ name: 'gated', steps: [step1, step2] }), { write() {} });
    diagnostics_channel.subscribe(MODULE_CHANNEL_NAMES.advance, onAdvance);
    try {
      const run = engine.run();
      await engine.submit({ module: 'gated', runId: 'run-a' });
      await engine.submit({ module: 'gated', runId: 'run-b' });
      await run;
    } finally {
      diagnostics_channel.unsubscribe(MODULE_CHANNEL_NAMES.advance, onAdvance);
    }
    expect(step2Calls.map((c) => c.runId).sort()).toEqual(['run-a', 'run-b']);
    expect(step2Calls.every((c) => c.trigger === 'advance')).toBe(true);
    // the meta of the parsed request is handed on (one of the five pages)
    expect(step2Calls.every((c) => [1, 2, 3, 4, 5].includes(c.page as number))).toBe(true);
    expect(advances).toHaveLength(2);
  });

  test('steps: meta handed on with cx.next reaches the next generate; a leaf cx.next is reported', async () => {
    const { items, sink } = collector<string>();
    const errors: string[] = [];
    const first: ModuleNode<string> = {
      id: 'first',
      generate: () => [new Request(`${site.url}/books/page/1`)],
      parse(res, cx) {
        const href = res.$('.product_pod h3 a').first().attr('href')!;
        cx.next({ href, title: res.$('.product_pod h3 a').first().attr('title') });
      },
    };
    const second: ModuleNode<string> = {
      id: 'second',
      generate: (ctx) => [
        new Request(new URL(String(ctx.params.href), site.url).href, { meta: { title: ctx.params.title } }),
      ],
      parse(res, cx) {
        cx.emit(`${String(res.request.meta.title)} = ${res.$('article.product h1').text()}`);
        cx.next({}); // 'second' is the last step: there is no successor
      },
    };
    await Mocra.builder()
      .module(defineModule<string>({ name: 'chain', steps: [first, second] }), sink)
      .onError((event) => void errors.push(event.message))
      .handleSignals(false)
      .run();
    const title = catalogBook(1, SITE_OPTIONS)!.title;
    expect(items).toEqual([`${title} = ${title}`]);
    expect(errors).toEqual(['cx.next() in chain/second: the node has no successor']);
  });
});

describe('the stop signal and other modules', () => {
  test('a stop ends the run: later work of it is dropped and reported, never silently lost', async () => {
    const { items, sink } = collector<number>();
    const drops: ModuleDropMessage[] = [];
    const onDrop = (m: unknown) => drops.push(m as ModuleDropMessage);
    let stopped = false;
    const pages: ModuleNode<number> = {
      id: 'pages',
      generate: () =>
        [1, 2, 3, 4, 5, 6].map((n) => new Request(`${site.url}/books/page/${n}`, { meta: { n } })),
      parse(res, cx) {
        cx.emit(res.request.meta.n as number);
        cx.follow(`${site.url}/book/1`, { node: 'never' });
        if (!stopped) {
          stopped = true;
          cx.stop('found what we came for');
        }
      },
    };
    const never: ModuleNode<number> = { id: 'never', parse: () => expect.fail('parsed after the stop') };
    diagnostics_channel.subscribe(MODULE_CHANNEL_NAMES.drop, onDrop);
    let summary: RunSummary;
    try {
      summary = await Mocra.builder()
        .module(defineModule<number>({ name: 'stopper', nodes: [pages, never] }), sink)
        .stages({ parse: 1 })
        .concurrency(2)
        .handleSignals(false)
        .run();
    } finally {
      diagnostics_channel.unsubscribe(MODULE_CHANNEL_NAMES.drop, onDrop);
    }
    expect(items).toHaveLength(1); // the parse that stopped still writes its items
    // its follow-up, and the five other pages (at download or at parse), were reported
    const pagesDropped = drops.filter(
      (d) => d.stage === 'download' || (d.stage === 'parse' && d.node === 'pages'),
    );
    const followDropped = drops.filter((d) => d.stage === 'parse' && d.node === 'never');
    expect(followDropped).toHaveLength(1);
    expect(pagesDropped).toHaveLength(5);
    expect(new Set(pagesDropped.map((d) => d.url)).size).toBe(5);
    expect(drops.every((d) => d.reason === 'found what we came for' && d.module === 'stopper')).toBe(true);
    expect(summary.modules.droppedAfterStop).toBe(6);
    expect(summary.modules.stops).toBe(1);
  });

  test('a parse starts another module: its entry nodes run with the params, in the same run', async () => {
    const seen: { module: string; runId: string; params: unknown }[] = [];
    const first = defineModule<string>({
      name: 'first',
      nodes: [
        {
          id: 'n',
          generate: () => [new Request(`${site.url}/books/page/1`)],
          parse(res, cx) {
            cx.start('second', { params: { count: res.$('.product_pod').length } });
          },
        },
      ],
    });
    const secondNode = (id: string): ModuleNode<string> => ({
      id,
      generate(ctx) {
        seen.push({ module: ctx.module, runId: ctx.runId, params: ctx.params });
        return [new Request(`${site.url}/echo?${id}=${String(ctx.params.count)}`)];
      },
      parse: (res, cx) => cx.emit(new URL(res.url).search),
    });
    const second = defineModule<string>({
      name: 'second',
      graph: graph<string>().edge(secondNode('x'), secondNode('z')).node(secondNode('y')).build(),
    });
    const { items, sink } = collector<string>();
    const engine = Mocra.builder()
      .module(first, () => {})
      .module(second, sink)
      .handleSignals(false)
      .build();
    const runSecondAlone = engine.registry.get('second');
    expect(runSecondAlone.entry.map((n) => n.id)).toEqual(['x', 'y']);
    // only 'first' is seeded by the test; 'second' runs because first's parse starts it
    const run = engine.run();
    await run;
    const fromStart = seen.filter((s) => (s.params as { count?: number }).count === 20);
    expect(fromStart.map((s) => s.module)).toEqual(['second', 'second']);
    expect(new Set(fromStart.map((s) => s.runId))).toEqual(new Set([engine.runId]));
    expect(items.sort()).toContain('?x=20');
    expect(items.sort()).toContain('?y=20');
  });
});
