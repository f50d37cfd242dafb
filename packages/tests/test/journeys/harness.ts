// What the journey tests share: the built `mocra` bin run as a user runs it (a child process,
// an environment without the test runner's variables), temporary directories outside the
// repository, a seeded PRNG for kill points, and readers for the files the CLI writes.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const REPO = path.resolve(import.meta.dirname, '../../../..');
/** The bin as installed: package.json "bin" of `mocra`, built by `pnpm build`. */
export const BIN = path.join(REPO, 'packages/mocra/dist/cli.js');
export const FIXTURES = path.resolve(import.meta.dirname, '../fixtures');

/** Fail at once, with the fix, when the bin was not built (the journeys never run sources). */
export function assertBuilt(): void {
  if (!existsSync(BIN))
    throw new Error(`${BIN} is missing: run \`pnpm build\` first (the journeys drive the built bin)`);
}

/** A directory under the OS temp dir: outside the repository and any package.json. */
export function tempDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), `mocra-journey-${prefix}-`));
}

/**
 * The environment a user's shell would have: the test runner's own variables (VITEST…,
 * NODE_ENV=test, which make mocra's logs silent) and any MOCRA_* of the machine removed.
 */
export function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('VITEST') || key.startsWith('MOCRA_') || key === 'NODE_ENV' || key === 'TEST')
      continue;
    env[key] = value;
  }
  return { ...env, FORCE_COLOR: '0', NO_COLOR: '1', ...extra };
}

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Started {
  child: ChildProcess;
  done: Promise<Ran>;
  /** What the child has written so far. */
  stdout(): string;
  stderr(): string;
  /** Signal the child and everything it started (a `pnpm <script>` runs the script in a grandchild). */
  stopAll(signal?: NodeJS.Signals): void;
}

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** Milliseconds before the child is killed and the test fails. @default 120000 */
  timeoutMs?: number;
}

/** Start a command (argv[0] is the executable) with the user's environment. */
export function startCommand(argv: readonly string[], options: RunOptions = {}): Started {
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: options.cwd ?? tmpdir(),
    env: userEnv(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, so that stopAll reaches the processes it starts.
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (b: Buffer) => {
    stdout += b.toString();
  });
  child.stderr!.on('data', (b: Buffer) => {
    stderr += b.toString();
  });
  const stopAll = (signal: NodeJS.Signals = 'SIGTERM') => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // already gone
    }
  };
  const timer = setTimeout(() => stopAll('SIGKILL'), options.timeoutMs ?? 120_000);
  const done = new Promise<Ran>((resolve) => {
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return { child, done, stdout: () => stdout, stderr: () => stderr, stopAll };
}

/** Start the built `mocra` bin. */
export function startMocra(args: readonly string[], options: RunOptions = {}): Started {
  return startCommand([process.execPath, BIN, ...args], options);
}

/** Run the built `mocra` bin to its end. */
export function mocra(args: readonly string[], options: RunOptions = {}): Promise<Ran> {
  return startMocra(args, options).done;
}

/** mulberry32: a small seeded PRNG, so every run of a test kills at the same points. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Wait until `ready()` holds, polling every `everyMs`; false when `deadlineMs` passed first. */
export async function waitFor(ready: () => boolean, deadlineMs: number, everyMs = 5): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (ready()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return ready();
}

export function readText(file: string): string {
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

/** JSON Lines, every line parsed (a line that does not parse fails the test: the file is broken). */
export function readJsonl<T>(file: string): T[] {
  return readText(file)
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as T);
}

/** RFC 4180 CSV: the header row and the records as objects. */
export function readCsv(file: string): { header: string[]; rows: Record<string, string>[] } {
  const table = parseCsv(readText(file));
  const [header = [], ...rows] = table;
  return { header, rows: rows.map((row) => Object.fromEntries(header.map((h, i) => [h, row[i] ?? '']))) };
}

export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if (field !== '' || row.length > 0) throw new Error(`the CSV ends inside a record: ${JSON.stringify(row)}`);
  return rows;
}

/**
 * What a terminal shows for a stream with carriage returns and "erase line" sequences: each
 * line as it was last drawn. Used to check that no message lands on the progress bar's line.
 */
export function screenLines(raw: string): string[] {
  return raw
    .replace(/\r\n/g, '\n')
    .split('\n')
    .map((line) => {
      const plain = line.replaceAll('\u001b[2K', '');
      return plain.slice(plain.lastIndexOf('\r') + 1);
    });
}

/** A TCP port on 127.0.0.1 that was free a moment ago (for a server the test starts). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Complete lines in a file the CLI is still writing. */
export function lineCount(file: string): number {
  const text = readText(file);
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/**
 * The page numbers of the fixture graph `graph` in a `mocra crawl --out` file; a last line cut
 * short by a SIGKILL is skipped.
 */
export function graphPagesIn(
  file: string,
  graph: { pages: number; fanout: number; bytes: number },
): number[] {
  const prefix = `/graph/${graph.pages}/${graph.fanout}/${graph.bytes}/`;
  const out: number[] = [];
  for (const line of readText(file).split('\n')) {
    if (line === '') continue;
    let url: string;
    try {
      url = (JSON.parse(line) as { url: string }).url;
    } catch {
      continue;
    }
    out.push(Number(new URL(url).pathname.slice(prefix.length)));
  }
  return out;
}
