/**
 * What the CLI shows of a run's failures at its default level. The first failure of each kind
 * (observability/error-digest.ts in core) is printed as it happens:
 *
 * ```
 * mocra: parse of books/spider (https://example.com/books/page/1) threw: Cannot read properties of undefined (reading 'title') (MOCRA_ERR_PARSE_FAILED)
 *   TypeError: Cannot read properties of undefined (reading 'title')
 *       at Object.parse (/home/me/spiders/books.ts:12:31)
 *   (the first of its kind; repeats are counted in the summary)
 * ```
 *
 * — with a stack when the failure started in user code (a spider's `parse` or `start`, a
 * sink, a middleware: an error that is not mocra's own), else one line when the work was given
 * up (a URL that could not be fetched). Retried failures of mocra's own are only counted. The
 * summary at the end lists every code with its count and the first URL (summaryLines).
 */
import { fileURLToPath } from 'node:url';
import {
  ErrorDigest,
  type ErrorEvent,
  type ErrorExample,
  isMocraError,
  type PolicyDecision,
  rootCause,
} from '@mocra/core';

/** Frames of these directories are mocra's, not the user's: `mocra` and `@mocra/core` installed. */
const OWN_DIRS = [packageDirOf(import.meta.url), packageDirOf(import.meta.resolve('@mocra/core'))];
const MAX_FRAMES = 8;

export class ErrorReport {
  readonly #digest = new ErrorDigest();
  readonly #print: (text: string) => void;

  constructor(print: (text: string) => void) {
    this.#print = print;
  }

  onError(event: ErrorEvent, decision: PolicyDecision): void {
    if (!this.#digest.record(event)) return;
    const root = rootCause(event.error);
    const userCode = root instanceof Error && !isMocraError(root);
    if (!userCode && decision.action === 'retry') return;
    const lines = [`mocra: ${event.message} (${event.code})`];
    if (userCode) {
      lines.push(...userStack(root).map((line) => `  ${line}`));
      lines.push('  (the first of its kind; repeats are counted in the summary)');
    }
    this.#print(lines.join('\n'));
  }
}

/** The error's first line and its frames in user code (all frames when none is the user's). */
export function userStack(err: Error): string[] {
  const [head, ...rest] = (err.stack ?? `${err.name}: ${err.message}`).split('\n');
  const frames = rest.filter((line) => line.trimStart().startsWith('at '));
  const mine = frames.filter((line) => !isOwnFrame(line));
  const shown = (mine.length > 0 ? mine : frames).slice(0, MAX_FRAMES).map((line) => `    ${line.trim()}`);
  return [head ?? `${err.name}: ${err.message}`, ...shown];
}

function isOwnFrame(frame: string): boolean {
  if (/\(node:|at node:|\bnode:internal\b/.test(frame)) return true;
  if (frame.includes('/node_modules/')) return true;
  return OWN_DIRS.some((dir) => dir !== undefined && frame.includes(dir));
}

/** The directory of the package a module URL belongs to (its `src/` or `dist/` parent). */
function packageDirOf(url: string): string | undefined {
  if (!url.startsWith('file:')) return undefined;
  const file = fileURLToPath(url);
  const at = Math.max(file.lastIndexOf('/src/'), file.lastIndexOf('/dist/'));
  return at < 0 ? undefined : `${file.slice(0, at)}/`;
}

/** Summary lines: one per error code, most frequent first, with the first URL it happened at. */
export function summaryLines(byCode: Record<string, ErrorExample>): string[] {
  const entries = Object.entries(byCode);
  const width = Math.max(0, ...entries.map(([code]) => code.length));
  return entries.map(([code, example]) => {
    const where =
      example.url ??
      `in the ${example.stage} stage${example.module === undefined ? '' : ` of ${example.module}`} (no URL): ${example.message}`;
    return `            ${code.padEnd(width)}  ${example.count}, e.g. ${where}`;
  });
}
