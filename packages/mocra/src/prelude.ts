/**
 * The prelude: one import for the 80 % path. Re-exports from @mocra/core are listed by name
 * (the core's advanced pieces stay reachable as `@mocra/core`).
 */

// The embedded Raft cluster: `.cluster(ClusterConfig.bootstrap(…))` / `.join(…)` / `.fromEnv()`.
export { ClusterConfig } from '@mocra/cluster/config';
export type {
  BreakerSnapshot,
  CronInput,
  CronTarget,
  DataMiddleware,
  DataSink,
  DeadLetterEntry,
  DeadLetterQuery,
  DownloadContext,
  Downloader,
  DownloadMiddleware,
  Engine,
  EngineOptions,
  EngineStats,
  EnqueueLinksOptions,
  EnqueueLinksResult,
  ErrorEvent,
  FailurePolicy,
  FieldValue,
  FollowOptions,
  FrontierOptions,
  GenerateContext,
  HttpCacheOptions,
  HttpDownloaderOptions,
  ItemMeta,
  LinkCandidate,
  LinkScope,
  Logger,
  LoginContext,
  LoginHook,
  LoginInfo,
  LoginResult,
  LogLevel,
  Middleware,
  MiddlewareContext,
  MiddlewareOptions,
  MocraConfig,
  MocraConfigInput,
  Module,
  ModuleCron,
  ModuleGraphDefinition,
  ModuleNode,
  ModuleSettings,
  PolicyDecision,
  PolicyOverride,
  PolicyStats,
  ProxyChoice,
  RecoveryPolicyOptions,
  RedirectHop,
  RequestData,
  RequestEncodingInit,
  RequestInit,
  RunSummary,
  SimpleRetryPolicyOptions,
  StageConcurrency,
  StageStats,
  StopReason,
  StoreBatch,
  StoreMiddleware,
  WatchdogTimeouts,
} from '@mocra/core';
export {
  AbortedError,
  ApiBindError,
  apiOptionsFromConfig,
  BatchFlushError,
  BlockedResponseError,
  BodyTooLargeError,
  CHANNEL_NAMES,
  CircuitOpenError,
  ConnectionError,
  ContentDecodingError,
  CriticalError,
  createEngine,
  createHttpDownloader,
  cron,
  DataFrameSchemaError,
  DataFrameWriteError,
  defineModule,
  every,
  fingerprintRequest,
  GenerateFailedError,
  graph,
  HandlerTimeoutError,
  HostScheduler,
  HttpStatusError,
  InvalidArgumentError,
  InvalidUrlError,
  isMocraError,
  LoginFailedError,
  MalformedResponseError,
  ManualClock,
  MiddlewareFailedError,
  MissingDependencyError,
  MocraError,
  NonRetryableError,
  normalizeUrl,
  ParseFailedError,
  RedirectLoopError,
  Request,
  Response,
  RetryLaterError,
  RobotsCache,
  runNow,
  SandboxError,
  SessionExpiredError,
  SinkFailedError,
  SitemapError,
  TextDecodingError,
  TimeoutError,
  TooManyRedirectsError,
  UnknownDownloaderError,
  WorkbookReadError,
} from '@mocra/core';
// The browser and WebSocket downloaders are subpaths of the core; the facade names their
// factories, so that a spider can `.downloader(createBrowserDownloader())` from one import.
export type { BrowserDownloaderOptions } from '@mocra/core/browser';
export { BrowserResponse, createBrowserDownloader } from '@mocra/core/browser';
export type { DagJobOptions, DagJobResult } from '@mocra/core/cluster';
// Parsing helpers for scraped text (numbers, dates, case, batches). chrono-node loads on the
// first parseDate; the DataFrame, workbook and sandbox tools are the subpaths mocra/dataframe,
// mocra/excel and mocra/sandbox, so that this import loads none of them.
export type {
  BatchBufferOptions,
  CaseStyle,
  DateLocale,
  ParseDateOptions,
  ToNumericOptions,
} from '@mocra/core/text';
export { BatchBuffer, keysToCase, parseDate, toCase, toNumeric } from '@mocra/core/text';
export type { WebSocketDownloaderOptions } from '@mocra/core/websocket';
export { createWebSocketDownloader, websocketRequest } from '@mocra/core/websocket';
export type {
  DashboardOptions,
  LoggingOptions,
  PolitenessOptions,
  ProxiesOptions,
  SinkLike,
} from './builder.js';
export { Mocra, MocraBuilder } from './builder.js';
export type { ClusterOptions, ClusterSettings } from './cluster.js';
export { clusterSettingsFromConfig, resolveClusterOptions } from './cluster.js';
export type { MocraErrorCode } from './errors.js';
export { MOCRA_ERROR_CODES, SinkClosedError } from './errors.js';
export type { RouteHandler, Router } from './router.js';
export { createRouter } from './router.js';
export type { ChannelEntry, ChannelSinkOptions, FileSinkOptions, JsonlSinkOptions } from './sinks/index.js';
export {
  ChannelSink,
  createChannelSink,
  createCsvSink,
  createFileSink,
  createJsonlSink,
  FileSink,
  JsonlSink,
  onItem,
} from './sinks/index.js';
export type { SitemapSeedOptions } from './sitemap-seeds.js';
export type { Ctx, Spider, SpiderDefinition, SpiderModuleOptions } from './spider.js';
export { compileSpider, defineSpider, Seeds, SPIDER_NODE_ID } from './spider.js';
