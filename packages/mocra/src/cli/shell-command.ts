/**
 * `mocra shell <url>`: fetch a page with the downloader settings a crawl uses (the download
 * flags and `--config`) and open a Node REPL on it, to try selectors before writing a spider.
 *
 * In the REPL: `res` (the Response), `$` (its parsed HTML), `fetch(url)` (fetch another page,
 * relative to the current one; `res` and `$` follow), `view()` (the body in a file, or in
 * $BROWSER). A promise a line evaluates to is awaited before it is printed, so `fetch('/next')`
 * needs no `await`. Standard input that is not a terminal is read line by line, so commands can
 * be piped in; the shell ends at the end of its input (or `.exit`, Ctrl-D).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import type repl from 'node:repl';
import { PassThrough } from 'node:stream';
import {
  ConfigReadError,
  createHttpDownloader,
  engineOptionsFromConfig,
  type HttpDownloaderOptions,
  isMocraError,
  Request,
  type Response,
  readEnvOverrides,
  resolveConfig,
} from '@mocra/core';
import { CliUsageError } from '../errors.js';
import { checkStartUrls } from './crawl-command.js';
import type { CliIo } from './execute.js';
import { type DownloadFlags, downloadOptions } from './runtime-options.js';

export interface ShellIo extends CliIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
}

/** The names the REPL adds; the banner lists them. */
const HELP = `  res        the response: res.status, res.headers, res.url, res.text(), res.json(), res.body
  $          the page parsed as HTML (cheerio): $('title').text(), $('a').attr('href')
  fetch(url) fetch another page (relative to res.url); res and $ follow it
  view()     write the body to a file and print its path (opens $BROWSER when set)
`;

export async function shellCommand(rawUrl: string, flags: DownloadFlags, io: ShellIo): Promise<number> {
  const [start] = checkStartUrls([rawUrl]);
  const downloader = createHttpDownloader({ ...configuredDownload(flags.config), ...downloadOptions(flags) });
  const out = io.stdout;
  let res: Response | undefined;
  let views = 0;
  let viewDir: string | undefined;
  let inFlight: AbortController | undefined;

  const load = async (url: string): Promise<void> => {
    let target: string;
    try {
      target = new URL(url, res?.url ?? start).href;
    } catch {
      throw new CliUsageError(`'${url}' is not a URL`);
    }
    // --timeout bounds the request inside the downloader; Ctrl-C (below) ends it sooner.
    inFlight = new AbortController();
    try {
      res = await downloader.download(new Request(target), inFlight.signal);
    } finally {
      inFlight = undefined;
    }
    out.write(
      `[mocra] ${res.status} ${res.url} (${res.body.length} bytes${res.contentType ? `, ${res.contentType}` : ''})\n`,
    );
  };
  const current = (): Response => {
    if (res === undefined) throw new Error('no page fetched yet: fetch(url) first');
    return res;
  };

  out.write(`[mocra] shell on ${start}\n`);
  try {
    await load(start!);
  } catch (err) {
    // The shell still opens: the user can fix the URL with fetch().
    out.write(`[mocra] cannot fetch ${start}: ${describe(err)}\n`);
  }
  out.write(HELP);

  const terminal = io.stdin.isTTY === true && io.stdout.isTTY === true;
  const paced = terminal ? undefined : pacedInput(io.stdin);
  // Loaded here, not at the top: node:repl loads node:domain, which from then on wraps every
  // EventEmitter's construction and every callback from native code in the process — a cost
  // every page of a `mocra crawl` in the same bundle would pay.
  const { start: startRepl } = await import('node:repl');
  const server = startRepl({
    prompt: 'mocra> ',
    input: paced?.input ?? io.stdin,
    output: out,
    terminal,
    useGlobal: false,
    ignoreUndefined: true,
    preview: false,
  });
  server.on('SIGINT', () => inFlight?.abort(new Error('interrupted (Ctrl-C)')));
  const define = (name: string, get: () => unknown) =>
    Object.defineProperty(server.context, name, { get, enumerable: true, configurable: true });
  define('res', current);
  define('$', () => current().$);
  define('fetch', () => load);
  define('view', () => () => {
    viewDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'mocra-shell-'));
    const page = current();
    const file = path.join(viewDir, `page-${++views}${extensionOf(page)}`);
    fs.writeFileSync(file, page.body);
    const browser = process.env.BROWSER;
    if (browser !== undefined && browser !== '') {
      const child = spawn(browser, [file], { stdio: 'ignore', detached: true });
      child.on('error', (err) => out.write(`[mocra] cannot start $BROWSER (${browser}): ${err.message}\n`));
      child.unref();
    }
    return file;
  });
  // A line that evaluates to a promise (fetch(), an async call) prints what it resolves to.
  const evaluate = server.eval;
  const awaitingEval: repl.REPLEval = function (this: repl.REPLServer, code, context, file, done) {
    evaluate.call(this, code, context, file, (err, result) => {
      if (err || !isThenable(result)) return done(err, result);
      result.then(
        (value) => done(null, value),
        (failure: unknown) =>
          done(failure instanceof Error ? failure : new Error(String(failure)), undefined),
      );
    });
  };
  (server as { eval: repl.REPLEval }).eval = awaitingEval;
  if (paced !== undefined) {
    // The REPL shows its prompt when a line is done (its promise settled too): then the next one.
    const displayPrompt = server.displayPrompt.bind(server);
    server.displayPrompt = (preserveCursor?: boolean) => {
      displayPrompt(preserveCursor);
      paced.ready();
    };
    paced.ready();
  }

  await new Promise<void>((resolve) => server.once('exit', resolve));
  await downloader.close();
  if (viewDir !== undefined) out.write(`[mocra] pages written by view() stay in ${viewDir}\n`);
  return 0;
}

