/**
 * The runtime flags `mocra crawl` and `mocra run` share (and the download flags `mocra shell`
 * shares with them), their parsing (bad values are CliUsageErrors, exit code 2), and how they
 * configure the builder or the downloader.
 */

import { readFileSync } from 'node:fs';
import {
  ConfigReadError,
  compileUrlPattern,
  createResourceFetcher,
  createRobotsCache,
  type HttpDownloaderOptions,
  type LinkScope,
  type LogLevel,
  parseToml,
  type ResourceFetcher,
  type RobotsCache,
  readEnvOverrides,
  type UrlPattern,
} from '@mocra/core';
import { type Command, InvalidArgumentError as CommanderArgumentError, Option } from 'commander';
import type { MocraBuilder } from '../builder.js';
import { CliUsageError } from '../errors.js';
import { checkDashboardFlags } from './dashboard.js';

/** The flags that say how pages are fetched: shared by every command that downloads (`mocra shell` too). */
export interface DownloadFlags {
  userAgent?: string;
  /** Extra request headers (`--header 'name: value'`, repeatable). */
  header: Record<string, string>;
  timeout: number;
  /** A mocra.toml (Mocra.builder().fromToml): its keys apply unless a flag given on the command line sets them. */
  config?: string;
  /** The flags given on the command line (the others hold their defaults). */
  given: ReadonlySet<string>;
}

export interface RuntimeFlags extends DownloadFlags {
  concurrency: number;
  perHostConcurrency: number;
  delay: number;
  autothrottle: boolean;
  robots: boolean;
  maxPages?: number;
  maxDepth?: number;
  out?: string;
  persist?: string;
  /** Development response cache directory. */
  cache?: string;
  /** Milliseconds a cached response is replayed (0: forever). */
  cacheTtl?: number;
  dashboard?: number;
  /** Key of the dashboard's control actions (else MOCRA_API__API_KEY). */
  apiKey?: string;
  /** Interface the dashboard binds (else MOCRA_API__HOST, else 127.0.0.1). */
  host?: string;
  /** Milliseconds the dashboard stays up after the crawl ended. */
  dashboardLinger?: number;
  retries: number;
  logLevel: LogLevel;
  progress: boolean;
  progressInterval: number;
  strict: boolean;
}

export interface CrawlFlags extends RuntimeFlags {
  scope: LinkScope;
  include: UrlPattern[];
  exclude: UrlPattern[];
  respectNofollow: boolean;
  sitemaps: boolean;
}

/** Commander's parser error: commander prints it with the flag's name and we exit 2. */
function bad(message: string): never {
  throw new CommanderArgumentError(message);
}

export function intFlag(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    if (!/^\d+$/.test(value.trim())) bad(`expected a whole number, got '${value}'`);
    const n = Number(value);
    if (n < min || n > max) bad(`expected a number from ${min} to ${max}, got ${n}`);
    return n;
  };
}

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds: `500`, `500ms`, `1.5s`, `2m`, `1h`. */
export function durationFlag(value: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/i.exec(value.trim());
  if (!m) bad(`expected a duration such as 500, 500ms, 1.5s, 2m or 1h, got '${value}'`);
  return Math.round(Number(m[1]) * UNIT_MS[(m[2] ?? 'ms').toLowerCase()]!);
}

/** A glob, or `/regex/flags`. Repeatable: values collect into a list. */
export function patternFlag(value: string, previous: UrlPattern[] = []): UrlPattern[] {
  const text = value.trim();
  if (text === '') bad('a pattern must not be empty');
  const re = /^\/(.+)\/([dgimsuvy]*)$/.exec(text);
  if (re && !text.startsWith('//')) {
    try {
      return [...previous, new RegExp(re[1]!, re[2])];
    } catch (err) {
      bad(`invalid regular expression ${text}: ${(err as Error).message}`);
    }
  }
  try {
    compileUrlPattern(text); // the crawl's own check: a glob it would refuse is refused here, at once
  } catch (err) {
    bad((err as Error).message);
  }
  return [...previous, text];
}

