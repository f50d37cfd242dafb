/**
 * Parsing helpers for scraped text: numbers, dates, string case, and a batch buffer.
 *
 * @module @mocra/core/text
 */
export type { BatchBufferOptions } from './batch-buffer.js';
export { BatchBuffer } from './batch-buffer.js';
export type { CaseStyle } from './case.js';
export {
  CASE_STYLES,
  camelCase,
  capitalCase,
  constantCase,
  dotCase,
  kebabCase,
  keysToCase,
  pascalCase,
  sentenceCase,
  snakeCase,
  toCase,
} from './case.js';
export type { DateLocale, ParseDateOptions } from './dates.js';
export { parseDate } from './dates.js';
export type { ToNumericOptions } from './numeric.js';
export { toNumeric } from './numeric.js';
