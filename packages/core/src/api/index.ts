/**
 * The control API and the dashboard, served next to a crawl (docs/api-reference.md). The
 * options and handle of starting it (`EngineApiOptions`, `EngineApi`, `ApiServerOptions`,
 * `ApiAddress`, `ApiConfigOptions`) are types of the package root, which starts it.
 *
 * @module @mocra/core/api
 */
export { ApiKeyChecker } from './auth.js';
export { apiOptionsFromConfig } from './config.js';
export { dashboardHtml } from './dashboard.js';
export { describeWork, safeJson, summarizeDeadLetter } from './dlq-view.js';
export { startEngineApi } from './engine-api.js';
export type { EngineControlPlaneOptions } from './engine-control-plane.js';
export { createEngineControlPlane, EngineControlPlane } from './engine-control-plane.js';
export type { ApiErrorBody } from './error-status.js';
export { API_ERROR_STATUS, errorResponse } from './error-status.js';
export { openApiDocument } from './openapi.js';
export type { RateDecision, RateLimiterOptions } from './rate-limit.js';
export { RateLimiter } from './rate-limit.js';
export type { RouteId, RouteSpec } from './routes.js';
export { API_ROUTES } from './routes.js';
export { apiSchemas } from './schemas.js';
export { ApiServer, createApiServer, DEFAULT_API_PORT } from './server.js';
export type {
  ClusterInfo,
  ClusterInfoSource,
  ClusterView,
  ControlPlane,
  DlqEntryView,
  DlqListQuery,
  DlqPage,
  DlqResult,
  DlqSelection,
  EngineView,
  HealthView,
  HistorySample,
  HistoryView,
  HostsView,
  HostView,
  LogRecordView,
  LogsView,
  MemberView,
  MetricsSource,
  NodesView,
  NodeView,
  PauseView,
  QueuesView,
  QueueView,
  StageView,
  StartWorkInput,
  StartWorkResult,
  StopView,
  SystemView,
} from './types.js';
