/**
 * Structured logs (pino), on stderr so stdout stays free for a crawl's data. The engine logs
 * run-level events at info and per-request detail only at debug, behind a level check, so a
 * crawl at the default level formats no string per page.
 *
 * Level, first match wins: `MOCRA_DISABLE_LOGS=1` (silent) → the `level` option →
 * `MOCRA_LOG_LEVEL` → 'silent' under a test runner (VITEST or NODE_ENV=test) → 'warn'
 * (failures and problems only; 'info' adds the start and end of each run).
 */
import type pinoModule from 'pino';
import { lazyRequire } from '../optional-dependency.js';
import { redactUrlCredentials } from '../redact.js';

/** pino loads with the first logger, not at import. */
export const loadPino = lazyRequire<typeof pinoModule>('pino');

export type Logger = pinoModule.Logger;
export type LogLevel = pinoModule.LevelWithSilent;

export interface LoggerOptions {
  /** @default 'warn' ('silent' under a test runner; see the module comment) */
  level?: LogLevel;
  /** Use this pino logger instead of creating one (its own level and destination apply). */
  logger?: Logger;
}

/** Every log line leaves with the credentials of its URLs removed. */
export const LOG_HOOKS = { streamWrite: redactUrlCredentials } as const;

const LEVELS = new Set<string>(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

export function resolveLogLevel(level: LogLevel | undefined, env: NodeJS.ProcessEnv = process.env): LogLevel {
  const disabled = env.MOCRA_DISABLE_LOGS;
  if (disabled !== undefined && disabled !== '' && disabled !== '0' && disabled.toLowerCase() !== 'false') {
    return 'silent';
  }
  if (level !== undefined) return level;
  const fromEnv = env.MOCRA_LOG_LEVEL?.toLowerCase();
  if (fromEnv !== undefined && LEVELS.has(fromEnv)) return fromEnv as LogLevel;
  if (env.VITEST !== undefined || env.NODE_ENV === 'test') return 'silent';
  return 'warn';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  if (options.logger) return options.logger;
  const pino = loadPino();
  return pino(
    { name: 'mocra', level: resolveLogLevel(options.level), hooks: LOG_HOOKS },
    pino.destination({ fd: 2, sync: true }),
  );
}