/** `name: value` (repeatable; a later value of the same name wins). */
export function headerFlag(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const colon = value.indexOf(':');
  const name = colon < 0 ? '' : value.slice(0, colon).trim();
  // RFC 9110 token characters: what undici would refuse later is refused here, by its flag.
  if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/i.test(name)) bad(`expected 'name: value', got '${value}'`);
  return { ...previous, [name.toLowerCase()]: value.slice(colon + 1).trim() };
}

/** Add the flags of {@link DownloadFlags} to a command. */
export function addDownloadFlags(cmd: Command): Command {
  return cmd
    .option('--user-agent <ua>', 'User-Agent header (robots.txt rules are matched for the "mocra" token)')
    .option('-H, --header <name: value>', 'send this header with every request (repeatable)', headerFlag, {})
    .addOption(
      new Option(
        '--timeout <duration>',
        'longest a request may take, body included (also the wait for headers and between body chunks); robots.txt and sitemaps too',
      )
        .default(30_000)
        .argParser(durationFlag),
    )
    .option(
      '--config <file>',
      'read settings from a mocra.toml (docs/configuration.md); flags given here win over it',
    );
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** Add the shared runtime flags to a command. */
export function addRuntimeFlags(cmd: Command): Command {
  return addDownloadFlags(cmd)
    .hook('preAction', (command) => checkDashboardFlags(command.opts<Partial<RuntimeFlags>>()))
    .addOption(
      new Option('-c, --concurrency <n>', 'downloads at once, all hosts together')
        .default(16)
        .argParser(intFlag(1, 10_000)),
    )
    .addOption(
      new Option('--per-host-concurrency <n>', 'downloads at once against one host')
        .default(8)
        .argParser(intFlag(1, 10_000)),
    )
    .addOption(
      new Option('--delay <duration>', 'minimum time between two requests to one host (500, 500ms, 2s)')
        .default(0)
        .argParser(durationFlag),
    )
    .option('--autothrottle', 'adapt the delay per host to its latency (AutoThrottle)', false)
    .option(
      '--no-robots',
      'ignore robots.txt (obeyed by default: disallowed URLs are skipped, Crawl-delay honoured)',
    )
    .addOption(new Option('--max-pages <n>', 'stop after this many pages (exact)').argParser(intFlag(1)))
    .addOption(
      new Option('--max-depth <n>', 'do not follow links deeper than this (start URLs are 0)').argParser(
        intFlag(0),
      ),
    )
    .option(
      '-o, --out <file>',
      'write one record per page to a .jsonl, .csv, .parquet or .arrow file (- for standard output)',
    )
    .option(
      '--persist <dir>',
      'keep the crawl state in this directory; run again with it to resume after a crash',
    )
    .option(
      '--cache <dir>',
      'cache responses in this directory and replay them on later runs instead of fetching (for development)',
    )
    .addOption(
      new Option(
        '--cache-ttl <duration>',
        'replay cached responses this long, then fetch again (30s, 5m, 1h; default: forever)',
      ).argParser(durationFlag),
    )
    .addOption(
      new Option('--dashboard <port>', 'serve the live dashboard and control API on this port').argParser(
        intFlag(0, 65_535),
      ),
    )
    .option(
      '--api-key <key>',
      "key of the dashboard's control actions: pause, resume, dead letters (default: $MOCRA_API__API_KEY)",
    )
    .option(
      '--host <address>',
      'interface the dashboard binds (default: $MOCRA_API__HOST, else 127.0.0.1; 0.0.0.0 for other machines)',
    )
    .addOption(
      new Option(
        '--dashboard-linger <duration>',
        'keep the dashboard up this long after the crawl ended (30s, 5m, 1h; Ctrl-C ends it)',
      ).argParser(durationFlag),
    )
    .addOption(
      new Option('--retries <n>', 'retries of a failed request').default(2).argParser(intFlag(0, 100)),
    )
    .addOption(new Option('--log-level <level>', 'log level on stderr').default('error').choices(LOG_LEVELS))
    .option('--no-progress', 'no progress display')
    .addOption(
      new Option(
        '--progress-interval <seconds>',
        'seconds between progress lines when stderr is not a terminal',
      )
        .default(5)
        .argParser(intFlag(1, 3600)),
    )
    .option('--strict', 'exit with 1 when any URL was given up on (not only when the crawl failed)', false);
}

/**
 * The flags that stand for keys of mocra.toml. Such a flag left at its default gives way to
 * the key when `--config` or a `MOCRA_*` variable sets it; a flag given always wins.
 */
const CONFIG_FLAGS = {
  concurrency: ['crawler.task_concurrency'],
  timeout: ['download.headers_timeout_ms', 'download.body_timeout_ms', 'download.request_timeout_ms'],
  retries: ['retry.max_retries'],
  logLevel: ['logger.level'],
} as const satisfies Record<string, readonly string[]>;

/** The dotted keys the config file and the environment set (their values are the builder's to check). */
function configuredKeys(file: string | undefined): Set<string> {
  const keys = new Set(readEnvOverrides(process.env).variables.keys());
  if (file === undefined) return keys;
  let toml: string;
  try {
    toml = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigReadError(file, { cause: err });
  }
  const walk = (table: Record<string, unknown>, prefix: string) => {
    for (const [key, value] of Object.entries(table)) {
      keys.add(`${prefix}${key}`);
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        walk(value as Record<string, unknown>, `${prefix}${key}.`);
      }
    }
  };
  walk(parseToml(toml, file).values, '');
  return keys;
}

