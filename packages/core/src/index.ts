/**
 * Public entry of @mocra/core. Each folder names what it exports; this file lists them
 * explicitly (no `export *`) so the public surface is reviewed, not accidental.
 *
 * The root is what one process crawling over HTTP needs. The optional parts are subpaths, so
 * that a program loads only the ones it imports: `/redis`, `/nats`, `/kafka` and `/leveldb`
 * (backends), `/browser` and `/websocket` (downloaders), `/store` (a SQL database), `/cluster`
 * (many processes, Raft) and `/api` (the control API and dashboard). The URL-based factories
 * here (`createQueueBackend`, `createCoordination`) load a backend's module on first use.
 *
 * @module @mocra/core
 */

// The control API (fastify, its schemas and the dashboard) is the subpath @mocra/core/api; the
// root names only what a program needs to start it, and loads the rest on that first call. The
// API's view and route types have their one home there; the options and handle of starting it
// have theirs here.
export type { ApiConfigOptions } from './api/config.js';
export { apiOptionsFromConfig } from './api/config.js';
export type { EngineApi, EngineApiOptions } from './api/engine-api.js';
export type { ApiAddress, ApiServerOptions } from './api/server.js';
export { startEngineApi } from './api/start.js';
export type {
  CarriedKey,
  ConfigChange,
  ConfigEnv,
  ConfigKeyDescriptor,
  ConfigKeyInfo,
  ConfigReloadErrorEvent,
  ConfigReloadEvent,
  ConfigValueKind,
  DroppedKey,
  EngineConfigOptions,
  LiveConfigOptions,
  LoadConfigOptions,
  MemoryModuleConfigData,
  MigrateRustConfigOptions,
  MocraConfig,
  MocraConfigInput,
  ModuleConfigProvider,
  ModuleConfigQuery,
  ModuleConfigResolverOptions,
  ModuleLayerInput,
  ModuleSettings,
  ResolveConfigOptions,
  ResolvedModuleConfig,
  RustConfigMigration,
  SourcePosition,
  UnknownEnvVariable,
} from './config/index.js';
export {
  applyLiveConfig,
  BUILT_IN_MODULE_DEFAULTS,
  CONFIG_CHANNEL_NAMES,
  configKey,
  configKeys,
  configSchema,
  createMemoryModuleConfigProvider,
  createModuleConfigResolver,
  ENV_PREFIX,
  engineOptionsFromConfig,
  envNameOf,
  formatKeyPath,
  LiveConfig,
  loadConfig,
  MemoryModuleConfigProvider,
  ModuleConfigResolver,
  migrateRustConfig,
  moduleConfigOf,
  moduleLayerSchema,
  OTHER_ENV_VARIABLES,
  openLiveConfig,
  parseToml,
  REFUSED_UPSTREAM_MODULE_KEYS,
  readConfigFile,
  readEnvOverrides,
  resolveConfig,
  TomlKeyLocator,
  unknownEnvVariables,
} from './config/index.js';
export type {
  Coordination,
  CoordinationKind,
  CreateCoordinationOptions,
  LeaderElectionOptions,
  LeadershipState,
  LocalCoordinationOptions,
  LockLease,
  Member,
  PartitionOwnershipOptions,
} from './coordination/index.js';
export {
  COORDINATION_URL_SCHEMES,
  createCoordination,
  createLeaderElection,
  createLocalCoordination,
  createPartitionOwnership,
  FencingGuard,
  LeaderElection,
  LocalCoordination,
  LocalCoordinationStore,
  leaderChannel,
  PartitionOwnership,
  rendezvousOwner,
} from './coordination/index.js';
export type { BlockedDetectionOptions, BlockedDetector } from './downloader/blocked.js';
export {
  createBlockedDetector,
  DEFAULT_BLOCK_PATTERNS,
  DEFAULT_BLOCK_STATUSES,
} from './downloader/blocked.js';
export type {
  DownloadRouterOptions,
  DownloadRouterStats,
  ModuleDownloadSettings,
} from './downloader/download-router.js';
export { createDownloadRouter, DownloadRouter } from './downloader/download-router.js';
export type {
  Downloader,
  HttpCacheOptions,
  HttpCacheStats,
  HttpDownloaderOptions,
} from './downloader/index.js';
export {
  createHttpCache,
  createHttpDownloader,
  DEFAULT_USER_AGENT,
  HttpCache,
  HttpDownloader,
  MOCRA_VERSION,
} from './downloader/index.js';
export type {
  DownloaderHealth,
  DownloaderRegistryOptions,
  DownloaderSelection,
  HealthCheckedDownloader,
} from './downloader/registry.js';
export {
  createDownloaderRegistry,
  DEFAULT_DOWNLOADER,
  DownloaderRegistry,
  downloaderHealthChannel,
  hasHealthCheck,
} from './downloader/registry.js';
export type { DownloadContext, DownloadProxy } from './downloader/types.js';
export type {
  DeadLetterEntry,
  DeadLetterListOptions,
  DeadLetterQuery,
  StageTopics,
} from './engine/dead-letters.js';
export { EngineDeadLetters, REPLAYED_HEADER } from './engine/dead-letters.js';
export type {
  EngineCounters,
  EngineCronOptions,
  EngineOptions,
  EngineRouter,
  EngineState,
  EngineStats,
  EngineTopicOptions,
  ForwardedWork,
  HandlerResult,
  LocalDeliveryFields,
  PersistLock,
  RegisteredModules,
  RunSummary,
  StageConcurrency,
  StageRunnerOptions,
  StageRunnerStats,
  StageStats,
  StopReason,
} from './engine/index.js';
export {
  createEngine,
  Engine,
  LocalDelivery,
  lockPersistDir,
  StageRunner,
} from './engine/index.js';
export type { PolicyStats, WatchdogTimeouts } from './engine/recovery.js';
export { DEFAULT_WATCHDOG_TIMEOUTS } from './engine/recovery.js';
export type {
  ApiValidationIssue,
  ConfigIssue,
  ConfigIssueSource,
  ConnectionPhase,
  CoreErrorCode,
  MiddlewareKind,
  MiddlewarePhase,
  MocraErrorOptions,
  SandboxErrorCode,
  TimeoutPhase,
} from './errors.js';
export {
  AbortedError,
  ApiBindError,
  ApiHostNotAllowedError,
  ApiKeyNotConfiguredError,
  ApiNotFoundError,
  ApiRateLimitedError,
  ApiUnauthorizedError,
  ApiUnavailableError,
  ApiValidationError,
  BackendUnavailableError,
  BatchFlushError,
  BlockedResponseError,
  BodyTooLargeError,
  BrowserLaunchError,
  BrowserNavigationError,
  CircuitOpenError,
  CORE_ERROR_CODES,
  ConfigEmptyError,
  ConfigReadError,
  ConfigSyntaxError,
  ConfigValidationError,
  ConnectionError,
  ContentDecodingError,
  CoordinationClosedError,
  CoordinationDataLostError,
  CriticalError,
  DataFrameSchemaError,
  DataFrameWriteError,
  DownloaderClosedError,
  EngineStateError,
  FencingTokenRejectedError,
  formatConfigIssueSource,
  GenerateFailedError,
  HandlerTimeoutError,
  HttpStatusError,
  InternalError,
  InvalidArgumentError,
  InvalidBackendUrlError,
  InvalidCronError,
  InvalidModuleError,
  InvalidUrlError,
  isMocraError,
  LeaseExpiredError,
  LockLostError,
  LoginFailedError,
  MalformedResponseError,
  MiddlewareFailedError,
  MissingDependencyError,
  MocraError,
  ModuleTerminatedError,
  NonRetryableError,
  ParseFailedError,
  PayloadTooLargeError,
  QueueClosedError,
  QueueDataLostError,
  QueueDecodeError,
  QueueEncodeError,
  RedirectLoopError,
  RemoteNodeFailedError,
  RequestSkippedError,
  RetryLaterError,
  RunHookFailedError,
  SandboxError,
  SessionExpiredError,
  SinkFailedError,
  SitemapError,
  StalledError,
  StoreFailedError,
  StoreLockedError,
  TaskTerminatedError,
  TextDecodingError,
  TimeoutError,
  TooManyEncodingsError,
  TooManyRedirectsError,
  UnknownDownloaderError,
  UnknownMiddlewareError,
  UnknownModuleError,
  WebSocketClosedError,
  WebSocketConnectError,
  WebSocketOverflowError,
  WorkbookReadError,
} from './errors.js';
export type { BloomFilterOptions } from './frontier/dedup/index.js';
export { ScalableBloomFilter } from './frontier/dedup/index.js';
export type {
  AdmissionResult,
  AdmitOptions,
  Deduplicator,
  DownloadGate,
  DownloadOutcome,
  FingerprintOptions,
  FrontierOptions,
  FrontierStats,
  GateDecision,
  MarkSeenOptions,
} from './frontier/index.js';
export {
  createFrontier,
  createMemoryDeduplicator,
  Frontier,
  fingerprintParts,
  fingerprintRequest,
  MemoryDeduplicator,
  normalizeParsedUrl,
  normalizeUrl,
  OPEN_GATE,
  parseHttpUrl,
} from './frontier/index.js';
export type {
  EnqueueLinksOptions,
  EnqueueLinksResult,
  ExtractedLink,
  ExtractedPage,
  ExtractLinksOptions,
  LinkCandidate,
  LinkFilter,
  LinkFilterOptions,
  LinkPlan,
  LinkPlanner,
  LinkScope,
  LinkView,
  PageInput,
  PlanLinksOptions,
  UrlPattern,
} from './frontier/links/index.js';
export {
  compileUrlPattern,
  createLinkFilter,
  createLinkPlanner,
  enqueueLinks,
  extractLinks,
  LINK_SCOPES,
  MAX_TEXT_CHARS,
  planLinks,
  registrableDomain,
  TRUNCATED_MARKER,
} from './frontier/links/index.js';
export type {
  AcquirePolicy,
  AcquireResult,
  AutoThrottleOptions,
  BackoffMessage,
  HostBackoffOptions,
  HostBudget,
  HostBudgetState,
  HostOutcome,
  HostSchedulerOptions,
  HostSnapshot,
  LocalHostBudgetOptions,
  RobotsGuard,
  RobotsVerdict,
} from './frontier/politeness/index.js';
export {
  backoffChannel,
  createHostScheduler,
  HostScheduler,
  LocalHostBudget,
} from './frontier/politeness/index.js';
export type {
  FetchedResource,
  ResourceFetcher,
  ResourceFetcherOptions,
  ResourceFetchInit,
  RobotsCacheOptions,
  RobotsEntry,
  RobotsKey,
  RobotsRecord,
  RobotsRules,
  RobotsStatus,
} from './frontier/robots/index.js';
export {
  compileRobotsTxt,
  createResourceFetcher,
  createRobotsCache,
  parseRobotsRecords,
  productToken,
  RobotsCache,
} from './frontier/robots/index.js';
export type { DiscoverSitemapsOptions, ReadSitemapOptions, SitemapEntry } from './frontier/sitemap/index.js';
export { discoverSitemaps, readSitemap, SitemapParser } from './frontier/sitemap/index.js';
export type {
  ChainResult,
  DataChainResult,
  DataMiddleware,
  DownloadMiddleware,
  Middleware,
  MiddlewareContext,
  MiddlewareDropMessage,
  MiddlewareOptions,
  MiddlewarePlan,
  MiddlewareResult,
  MiddlewareSelection,
  StoreBatch,
  StoreMiddleware,
} from './middleware/index.js';
export {
  createMiddlewareManager,
  MIDDLEWARE_CHANNEL_NAMES,
  MiddlewareManager,
  middlewareKind,
} from './middleware/index.js';
export type {
  CharsetSource,
  DataSink,
  DetectedCharset,
  ErrorEvent,
  FieldValue,
  FollowUpTask,
  ItemMeta,
  ProxyChoice,
  RedirectHop,
  RequestBody,
  RequestData,
  RequestEncodingInit,
  RequestInit,
  ResponseData,
  ResponseHeaders,
  ResponseInit,
  StageName,
  TaskEvent,
  TextOptions,
  TopicName,
} from './model/index.js';
export {
  ATTEMPT_HEADER,
  decodeText,
  detectCharset,
  normalizeCharset,
  Request,
  Response,
  STAGE_TOPICS,
  TOPICS,
} from './model/index.js';
export type {
  CollectedFollow,
  CronTarget,
  FollowOptions,
  GenerateContext,
  GenerateOutput,
  GenerateTrigger,
  JoinReady,
  Module,
  ModuleCron,
  ModuleDropMessage,
  ModuleFetch,
  ModuleFlowMessage,
  ModuleGraph,
  ModuleGraphDefinition,
  ModuleNode,
  ModuleRuntimeOptions,
  ModuleRuntimeStats,
  ModuleScope,
  ModuleStopMessage,
  NodeRef,
  RegisteredModule,
  RouteResult,
  RouteTarget,
  RunEndContext,
  RunLedgerOptions,
  RunStartContext,
  StartModuleOptions,
  SubmitTask,
} from './module/index.js';
export {
  compileModuleGraph,
  DEFAULT_ACCOUNT,
  DEFAULT_PLATFORM,
  defineModule,
  graph,
  MODULE_CHANNEL_NAMES,
  ModuleGraphBuilder,
  ModuleRegistry,
  ModuleRuntime,
  ParseContext,
  RunLedger,
  routeFollowUp,
  scheduleModuleCrons,
} from './module/index.js';
export type {
  DagMessage,
  DigestedFailure,
  DropMessage,
  ErrorExample,
  ErrorMessage,
  HandlerMessage,
  ItemMessage,
  Logger,
  LoggerOptions,
  LogLevel,
  RequestMessage,
  ResponseMessage,
  RunMessage,
  StageMessage,
} from './observability/index.js';
export {
  CHANNEL_NAMES,
  channels,
  createLogger,
  ErrorDigest,
  resolveLogLevel,
  rootCause,
} from './observability/index.js';
export type {
  BufferedLoggerOptions,
  LogBufferOptions,
  LogQuery,
  LogRecord,
  LogRecordLevel,
} from './observability/log-buffer.js';
export {
  createBufferedLogger,
  createLogBuffer,
  DEFAULT_LOG_LIMIT,
  LOG_RECORD_LEVELS,
  LogBuffer,
  logsDisabled,
} from './observability/log-buffer.js';
export type {
  BreakerStateLabel,
  CounterKey,
  DagTotals,
  EngineStateLabel,
  EngineTelemetryOptions,
  GaugeKey,
  HistogramKey,
  HostState,
  LabelGuardOptions,
  MetricFamilyKey,
  MetricFamilySpec,
  MetricLabels,
  MetricsCollector,
  MetricsOptions,
  MetricType,
  OperationSample,
  ProcessSnapshot,
  QueueSample,
  StageLatency,
  StageThroughput,
  SystemSamplerOptions,
  SystemSnapshot,
} from './observability/metrics/index.js';
export {
  attachEngineTelemetry,
  CRAWL_PIPELINE,
  createMetrics,
  DAG_PIPELINE,
  DEFAULT_LABEL_LIMITS,
  EngineTelemetry,
  errorKind,
  hostLabel,
  LATENCY_BUCKETS,
  LabelGuard,
  METRIC_FAMILIES,
  MocraMetrics,
  OVERFLOW_LABEL_VALUE,
  PROCESS_METRICS_PREFIX,
  processMetricsRegistry,
  STAGE_LABELS,
  SystemSampler,
  statusClass,
  THRESHOLD_DECISION_LABELS,
} from './observability/metrics/index.js';
export { importOptional } from './optional-dependency.js';
export type { Backoff, BackoffStrategy } from './policy/backoff.js';
export { BACKOFF_STRATEGIES, backoffDelayMs, parseRetryAfterMs } from './policy/backoff.js';
export type {
  BreakerPermit,
  BreakerScope,
  BreakerSnapshot,
  BreakerState,
  BreakerTransition,
  CircuitBreakerOptions,
} from './policy/circuit-breakers.js';
export { CircuitBreakers, createCircuitBreakers } from './policy/circuit-breakers.js';
export type {
  ErrorThresholdsOptions,
  ThresholdDecision,
  ThresholdScope,
  ThresholdVerdict,
} from './policy/error-thresholds.js';
export { createErrorThresholds, ErrorThresholds, THRESHOLD_DECISIONS } from './policy/error-thresholds.js';
export type { FailureKind, PolicyStage } from './policy/failure-kind.js';
export {
  classifyCode,
  classifyError,
  FAILURE_KINDS,
  isHostFailure,
  kindOfStatus,
  POLICY_STAGES,
  steeringCause,
} from './policy/failure-kind.js';
export type { FailurePolicy, PolicyDecision, SimpleRetryPolicyOptions } from './policy/index.js';
export { createSimpleRetryPolicy, parseRetryAfter, SimpleRetryPolicy } from './policy/index.js';
export type { PolicyDecisionMessage, WatchdogTimeoutMessage } from './policy/policy-channels.js';
export { POLICY_CHANNEL_NAMES, policyChannels } from './policy/policy-channels.js';
export type {
  FailureDecision,
  FailureInput,
  PolicyResolverOptions,
  RuleContext,
} from './policy/policy-resolver.js';
export { createPolicyResolver, PolicyResolver } from './policy/policy-resolver.js';
export type { DeadLetterMode, FailureRule, PolicyOverride } from './policy/policy-table.js';
export {
  DEAD_LETTER_MODES,
  DEFAULT_FAILURE_RULES,
  policyOverrideSchema,
  policyOverridesSchema,
} from './policy/policy-table.js';
export type { ProgressWatchdogOptions, StallReport } from './policy/progress-watchdog.js';
export { createProgressWatchdog, ProgressWatchdog } from './policy/progress-watchdog.js';
export type { RecoveryPolicyOptions } from './policy/recovery-policy.js';
export { createRecoveryPolicy, policyStage, RecoveryPolicy } from './policy/recovery-policy.js';
export type { Admission, WorkScope } from './policy/types.js';
export type { DeadlineGroupOptions, DeadlineOptions, HandlerWatchdogOptions } from './policy/watchdog.js';
export { DeadlineGroup, HandlerWatchdog, runWithDeadline } from './policy/watchdog.js';
export type {
  ConnectionEvent,
  ConsumeOptions,
  CreateQueueBackendOptions,
  DeadLetter,
  DeadLetterEvent,
  DeadLetterFilter,
  DeadLetterQueue,
  Delivery,
  LeaseQueue,
  MemoryQueueBackendOptions,
  PublishMessage,
  QueueBackend,
  QueueBackendKind,
  QueueCodec,
  QueueCodecFormat,
  QueueCodecOptions,
  QueueStats,
  TopicOptions,
} from './queue/index.js';
export {
  connectionChannel,
  createMemoryQueueBackend,
  createQueueBackend,
  createQueueCodec,
  DEFAULT_TOPIC_OPTIONS,
  deadLetterChannel,
  MemoryQueueBackend,
  poisonChannel,
  QUEUE_URL_SCHEMES,
} from './queue/index.js';
export { REDACTED_USERINFO, redactUrlCredentials } from './redact.js';
export type {
  Clock,
  CronFireMessage,
  CronFiring,
  CronInput,
  CronJob,
  CronJobInfo,
  CronOptions,
  CronSchedule,
  CronSchedulerOptions,
  CronSkipMessage,
  CronSkipReason,
  TimerHandle,
} from './schedule/index.js';
export {
  CronBuilder,
  CronScheduler,
  createCronScheduler,
  cron,
  every,
  ManualClock,
  nextFireTime,
  previousFireTime,
  runNow,
  SCHEDULE_CHANNEL_NAMES,
  systemClock,
  toCronSchedule,
} from './schedule/index.js';
export type {
  DownloadFn,
  EnsureLoggedInOptions,
  LoginContext,
  LoginHook,
  LoginInfo,
  LoginResult,
  SessionFetchOptions,
  SessionGoneRule,
  SessionStoreOptions,
} from './session/index.js';
export {
  checkSession,
  createSessionStore,
  downloadWithSession,
  ensureLoggedIn,
  isSessionGone,
  Session,
  SessionStore,
} from './session/index.js';
