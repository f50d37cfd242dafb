// @mocra/testkit — an offline, deterministic fixture web site for testing crawlers and spiders.
// See README.md for every route and docs/fixture-site.md for the exact counts tests can assert.

export { type Book, type Category, catalogBook, catalogBooks, catalogCategories } from './catalog/data.js';
export { SeededRandom } from './content/random.js';
export {
  fixtureSitemaps,
  SITEMAP_GZIP_PATH,
  SITEMAP_INDEX_PATH,
  SITEMAP_TEXT_PATH,
  type SitemapLayout,
} from './crawl-rules/sitemaps.js';
export {
  EMPTY_GROUP_ROBOTS,
  FOREIGN_SITEMAP_PATH,
  LATE_META_TITLE,
  LEGACY_TITLE,
  STANDARDS_PATHS,
  STANDARDS_ROBOTS,
} from './crawl-rules/standards.js';
export {
  expectedSignature,
  PRICE_TABLE_HEADER,
  PRICE_TABLE_PATH,
  PRICE_TABLE_PER_PAGE,
  type PriceTableRow,
  priceTableRows,
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
  SPREADSHEET_HEADER,
  SPREADSHEET_PATH,
  type SpreadsheetRow,
  signedItems,
  spreadsheetRows,
} from './data-sources/index.js';
export {
  FixtureListenError,
  FixtureOptionError,
  TESTKIT_ERROR_CODES,
  TestkitError,
  type TestkitErrorCode,
  UnknownHostError,
} from './errors.js';
export { expectedCounts, type FixtureExpectations } from './expected.js';
export { paddedPage } from './failures/bodies.js';
export {
  CHARSET_PAGES,
  type CharsetPage,
  type CharsetPageName,
  charsetPageBytes,
} from './failures/charsets.js';
export { crc32, crc32OfZeros } from './failures/crc32.js';
export { COMPRESSIONS, type Compression } from './failures/transport-routes.js';
export {
  GRAPH_LIMITS,
  type GraphSpec,
  graphLinkCount,
  graphLinks,
  graphPageCount,
  graphPath,
  graphTreeDepth,
} from './graph/graph.js';
export {
  HOSTILE_BOMB_BYTES,
  HOSTILE_CREDENTIALS,
  type HostileSite,
  type HostileSiteOptions,
  MAX_HOSTILE_LINKS,
  MAX_HUGE_TITLE_BYTES,
  MAX_STACKED_ENCODINGS,
  startHostileSite,
} from './hostile/hostile-site.js';
export type { EchoResponse } from './inspect/routes.js';
export { type Author, type Quote, quoteAuthors, quoteList, quoteTags, type Tag } from './quotes/data.js';
export { type ApiQuote, type ApiQuotesPage, CSRF_COOKIE, SESSION_COOKIE } from './quotes/routes.js';
export type { AuthCounters } from './quotes/sessions.js';
export type { StreamMessage } from './realtime/websocket.js';
export { HOME_LINKS } from './site/home-routes.js';
export type {
  CatalogOptions,
  FixtureSiteOptions,
  LoginOptions,
  QuotesOptions,
  ResolvedFixtureSiteOptions,
  RobotsOption,
  RobotsRules,
} from './site/options.js';
export { DEFAULT_SEED, resolveFixtureOptions } from './site/options.js';
export type { FixtureSiteStats } from './site/site-stats.js';
export {
  type FixtureSite,
  startFixtureSite,
} from './site/start.js';
export {
  filterLog,
  type LogFilter,
  maxConcurrency,
  maxRequestsInWindow,
  minStartInterval,
} from './stats/analysis.js';
export type { RequestLogEntry } from './stats/request-log.js';
export type { FixtureStats, HostStats } from './stats/tracker.js';
export { requestChannel } from './stats/tracker.js';
