/**
 * The default downloader: HTTP/1.1 over undici with pooled keep-alive connections.
 *
 * ```
 *  request ─▶ build headers (defaults ◀ options ◀ request, case-insensitive)
 *          ─▶ undici Agent (per-origin pool, `connections` sockets, keep-alive)
 *          ─▶ 3xx + Location? ─yes─▶ discard body, next hop (method/body rules, loop check)
 *          ─▶ body ─▶ [gunzip | inflate | brotli]* ─▶ size cap (decoded bytes) ─▶ Response
 * ```
 *
 * Timeouts are undici's own per-request timers (connect, headers, body-idle), and one deadline
 * for the whole request (every hop, headers and body): a body that trickles a byte at a time
 * never trips an idle timer, so only a total bound frees its slot. The size cap is enforced on the bytes we would hold, i.e. after decompression, while
 * streaming: a compression bomb is stopped at the cap, not after inflating.
 */
import type { Readable } from 'node:stream';
import { pipeline, Transform, type TransformCallback } from 'node:stream';
import zlib from 'node:zlib';
import { Agent, type Dispatcher } from 'undici';
import {
  AbortedError,
  BodyTooLargeError,
  ConnectionError,
  type ConnectionPhase,
  ContentDecodingError,
  InvalidArgumentError,
  InvalidUrlError,
  isMocraError,
  MalformedResponseError,
  type MocraError,
  RedirectLoopError,
  TimeoutError,
  TooManyEncodingsError,
  TooManyRedirectsError,
} from '../errors.js';
import { parseHttpUrl, requestUrl } from '../frontier/fingerprint.js';
import type { Request } from '../model/request.js';
import { type RedirectHop, Response } from '../model/response.js';
import { RequestDeadline } from './request-deadline.js';
import type { DownloadContext, Downloader } from './types.js';
import { DEFAULT_USER_AGENT } from './version.js';

export interface HttpDownloaderOptions {
  /** Sockets per origin (the engine sizes this to its download concurrency). @default 64 */
  connections?: number;
  /** Idle keep-alive sockets are closed after this long (unless the server asks for less). @default 10000 */
  keepAliveTimeoutMs?: number;
  /** Time to establish a TCP/TLS connection. @default 10000 */
  connectTimeoutMs?: number;
  /** Time from sending the request to receiving the response headers. @default 30000 */
  headersTimeoutMs?: number;
  /** Longest pause between two body chunks (undici checks it on a tick of about half a second). @default 30000 */
  bodyTimeoutMs?: number;
  /**
   * Longest a whole request may take: every redirect hop, the headers and the body. It fails
   * with TimeoutError (`phase: 'request'`) when passed. A request's own `timeoutMs` (its headers
   * and body timeout) raises it for that request when larger.
   * @default 120000
   */
  requestTimeoutMs?: number;
  /** Largest body kept, counted after decompression; larger ones fail with BodyTooLargeError. @default 10485760 (10 MiB) */
  maxBodyBytes?: number;
  /** Redirects followed per request before TooManyRedirectsError (`request.maxRedirects` overrides). @default 10 */
  maxRedirects?: number;
  /** @default `mocra/<version> (+https://github.com/mocra-ts/mocra)` */
  userAgent?: string;
  /** Sent with every request; a request's own headers win (names compared case-insensitively). @default {} */
  headers?: Record<string, string>;
  /**
   * Most content-codings decoded on one body (`gzip, gzip` is two). Each layer is a full decode,
   * so a server stacking thousands costs seconds of CPU per page; more fail with
   * TooManyEncodingsError before any is decoded.
   * @default 4
   */
  maxContentCodings?: number;
  /** Ask for and decode gzip, deflate and br bodies. @default true */
  decompress?: boolean;
  /**
   * Send through this undici dispatcher (a ProxyAgent, a MockAgent…) instead of an own Agent.
   * It is not closed by `close()`.
   */
  dispatcher?: Dispatcher;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const SUPPORTED_ENCODINGS = new Set(['gzip', 'x-gzip', 'deflate', 'br']);
const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_FAIL',
]);
/** undici's message when a proxy answers CONNECT with anything but 200. */
const PROXY_REFUSED = /^Proxy response \(\d+\) !== 200/;
const CROSS_ORIGIN_DROPPED = ['authorization', 'cookie', 'proxy-authorization'];
const BODY_HEADERS = ['content-type', 'content-length', 'content-encoding', 'transfer-encoding'];

