/**
 * Login orchestration. A module with `shouldLogin` supplies `login(ctx)`; the engine calls {@link ensureLoggedIn}
 * before the module's first generate and before each download, and {@link isSessionGone} on each
 * response:
 *
 * ```
 *   ensureLoggedIn ── logged in? ──yes──▶ go on
 *        │ no
 *        ├── a login is running for this session ──▶ wait for it (single flight)
 *        └── run login(ctx), up to `maxAttempts` times ──ok──▶ mark logged in
 *                                                    └─fail─▶ LoginFailedError (sticky until invalidated)
 *
 *   response ── status in loginStatuses or predicate ──▶ invalidate(generation at send time)
 *                                                        ▶ SessionExpiredError: the retry logs in again
 * ```
 *
 * The failure is sticky so that a login that cannot succeed (wrong password) is tried
 * `maxAttempts` times per session, not that many times per waiting request.
 */
import { AbortedError, isMocraError, LoginFailedError, SessionExpiredError } from '../errors.js';
import { Request, type RequestInit } from '../model/request.js';
import type { Response } from '../model/response.js';
import { type DownloadFn, downloadWithSession } from './fetch.js';
import type { Session } from './session.js';

/** What `login(ctx)` works with. */
export interface LoginContext {
  readonly account: string;
  readonly platform: string;
  readonly module: string;
  readonly session: Session;
  /** 1 on the first try. */
  readonly attempt: number;
  readonly signal: AbortSignal;
  /**
   * Download through the session: its cookies and sticky headers are sent, and every
   * Set-Cookie (of every redirect hop) is kept. A string is a GET; relative URLs are not allowed.
   */
  fetch(target: string | Request, init?: RequestInit): Promise<Response>;
}

/** What a login may return: sticky headers, data for generate (`ctx.login.data`), a lifetime. */
export interface LoginResult {
  headers?: Record<string, string>;
  data?: Record<string, unknown>;
  /** The session counts as logged out after this long. @default no limit */
  expiresInMs?: number;
}

/** Logs a session in; throws when it did not work (the attempt is then retried, up to the limit). */
// biome-ignore lint/suspicious/noConfusingVoidType: a login that returns nothing is the common case
export type LoginHook = (ctx: LoginContext) => void | LoginResult | Promise<void | LoginResult>;

export interface EnsureLoggedInOptions {
  module: string;
  login: LoginHook;
  download: DownloadFn;
  signal: AbortSignal;
  /** @default 3 */
  maxAttempts?: number;
  /** Pause before a retry; doubles each time. @default 250 */
  retryDelayMs?: number;
  /** Response headers written back as sticky headers during login. @default [] */
  stickyHeaders?: readonly string[];
}

/**
 * Resolves once the session is logged in. Concurrent callers share one login. Throws
 * LoginFailedError after `maxAttempts` failed tries (and again, without trying, until the
 * session is invalidated), or AbortedError when `signal` aborts.
 */
export async function ensureLoggedIn(session: Session, options: EnsureLoggedInOptions): Promise<void> {
  for (;;) {
    if (session.loggedIn) return;
    if (session.failure) throw session.failure;
    if (session.inflight) {
      await waitOrAbort(session.inflight, options.signal);
      continue;
    }
    const run = runLogin(session, options);
    session.inflight = run;
    try {
      await run;
    } finally {
      if (session.inflight === run) session.inflight = undefined;
    }
  }
}

async function runLogin(session: Session, options: EnsureLoggedInOptions): Promise<void> {
  const maxAttempts = options.maxAttempts ?? 3;
  let delay = options.retryDelayMs ?? 250;
  let lastError: unknown;
  let ran = 0;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    if (options.signal.aborted) throw new AbortedError('login aborted');
    ran = attempt;
    const ctx: LoginContext = {
      account: session.account,
      platform: session.platform,
      module: options.module,
      session,
      attempt,
      signal: options.signal,
      fetch: (target, init) => {
        const request = typeof target === 'string' ? new Request(target, init) : target;
        return downloadWithSession(options.download, session, request, options.signal, {
          ...(options.stickyHeaders ? { stickyHeaders: options.stickyHeaders } : {}),
        });
      },
    };
    try {
      const result = await options.login(ctx);
      session.markLoggedIn(result ?? {});
      return;
    } catch (err) {
      lastError = err;
      if (options.signal.aborted) throw new AbortedError('login aborted', { cause: err });
      // A login that declares itself hopeless is not tried again.
      if (isMocraError(err) && !err.retryable && err.code === 'MOCRA_ERR_NON_RETRYABLE') break;
      if (attempt < maxAttempts && delay > 0) {
        await sleep(delay, options.signal);
        delay *= 2;
      }
    }
  }
  const failure = new LoginFailedError(session.account, session.platform, ran, { cause: lastError });
  session.failure = failure;
  throw failure;
}

/** When a response means the session is gone. */
export interface SessionGoneRule {
  /** @default [401] */
  statuses?: readonly number[];
  /** Also gone when this says so (e.g. a redirect to the login page). */
  predicate?: (response: Response) => boolean;
}

/** True when `response` says the session is gone, by status or by the predicate. */
export function isSessionGone(response: Response, rule: SessionGoneRule = {}): boolean {
  const statuses = rule.statuses ?? [401];
  if (statuses.includes(response.status)) return true;
  return rule.predicate?.(response) ?? false;
}

/**
 * Checks a response against the rule; when the session is gone, invalidates it (if it is still
 * the `generation` the request was sent with) and returns the SessionExpiredError to fail the
 * work with, so its retry logs in again. Returns undefined when the session is fine.
 */
export function checkSession(
  session: Session,
  response: Response,
  generation: number,
  rule: SessionGoneRule = {},
): SessionExpiredError | undefined {
  if (!isSessionGone(response, rule)) return undefined;
  session.invalidate(generation);
  return new SessionExpiredError(
    `session of ${session.account}@${session.platform} is gone (HTTP ${response.status} from ${response.url})`,
  );
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new AbortedError('login aborted'));
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbortedError('login aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function waitOrAbort(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new AbortedError('login aborted'));
      return;
    }
    const onAbort = () => reject(new AbortedError('login aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      () => {
        signal.removeEventListener('abort', onAbort);
        // The login's own error reaches its caller; waiters re-check the session (and see `failure`).
        resolve();
      },
    );
  });
}
