/**
 * A bounded pool of Chromium pages. Each slot is one browser context with one page, so slots
 * never share cookies or storage; a slot is reused for `maxPageUses` renders (its cookies live
 * that long, like a short session) and then closed and replaced, which also caps how much a
 * long-lived page can leak.
 *
 * ```
 *  acquire(proxy) ─▶ idle slot of that proxy? ──yes──▶ use it
 *               │ no
 *               ▼
 *       slots < maxPages (after closing an idle slot of another proxy, if any)?
 *               │ yes ──▶ new context + page through that proxy (launching Chromium if needed)
 *               │ no
 *               ▼
 *          wait (FIFO) for a release
 *
 *  release ─▶ uses ≥ maxPageUses, broken, or browser gone? ──yes──▶ close the context
 *               │ no                                                (a waiter gets a new slot)
 *               ▼
 *          hand to the first waiter for the same proxy; else, if others wait, close it and
 *          open one for the first of them; else back to the idle list
 * ```
 *
 * A slot's context goes through one proxy (or none) for its whole life, so a page never carries
 * one proxy's cookies or connections into another's requests. Chromium is launched on the first
 * acquire and launched again if it disconnects (a crash); slots of a dead browser are dropped.
 */
import type { Browser, BrowserContext, Page, Response as PlaywrightResponse, Route } from 'playwright-core';
import {
  AbortedError,
  BrowserNavigationError,
  ConnectionError,
  DownloaderClosedError,
  InvalidArgumentError,
  isMocraError,
  TimeoutError,
} from '../../errors.js';
import type { RedirectHop } from '../../model/response.js';
import { type ChromiumLaunchOptions, launchChromium } from './launch.js';
import { type RenderOptions, type ResolvedRenderOptions, resolveRenderOptions } from './render-options.js';

/** Options of every browser context the pool creates (a subset of Playwright's, kept serializable). */
export interface BrowserContextSettings {
  userAgent?: string;
  /** @default { width: 1280, height: 800 } */
  viewport?: { width: number; height: number };
  locale?: string;
  timezoneId?: string;
  /** Headers sent with every request of every page. */
  extraHttpHeaders?: Record<string, string>;
  /** Accept invalid TLS certificates. @default false */
  ignoreHttpsErrors?: boolean;
  /** @default true */
  javaScriptEnabled?: boolean;
  /** Route every page through this proxy (`http://user:pass@host:port`, `socks5://host:port`). */
  proxy?: string;
}

export interface BrowserPagePoolOptions extends ChromiumLaunchOptions {
  /** Pages open at once (each in its own context); more renders wait. @default 4 */
  maxPages?: number;
  /** Renders per page before its context is closed and replaced. @default 50 */
  maxPageUses?: number;
  /** @default {} */
  context?: BrowserContextSettings;
  /** Render defaults; per-call options override them field by field. */
  render?: RenderOptions;
}

/** What a render asks for besides the options: the request to make. */
export interface RenderRequest {
  url: string;
  /** Anything but GET is sent by rewriting the navigation request (Playwright's `goto` only GETs). @default 'GET' */
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /**
   * Send this render through this proxy (`http://user:pass@host:port`). Pages are kept per
   * proxy: a page opened for one proxy is never used for another. @default `context.proxy`
   */
  proxy?: string;
}

export interface RenderResult {
  /** The final URL after redirects (the main document's). */
  url: string;
  status: number;
  /** The main document's response headers (lower-case names). */
  headers: Record<string, string>;
  /**
   * The rendered DOM serialized as HTML when the main document was HTML (or had no type),
   * else the raw bytes the server sent (JSON, an image…). See `rendered`.
   */
  body: Uint8Array;
  /** True when `body` is the rendered DOM (UTF-8), false when it is the raw response body. */
  rendered: boolean;
  redirects: RedirectHop[];
  screenshot: Uint8Array | undefined;
  durationMs: number;
}

export interface BrowserPagePoolStats {
  /** Chromium launches so far (more than 1 means it was relaunched). */
  launches: number;
  /** Slots open now (busy + idle). */
  pages: number;
  idle: number;
  /** Renders waiting for a slot. */
  waiting: number;
  pagesCreated: number;
  /** Slots closed because they reached `maxPageUses`, broke, or their browser died. */
  pagesRecycled: number;
  renders: number;
  failures: number;
}

interface SlotState {
  blocked: ReadonlySet<string>;
  /** Rewrites the next main-frame navigation (non-GET requests). */
  override:
    | { method: string; headers: Record<string, string>; body: string | Buffer | undefined }
    | undefined;
}

