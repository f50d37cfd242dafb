/** Routes of the data sources: a price table, a spreadsheet download and an API signed by the site's JS (see signing.ts). */
import { HTML_TYPE, JSON_TYPE } from '../content/html.js';
import type { RouteRegistrar } from '../site/context.js';
import { notFound } from '../site/http.js';
import { PRICE_TABLE_PATH, priceTablePages, renderPriceTable } from './price-table.js';
import {
  expectedSignature,
  renderSignedPage,
  SIGNATURE_HEADER,
  SIGNATURE_WINDOW_S,
  SIGNED_API_PATH,
  SIGNED_PAGE_PATH,
  SIGNED_PAGES,
  SIGNER_JS,
  SIGNER_JS_PATH,
  SIGNER_WASM,
  SIGNER_WASM_PATH,
  signedItemsPage,
} from './signing.js';
import { SPREADSHEET_PATH, spreadsheetBytes, XLSX_TYPE } from './spreadsheet.js';

export const registerDataSourceRoutes: RouteRegistrar = (app, ctx) => {
  let xlsx: Buffer | undefined;
  app.get(SPREADSHEET_PATH, (_req, reply) => {
    xlsx ??= spreadsheetBytes(ctx.cfg);
    return reply
      .type(XLSX_TYPE)
      .header('content-disposition', 'attachment; filename="books.xlsx"')
      .send(xlsx);
  });
  app.get<{ Querystring: { page?: string } }>(PRICE_TABLE_PATH, (req, reply) => {
    const page = req.query.page === undefined ? 1 : Number(req.query.page);
    if (!Number.isInteger(page) || page < 1 || page > priceTablePages(ctx.cfg)) return notFound(reply);
    return reply.type(HTML_TYPE).send(renderPriceTable(ctx.cfg, page));
  });
  app.get(SIGNED_PAGE_PATH, (_req, reply) => reply.type(HTML_TYPE).send(renderSignedPage()));
  app.get(SIGNER_JS_PATH, (_req, reply) => reply.type('text/javascript; charset=utf-8').send(SIGNER_JS));
  app.get(SIGNER_WASM_PATH, (_req, reply) => reply.type('application/wasm').send(Buffer.from(SIGNER_WASM)));
  app.get<{ Querystring: { page?: string; ts?: string } }>(SIGNED_API_PATH, (req, reply) => {
    const page = Number(req.query.page);
    const ts = Number(req.query.ts);
    const refuse = (error: string) => reply.code(403).type(JSON_TYPE).send({ error });
    if (!Number.isInteger(page) || page < 1 || page > SIGNED_PAGES) {
      return reply.code(404).type(JSON_TYPE).send({ error: 'no such page' });
    }
    if (!Number.isInteger(ts) || Math.abs(Date.now() / 1000 - ts) > SIGNATURE_WINDOW_S) {
      return refuse('ts must be the current Unix time in seconds');
    }
    const signature = req.headers[SIGNATURE_HEADER];
    if (signature !== expectedSignature(`${SIGNED_API_PATH}?page=${page}`, req.query.ts!)) {
      return refuse('bad signature');
    }
    return reply.type(JSON_TYPE).send({ page, pages: SIGNED_PAGES, items: signedItemsPage(ctx.cfg, page) });
  });
};
