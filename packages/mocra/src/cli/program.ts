/**
 * The `mocra` command line: `mocra crawl <url…>`, `mocra run <spider-file>`, `mocra create <dir>`,
 * `mocra shell <url>`, `mocra store …` and `mocra config migrate <file>`, with `--help` on every
 * command. `main(argv)` returns the exit code (see execute.ts); bad usage is 2.
 */

import { isMocraError, LINK_SCOPES } from '@mocra/core';
import { Command, CommanderError, Option } from 'commander';
import { addConfigCommands } from './config-command.js';
import { crawlCommand } from './crawl-command.js';
import { type CreateFlags, createCommand } from './create-command.js';
import type { CliIo } from './execute.js';
import { isUnreleased, ownPackage } from './own-package.js';
import { runCommand } from './run-command.js';
import {
  addDownloadFlags,
  addRuntimeFlags,
  type CrawlFlags,
  type DownloadFlags,
  patternFlag,
  type RuntimeFlags,
} from './runtime-options.js';
import { shellCommand } from './shell-command.js';
import { addStoreCommands } from './store-commands.js';

const EXAMPLES_CRAWL = `
Examples:
  mocra crawl https://example.com/ --out pages.jsonl
  mocra crawl https://example.com/docs/ --scope prefix --max-pages 500 --out docs.csv
  mocra crawl https://example.com/ --include '/blog/**' --exclude '/blog/tag/**' --delay 1s
  mocra crawl https://example.com/ --persist ./state --out pages.jsonl   # run again to resume

Scopes: same-host (default), same-domain (public-suffix aware), prefix (under the start URL's
directory), any. Patterns are globs ('/books/**' matches the path, 'https://*.example.com/**'
the whole URL) or /regular expressions/. robots.txt is obeyed unless --no-robots.`;

const EXAMPLES_RUN = `
Examples:
  mocra run ./spiders/books.ts --out books.jsonl
  mocra run ./spider.js --concurrency 8 --per-host-concurrency 2 --no-robots
  mocra run ./catalog-module.ts --config mocra.toml --persist ./state --out items.csv

The file's default export (or its \`spider\` or \`module\` export) is what runs: a spider —
name, startUrls or start(seeds), and parse(res, cx), what defineSpider() returns — or a module,
what defineModule() returns. The file needs no project of its own: \`mocra\` resolves from the
file's project, else from this command's installation.`;

const EXAMPLES_CREATE = `
Examples:
  mocra create my-crawler && cd my-crawler && npm install && npm test
  mocra create my-crawler --link ~/src/mocra   # offline: link a built clone of the repository

An unreleased build (run from a clone of the repository) links to its own clone by default.`;

const EXAMPLES_SHELL = `
Examples:
  mocra shell https://example.com/books/
  mocra shell https://example.com/ --user-agent 'my-bot/1.0' -H 'accept-language: fr'
  echo "$('title').text()" | mocra shell https://example.com/    # commands from a pipe

In the REPL: res.status, res.headers, res.text(), $('h1').text(), fetch('/page/2'), view().
The page is fetched as a crawl would fetch it: the same User-Agent, headers, timeouts and
--config [download] settings.`;

/** This package's version (a clone of the repository says it is not a release). */
function version(): string {
  const pkg = ownPackage();
  return isUnreleased(pkg)
    ? `${pkg.version} (unreleased: built from the repository, not a published package)`
    : pkg.version;
}

/** The runtime flags with the names of those given on the command line. */
function withGiven<T extends object>(flags: T, command: Command): T & { given: ReadonlySet<string> } {
  const given = new Set(Object.keys(flags).filter((key) => command.getOptionValueSource(key) === 'cli'));
  return { ...flags, given };
}

export function createProgram(io: CliIo, onExit: (code: number) => void): Command {
  // `mocra crawl --help | head`: a closed pipe is not an error.
  for (const stream of [io.stdout, io.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
    });
  }
  const program = new Command('mocra')
    .description('Crawl and scrape from the command line (docs/cli.md)')
    .version(version(), '-v, --version')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    })
    .exitOverride();

  const crawl = program
    .command('crawl')
    .description('crawl a site from its start URL(s), following links; one record per page')
    .argument('<url...>', 'start URL(s)')
    .addOption(
      new Option('--scope <scope>', 'where links may lead').choices([...LINK_SCOPES]).default('same-host'),
    )
    .option(
      '--include <pattern>',
      'follow only links matching a glob or /regex/ (repeatable)',
      patternFlag,
      [],
    )
    .option(
      '--exclude <pattern>',
      'do not follow links matching a glob or /regex/ (repeatable)',
      patternFlag,
      [],
    )
    .option('--respect-nofollow', 'skip rel=nofollow links and pages marked nofollow', false)
    .option(
      '--sitemaps',
      "also start from the pages the site's sitemaps list (found through robots.txt)",
      false,
    )
    .addHelpText('after', EXAMPLES_CRAWL)
    .exitOverride();
  addRuntimeFlags(crawl).action(async (urls: string[], flags: CrawlFlags, command: Command) => {
    onExit(await crawlCommand(urls, withGiven(flags, command), io));
  });

  const run = program
    .command('run')
    .description(
      'run a spider or a module from a file (TypeScript or JavaScript) with the same runtime flags',
    )
    .argument('<file>', 'file whose default export is the spider or module')
    .addHelpText('after', EXAMPLES_RUN)
    .exitOverride();
  addRuntimeFlags(run).action(async (file: string, flags: RuntimeFlags, command: Command) => {
    onExit(await runCommand(file, withGiven(flags, command), io));
  });
  program
    .command('create')
    .description('write a new crawler project: a spider, its offline test, package.json and README')
    .argument('<dir>', 'directory of the new project (created, or empty)')
    .option(
      '--link <clone>',
      'depend on the built packages of this clone of the mocra repository (file: links) instead of the registry',
    )
    .option(
      '--force',
      'write into a directory that is not empty (files of the same name are replaced)',
      false,
    )
    .addHelpText('after', EXAMPLES_CREATE)
    .exitOverride()
    .action((dir: string, flags: CreateFlags) => {
      onExit(createCommand(dir, flags, io));
    });
  const shell = program
    .command('shell')
    .description('fetch a page and open a REPL on it (res, $, fetch(url), view()) to try selectors')
    .argument('<url>', 'page to fetch first')
    .addHelpText('after', EXAMPLES_SHELL)
    .exitOverride();
  addDownloadFlags(shell).action(async (url: string, flags: DownloadFlags, command: Command) => {
    onExit(await shellCommand(url, withGiven(flags, command), { ...io, stdin: io.stdin ?? process.stdin }));
  });
  addStoreCommands(program, io, onExit);
  addConfigCommands(program, io, onExit);
  return program;
}

/** Run the CLI; resolves with the exit code. */
export async function main(
  argv: readonly string[],
  io: CliIo = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  let code = 0;
  const program = createProgram(io, (c) => {
    code = c;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return code;
  } catch (err) {
    // Commander has printed the help, the version or what was wrong.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (isMocraError(err)) {
      io.stderr.write(`mocra: ${err.message} (${err.code})\n`);
      return err.code === 'MOCRA_ERR_CLI_USAGE' ? 2 : 1;
    }
    io.stderr.write(`mocra: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  }
}
