/**
 * Running a configured builder for the CLI: progress while it runs, the first failure of each
 * kind as it happens, the summary after, and the exit code.
 *
 * | exit | when |
 * | ---- | ---- |
 * | 0    | the crawl ran to its end (every reachable page done, or `--max-pages` reached) |
 * | 1    | the crawl failed: nothing could be fetched (start URL unreachable, or disallowed by robots.txt), the run stopped on a critical error, the persist directory is in use, its output cannot be resumed, or (`--strict`) some URL was given up on or some work dead-lettered |
 * | 2    | bad usage (flags, arguments) |
 * | 130  | interrupted (SIGINT/SIGTERM); with `--persist`, run the same command again to resume |
 *
 * Order at the start, for `--persist`: the builder takes the directory's lock first, then calls
 * `onStart`, where the output file is opened — a second process on the same directory is
 * refused before it has touched the file.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import {
  CHANNEL_NAMES,
  type ConnectionEvent,
  connectionChannel,
  type DropMessage,
  type ErrorEvent,
  isMocraError,
  type PolicyDecision,
  type RobotsCache,
  type RunSummary,
  rootCause,
  unknownEnvVariables,
} from '@mocra/core';
import type { MocraBuilder } from '../builder.js';
import { StartUnreachableError } from '../errors.js';
import { cliDashboard, lingerLine } from './dashboard.js';
import { ErrorReport, summaryLines } from './error-report.js';
import { formatElapsed, ProgressReporter, rateOf } from './progress.js';
import type { RuntimeFlags } from './runtime-options.js';

export interface CliIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WriteStream;
  /** What `mocra shell` reads its commands from. @default process.stdin */
  stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
}

/** A piece of work given up on. */
export interface Failure {
  /** Empty for work with no URL (a spider's `start()` that threw, a failed login). */
  url: string;
  code: string;
  /** What went wrong, without the URL (the cause's own message when there is one). */
  reason: string;
}

/** Where records went, for the summary. */
export interface Output {
  /** The file as the user gave it, `standard output`, or undefined when nothing is kept. */
  file: string | undefined;
  written(): number;
  resumed(): number;
  close(): void;
}

export interface ExecuteContext {
  /** The robots.txt cache the crawl obeyed (to tell "disallowed" from "unreachable"). */
  robots: RobotsCache | undefined;
  /** What the run is (`crawl of https://…`, `spider books`), for the summary. */
  label: string;
  startUrls: readonly string[];
  /** Open the output; called once the run may write (the persist directory is this process's). */
  open(): Output;
  /** Called for every failure after the CLI counted it (a crawl writes a record per URL given up). */
  onError?: (event: ErrorEvent, decision: PolicyDecision) => void;
}

export async function execute(
  builder: MocraBuilder,
  flags: RuntimeFlags,
  ctx: ExecuteContext,
  io: CliIo,
): Promise<number> {
  const mode = !flags.progress ? 'off' : io.stderr.isTTY ? 'bar' : 'lines';
  const progress = new ProgressReporter({
    mode,
    intervalS: flags.progressInterval,
    ...(flags.maxPages === undefined ? {} : { total: flags.maxPages }),
    stream: io.stderr,
  });
  const say = (text: string) => progress.log(text);
  for (const unknown of unknownEnvVariables(process.env)) say(`mocra: warning: ${unknown.message}`);

  const failures: Failure[] = [];
  const report = new ErrorReport(say);
  builder.onError((event, decision) => {
    report.onError(event, decision);
    if (decision.action !== 'retry') failures.push(failureOf(event));
    ctx.onError?.(event, decision);
  });
  let out: Output | undefined;
  let engineStartedAt = Date.now();
  builder.onStart((engine) => {
    out = ctx.open();
    engineStartedAt = Date.now();
    progress.start(engine);
  });
  const dashboard =
    flags.dashboard === undefined ? undefined : cliDashboard({ ...flags, dashboard: flags.dashboard }, say);
  if (dashboard !== undefined) builder.dashboard(dashboard.options);
  const robotsUnreachable = countRobotsUnreachable();
  const outages = reportOutages(say);
  // The summary and the exit code as soon as the run ended: before a lingering dashboard.
  let code: number | undefined;
  builder.onEnd(async (summary) => {
    robotsUnreachable.stop();
    outages.stop();
    progress.stop({
      pages: summary.pages,
      queued: summary.pending,
      errors: summary.errors,
      elapsedMs: Date.now() - engineStartedAt,
    });
    out?.close();
    printSummary(
      summary,
      { ...ctx, out, failures, robotsUnreachable: robotsUnreachable.count() },
      io,
      flags.strict,
    );
    code = await exitCode(summary, flags, { ...ctx, out, failures }, io);
    const url = dashboard?.url();
    const linger = flags.dashboardLinger ?? 0;
    if (url !== undefined && linger > 0 && summary.reason !== 'signal' && summary.reason !== 'aborted') {
      io.stderr.write(`${lingerLine(url, linger)}\n`);
    }
  });
  try {
    await builder.run();
  } catch (err) {
    if (code === undefined) {
      progress.stop();
      out?.close();
    }
    robotsUnreachable.stop();
    outages.stop();
    say(`mocra: ${describe(err)}`);
    return isMocraError(err) && err.code === 'MOCRA_ERR_CLI_USAGE' ? 2 : 1;
  }
  return code ?? 1;
}

