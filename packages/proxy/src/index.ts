// Public entry of @mocra/proxy: a proxy pool with no crawler concepts. Exports are listed
// explicitly so the public surface is reviewed, not accidental.

export type { ParsedProxyList, ProxyAddress, ProxyProtocol } from './address/index.js';
export { PROXY_PROTOCOLS, parseProxyAddress, parseProxyList } from './address/index.js';
export { proxyChannels } from './channels.js';
export type { ClockTimer, ProxyClock } from './clock.js';
export { systemClock } from './clock.js';
export type {
  Duration,
  FunctionProviderConfig,
  HealthCheckConfig,
  Instant,
  ListProviderConfig,
  ParseProxyConfigOptions,
  ProvidedProxy,
  ProviderConfig,
  ProviderConfigBase,
  ProviderLoadContext,
  ProxyPoolConfig,
  RateLimit,
  RateLimitInput,
  ResolvedFunctionProvider,
  ResolvedListProvider,
  ResolvedProvider,
  ResolvedProxyConfig,
  ResolvedStaticProxy,
  ResolvedTunnel,
  StaticProxyConfig,
  TierConfig,
  TunnelConfig,
} from './config/index.js';
export { parseDuration, parseProxyConfig } from './config/index.js';
export type { ProxyDispatchersOptions } from './dispatcher/index.js';
export { classifyProxyError, createProxyDispatchers, ProxyDispatchers } from './dispatcher/index.js';
export type { ProxyConfigIssue, ProxyErrorCode, ProxyErrorOptions } from './errors.js';
export {
  PROXY_ERROR_CODES,
  ProxyAddressError,
  ProxyClosedError,
  ProxyConfigError,
  ProxyError,
  ProxyInvalidArgumentError,
  ProxyPoolEmptyError,
  ProxyProviderError,
  ProxyRateLimitedError,
} from './errors.js';
export type {
  AcquireOptions,
  HealthCheckReport,
  ProviderStats,
  ProxyFailureReason,
  ProxyInfoJSON,
  ProxyKind,
  ProxyPoolOptions,
  ProxyPoolStats,
  ProxySelection,
  ProxyStats,
  RefillReport,
  ReportFailureOptions,
  ReportSuccessOptions,
} from './pool/index.js';
export { createProxyPool, PROXY_FAILURE_REASONS, ProxyInfo, ProxyPool } from './pool/index.js';
