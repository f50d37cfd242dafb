/**
 * Downloading through a session. Redirects are followed here, hop by hop, instead of inside the
 * downloader, because a session must see every hop: a login POST typically answers
 * `302 Set-Cookie: session=…` and a downloader that follows the redirect itself would drop that
 * cookie with the intermediate response.
 *
 * ```
 *   request ─▶ apply(jar, sticky headers) ─▶ download (no redirects) ─▶ absorb(Set-Cookie, sticky)
 *                  ▲                                                        │ 3xx + Location
 *                  └────────────── next hop (method/body per RFC 9110) ◀────┘
 * ```
 *
 * Redirect rules match the HTTP downloader's: 303 (and 301/302 after a POST) become a GET
 * without a body; credentials are not carried to another origin; a loop or more than
 * `maxRedirects` hops is an error. The final Response keeps the original request (its meta,
 * depth…) and lists every hop in `redirects`.
 */
import { RedirectLoopError, TooManyRedirectsError } from '../errors.js';
import { parseHttpUrl } from '../frontier/fingerprint.js';
import { Request } from '../model/request.js';
import { type RedirectHop, Response } from '../model/response.js';
import type { Session } from './session.js';

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const BODY_HEADERS = ['content-type', 'content-length', 'content-encoding', 'transfer-encoding'];
const CROSS_ORIGIN_DROPPED = ['authorization', 'cookie', 'proxy-authorization'];

/** Downloads one request (no redirects followed: the session layer sets `maxRedirects = 0`). */
export type DownloadFn = (request: Request, signal: AbortSignal) => Promise<Response>;

export interface SessionFetchOptions {
  /** Response headers written back into the session as sticky headers. @default [] */
  stickyHeaders?: readonly string[];
  /** Redirects followed (`request.maxRedirects` wins). @default 10 */
  maxRedirects?: number;
}

/** Downloads `request` with the session's cookies and headers, keeping what every hop sets. */
export async function downloadWithSession(
  download: DownloadFn,
  session: Session,
  request: Request,
  signal: AbortSignal,
  options: SessionFetchOptions = {},
): Promise<Response> {
  const maxRedirects = request.maxRedirects ?? options.maxRedirects ?? 10;
  const stickyHeaders = options.stickyHeaders ?? [];
  const hops: RedirectHop[] = [];
  const seen = new Set<string>();
  let durationMs = 0;
  let hop = request.clone({ maxRedirects: 0 });
  copyEngineFields(request, hop);
  for (;;) {
    await session.apply(hop);
    const res = await download(hop, signal);
    durationMs += res.durationMs;
    await session.absorb(res, stickyHeaders);
    const location = REDIRECT_STATUSES.has(res.status) ? res.header('location') : undefined;
    if (location === undefined || maxRedirects === 0) {
      if (hops.length === 0 && res.request === request) return res;
      return new Response({
        url: res.url,
        status: res.status,
        headers: res.headers,
        body: res.body,
        request,
        redirects: [...hops, ...res.redirects],
        durationMs,
      });
    }
    const from = new URL(res.url);
    const next = parseHttpUrl(location, res.url);
    next.hash = '';
    if (hops.length >= maxRedirects) {
      throw new TooManyRedirectsError(request.url, maxRedirects, [...hops.map((h) => h.url), res.url]);
    }
    if (seen.size === 0) seen.add(`${request.method} ${stripHash(request.url)}`);
    const toGet =
      (res.status === 303 && hop.method !== 'HEAD') ||
      ((res.status === 301 || res.status === 302) && hop.method === 'POST');
    const method = toGet ? 'GET' : hop.method;
    const key = `${method} ${next.href}`;
    if (seen.has(key)) throw new RedirectLoopError(next.href, [...hops.map((h) => h.url), res.url]);
    seen.add(key);
    hops.push({ url: res.url, status: res.status, location: next.href });
    const headers = { ...hop.headers };
    // The session re-applies cookies per hop, for the hop's URL; the old Cookie header must not leak.
    deleteHeaders(headers, ['cookie']);
    if (toGet) deleteHeaders(headers, BODY_HEADERS);
    if (next.origin !== from.origin) deleteHeaders(headers, CROSS_ORIGIN_DROPPED);
    const nextHop = new Request(next.href, {
      method,
      headers,
      meta: hop.meta,
      priority: hop.priority,
      depth: hop.depth,
      maxRedirects: 0,
      ...(toGet || hop.body === undefined ? {} : { body: hop.body }),
      ...(hop.timeoutMs === undefined ? {} : { timeoutMs: hop.timeoutMs }),
    });
    copyEngineFields(request, nextHop);
    hop = nextHop;
  }
}

function copyEngineFields(from: Request, to: Request): void {
  to.module = from.module;
  to.node = from.node;
  to.runId = from.runId;
  to.account = from.account;
  to.fingerprint = from.fingerprint;
}

function deleteHeaders(headers: Record<string, string>, names: readonly string[]): void {
  for (const name of Object.keys(headers)) {
    if (names.includes(name.toLowerCase())) delete headers[name];
  }
}

function stripHash(url: string): string {
  const i = url.indexOf('#');
  return i === -1 ? url : url.slice(0, i);
}
