/**
 * The `[api]` config table as options: what the builder's `.dashboard()` (and `startEngineApi`)
 * take. Keys are snake_case in config and camelCase in code, as everywhere else.
 *
 * ```ts
 * const config = await loadConfig({ file: 'mocra.toml' });
 * const api = apiOptionsFromConfig(config);
 * if (api) builder.dashboard(api);
 * ```
 */
import type { MocraConfig } from '../config/schema.js';
import type { LogRecordLevel } from '../observability/log-buffer.js';

export interface ApiConfigOptions {
  host: string;
  port: number;
  apiKey?: string;
  corsOrigins: string[];
  allowedHosts: string[];
  rateLimit: number;
  rateLimitBurst?: number;
  dashboard: boolean;
  keepAlive: boolean;
  logBufferSize: number;
  logLevel: LogRecordLevel;
}

/** Options for the control API from `[api]`, or undefined when `api.enabled` is false. */
export function apiOptionsFromConfig(config: Pick<MocraConfig, 'api'>): ApiConfigOptions | undefined {
  const api = config.api;
  if (!api.enabled) return undefined;
  return {
    host: api.host,
    port: api.port,
    ...(api.api_key === undefined ? {} : { apiKey: api.api_key }),
    corsOrigins: api.cors_origins,
    allowedHosts: api.allowed_hosts,
    rateLimit: api.rate_limit,
    ...(api.rate_limit_burst === undefined ? {} : { rateLimitBurst: api.rate_limit_burst }),
    dashboard: api.dashboard,
    keepAlive: api.keep_alive,
    logBufferSize: api.log_buffer_size,
    logLevel: api.log_level,
  };
}