export function createHttpDownloader(options: HttpDownloaderOptions = {}): HttpDownloader {
  return new HttpDownloader(options);
}

export class HttpDownloader implements Downloader {
  readonly name = 'http';
  /** Sends through `context.proxy.dispatcher` when the engine chose a proxy. */
  readonly usesProxy = true;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #connectTimeoutMs: number;
  readonly #headersTimeoutMs: number;
  readonly #bodyTimeoutMs: number;
  readonly #requestTimeoutMs: number;
  readonly #maxBodyBytes: number;
  readonly #maxRedirects: number;
  readonly #decompress: boolean;
  readonly #maxContentCodings: number;
  /** Lower-cased default headers; shared (never mutated) by requests that add none. */
  readonly #defaultHeaders: Readonly<Record<string, string>>;

  constructor(options: HttpDownloaderOptions = {}) {
    this.#connectTimeoutMs = positive('connectTimeoutMs', options.connectTimeoutMs, 10_000);
    this.#headersTimeoutMs = positive('headersTimeoutMs', options.headersTimeoutMs, 30_000);
    this.#bodyTimeoutMs = positive('bodyTimeoutMs', options.bodyTimeoutMs, 30_000);
    this.#requestTimeoutMs = positive('requestTimeoutMs', options.requestTimeoutMs, 120_000);
    this.#maxBodyBytes = positive('maxBodyBytes', options.maxBodyBytes, 10 * 1024 * 1024);
    this.#maxRedirects = nonNegative('maxRedirects', options.maxRedirects, 10);
    this.#decompress = options.decompress ?? true;
    this.#maxContentCodings = positive('maxContentCodings', options.maxContentCodings, 4);
    const headers: Record<string, string> = {
      'user-agent': options.userAgent ?? DEFAULT_USER_AGENT,
      accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
    };
    if (this.#decompress) headers['accept-encoding'] = 'gzip, deflate, br';
    for (const [k, v] of Object.entries(options.headers ?? {})) headers[k.toLowerCase()] = v;
    this.#defaultHeaders = Object.freeze(headers);
    if (options.dispatcher) {
      this.#dispatcher = options.dispatcher;
      this.#ownsDispatcher = false;
    } else {
      this.#dispatcher = new Agent({
        connections: positive('connections', options.connections, 64),
        pipelining: 1,
        keepAliveTimeout: positive('keepAliveTimeoutMs', options.keepAliveTimeoutMs, 10_000),
        connect: { timeout: this.#connectTimeoutMs },
        headersTimeout: this.#headersTimeoutMs,
        bodyTimeout: this.#bodyTimeoutMs,
      });
      this.#ownsDispatcher = true;
    }
  }