interface Slot {
  /** The proxy its context goes through (undefined: none, or the pool's `context.proxy`). */
  proxy: string | undefined;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  uses: number;
  state: SlotState;
}

interface Waiter {
  proxy: string | undefined;
  resolve: (slot: Slot) => void;
  reject: (err: unknown) => void;
}

/** Chromium network errors that mean "could not reach the server" (retryable connection failures). */
const CONNECT_ERRORS =
  /net::ERR_(CONNECTION_REFUSED|CONNECTION_RESET|CONNECTION_CLOSED|CONNECTION_FAILED|CONNECTION_TIMED_OUT|NAME_NOT_RESOLVED|ADDRESS_UNREACHABLE|EMPTY_RESPONSE|TUNNEL_CONNECTION_FAILED|PROXY_CONNECTION_FAILED|SOCKS_CONNECTION_FAILED|INTERNET_DISCONNECTED|NETWORK_CHANGED|TIMED_OUT)/;
/** Errors that retrying the same URL cannot fix. */
const PERMANENT_ERRORS =
  /net::ERR_(INVALID_URL|UNKNOWN_URL_SCHEME|DISALLOWED_URL_SCHEME|INVALID_ARGUMENT|UNSAFE_PORT)/;
const HTML_TYPES = new Set(['text/html', 'application/xhtml+xml']);

export function createBrowserPagePool(options: BrowserPagePoolOptions = {}): BrowserPagePool {
  return new BrowserPagePool(options);
}

export class BrowserPagePool {
  readonly #launch: ChromiumLaunchOptions;
  readonly #maxPages: number;
  readonly #maxPageUses: number;
  readonly #context: BrowserContextSettings;
  readonly #renderDefaults: RenderOptions;
  #browser: Promise<Browser> | undefined;
  readonly #idle: Slot[] = [];
  readonly #waiters: Waiter[] = [];
  /** Slots open or being opened. */
  #slots = 0;
  readonly #closing = new Set<Promise<void>>();
  #closed = false;
  readonly #stats = { launches: 0, pagesCreated: 0, pagesRecycled: 0, renders: 0, failures: 0 };

