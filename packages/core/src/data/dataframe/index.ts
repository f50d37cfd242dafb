/**
 * DataFrames on nodejs-polars (an optional peer dependency, loaded on first use).
 *
 * @module @mocra/core/dataframe
 */
export type { HtmlSource, HtmlTableOptions, TableToDataFrameOptions, ToDataFrameOptions } from './convert.js';
export { dataFrameToItems, readHtmlTable, tableToDataFrame, toDataFrame } from './convert.js';
export type { DataFrame, PolarsModule } from './polars.js';
export { loadPolars } from './polars.js';
export type { ColumnSpec, ColumnType, DataFrameSchema, ResolvedColumn } from './schema.js';
export type { DataFrameFormat, DataFrameStoreOptions, ParquetCompression } from './store.js';
export { DataFrameStore, dataFrameFormatOf, readDataFrame } from './store.js';