  async download(request: Request, outer: AbortSignal, context?: DownloadContext): Promise<Response> {
    // A request allowed a longer idle wait than the deadline is not cut short by it.
    const ms = Math.max(this.#requestTimeoutMs, request.timeoutMs ?? 0);
    const deadline = new RequestDeadline(outer, ms, () => new TimeoutError(request.url, 'request', ms));
    try {
      return await this.#download(request, deadline, context);
    } catch (err) {
      // An idle timer that struck first names its own phase.
      if (!deadline.expired || err instanceof TimeoutError) throw err;
      throw new TimeoutError(request.url, 'request', ms, { cause: err });
    } finally {
      deadline.clear();
    }
  }

  async #download(request: Request, deadline: RequestDeadline, context?: DownloadContext): Promise<Response> {
    const signal = deadline;
    const started = performance.now();
    // Every hop of a redirect chain goes through the same proxy.
    const dispatcher = context?.proxy?.dispatcher ?? this.#dispatcher;
    let url = requestUrl(request);
    let method = request.method;
    let body = request.body;
    let headers = this.#headersFor(request);
    const maxRedirects = request.maxRedirects ?? this.#maxRedirects;
    const redirects: RedirectHop[] = [];
    let seen: Set<string> | undefined;
    for (;;) {
      const res = await this.#send(dispatcher, url, method, headers, body, request, signal);
      const location = REDIRECT_STATUSES.has(res.statusCode) ? headerValue(res.headers.location) : undefined;
      if (location === undefined || maxRedirects === 0) {
        const bytes =
          method === 'HEAD' || res.statusCode === 204 || res.statusCode === 304
            ? await discard(res)
            : await this.#readBody(res, url.href, signal);
        return new Response({
          url: url.href,
          status: res.statusCode,
          headers: res.headers,
          body: bytes,
          request,
          redirects,
          durationMs: performance.now() - started,
        });
      }
      await discard(res);
      // An empty Location resolves to the page itself; that is a broken answer, not a loop.
      if (location.trim() === '') {
        throw new InvalidUrlError(
          location,
          `the ${res.statusCode} redirect from ${url.href} has an empty Location header`,
        );
      }
      const next = parseHttpUrl(location, url.href);
      next.hash = '';
      if (redirects.length >= maxRedirects) {
        throw new TooManyRedirectsError(request.url, maxRedirects, [
          ...redirects.map((r) => r.url),
          url.href,
        ]);
      }
      // 303, and 301/302 after a POST, turn into a GET without a body (what browsers do).
      const toGet =
        (res.statusCode === 303 && method !== 'HEAD') ||
        ((res.statusCode === 301 || res.statusCode === 302) && method === 'POST');
      if (toGet) {
        method = 'GET';
        body = undefined;
        headers = withoutHeaders(headers, BODY_HEADERS);
      }
      if (next.origin !== url.origin) headers = withoutHeaders(headers, CROSS_ORIGIN_DROPPED);
      seen ??= new Set([`${request.method} ${stripHash(url.href)}`]);
      const key = `${method} ${next.href}`;
      if (seen.has(key)) {
        throw new RedirectLoopError(next.href, [...redirects.map((r) => r.url), url.href]);
      }
      seen.add(key);
      redirects.push({ url: url.href, status: res.statusCode, location: next.href });
      url = next;
    }
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  #headersFor(request: Request): Record<string, string> {
    const own = request.headers;
    let any = false;
    for (const _ in own) {
      any = true;
      break;
    }
    if (!any) return this.#defaultHeaders as Record<string, string>;
    const headers: Record<string, string> = { ...this.#defaultHeaders };
    for (const name in own) headers[name.toLowerCase()] = own[name]!;
    return headers;
  }

  async #send(
    dispatcher: Dispatcher,
    url: URL,
    method: string,
    headers: Record<string, string>,
    body: string | Uint8Array | undefined,
    request: Request,
    signal: RequestDeadline,
  ): Promise<Dispatcher.ResponseData> {
    const timeout = request.timeoutMs;
    try {
      return await dispatcher.request({
        origin: url.origin,
        path: url.pathname + url.search,
        method: method as Dispatcher.HttpMethod,
        // The shared default headers are frozen; undici's ProxyAgent adds `host` to the object
        // it is given, so a proxied request gets its own copy.
        headers: dispatcher === this.#dispatcher ? headers : { ...headers },
        body: body ?? null,
        signal: signal.asSignal(),
        headersTimeout: timeout ?? this.#headersTimeoutMs,
        bodyTimeout: timeout ?? this.#bodyTimeoutMs,
      });
    } catch (err) {
      throw this.#mapError(err, url.href, 'headers', signal, timeout);
    }
  }

