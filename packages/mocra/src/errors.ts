/**
 * Errors the `mocra` facade raises itself (everything else comes from @mocra/core and is
 * re-exported by the prelude). Codes are listed in docs/errors.md under `## mocra`.
 */
import { MocraError } from '@mocra/core';

export const MOCRA_ERROR_CODES = {
  MOCRA_ERR_SINK_CLOSED: 'An item was written to a channel sink whose reader has stopped reading.',
  MOCRA_ERR_CLI_USAGE:
    'The mocra CLI was given a bad flag, value or argument (exit code 2); the message names it and `--help` shows the usage.',
  MOCRA_ERR_SPIDER_LOAD:
    '`mocra run` could not load the spider file (missing, does not compile or throws on import) or found no spider exported in it.',
  MOCRA_ERR_START_UNREACHABLE:
    'No start URL of a `mocra crawl` could be fetched (connection refused, DNS, timeout, TLS…); the crawl fails with exit code 1.',
  MOCRA_ERR_OUTPUT_RESUME:
    'A `--persist` run cannot resume its `--out` file: the file is missing or shorter than the interrupted run wrote, so lines already done would be lost; restore the file, or start afresh with a new persist directory.',
  MOCRA_ERR_CREATE_NOT_EMPTY:
    '`mocra create` was pointed at a directory that is not empty; choose a new one, or pass `--force` to write the project into it (files of the same name are replaced).',
  MOCRA_ERR_OUTPUT_EXISTS:
    'A command would write a file that already exists (`mocra config migrate`); nothing was written: give `--force` to overwrite it, or another `-o <path>`.',
} as const;

export type MocraErrorCode = keyof typeof MOCRA_ERROR_CODES;

/** The reader of a channel sink went away (`break` out of the `for await`); the item was not delivered. */
export class SinkClosedError extends MocraError {
  override readonly name = 'SinkClosedError';
  constructor(message = 'the channel sink is closed: its reader stopped reading') {
    super('MOCRA_ERR_SINK_CLOSED', message, { retryable: false });
  }
}

/** A bad command line: a flag's value, a missing argument, an unknown option. */
export class CliUsageError extends MocraError {
  override readonly name = 'CliUsageError';
  constructor(message: string) {
    super('MOCRA_ERR_CLI_USAGE', message, { retryable: false });
  }
}

/** The spider file of `mocra run` cannot be used. */
export class SpiderLoadError extends MocraError {
  override readonly name = 'SpiderLoadError';
  constructor(
    readonly file: string,
    reason: string,
    options: { cause?: unknown } = {},
  ) {
    super('MOCRA_ERR_SPIDER_LOAD', `cannot load a spider from ${file}: ${reason}`, {
      ...options,
      retryable: false,
    });
  }
}

/** None of the start URLs could be fetched. */
export class StartUnreachableError extends MocraError {
  override readonly name = 'StartUnreachableError';
  constructor(
    readonly url: string,
    reason: string,
    options: { cause?: unknown } = {},
  ) {
    super('MOCRA_ERR_START_UNREACHABLE', `cannot reach ${url}: ${reason}`, { ...options, retryable: false });
  }
}

/** The `--out` file of a resumed `--persist` run is not the one the interrupted run wrote. */
export class OutputResumeError extends MocraError {
  override readonly name = 'OutputResumeError';
  constructor(
    readonly file: string,
    found: 'missing' | 'shorter',
    readonly expectedBytes: number,
  ) {
    super(
      'MOCRA_ERR_OUTPUT_RESUME',
      `cannot resume ${file}: ${found === 'missing' ? 'the file is gone' : 'the file is shorter'} than the interrupted run left it (${expectedBytes} bytes); its lines cannot be written again (their pages are done): restore the file, or start afresh with a new --persist directory`,
      { retryable: false },
    );
  }
}

/** `mocra create` would write into a directory that already holds files. */
export class ProjectNotEmptyError extends MocraError {
  override readonly name = 'ProjectNotEmptyError';
  constructor(readonly dir: string) {
    super(
      'MOCRA_ERR_CREATE_NOT_EMPTY',
      `${dir} is not empty: choose a new directory, or pass --force to write the project into it (files of the same name are replaced)`,
      { retryable: false },
    );
  }
}

/** A command's output file exists and `--force` was not given. */
export class OutputExistsError extends MocraError {
  override readonly name = 'OutputExistsError';
  constructor(readonly file: string) {
    super('MOCRA_ERR_OUTPUT_EXISTS', `${file} exists; give --force to overwrite it, or another -o <path>`, {
      retryable: false,
    });
  }
}
