/**
 * Login state of the quotes site, kept stateless: a CSRF token and a session cookie are both
 * `payload.mac` strings signed with a per-site random key, so the server stores nothing per login
 * (a benchmark may log in a million times). Invalidation bumps a generation number that every
 * session token carries; older generations no longer verify.
 *
 *   csrf token    = nonce "." mac(nonce)                        (double-submit: hidden input == cookie)
 *   session token = b64(user|gen|userGen|issuedAt|nonce) "." mac(…)
 */
import { createHmac, randomBytes } from 'node:crypto';

export interface AuthCounters {
  /** Successful logins. */
  logins: number;
  /** Login posts refused for a missing, forged or mismatched CSRF token (403). */
  csrfFailures: number;
  /** Login posts with a valid CSRF token but a wrong username or password (401). */
  credentialFailures: number;
  /** Requests to protected pages without a valid session (redirected to the login or 401). */
  rejectedSessions: number;
  /** Calls of `invalidateSessions()`. */
  invalidations: number;
}

export class SessionAuthority {
  readonly #key = randomBytes(32);
  readonly #ttlMs: number;
  #generation = 0;
  readonly #userGenerations = new Map<string, number>();
  counters: AuthCounters = SessionAuthority.#zero();

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  static #zero(): AuthCounters {
    return { logins: 0, csrfFailures: 0, credentialFailures: 0, rejectedSessions: 0, invalidations: 0 };
  }

  resetCounters(): void {
    this.counters = SessionAuthority.#zero();
  }

  #mac(data: string): string {
    return createHmac('sha256', this.#key).update(data).digest('base64url').slice(0, 32);
  }

  issueCsrf(): string {
    const nonce = randomBytes(12).toString('base64url');
    return `${nonce}.${this.#mac(`csrf:${nonce}`)}`;
  }

  /** True when the form token is present, equals the cookie token, and was signed by this site. */
  checkCsrf(formToken: unknown, cookieToken: unknown): boolean {
    if (typeof formToken !== 'string' || typeof cookieToken !== 'string' || formToken !== cookieToken)
      return false;
    const dot = formToken.indexOf('.');
    return dot > 0 && formToken.slice(dot + 1) === this.#mac(`csrf:${formToken.slice(0, dot)}`);
  }

  issueSession(username: string, now = Date.now()): string {
    const payload = [
      username,
      this.#generation,
      this.#userGenerations.get(username) ?? 0,
      now,
      randomBytes(6).toString('base64url'),
    ].join('|');
    const encoded = Buffer.from(payload).toString('base64url');
    return `${encoded}.${this.#mac(`session:${encoded}`)}`;
  }

  /** The username of a valid session token, or undefined (forged, invalidated or expired). */
  verifySession(token: unknown, now = Date.now()): string | undefined {
    if (typeof token !== 'string') return undefined;
    const dot = token.indexOf('.');
    if (dot <= 0) return undefined;
    const encoded = token.slice(0, dot);
    if (token.slice(dot + 1) !== this.#mac(`session:${encoded}`)) return undefined;
    const [user, gen, userGen, issuedAt] = Buffer.from(encoded, 'base64url').toString().split('|');
    if (user === undefined || Number(gen) !== this.#generation) return undefined;
    if (Number(userGen) !== (this.#userGenerations.get(user) ?? 0)) return undefined;
    if (this.#ttlMs > 0 && now - Number(issuedAt) >= this.#ttlMs) return undefined;
    return user;
  }

  /** Ends every session, or only `username`'s. Sessions issued afterwards are valid. */
  invalidate(username?: string): void {
    this.counters.invalidations += 1;
    if (username === undefined) this.#generation += 1;
    else this.#userGenerations.set(username, (this.#userGenerations.get(username) ?? 0) + 1);
  }
}
