export type { ProxyPoolOptions } from './proxy-pool.js';
export { createProxyPool, ProxyPool } from './proxy-pool.js';
export type {
  AcquireOptions,
  HealthCheckReport,
  ProviderStats,
  ProxyFailureReason,
  ProxyInfoJSON,
  ProxyKind,
  ProxyPoolStats,
  ProxySelection,
  ProxyStats,
  RefillReport,
  ReportFailureOptions,
  ReportSuccessOptions,
} from './types.js';
export { PROXY_FAILURE_REASONS, ProxyInfo } from './types.js';
