/**
 * Sessions: one per account × platform, shared by every module and
 * request of that pair. A session holds
 *
 *   - a real cookie jar (tough-cookie: domain/path matching, Secure, HttpOnly, Expires/Max-Age,
 *     a Set-Cookie with Max-Age=0 deletes),
 *   - sticky headers (set by login or written back from responses, e.g. a CSRF header) sent with
 *     every request that does not set the header itself,
 *   - the login state: whether a login succeeded, what it returned, when it expires, and a
 *     generation number bumped on every invalidation (so N requests that all see a 401 cause
 *     one re-login, not N).
 */

import type { CookieJar } from 'tough-cookie';
import { InvalidArgumentError } from '../errors.js';
import type { Request } from '../model/request.js';
import type { Response } from '../model/response.js';
import { lazyRequire } from '../optional-dependency.js';

// Loaded with the first session: a crawl without sessions never loads the cookie jar.
const toughCookie = lazyRequire<typeof import('tough-cookie')>('tough-cookie');

/** Milliseconds since the epoch; injectable so tests run on a fake clock. */
export type NowFn = () => number;

/** What a successful login left in the session (the `login` part of a generate context). */
export interface LoginInfo {
  readonly account: string;
  readonly platform: string;
  /** Whatever the login returned as `data` (tokens, user ids…). */
  readonly data: Readonly<Record<string, unknown>>;
  /** Sticky headers of the session. */
  readonly headers: Readonly<Record<string, string>>;
  /** Epoch ms of the login. */
  readonly loggedInAt: number;
  /** Epoch ms after which the session counts as logged out, if the login said so. */
  readonly expiresAt: number | undefined;
}

export class Session {
  readonly account: string;
  readonly platform: string;
  readonly jar: CookieJar;
  readonly #now: NowFn;
  readonly #headers: Record<string, string> = {};
  #data: Record<string, unknown> = {};
  #generation = 0;
  #loggedInAt: number | undefined;
  #expiresAt: number | undefined;
  /** The login in progress (single flight), if any. */
  inflight: Promise<void> | undefined;
  /** The error of the last login that used up its attempts; cleared by invalidate() and by a successful login. */
  failure: Error | undefined;

  constructor(account: string, platform: string, now: NowFn = Date.now) {
    this.account = account;
    this.platform = platform;
    this.jar = new (toughCookie().CookieJar)(undefined, { looseMode: true });
    this.#now = now;
  }

  /** Bumped by every invalidation. Remember it when sending a request; pass it to `invalidate`. */
  get generation(): number {
    return this.#generation;
  }