/**
 * Piped commands, one line at a time: the REPL evaluates every line it has read at once, so
 * `fetch('/a')` then `res.url` would read the old page; each line waits for the one before.
 */
function pacedInput(source: NodeJS.ReadableStream): { input: PassThrough; ready(): void } {
  const input = new PassThrough();
  const lines: string[] = [];
  let ended = false;
  let idle = false;
  const next = () => {
    if (!idle) return;
    const line = lines.shift();
    if (line !== undefined) {
      idle = false;
      input.write(`${line}\n`);
    } else if (ended) {
      input.end();
    }
  };
  const reader = readline.createInterface({ input: source, crlfDelay: Number.POSITIVE_INFINITY });
  reader.on('line', (line) => {
    lines.push(line);
    next();
  });
  reader.once('close', () => {
    ended = true;
    next();
  });
  return {
    input,
    ready() {
      idle = true;
      next();
    },
  };
}

/**
 * The `[download]` options of `--config` or the MOCRA_* environment, as a crawl gets them; the
 * config's `[proxy]` pool is refused: the shell fetches directly and would not say so otherwise.
 */
function configuredDownload(file: string | undefined): HttpDownloaderOptions {
  if (file === undefined) {
    const env = readEnvOverrides(process.env);
    if (env.variables.size === 0 && env.issues.length === 0) return {};
  }
  let toml: string | undefined;
  if (file !== undefined) {
    try {
      toml = fs.readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigReadError(file, { cause: err });
    }
  }
  const config = resolveConfig(toml === undefined || file === undefined ? {} : { toml, file });
  if (config.proxy !== undefined) {
    throw new CliUsageError(
      'mocra shell does not send through a [proxy] pool yet; remove [proxy] (or its MOCRA_PROXY__* variables) for the shell',
    );
  }
  return engineOptionsFromConfig(config).download ?? {};
}

function extensionOf(page: Response): string {
  const type = page.contentType ?? '';
  if (type.includes('html')) return '.html';
  if (type.includes('json')) return '.json';
  if (type.includes('xml')) return '.xml';
  return type.startsWith('text/') ? '.txt' : '.bin';
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function describe(err: unknown): string {
  if (isMocraError(err)) return `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}
