export type { DataChainResult, MiddlewareDropMessage, MiddlewarePlan } from './manager.js';
export {
  createMiddlewareManager,
  MIDDLEWARE_CHANNEL_NAMES,
  MiddlewareManager,
  middlewareKind,
} from './manager.js';
export type {
  ChainResult,
  DataMiddleware,
  DownloadMiddleware,
  Middleware,
  MiddlewareContext,
  MiddlewareKind,
  MiddlewareOptions,
  MiddlewareResult,
  MiddlewareSelection,
  StoreBatch,
  StoreMiddleware,
} from './types.js';