  constructor(options: BrowserPagePoolOptions = {}) {
    const { maxPages, maxPageUses, context, render, ...launch } = options;
    this.#maxPages = positiveInt('maxPages', maxPages, 4);
    this.#maxPageUses = positiveInt('maxPageUses', maxPageUses, 50);
    this.#context = context ?? {};
    this.#renderDefaults = render ?? {};
    resolveRenderOptions(this.#renderDefaults); // bad defaults fail here, not on the first render
    this.#launch = launch;
  }

  get closed(): boolean {
    return this.#closed;
  }

  stats(): BrowserPagePoolStats {
    return {
      launches: this.#stats.launches,
      pages: this.#slots,
      idle: this.#idle.length,
      waiting: this.#waiters.length,
      pagesCreated: this.#stats.pagesCreated,
      pagesRecycled: this.#stats.pagesRecycled,
      renders: this.#stats.renders,
      failures: this.#stats.failures,
    };
  }

  /** Launch Chromium now (it is otherwise launched on the first render). Throws BrowserLaunchError. */
  async warmUp(): Promise<void> {
    await this.#ensureBrowser();
  }

  /** The browser's version string, launching it if needed (a health check). */
  async version(): Promise<string> {
    return (await this.#ensureBrowser()).version();
  }

  /**
   * Load `request.url` in a pooled page, wait as `options` say, and return the rendered HTML.
   * Non-2xx statuses are results, not errors. Failures are typed: TimeoutError (`headers`
   * before the main response arrived, `body` after), ConnectionError, BrowserNavigationError,
   * AbortedError when `signal` fires, DownloaderClosedError after `close()`.
   */
  async render(
    request: RenderRequest | string,
    options: RenderOptions = {},
    signal?: AbortSignal,
  ): Promise<RenderResult> {
    const req = typeof request === 'string' ? { url: request } : request;
    const resolved = resolveRenderOptions(this.#renderDefaults, options);
    const slot = await this.#acquire(signal, req.proxy);
    let broken = false;
    try {
      this.#stats.renders++;
      return await renderIn(slot, req, resolved, signal);
    } catch (err) {
      this.#stats.failures++;
      // A page that failed mid-navigation may be in any state: do not hand it to the next render.
      broken = true;
      throw this.#closed ? new DownloaderClosedError('browser page pool') : err;
    } finally {
      this.#release(slot, broken);
    }
  }

  /** Close every page and the browser. Waiting renders fail with DownloaderClosedError. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const error = new DownloaderClosedError('browser page pool');
    for (const waiter of this.#waiters.splice(0)) waiter.reject(error);
    for (const slot of this.#idle.splice(0)) this.#closeSlot(slot, false);
    const browser = this.#browser;
    this.#browser = undefined;
    if (browser) await browser.then((b) => b.close()).catch(() => undefined);
    await Promise.all([...this.#closing]);
  }

  // ── slots ────────────────────────────────────────────────────────────────────

  async #acquire(signal: AbortSignal | undefined, proxy: string | undefined): Promise<Slot> {
    if (this.#closed) throw new DownloaderClosedError('browser page pool');
    if (signal?.aborted) throw new AbortedError('aborted', { cause: signal.reason });
    for (let i = this.#idle.length - 1; i >= 0; i--) {
      const slot = this.#idle[i]!;
      if (!slot.browser.isConnected()) {
        this.#idle.splice(i, 1);
        this.#closeSlot(slot, true);
      } else if (slot.proxy === proxy) {
        this.#idle.splice(i, 1);
        return slot;
      }
    }
    // No idle page for this proxy: open one, making room by closing an idle page of another proxy.
    if (this.#slots >= this.#maxPages && this.#idle.length > 0) this.#closeSlot(this.#idle.shift()!, true);
    if (this.#slots < this.#maxPages) {
      this.#slots++;
      try {
        return await this.#openSlot(proxy);
      } catch (err) {
        this.#slots--;
        this.#serveWaiter();
        throw err;
      }
    }
    return new Promise<Slot>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
        reject(new AbortedError('aborted while waiting for a browser page', { cause: signal?.reason }));
      };
      const waiter: Waiter = {
        proxy,
        resolve: (slot) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(slot);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #release(slot: Slot, broken: boolean): void {
    slot.uses++;
    if (this.#closed) {
      this.#closeSlot(slot, false);
      return;
    }
    if (broken || slot.uses >= this.#maxPageUses || !slot.browser.isConnected()) {
      this.#closeSlot(slot, true);
      this.#serveWaiter();
      return;
    }
    const i = this.#waiters.findIndex((w) => w.proxy === slot.proxy);
    if (i >= 0) {
      this.#waiters.splice(i, 1)[0]!.resolve(slot);
    } else if (this.#waiters.length > 0) {
      // Everyone waiting needs another proxy: this page makes room for one of theirs.
      this.#closeSlot(slot, true);
      this.#serveWaiter();
    } else {
      this.#idle.push(slot);
    }
  }

  /** A slot was freed up: open a new one for the first waiter, if any. */
  #serveWaiter(): void {
    if (this.#closed || this.#waiters.length === 0 || this.#slots >= this.#maxPages) return;
    const waiter = this.#waiters.shift()!;
    this.#slots++;
    this.#openSlot(waiter.proxy).then(waiter.resolve, (err: unknown) => {
      this.#slots--;
      waiter.reject(err);
      this.#serveWaiter();
    });
  }

  async #openSlot(proxy: string | undefined): Promise<Slot> {
    const browser = await this.#ensureBrowser();
    const settings = this.#context;
    const proxyUrl = proxy ?? settings.proxy;
    const context = await browser.newContext({
      viewport: settings.viewport ?? { width: 1280, height: 800 },
      ...(settings.userAgent === undefined ? {} : { userAgent: settings.userAgent }),
      ...(settings.locale === undefined ? {} : { locale: settings.locale }),
      ...(settings.timezoneId === undefined ? {} : { timezoneId: settings.timezoneId }),
      ...(settings.extraHttpHeaders === undefined ? {} : { extraHTTPHeaders: settings.extraHttpHeaders }),
      ignoreHTTPSErrors: settings.ignoreHttpsErrors ?? false,
      javaScriptEnabled: settings.javaScriptEnabled ?? true,
      ...(proxyUrl === undefined ? {} : { proxy: playwrightProxy(proxyUrl) }),
      serviceWorkers: 'block',
    });
    try {
      const page = await context.newPage();
      const state: SlotState = { blocked: new Set(), override: undefined };
      // One route handler per page for its whole life; each render only swaps `state`.
      await page.route('**/*', (route) => handleRoute(route, page, state));
      this.#stats.pagesCreated++;
      if (this.#closed) {
        await context.close().catch(() => undefined);
        throw new DownloaderClosedError('browser page pool');
      }
      return { proxy, browser, context, page, uses: 0, state };
    } catch (err) {
      await context.close().catch(() => undefined);
      throw err;
    }
  }

