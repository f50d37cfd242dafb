/**
 * `/data/prices?page=N`: the catalog as a plain HTML `<table>` (a header row, one row per book,
 * a "next" link), the shape of table a scraper turns into a DataFrame.
 */
import { bookSummaryAt } from '../catalog/data.js';
import { htmlPage } from '../content/html.js';
import type { ResolvedFixtureSiteOptions } from '../site/options.js';

export const PRICE_TABLE_PATH = '/data/prices';
export const PRICE_TABLE_PER_PAGE = 100;
export const PRICE_TABLE_HEADER = ['ID', 'Title', 'Price', 'Stock', 'Rating'] as const;

/** One row of the price table as text, keyed by the header. */
export type PriceTableRow = Record<(typeof PRICE_TABLE_HEADER)[number], string>;

export function priceTablePages(cfg: ResolvedFixtureSiteOptions): number {
  return Math.max(1, Math.ceil(cfg.catalog.books / PRICE_TABLE_PER_PAGE));
}

export function priceTableRowsOf(cfg: ResolvedFixtureSiteOptions, page: number): PriceTableRow[] {
  const rows: PriceTableRow[] = [];
  const first = (page - 1) * PRICE_TABLE_PER_PAGE + 1;
  for (let id = first; id < first + PRICE_TABLE_PER_PAGE && id <= cfg.catalog.books; id++) {
    const b = bookSummaryAt(cfg, id);
    rows.push({
      ID: String(id),
      Title: b.title,
      Price: b.price,
      Stock: String(b.stock),
      Rating: `${b.rating}/5`,
    });
  }
  return rows;
}

const esc = (s: string) => s.replace(/[<>&]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;' })[c]!);

export function renderPriceTable(cfg: ResolvedFixtureSiteOptions, page: number): string {
  const pages = priceTablePages(cfg);
  const rows = priceTableRowsOf(cfg, page)
    .map((r) => `<tr>${PRICE_TABLE_HEADER.map((h) => `<td>${esc(r[h])}</td>`).join('')}</tr>`)
    .join('\n');
  const next = page < pages ? `<a class="next" href="${PRICE_TABLE_PATH}?page=${page + 1}">next</a>` : '';
  return htmlPage(
    `Prices, page ${page} of ${pages}`,
    `<h1>Prices</h1>
<table id="prices">
<thead><tr>${PRICE_TABLE_HEADER.map((h) => `<th>${h}</th>`).join('')}</tr></thead>
<tbody>
${rows}
</tbody>
</table>
<p class="pager">page ${page} of ${pages} ${next}</p>`,
  );
}