function failureOf(event: ErrorEvent): Failure {
  const url = event.url ?? urlOf(event.payload) ?? '';
  if (url === '') return { url, code: event.code, reason: event.message };
  // "cannot reach <url>: <why>" names the URL once: the cause's own words, else the message without it.
  const root = rootCause(event.error);
  const reason =
    root instanceof Error && root !== event.error ? root.message : event.message.replace(` for ${url}`, '');
  return { url, code: event.code, reason };
}

function urlOf(payload: unknown): string | undefined {
  const url = (payload as { url?: unknown } | undefined)?.url;
  return typeof url === 'string' ? url : undefined;
}

/**
 * Requests dropped because a host's robots.txt could not be fetched (not because it disallows
 * them): a summary that called those "dropped by robots.txt" would blame a file nobody read.
 */
function countRobotsUnreachable(): { count(): number; stop(): void } {
  let n = 0;
  const onDrop = (message: unknown) => {
    if (/^robots\.txt of .* is unreachable/.test((message as DropMessage).reason)) n++;
  };
  diagnosticsChannel.subscribe(CHANNEL_NAMES.drop, onDrop);
  return {
    count: () => n,
    stop: () => diagnosticsChannel.unsubscribe(CHANNEL_NAMES.drop, onDrop),
  };
}

/**
 * A broker (Redis) the crawl depends on went away: the crawl stalls until it is back, so say
 * so — once per server and backend, however many connections noticed — and say when it is back.
 */
function reportOutages(say: (text: string) => void): { stop(): void } {
  const down = new Set<string>();
  const onEvent = (message: unknown) => {
    const event = message as ConnectionEvent;
    const which = `${event.backend} (${event.server})`;
    if (event.state === 'lost' && !down.has(which)) {
      down.add(which);
      const why = event.error instanceof Error ? `: ${event.error.message}` : '';
      say(
        `mocra: warning: lost the connection of ${which}${why}; waiting for it to come back (MOCRA_ERR_BACKEND_UNAVAILABLE)`,
      );
    } else if (event.state === 'restored' && down.delete(which)) {
      say(`mocra: ${which} is connected again after ${((event.downMs ?? 0) / 1000).toFixed(1)} s`);
    } else if (event.state === 'emptied') {
      say(`mocra: ${describe(event.error)}`);
    }
  };
  connectionChannel.subscribe(onEvent);
  return { stop: () => connectionChannel.unsubscribe(onEvent) };
}

