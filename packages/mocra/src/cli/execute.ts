/**
 * Running a configured builder for the CLI: progress while it runs, the summary after, and
 * the exit code.
 *
 * | exit | when |
 * | ---- | ---- |
 * | 0    | the crawl ran to its end (every reachable page done, or `--max-pages` reached) |
 * | 1    | the crawl failed: nothing could be fetched (start URL unreachable, or disallowed by robots.txt), the run stopped on a critical error, the persist directory is in use, or (`--strict`) some URL was given up on or some work dead-lettered |
 * | 2    | bad usage (flags, arguments) |
 * | 130  | interrupted (SIGINT/SIGTERM); with `--persist`, run the same command again to resume |
 */
import { isMocraError, type RobotsCache, type RunSummary } from '@mocra/core';
import type { MocraBuilder } from '../builder.js';
import { StartUnreachableError } from '../errors.js';
import { cliDashboard, lingerLine } from './dashboard.js';
import { formatElapsed, ProgressReporter, rateOf } from './progress.js';
import type { RuntimeFlags } from './runtime-options.js';

export interface CliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WriteStream;
}

export interface Failure {
  url: string;
  code: string;
  message: string;
}

export interface ExecuteContext {
  /** The robots.txt cache the crawl obeyed (to tell "disallowed" from "unreachable"). */
  robots: RobotsCache | undefined;
  /** What the run is (`crawl of https://…`, `spider books`), for the summary. */
  label: string;
  startUrls: readonly string[];
  /** URLs given up on, filled by the caller's onError. */
  failures: Failure[];
  /** Where records went, for the summary. */
  out: { file: string; written: () => number; resumed: () => number; close: () => void } | undefined;
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
  let engineStartedAt = Date.now();
  builder.onStart((engine) => {
    engineStartedAt = Date.now();
    progress.start(engine);
  });
  const dashboard =
    flags.dashboard === undefined
      ? undefined
      : cliDashboard({ ...flags, dashboard: flags.dashboard }, io.stderr);
  if (dashboard !== undefined) builder.dashboard(dashboard.options);
  // The summary and the exit code as soon as the run ended: before a lingering dashboard.
  let code: number | undefined;
  builder.onEnd(async (summary) => {
    progress.stop({
      pages: summary.pages,
      queued: summary.pending,
      errors: summary.errors,
      elapsedMs: Date.now() - engineStartedAt,
    });
    ctx.out?.close();
    printSummary(summary, ctx, io, flags.strict);
    code = await exitCode(summary, flags, ctx, io);
    const url = dashboard?.url();
    const linger = flags.dashboardLinger ?? 0;
    if (url !== undefined && linger > 0 && summary.reason !== 'signal' && summary.reason !== 'aborted') {
      io.stderr.write(lingerLine(url, linger));
    }
  });
  try {
    await builder.run();
  } catch (err) {
    if (code === undefined) {
      progress.stop();
      ctx.out?.close();
    }
    io.stderr.write(`mocra: ${describe(err)}\n`);
    return 1;
  }
  return code ?? 1;
}

/** A start URL whose robots.txt could not be fetched: the host itself is likely unreachable. */
async function unreachableRobots(ctx: ExecuteContext): Promise<Failure | undefined> {
  if (!ctx.robots) return undefined;
  for (const url of ctx.startUrls) {
    const entry = await ctx.robots.entry(new URL(url).origin).catch(() => undefined);
    if (entry?.status === 'unreachable') {
      return {
        url,
        code: '',
        message: `its robots.txt could not be fetched (${entry.error ?? `HTTP ${entry.httpStatus}`})`,
      };
    }
  }
  return undefined;
}

function describe(err: unknown): string {
  if (isMocraError(err)) return `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}

function printSummary(summary: RunSummary, ctx: ExecuteContext, io: CliIo, strict: boolean): void {
  const seconds = summary.durationMs / 1000;
  const rate = rateOf({ pages: summary.pages, queued: 0, errors: 0, elapsedMs: summary.durationMs });
  const mb = (summary.bytes / 1_048_576).toFixed(1);
  const lines = [
    `mocra: ${ctx.label} ${summary.reason === 'idle' ? 'finished' : `ended (${summary.reason})`} in ${formatElapsed(summary.durationMs)} (${seconds.toFixed(1)} s)`,
    `  pages     ${summary.pages} (${rate.toFixed(1)}/s, ${mb} MB), items ${summary.items}`,
    `  frontier  ${summary.frontier.admitted} admitted, ${summary.frontier.duplicates} duplicates, ${summary.frontier.overDepth} over max depth, ${summary.frontier.overLimit} over max pages`,
    `  errors    ${summary.errors} (${summary.retries} retried, ${ctx.failures.length} given up), ${summary.dropped} dropped by robots.txt`,
  ];
  if (ctx.out) {
    const resumed = ctx.out.resumed();
    lines.push(
      `  out       ${ctx.out.file}: ${ctx.out.written()} records${resumed > 0 ? ` (+ ${resumed} from before the resume)` : ''}`,
    );
  }
  if (summary.deadLettered > 0) {
    lines.push(
      `  dlq       ${summary.deadLettered} given up for good and dead-lettered (${strict ? 'exit 1: --strict' : '--strict makes this exit 1'})`,
    );
  }
  if (summary.pending > 0)
    lines.push(`  pending   ${summary.pending} messages left (resume with the same --persist)`);
  io.stderr.write(`${lines.join('\n')}\n`);
}

async function exitCode(
  summary: RunSummary,
  flags: RuntimeFlags,
  ctx: ExecuteContext,
  io: CliIo,
): Promise<number> {
  if (summary.reason === 'signal') return 130;
  if (summary.reason === 'critical' || summary.reason === 'aborted') return 1;
  if (summary.pages === 0 && (ctx.out?.resumed() ?? 0) === 0) {
    const start =
      ctx.failures.find((f) => ctx.startUrls.includes(f.url)) ??
      ctx.failures[0] ??
      (summary.dropped > 0 ? await unreachableRobots(ctx) : undefined);
    if (start) {
      const err = new StartUnreachableError(
        start.url,
        start.code ? `${start.message} (${start.code})` : start.message,
      );
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
