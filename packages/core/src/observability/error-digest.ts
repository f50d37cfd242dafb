/**
 * A digest of a run's failures: which are the first of their kind, and per error code how many
 * there were and one example. A parse that throws on every page is one problem seen a thousand
 * times; whoever reports it (the engine's log, the CLI) shows its first occurrence in full — the
 * message and a stack into the code that threw — and counts the rest.
 *
 * Two failures are of one kind when they have the same code, stage, module and node, and the
 * error that started them (the innermost `cause`, for a user's parse that threw: their
 * TypeError) has the same name, message and throwing frame. URLs and numbers are taken out of
 * the message first, so "HTTP 503 for /a" and "HTTP 503 for /b" are one kind.
 */
import type { StageName } from '../model/events.js';
import { redactUrlCredentials } from '../redact.js';

/** What the digest needs of a failure (an ErrorEvent has all of it). */
export interface DigestedFailure {
  code: string;
  message: string;
  stage: StageName;
  error?: unknown;
  module?: string;
  node?: string;
  url?: string;
}

/** One error code of a run: how often, and its first occurrence. */
export interface ErrorExample {
  count: number;
  /** The URL of the first occurrence (absent for failures with no URL, e.g. a `start()` that threw). */
  url?: string;
  message: string;
  stage: StageName;
  module?: string;
}

export class ErrorDigest {
  readonly #kinds = new Set<string>();
  readonly #byCode = new Map<string, ErrorExample>();

  /** Count one failure; true when it is the first of its kind. */
  record(failure: DigestedFailure): boolean {
    const example = this.#byCode.get(failure.code);
    if (example === undefined) {
      this.#byCode.set(failure.code, {
        count: 1,
        ...(failure.url === undefined ? {} : { url: redactUrlCredentials(failure.url) }),
        message: redactUrlCredentials(failure.message),
        stage: failure.stage,
        ...(failure.module === undefined ? {} : { module: failure.module }),
      });
    } else {
      example.count++;
    }
    const kind = kindOf(failure);
    if (this.#kinds.has(kind)) return false;
    // Bounded: a run that fails in more ways than this reports the rest by code only.
    if (this.#kinds.size < 1000) this.#kinds.add(kind);
    return true;
  }

  /** Per error code, most frequent first. */
  byCode(): Record<string, ErrorExample> {
    const sorted = [...this.#byCode].sort((a, b) => b[1].count - a[1].count);
    return Object.fromEntries(sorted.map(([code, example]) => [code, { ...example }]));
  }
}

/** The innermost cause of an error (a steering or wrapping error's origin). */
export function rootCause(error: unknown): unknown {
  let e = error;
  for (let depth = 0; depth < 8; depth++) {
    const cause = (e as { cause?: unknown } | null)?.cause;
    if (cause === undefined || cause === null || cause === e) break;
    e = cause;
  }
  return e;
}

function kindOf(failure: DigestedFailure): string {
  const root = rootCause(failure.error);
  const origin =
    root instanceof Error && root !== failure.error
      ? `${root.name}: ${generic(root.message)} @ ${firstFrame(root.stack)}`
      : generic(failure.message);
  return [failure.code, failure.stage, failure.module ?? '', failure.node ?? '', origin].join('\u0000');
}

const URL_LIKE = /\b[a-z][a-z0-9+.-]*:\/\/\S+/gi;
const NUMBER = /\d+/g;

function generic(message: string): string {
  return message.replace(URL_LIKE, '<url>').replace(NUMBER, '#');
}

function firstFrame(stack: string | undefined): string {
  return (
    stack
      ?.split('\n')
      .find((line) => line.trimStart().startsWith('at '))
      ?.trim() ?? ''
  );
}
