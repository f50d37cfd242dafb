/**
 * `mocra/dataframe`: DataFrames on nodejs-polars (install it: pnpm add nodejs-polars@0.25.2).
 *
 * @module mocra/dataframe
 */
export type {
  ColumnSpec,
  ColumnType,
  DataFrame,
  DataFrameFormat,
  DataFrameSchema,
  DataFrameStoreOptions,
  HtmlTableOptions,
  ParquetCompression,
  TableToDataFrameOptions,
  ToDataFrameOptions,
} from '@mocra/core/dataframe';
export {
  DataFrameStore,
  dataFrameFormatOf,
  dataFrameToItems,
  loadPolars,
  readDataFrame,
  readHtmlTable,
  tableToDataFrame,
  toDataFrame,
} from '@mocra/core/dataframe';
