// A multi-stage module: listing pages → book pages → the JSON API and a stock check (fan-out),
// then one report once both branches are done (a join). Runs offline against mocra's fixture
// site and prints one line per stage and a summary:
//
//   node --import tsx --conditions=@mocra/source examples/dag-pipeline.ts
//
//   list ─▶ detail ─┬─▶ api ───┐
//                   └─▶ stock ─┴─▶ report (join: once, after api and stock finished)
import { startFixtureSite } from '@mocra/testkit';
import { defineModule, graph, Mocra, type ModuleNode, Request } from 'mocra';

type Out =
  | { kind: 'book'; id: number; title: string }
  | { kind: 'price'; id: number; pence: number }
  | { kind: 'stock'; id: number; inStock: boolean }
  | { kind: 'report'; prices: number; stockChecks: number };

const site = await startFixtureSite({ catalog: { books: 30, perPage: 10 } });

// Entry node: walks the listing pages and sends every book to `detail`.
const list: ModuleNode<Out> = {
  id: 'list',
  generate: () => [new Request(`${site.url}/books/page/1`)],
  parse(res, cx) {
    for (const a of res.$('.product_pod h3 a').toArray()) cx.follow(a.attribs.href!, { node: 'detail' });
    const next = res.$('li.next a').attr('href');
    if (next) cx.follow(next); // the same node parses the next listing page
  },
};

// Emits the book and hands its id on to every successor (api and stock).
const detail: ModuleNode<Out> = {
  id: 'detail',
  parse(res, cx) {
    const book = res.$('article.product');
    const id = Number(book.attr('data-id'));
    cx.emit({ kind: 'book', id, title: book.find('h1').text() });
    cx.next({ id });
  },
};

// Its generate gets what detail handed on, as ctx.params.
const api: ModuleNode<Out> = {
  id: 'api',
  generate: (ctx) => [new Request(`${site.url}/api/books/${String(ctx.params.id)}`)],
  parse(res, cx) {
    const book = res.json<{ id: number; priceCents: number }>();
    cx.emit({ kind: 'price', id: book.id, pence: book.priceCents });
    cx.next({ from: 'api' });
  },
};

const stock: ModuleNode<Out> = {
  id: 'stock',
  // detail already fetched this page: skipDedup fetches it again (the frontier would drop it).
  generate: (ctx) => [
    new Request(`${site.url}/book/${String(ctx.params.id)}`, {
      meta: { id: ctx.params.id },
      skipDedup: true,
    }),
  ],
  parse(res, cx) {
    cx.emit({
      kind: 'stock',
      id: res.request.meta.id as number,
      inStock: res.$('.availability').hasClass('instock'),
    });
    cx.next({ from: 'stock' });
  },
};

// A join: generate runs once per run, after api and stock both finished; it gets every hand-off.
const report: ModuleNode<Out> = {
  id: 'report',
  join: true,
  generate: (ctx) => {
    const inputs = ctx.params.inputs as { from: string }[];
    return [new Request(`${site.url}/echo?report=1`, { meta: { inputs } })];
  },
  parse(res, cx) {
    const inputs = res.request.meta.inputs as { from: string }[];
    cx.emit({
      kind: 'report',
      prices: inputs.filter((i) => i.from === 'api').length,
      stockChecks: inputs.filter((i) => i.from === 'stock').length,
    });
  },
};

const catalog = defineModule<Out>({
  name: 'catalog',
  graph: graph<Out>()
    .edge(list, detail)
    .edge(detail, api)
    .edge(detail, stock)
    .edge(api, report)
    .edge(stock, report)
    .build(),
});

const counts: Record<string, number> = {};
const summary = await Mocra.builder()
  .module(catalog, (out) => {
    counts[out.kind] = (counts[out.kind] ?? 0) + 1;
    if (out.kind === 'report')
      console.log(`report: ${out.prices} prices and ${out.stockChecks} stock checks`);
  })
  .run();

console.log(`books ${counts.book}, prices ${counts.price}, stock ${counts.stock}, reports ${counts.report}`);
console.log(`${summary.items} items from ${summary.pages} pages; joins ${summary.modules.joins}`);
await site.close();