  #closeSlot(slot: Slot, recycled: boolean): void {
    this.#slots--;
    if (recycled) this.#stats.pagesRecycled++;
    const closing = slot.context.close().catch(() => undefined);
    this.#closing.add(closing);
    void closing.finally(() => this.#closing.delete(closing));
  }

  #ensureBrowser(): Promise<Browser> {
    if (this.#closed) return Promise.reject(new DownloaderClosedError('browser page pool'));
    const current = this.#browser;
    if (current) return current;
    const launching = launchChromium(this.#launch).then(
      (browser) => {
        this.#stats.launches++;
        browser.on('disconnected', () => {
          // A crash: the next acquire launches a new one; slots of this one are dropped on release.
          if (this.#browser === launching) this.#browser = undefined;
        });
        if (this.#closed) {
          void browser.close().catch(() => undefined);
          throw new DownloaderClosedError('browser page pool');
        }
        return browser;
      },
      (err: unknown) => {
        // Let the next acquire try again (Chromium may have been installed meanwhile).
        if (this.#browser === launching) this.#browser = undefined;
        throw err;
      },
    );
    this.#browser = launching;
    return launching;
  }
}

// ── one render ─────────────────────────────────────────────────────────────────

async function renderIn(
  slot: Slot,
  request: RenderRequest,
  options: ResolvedRenderOptions,
  signal: AbortSignal | undefined,
): Promise<RenderResult> {
  const { page } = slot;
  const started = performance.now();
  const deadline = started + options.timeoutMs;
  const remaining = (): number => Math.max(1, Math.floor(deadline - performance.now()));
  const method = (request.method ?? 'GET').toUpperCase();
  slot.state.blocked = options.blockResources;
  slot.state.override =
    method === 'GET' && request.body === undefined
      ? undefined
      : {
          method,
          headers: request.headers ?? {},
          body: request.body === undefined ? undefined : Buffer.from(request.body),
        };
  let response: PlaywrightResponse | null = null;
  const onAbort = (): void => {
    // Closing the page makes whatever Playwright call is pending reject at once.
    void page.close().catch(() => undefined);
  };
  if (signal?.aborted) throw new AbortedError('aborted', { cause: signal.reason });
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await page.setExtraHTTPHeaders(request.headers ?? {});
    // A reused page already showing this document would treat the goto as a same-document
    // (hash) navigation and return no response: leave it first.
    if (withoutHash(page.url()) === withoutHash(request.url)) await page.goto('about:blank');
    response = await page.goto(request.url, { waitUntil: options.waitUntil, timeout: remaining() });
    if (response === null) {
      throw new BrowserNavigationError(request.url, 'the navigation produced no response', {
        retryable: true,
      });
    }
    if (options.waitForSelector !== undefined)
      await page.waitForSelector(options.waitForSelector, { state: 'attached', timeout: remaining() });
    if (options.waitForFunction !== undefined)
      await page.waitForFunction(options.waitForFunction, undefined, { timeout: remaining() });
    if (options.scroll !== undefined) await infiniteScroll(page, options.scroll, remaining);
    const headers = await response.allHeaders();
    const mime = (headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
    const rendered = mime === '' || HTML_TYPES.has(mime);
    let body: Uint8Array;
    if (rendered) {
      body = Buffer.from(await page.content(), 'utf8');
      // The body is now our UTF-8 serialization of the DOM, not the bytes the server sent.
      headers['content-type'] = 'text/html; charset=utf-8';
      delete headers['content-encoding'];
      delete headers['content-length'];
    } else {
      body = await response.body();
    }
    const screenshot =
      options.screenshot === undefined
        ? undefined
        : await page.screenshot({
            fullPage: options.screenshot.fullPage,
            type: options.screenshot.type,
            ...(options.screenshot.type === 'jpeg' && options.screenshot.quality !== undefined
              ? { quality: options.screenshot.quality }
              : {}),
            timeout: remaining(),
          });
    return {
      url: response.url(),
      status: response.status(),
      headers,
      body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
      rendered,
      redirects: await redirectChain(response),
      screenshot: screenshot === undefined ? undefined : new Uint8Array(screenshot),
      durationMs: performance.now() - started,
    };
  } catch (err) {
    if (signal?.aborted) throw new AbortedError('aborted', { cause: signal.reason });
    throw mapError(err, request.url, response !== null, options.timeoutMs);
  } finally {
    signal?.removeEventListener('abort', onAbort);
    slot.state.override = undefined;
  }
}

function handleRoute(route: Route, page: Page, state: SlotState): void {
  const request = route.request();
  let handled: Promise<void>;
  if (state.blocked.has(request.resourceType())) {
    handled = route.abort('blockedbyclient');
  } else if (
    state.override !== undefined &&
    request.isNavigationRequest() &&
    request.frame() === page.mainFrame()
  ) {
    const { method, headers, body } = state.override;
    state.override = undefined; // only the first hop; redirects follow browser rules
    handled = route.continue({
      method,
      headers: { ...request.headers(), ...lowerKeys(headers) },
      ...(body === undefined ? {} : { postData: body }),
    });
  } else {
    handled = route.continue();
  }
  // The page may close (abort, recycle) while a route is in flight; that is not an error.
  handled.catch(() => undefined);
}

/** Scroll to the bottom until the page stops growing, `until` matches, or `maxScrolls` steps. */
async function infiniteScroll(
  page: Page,
  scroll: { until: string | undefined; maxScrolls: number; settleMs: number },
  remaining: () => number,
): Promise<void> {
  for (let step = 0; step < scroll.maxScrolls; step++) {
    if (scroll.until !== undefined && (await page.$(scroll.until)) !== null) return;
    // Strings, not functions: this package compiles without the DOM lib, and they run in the page anyway.
    const height = Number(
      await page.evaluate(
        '(() => { const h = document.documentElement.scrollHeight; window.scrollTo(0, h); return h; })()',
      ),
    );
    const grew = await page
      .waitForFunction(`document.documentElement.scrollHeight > ${height}`, undefined, {
        timeout: Math.min(scroll.settleMs, remaining()),
      })
      .then(
        () => true,
        (err: unknown) => {
          if (isPlaywrightTimeout(err)) return false;
          throw err;
        },
      );
    if (!grew) {
      // Nothing more loaded within settleMs: done, unless `until` is what we wait for.
      if (scroll.until === undefined) return;
      if ((await page.$(scroll.until)) !== null) return;
    }
  }
}

/** Every redirect on the way to `response`, oldest first (Playwright links requests backwards). */
async function redirectChain(response: PlaywrightResponse): Promise<RedirectHop[]> {
  const hops: RedirectHop[] = [];
  let next = response.request();
  for (let prev = next.redirectedFrom(); prev !== null; prev = prev.redirectedFrom()) {
    const redirect = await prev.response();
    hops.unshift({ url: prev.url(), status: redirect?.status() ?? 0, location: next.url() });
    next = prev;
  }
  return hops;
}

function mapError(err: unknown, url: string, gotResponse: boolean, timeoutMs: number): Error {
  if (isMocraError(err)) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (isPlaywrightTimeout(err))
    return new TimeoutError(url, gotResponse ? 'body' : 'headers', timeoutMs, { cause: err });
  const net = /net::ERR_[A-Z_]+/.exec(message)?.[0];
  if (net !== undefined && CONNECT_ERRORS.test(net))
    return new ConnectionError(url, gotResponse ? 'body' : 'connect', net, { cause: err });
  if (net !== undefined && PERMANENT_ERRORS.test(net))
    return new BrowserNavigationError(url, net, { cause: err, retryable: false });
  return new BrowserNavigationError(url, firstLine(message), { cause: err, retryable: true });
}

function isPlaywrightTimeout(err: unknown): boolean {
  return err instanceof Error && err.name === 'TimeoutError';
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? text;
}

function withoutHash(url: string): string {
  const i = url.indexOf('#');
  return i < 0 ? url : url.slice(0, i);
}

function lowerKeys(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) out[k.toLowerCase()] = v;
  return out;
}

/** Playwright wants proxy credentials apart from the server URL. */
function playwrightProxy(url: string): { server: string; username?: string; password?: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (err) {
    throw new InvalidArgumentError(`context.proxy is not a URL: ${url}`, { cause: err });
  }
  const server = `${parsed.protocol}//${parsed.host}`;
  return {
    server,
    ...(parsed.username === '' ? {} : { username: decodeURIComponent(parsed.username) }),
    ...(parsed.password === '' ? {} : { password: decodeURIComponent(parsed.password) }),
  };
}

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0)
    throw new InvalidArgumentError(`${name} must be an integer > 0, got ${value}`);
  return value;
}