  /** A login succeeded, has not been invalidated since, and has not expired. */
  get loggedIn(): boolean {
    if (this.#loggedInAt === undefined) return false;
    return this.#expiresAt === undefined || this.#now() < this.#expiresAt;
  }

  /** Sticky headers (lower-case names). */
  get headers(): Readonly<Record<string, string>> {
    return this.#headers;
  }

  get data(): Readonly<Record<string, unknown>> {
    return this.#data;
  }

  /** The login state, or undefined when not logged in. */
  get login(): LoginInfo | undefined {
    if (!this.loggedIn) return undefined;
    return {
      account: this.account,
      platform: this.platform,
      data: this.#data,
      headers: { ...this.#headers },
      loggedInAt: this.#loggedInAt!,
      expiresAt: this.#expiresAt,
    };
  }

  /** Sets (or, with undefined, removes) a sticky header. */
  setHeader(name: string, value: string | undefined): void {
    const key = name.toLowerCase();
    if (value === undefined) delete this.#headers[key];
    else this.#headers[key] = value;
  }

  /** Records a successful login. */
  markLoggedIn(
    result: { data?: Record<string, unknown>; headers?: Record<string, string>; expiresInMs?: number } = {},
  ): void {
    if (result.expiresInMs !== undefined && !(result.expiresInMs > 0)) {
      throw new InvalidArgumentError('login result: expiresInMs must be a positive number of milliseconds');
    }
    for (const [name, value] of Object.entries(result.headers ?? {})) this.setHeader(name, value);
    this.#data = { ...result.data };
    this.#loggedInAt = this.#now();
    this.#expiresAt = result.expiresInMs === undefined ? undefined : this.#loggedInAt + result.expiresInMs;
    this.failure = undefined;
  }

  /**
   * Ends the login: the next request logs in again. With `generation`, only if the session is
   * still that generation — a response to a request sent before a re-login must not end the
   * new login. Returns whether it invalidated. Cookies stay (the login replaces what it needs).
   */
  invalidate(generation?: number): boolean {
    if (generation !== undefined && generation !== this.#generation) return false;
    this.#generation++;
    this.#loggedInAt = undefined;
    this.#expiresAt = undefined;
    this.failure = undefined;
    return true;
  }

  /** Forgets everything: cookies, headers, login. */
  async reset(): Promise<void> {
    this.invalidate();
    for (const name of Object.keys(this.#headers)) delete this.#headers[name];
    this.#data = {};
    await this.jar.removeAllCookies();
  }

  /** The Cookie header value the jar has for `url` (expired cookies are left out). */
  cookieHeader(url: string): Promise<string> {
    return this.jar.getCookieString(url);
  }

  /**
   * Adds the session to a request, in place: cookies for its URL (names the request already
   * sends in its own Cookie header win) and sticky headers it does not set itself.
   */
  async apply(request: Request): Promise<void> {
    const names = new Map<string, string>();
    for (const name of Object.keys(request.headers)) names.set(name.toLowerCase(), name);
    for (const [name, value] of Object.entries(this.#headers)) {
      if (!names.has(name)) request.headers[name] = value;
    }
    const fromJar = await this.jar.getCookieString(request.url);
    if (fromJar === '') return;
    const own = names.get('cookie');
    if (own === undefined) {
      request.headers.cookie = fromJar;
      return;
    }
    const ownValue = request.headers[own]!;
    const taken = new Set(ownValue.split(';').map((pair) => pair.split('=', 1)[0]!.trim()));
    const extra = fromJar.split('; ').filter((pair) => !taken.has(pair.split('=', 1)[0]!));
    if (extra.length > 0) request.headers[own] = [ownValue, ...extra].join('; ');
  }

  /**
   * Takes what a response sets: every Set-Cookie (for the response's URL) and the values of the
   * `stickyHeaders` it carries. Malformed cookies are ignored, as a browser does.
   */
  async absorb(response: Response, stickyHeaders: readonly string[] = []): Promise<void> {
    const raw = response.headers['set-cookie'];
    const cookies = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
    const now = new Date(this.#now());
    for (const cookie of cookies) {
      await this.jar.setCookie(cookie, response.url, { ignoreError: true, now });
    }
    for (const name of stickyHeaders) {
      const value = response.header(name);
      if (value !== undefined) this.setHeader(name, value);
    }
  }
}

export interface SessionStoreOptions {
  /** Clock for cookie creation times and login expiry. @default Date.now */
  now?: NowFn;
}

/** The sessions of one engine, by account × platform. */
export class SessionStore {
  readonly #sessions = new Map<string, Session>();
  readonly #now: NowFn;

  constructor(options: SessionStoreOptions = {}) {
    this.#now = options.now ?? Date.now;
  }

  /** The session of an account × platform, created on first use. */
  get(account: string, platform: string): Session {
    const key = sessionKey(account, platform);
    let session = this.#sessions.get(key);
    if (!session) {
      session = new Session(account, platform, this.#now);
      this.#sessions.set(key, session);
    }
    return session;
  }

  peek(account: string, platform: string): Session | undefined {
    return this.#sessions.get(sessionKey(account, platform));
  }

  delete(account: string, platform: string): boolean {
    return this.#sessions.delete(sessionKey(account, platform));
  }

  get size(): number {
    return this.#sessions.size;
  }

  values(): IterableIterator<Session> {
    return this.#sessions.values();
  }
}

export function createSessionStore(options: SessionStoreOptions = {}): SessionStore {
  return new SessionStore(options);
}

function sessionKey(account: string, platform: string): string {
  if (typeof account !== 'string' || account === '' || typeof platform !== 'string' || platform === '') {
    throw new InvalidArgumentError('a session needs a non-empty account and platform');
  }
  return `${account}\u0000${platform}`;
}
