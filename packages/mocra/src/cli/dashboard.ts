/**
 * `--dashboard` and its companions: the options of the builder's dashboard, from the flags, the
 * `[api]` table of the `--config` file and the `[api]` environment variables
 * (`MOCRA_API__API_KEY`, `MOCRA_API__HOST`, `MOCRA_API__CORS_ORIGINS`, `MOCRA_API__ALLOWED_HOSTS`…)
 * — a flag winning over its variable, a variable over the file — and what the CLI tells a person
 * when the dashboard is up.
 */
import { readFileSync } from 'node:fs';
import { resolveConfig } from '@mocra/core';
import type { DashboardOptions } from '../builder.js';
import { CliUsageError } from '../errors.js';
import type { RuntimeFlags } from './runtime-options.js';

/** The flags that only mean something with `--dashboard`. */
const DASHBOARD_FLAGS = [
  ['apiKey', '--api-key'],
  ['host', '--host'],
  ['dashboardLinger', '--dashboard-linger'],
] as const;

/** Refuses `--api-key`, `--host` or `--dashboard-linger` without `--dashboard`: they would do nothing. */
export function checkDashboardFlags(flags: Partial<RuntimeFlags>): void {
  if (flags.dashboard !== undefined) return;
  const given = DASHBOARD_FLAGS.filter(([key]) => flags[key] !== undefined).map(([, flag]) => flag);
  if (given.length > 0) {
    throw new CliUsageError(
      `${given.join(', ')} ${given.length === 1 ? 'needs' : 'need'} --dashboard <port>`,
    );
  }
}

export interface CliDashboard {
  options: DashboardOptions;
  /** The URL, once the dashboard listens. */
  url(): string | undefined;
}

export function cliDashboard(
  flags: RuntimeFlags & { dashboard: number },
  /** Prints one line for a person (above the progress bar). */
  say: (text: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): CliDashboard {
  // The same file the builder reads (fromToml): its [api] keys must not be ignored here.
  const file = flags.config;
  const api = resolveConfig({
    env,
    ...(file === undefined ? {} : { toml: readFileSync(file, 'utf8'), file }),
  }).api;
  const apiKey = flags.apiKey ?? api.api_key;
  const keySource =
    flags.apiKey !== undefined
      ? '--api-key'
      : env.MOCRA_API__API_KEY !== undefined || file === undefined
        ? 'MOCRA_API__API_KEY'
        : `api_key in ${file}`;
  let listening: string | undefined;
  const options: DashboardOptions = {
    port: flags.dashboard,
    host: flags.host ?? api.host,
    ...(apiKey === undefined ? {} : { apiKey }),
    corsOrigins: api.cors_origins,
    allowedHosts: api.allowed_hosts,
    rateLimit: api.rate_limit,
    ...(api.rate_limit_burst === undefined ? {} : { rateLimitBurst: api.rate_limit_burst }),
    dashboard: api.dashboard,
    keepAlive: api.keep_alive,
    logBufferSize: api.log_buffer_size,
    logLevel: api.log_level,
    ...(flags.dashboardLinger === undefined ? {} : { lingerMs: flags.dashboardLinger }),
    onListen: (url) => {
      listening = url;
      const control =
        apiKey === undefined
          ? 'read-only: start with --api-key <key> (or MOCRA_API__API_KEY=<key>) to pause, resume and replay from it'
          : `to pause, resume or replay, click "API key" on the page and paste the key of ${keySource}`;
      say(`mocra: dashboard at ${url} (${control})`);
    },
  };
  return { options, url: () => listening };
}

/** The line printed when the crawl ended and the dashboard stays up. */
export function lingerLine(url: string, ms: number, now = new Date()): string {
  const until = new Date(now.getTime() + ms).toTimeString().slice(0, 8);
  return `mocra: the dashboard stays up at ${url} until ${until} (Ctrl-C to quit now)`;
}
