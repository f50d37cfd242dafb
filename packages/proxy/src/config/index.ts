export type { Duration } from './duration.js';
export { parseDuration } from './duration.js';
export type { ParseProxyConfigOptions } from './parse-config.js';
export { isResolvedProxyConfig, parseInstant, parseProxyConfig, parseRateLimit } from './parse-config.js';
export type {
  FunctionProviderConfig,
  HealthCheckConfig,
  Instant,
  ListProviderConfig,
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
} from './types.js';
