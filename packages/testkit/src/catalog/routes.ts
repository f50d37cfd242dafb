/** Routes of the book catalog: listing pages, category pages, detail pages and the book JSON API. */
import { HTML_TYPE, JSON_TYPE } from '../content/html.js';
import type { RouteRegistrar } from '../site/context.js';
import { notFound, positiveInt } from '../site/http.js';
import {
  bookAt,
  bookSummaryAt,
  type Category,
  categoryAt,
  categoryIndexOf,
  categoryPageIds,
  listingIds,
  listingPageCount,
} from './data.js';
import { renderBook, renderListing, sidebar } from './render.js';

export const registerCatalogRoutes: RouteRegistrar = (app, ctx) => {
  const cfg = ctx.cfg;
  const { books, categories, perPage } = cfg.catalog;
  const pages = listingPageCount(cfg);
  // The sidebar lists every category on every page: build it once, not per request.
  const cats: Category[] = [];
  for (let c = 0; c < categories; c++) cats.push(categoryAt(cfg, c));
  const side = sidebar(cats);

  app.get('/books', (_req, reply) => reply.redirect('/books/page/1', 302));

  app.get<{ Params: { n: string } }>('/books/page/:n', (req, reply) => {
    const page = positiveInt(req.params.n);
    if (page < 1 || page > pages) return notFound(reply);
    return reply.type(HTML_TYPE).send(
      renderListing({
        heading: 'All books',
        base: '/books',
        page,
        pages,
        total: books,
        from: (page - 1) * perPage + 1,
        books: listingIds(cfg, page).map((id) => bookSummaryAt(cfg, id)),
        sidebar: side,
      }),
    );
  });

  app.get<{ Params: { slug: string; n: string } }>('/books/category/:slug/page/:n', (req, reply) => {
    const index = categoryIndexOf(cfg, req.params.slug);
    if (index < 0) return notFound(reply);
    const cat = cats[index]!;
    const page = positiveInt(req.params.n);
    if (page < 1 || page > cat.pages) return notFound(reply);
    return reply.type(HTML_TYPE).send(
      renderListing({
        heading: cat.name,
        base: `/books/category/${cat.slug}`,
        page,
        pages: cat.pages,
        total: cat.books,
        from: (page - 1) * perPage + 1,
        books: categoryPageIds(cfg, index, page).map((id) => bookSummaryAt(cfg, id)),
        sidebar: side,
      }),
    );
  });

  app.get<{ Params: { id: string } }>('/book/:id', (req, reply) => {
    const id = positiveInt(req.params.id);
    if (id < 1 || id > books) return notFound(reply);
    const book = bookAt(cfg, id);
    return reply.type(HTML_TYPE).send(renderBook(book, cats[(id - 1) % categories]!.url));
  });

  app.get<{ Params: { id: string } }>('/api/books/:id', (req, reply) => {
    const id = positiveInt(req.params.id);
    if (id < 1 || id > books) return reply.code(404).type(JSON_TYPE).send('{"error":"not found"}');
    return reply.type(JSON_TYPE).send(JSON.stringify(bookAt(cfg, id)));
  });
};