/** What the crawl fetches besides its pages: robots.txt (when obeyed) and sitemaps. */
export interface CrawlResources {
  /** The robots.txt cache the crawl obeys, for the summary; undefined with `--no-robots`. */
  robots: RobotsCache | undefined;
  /** How robots.txt and sitemaps are fetched: held to `--timeout` like every page. */
  fetch: ResourceFetcher;
}

/** Whether a flag applies: given on the command line, or no key of the config or environment sets it. */
function flagApplies(flags: DownloadFlags): (flag: keyof typeof CONFIG_FLAGS) => boolean {
  const configured = configuredKeys(flags.config);
  return (flag) => flags.given.has(flag) || !CONFIG_FLAGS[flag].some((key) => configured.has(key));
}

/** What the download flags set of the HTTP downloader's options (the config supplies the rest). */
export function downloadOptions(flags: DownloadFlags): HttpDownloaderOptions {
  const apply = flagApplies(flags);
  return {
    ...(apply('timeout')
      ? { headersTimeoutMs: flags.timeout, bodyTimeoutMs: flags.timeout, requestTimeoutMs: flags.timeout }
      : {}),
    ...(flags.userAgent === undefined ? {} : { userAgent: flags.userAgent }),
    ...(Object.keys(flags.header).length === 0 ? {} : { headers: flags.header }),
  };
}

/** Apply the shared runtime flags to a builder; returns how robots.txt and sitemaps are fetched. */
export function configureBuilder(builder: MocraBuilder, flags: RuntimeFlags): CrawlResources {
  const apply = flagApplies(flags);
  const fetch = createResourceFetcher(
    apply('timeout') ? { timeoutMs: flags.timeout, requestTimeoutMs: flags.timeout } : {},
  );
  const robots = flags.robots ? createRobotsCache({ fetch }) : undefined;
  if (flags.config !== undefined) builder.fromToml(flags.config);
  if (apply('concurrency')) builder.concurrency(flags.concurrency);
  builder.download({
    ...(apply('concurrency') ? { connections: flags.concurrency } : {}),
    ...downloadOptions(flags),
  });
  if (apply('retries')) builder.retry({ maxRetries: flags.retries });
  if (apply('logLevel')) builder.logging({ level: flags.logLevel });
  builder
    .politeness({
      maxConcurrency: Math.min(flags.perHostConcurrency, flags.concurrency),
      delayMs: flags.delay,
      ...(flags.autothrottle ? { autoThrottle: true } : {}),
      ...(robots === undefined ? {} : { robots }),
    })
    .frontier({
      ...(flags.maxPages === undefined ? {} : { maxPages: flags.maxPages }),
      ...(flags.maxDepth === undefined ? {} : { maxDepth: flags.maxDepth }),
    });
  if (flags.persist !== undefined) builder.persist(flags.persist);
  if (flags.cache !== undefined) {
    builder.httpCache({
      dir: flags.cache,
      ...(flags.cacheTtl === undefined ? {} : { ttlMs: flags.cacheTtl }),
    });
  } else if (flags.cacheTtl !== undefined) {
    throw new CliUsageError('--cache-ttl needs --cache <dir>');
  }
  return { robots, fetch };
}
