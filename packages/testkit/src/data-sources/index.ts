// The data sources of the fixture site: a spreadsheet download and an API signed by the site's JS/WASM.

import type { FixtureSiteOptions } from '../site/options.js';
import { resolveFixtureOptions } from '../site/options.js';
import { type PriceTableRow, priceTablePages, priceTableRowsOf } from './price-table.js';
import { SIGNED_PAGES, type SignedItem, signedItemsPage } from './signing.js';
import { type SpreadsheetRow, spreadsheetRowsOf } from './spreadsheet.js';

export {
  PRICE_TABLE_HEADER,
  PRICE_TABLE_PATH,
  PRICE_TABLE_PER_PAGE,
  type PriceTableRow,
} from './price-table.js';
export {
  expectedSignature,
  SIGNATURE_HEADER,
  SIGNATURE_WINDOW_S,
  SIGNED_API_PATH,
  SIGNED_PAGE_PATH,
  SIGNED_PAGES,
  SIGNED_PER_PAGE,
  SIGNER_JS,
  SIGNER_JS_PATH,
  SIGNER_WASM,
  SIGNER_WASM_PATH,
  type SignedItem,
} from './signing.js';
export { SPREADSHEET_HEADER, SPREADSHEET_PATH, type SpreadsheetRow } from './spreadsheet.js';

/** Every item of the signed API, in page order (what a spider that signs correctly collects). */
export function signedItems(options: FixtureSiteOptions = {}): SignedItem[] {
  const cfg = resolveFixtureOptions(options);
  return Array.from({ length: SIGNED_PAGES }, (_, i) => signedItemsPage(cfg, i + 1)).flat();
}

/** The rows of the "Books" sheet of `/data/books.xlsx`, typed as a reader should give them. */
export function spreadsheetRows(options: FixtureSiteOptions = {}): SpreadsheetRow[] {
  return spreadsheetRowsOf(resolveFixtureOptions(options));
}

/** Every row of the price table (`/data/prices?page=1…`), as the cells' text, in page order. */
export function priceTableRows(options: FixtureSiteOptions = {}): PriceTableRow[] {
  const cfg = resolveFixtureOptions(options);
  return Array.from({ length: priceTablePages(cfg) }, (_, i) => priceTableRowsOf(cfg, i + 1)).flat();
}