/** A start URL whose robots.txt could not be fetched: the host itself is likely unreachable. */
async function unreachableRobots(ctx: { robots: RobotsCache | undefined; startUrls: readonly string[] }) {
  if (!ctx.robots) return undefined;
  for (const url of ctx.startUrls) {
    const entry = await ctx.robots.entry(new URL(url).origin).catch(() => undefined);
    if (entry?.status === 'unreachable') {
      return {
        url,
        code: '',
        reason: `${entry.error ?? `HTTP ${entry.httpStatus}`} (fetching its robots.txt)`,
      };
    }
  }
  return undefined;
}

function describe(err: unknown): string {
  if (isMocraError(err)) return `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}

interface Ended {
  out: Output | undefined;
  failures: Failure[];
}

function printSummary(
  summary: RunSummary,
  ctx: ExecuteContext & Ended & { robotsUnreachable: number },
  io: CliIo,
  strict: boolean,
): void {
  const seconds = summary.durationMs / 1000;
  const rate = rateOf({ pages: summary.pages, queued: 0, errors: 0, elapsedMs: summary.durationMs });
  const mb = (summary.bytes / 1_048_576).toFixed(1);
  const disallowed = summary.dropped - ctx.robotsUnreachable;
  const lines = [
    `mocra: ${ctx.label} ${summary.reason === 'idle' ? 'finished' : `ended (${summary.reason})`} in ${formatElapsed(summary.durationMs)} (${seconds.toFixed(1)} s)`,
    `  pages     ${summary.pages} (${rate.toFixed(1)}/s, ${mb} MB), items ${summary.items}`,
    `  frontier  ${summary.frontier.admitted} admitted, ${summary.frontier.duplicates} duplicates, ${summary.frontier.overDepth} over max depth, ${summary.frontier.overLimit} over max pages`,
    `  errors    ${summary.errors} (${summary.retries} retried, ${ctx.failures.length} given up), ${disallowed} dropped by robots.txt${ctx.robotsUnreachable > 0 ? `, ${ctx.robotsUnreachable} not fetched (robots.txt unreachable)` : ''}`,
    ...summaryLines(summary.errorExamples),
  ];
  if (summary.deadLettered > 0) {
    lines.push(
      `  dlq       ${summary.deadLettered} given up for good and dead-lettered (${strict ? 'exit 1: --strict' : '--strict makes this exit 1'})`,
    );
  }
  const out = ctx.out;
  if (out?.file === undefined) {
    lines.push('  out       none: records were not kept (give --out pages.jsonl, or pipe standard output)');
  } else {
    const resumed = out.resumed();
    lines.push(
      `  out       ${out.file}: ${out.written()} records${resumed > 0 ? ` (+ ${resumed} from before the resume)` : ''}`,
    );
  }
  if (summary.pending > 0)
    lines.push(`  pending   ${summary.pending} messages left (resume with the same --persist)`);
  io.stderr.write(`${lines.join('\n')}\n`);
}

async function exitCode(
  summary: RunSummary,
  flags: RuntimeFlags,
  ctx: ExecuteContext & Ended,
  io: CliIo,
): Promise<number> {
  if (summary.reason === 'signal') return 130;
  if (summary.reason === 'critical' || summary.reason === 'aborted') return 1;
  if (summary.pages === 0 && (ctx.out?.resumed() ?? 0) === 0) {
    const start =
      ctx.failures.find((f) => ctx.startUrls.includes(f.url)) ??
      ctx.failures[0] ??
      (summary.dropped > 0 ? await unreachableRobots(ctx) : undefined);
    if (start?.url === '') {
      // Nothing to reach: the spider's start() threw, or its login failed.
      io.stderr.write(`mocra: nothing was fetched: ${start.reason} (${start.code})\n`);
    } else if (start) {
      const err = new StartUnreachableError(start.url, start.reason);
      io.stderr.write(`mocra: ${err.message} (${err.code})\n`);
    } else if (summary.dropped > 0) {
      io.stderr.write(
        'mocra: nothing was fetched: robots.txt disallows the start URL (use --no-robots to ignore it)\n',
      );
    } else {
      io.stderr.write('mocra: nothing was fetched\n');
    }
    return 1;
  }
  if (flags.strict && (ctx.failures.length > 0 || summary.deadLettered > 0)) return 1;
  return 0;
}
