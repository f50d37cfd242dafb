/**
 * Workbooks (xlsx) on exceljs (an optional peer dependency, loaded on first use).
 *
 * @module @mocra/core/excel
 */
export type { CellValue, ReadWorkbookOptions, SheetFrameOptions, SheetRowsOptions } from './workbook.js';
export { readWorkbook, Sheet, Workbook } from './workbook.js';
