/**
 * The prelude: one import for the 80 % path. Re-exports from @mocra/core are listed by name
 * (the core's advanced pieces stay reachable as `@mocra/core`).
 */

export type {
  DataSink,
  Downloader,
  Engine,
  EngineOptions,
  EngineStats,
  ErrorEvent,
  FailurePolicy,
  FollowOptions,
  FrontierOptions,
  GenerateContext,
  HttpDownloaderOptions,
  ItemMeta,
  Logger,
  LogLevel,
  Module,
  ModuleNode,
  PolicyDecision,
  RedirectHop,
  RequestData,
  RequestInit,
  RunSummary,
  SimpleRetryPolicyOptions,
  StageConcurrency,
  StageStats,
  StopReason,
} from '@mocra/core';
export {
  AbortedError,
  BodyTooLargeError,
  CHANNEL_NAMES,
  ConnectionError,
  ContentDecodingError,
  CriticalError,
  createEngine,
  createHttpDownloader,
  fingerprintRequest,
  GenerateFailedError,
  HttpStatusError,
  InvalidArgumentError,
  InvalidUrlError,
  isMocraError,
  MalformedResponseError,
  MocraError,
  NonRetryableError,
  normalizeUrl,
  ParseFailedError,
  RedirectLoopError,
  Request,
  Response,
  RetryLaterError,
  SinkFailedError,
  TextDecodingError,
  TimeoutError,
  TooManyRedirectsError,
} from '@mocra/core';
export type { LoggingOptions, SinkLike } from './builder.js';
export { Mocra, MocraBuilder } from './builder.js';
export type { MocraErrorCode } from './errors.js';
export { MOCRA_ERROR_CODES, SinkClosedError } from './errors.js';
export type { ChannelEntry, ChannelSinkOptions, JsonlSinkOptions } from './sinks/index.js';
export { ChannelSink, createChannelSink, createJsonlSink, JsonlSink, onItem } from './sinks/index.js';
export type { Ctx, Spider, SpiderDefinition } from './spider.js';
export { compileSpider, defineSpider, Seeds, SPIDER_NODE_ID } from './spider.js';
