/**
 * `mocra/excel`: xlsx workbooks on exceljs (install it: pnpm add exceljs). `res.workbook()` needs no import.
 *
 * @module mocra/excel
 */
export type { CellValue, ReadWorkbookOptions, SheetFrameOptions, SheetRowsOptions } from '@mocra/core/excel';
export { readWorkbook, Sheet, Workbook } from '@mocra/core/excel';