  #readBody(
    res: Dispatcher.ResponseData,
    url: string,
    signal: { readonly aborted: boolean },
  ): Promise<Buffer> {
    const limit = this.#maxBodyBytes;
    const source = res.body;
    const encodings = this.#decompress ? parseEncodings(res.headers['content-encoding']) : [];
    const declared = Number(headerValue(res.headers['content-length']));
    if (encodings.length === 0 && declared > limit) {
      destroyQuietly(source);
      return Promise.reject(new BodyTooLargeError(url, limit, declared, false));
    }
    if (encodings.length > this.#maxContentCodings) {
      destroyQuietly(source);
      return Promise.reject(new TooManyEncodingsError(url, this.#maxContentCodings, encodings.length));
    }
    for (const encoding of encodings) {
      if (!SUPPORTED_ENCODINGS.has(encoding)) {
        destroyQuietly(source);
        return Promise.reject(new ContentDecodingError(url, encoding, 'unsupported content-encoding'));
      }
    }
    const framed = Number.isFinite(declared) || headerValue(res.headers['transfer-encoding']) !== undefined;
    return new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let raw = 0;
      let done = false;
      let out: Readable = source;
      const decoders: Transform[] = [];
      const finish = (body: Buffer) => {
        if (done) return;
        done = true;
        resolve(body);
      };
      const fail = (err: MocraError) => {
        if (done) return;
        done = true;
        // The listeners below hold this array until every stream of the pipeline is collected;
        // a failed body must not keep up to `limit` bytes alive that long.
        chunks.length = 0;
        source.destroy();
        for (const d of decoders) d.destroy();
        reject(err);
      };
      // Listeners go on before `pipeline` adds its own, so the first real error wins (a decoder's
      // error is a decoding error; the source's is a network one) before pipeline re-broadcasts it.
      source.on('error', (err) => {
        // The peer closed before the framing said the body was complete: a truncated body.
        const code = (err as { code?: unknown }).code;
        if (framed && code === 'UND_ERR_SOCKET' && !signal.aborted) {
          fail(
            new MalformedResponseError(url, `body ended early after ${raw} bytes (${err.message})`, {
              cause: err,
            }),
          );
        } else {
          fail(this.#mapError(err, url, 'body', signal, undefined));
        }
      });
      if (encodings.length > 0) {
        source.on('data', (chunk: Buffer) => {
          raw += chunk.length;
        });
        for (let i = encodings.length - 1; i >= 0; i--) {
          const encoding = encodings[i]!;
          const decoder = createDecoder(encoding);
          decoder.on('error', (err) => {
            // An empty body "in gzip" is just an empty body (HEAD-like answers, 0-length bodies).
            if (raw === 0 && source.readableEnded) finish(Buffer.alloc(0));
            else {
              fail(
                new ContentDecodingError(url, encoding, err instanceof Error ? err.message : String(err), {
                  cause: err,
                }),
              );
            }
          });
          decoders.push(decoder);
        }
        out = pipeline([source, ...decoders], () => {}) as unknown as Readable;
      }
      out.on('data', (chunk: Buffer) => {
        if (done) return;
        size += chunk.length;
        if (encodings.length === 0) raw = size;
        if (size > limit) {
          fail(new BodyTooLargeError(url, limit, size, encodings.length > 0));
          return;
        }
        chunks.push(chunk);
      });
      out.on('end', () => finish(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    });
  }

  #mapError(
    err: unknown,
    url: string,
    phase: ConnectionPhase,
    signal: { readonly aborted: boolean },
    requestTimeout: number | undefined,
  ): MocraError {
    if (isMocraError(err)) return err;
    if (signal.aborted) return new AbortedError(`download of ${url} aborted`, { cause: err });
    const code = (err as { code?: unknown } | null)?.code;
    const message = err instanceof Error ? err.message : String(err);
    switch (code) {
      case 'UND_ERR_ABORTED':
        // undici reports a proxy that refused the tunnel as an abort; nobody aborted anything, and
        // the proxy pool must hear of it as the proxy's failure.
        if (PROXY_REFUSED.test(message)) {
          return new ConnectionError(url, 'connect', `the proxy refused the tunnel: ${message}`, {
            cause: err,
          });
        }
        return new AbortedError(`download of ${url} aborted`, { cause: err });
      case 'UND_ERR_CONNECT_TIMEOUT':
        return new TimeoutError(url, 'connect', this.#connectTimeoutMs, { cause: err });
      case 'UND_ERR_HEADERS_TIMEOUT':
        return new TimeoutError(url, 'headers', requestTimeout ?? this.#headersTimeoutMs, { cause: err });
      case 'UND_ERR_BODY_TIMEOUT':
        return new TimeoutError(url, 'body', requestTimeout ?? this.#bodyTimeoutMs, { cause: err });
      case 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH':
      case 'UND_ERR_HEADERS_OVERFLOW':
      case 'UND_ERR_INFO':
        return new MalformedResponseError(url, message, { cause: err });
      default:
        break;
    }
    if (err instanceof Error && err.name === 'HTTPParserError') {
      return new MalformedResponseError(url, message, { cause: err });
    }
    if (typeof code === 'string') {
      if (code.startsWith('HPE_')) return new MalformedResponseError(url, message, { cause: err });
      if (CONNECT_CODES.has(code))
        return new ConnectionError(url, 'connect', `${code}: ${message}`, { cause: err });
    }
    if (err instanceof Error && err.name === 'AbortError') {
      return new AbortedError(`download of ${url} aborted`, { cause: err });
    }
    return new ConnectionError(url, phase, typeof code === 'string' ? `${code}: ${message}` : message, {
      cause: err,
    });
  }
}

function createDecoder(encoding: string): Transform {
  switch (encoding) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'br':
      return zlib.createBrotliDecompress();
    default:
      return new InflateAuto();
  }
}

/**
 * `deflate` is meant to be zlib-wrapped (RFC 9110), but some servers send raw deflate. The
 * first bytes tell which: a zlib header is CMF/FLG with CM = 8 and (CMF·256 + FLG) % 31 = 0.
 */
class InflateAuto extends Transform {
  #inner: zlib.Inflate | zlib.InflateRaw | undefined;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (!this.#inner) {
      const b0 = chunk[0] ?? 0;
      const b1 = chunk[1];
      const zlibWrapped = (b0 & 0x0f) === 8 && (b1 === undefined || ((b0 << 8) | b1) % 31 === 0);
      const inner = zlibWrapped ? zlib.createInflate() : zlib.createInflateRaw();
      inner.on('data', (data: Buffer) => this.push(data));
      inner.on('error', (err) => this.destroy(err));
      this.#inner = inner;
    }
    this.#inner.write(chunk, () => callback());
  }

  override _flush(callback: TransformCallback): void {
    const inner = this.#inner;
    if (!inner) {
      callback();
      return;
    }
    inner.once('end', () => callback());
    inner.end();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.#inner?.destroy();
    callback(err);
  }
}

function parseEncodings(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  const joined = Array.isArray(value) ? value.join(',') : value;
  const out: string[] = [];
  for (const part of joined.split(',')) {
    const e = part.trim().toLowerCase();
    if (e !== '' && e !== 'identity') out.push(e);
  }
  return out;
}

async function discard(res: Dispatcher.ResponseData): Promise<Buffer> {
  try {
    // dump() reads a small remainder so the socket can be reused, and destroys it otherwise.
    await res.body.dump({ limit: 64 * 1024 });
  } catch {
    // A body we throw away cannot fail the download.
  }
  return Buffer.alloc(0);
}

/** Destroying an undici body emits an AbortError: swallow it when nobody else listens. */
function destroyQuietly(stream: Readable): void {
  stream.on('error', () => {});
  stream.destroy();
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function withoutHeaders(headers: Record<string, string>, names: readonly string[]): Record<string, string> {
  const out = { ...headers };
  for (const name of names) delete out[name];
  return out;
}

function stripHash(href: string): string {
  const i = href.indexOf('#');
  return i < 0 ? href : href.slice(0, i);
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!(value > 0) || !Number.isFinite(value)) {
    throw new InvalidArgumentError(`${name} must be a positive number, got ${value}`);
  }
  return value;
}

function nonNegative(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!(value >= 0) || !Number.isInteger(value)) {
    throw new InvalidArgumentError(`${name} must be an integer ≥ 0, got ${value}`);
  }
  return value;
}
