// `mocra/excel`: xlsx workbooks on exceljs (install it: pnpm add exceljs). `res.workbook()` needs no import.
export type { CellValue, ReadWorkbookOptions, SheetFrameOptions, SheetRowsOptions } from '@mocra/core/excel';
export { readWorkbook, Sheet, Workbook } from '@mocra/core/excel';
