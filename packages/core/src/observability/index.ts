export type {
  DagMessage,
  DropMessage,
  ErrorMessage,
  HandlerMessage,
  ItemMessage,
  RequestMessage,
  ResponseMessage,
  RunMessage,
  StageMessage,
} from './channels.js';
export { CHANNEL_NAMES, channels } from './channels.js';
export type { DigestedFailure, ErrorExample } from './error-digest.js';
export { ErrorDigest, rootCause } from './error-digest.js';
export type { Logger, LoggerOptions, LogLevel } from './logger.js';
export { createLogger, resolveLogLevel } from './logger.js';
