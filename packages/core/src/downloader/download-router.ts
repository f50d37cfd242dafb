/**
 * What the engine's download stage calls: picks the downloader for a request (the registry),
 * picks its proxy (the pool), downloads, and reports the outcome back to the pool — the report
 * that lets the pool score proxies, retire dead ones and escalate a host's tier.
 *
 * ```
 *  request ─▶ downloader: request.downloader ▶ module.downloader ▶ default
 *          ─▶ proxy:      request.proxy ▶ module.proxy ▶ on (when a pool is configured and the
 *                         downloader uses proxies) ─▶ pool.acquire({ url, session, provider, tier })
 *          ─▶ download(request, signal, { proxy })
 *          ─▶ report:  response ─▶ blocked (403, 429, captcha title)? reportFailure('blocked')
 *                                  : reportSuccess(latency)
 *                      error    ─▶ aborted? nothing · the target's fault (too large, redirect loop…)?
 *                                  reportSuccess · else reportFailure(classifyProxyError(err))
 * ```
 */
import {
  classifyProxyError,
  createProxyPool,
  type ProxyPool,
  type ProxyPoolConfig,
  type ProxyPoolOptions,
  type ProxyPoolStats,
  type ProxySelection,
  type ResolvedProxyConfig,
} from '@mocra/proxy';
import { BlockedResponseError, InvalidArgumentError, isMocraError } from '../errors.js';
import type { ProxyChoice, Request } from '../model/request.js';
import type { Response } from '../model/response.js';
import { type BlockedDetectionOptions, type BlockedDetector, createBlockedDetector } from './blocked.js';
import { type DownloaderHealth, DownloaderRegistry } from './registry.js';
import type { DownloadContext, Downloader, DownloadProxy } from './types.js';

export interface DownloadRouterOptions {
  /** The downloader used when neither the request nor its module names one. */
  defaultDownloader: Downloader;
  /** Named downloaders, each registered under its `name`. @default [] */
  downloaders?: readonly Downloader[];
  /**
   * A proxy pool, or its configuration (a `[proxy]` table as parsed from TOML, a
   * `ProxyPoolConfig`, or what `parseProxyConfig` returned) to build one from. A pool passed
   * in is not closed by `close()`; one built here is.
   */
  proxies?: ProxyPool | ProxyPoolConfig | ResolvedProxyConfig | Readonly<Record<string, unknown>>;
  /** Code options of a pool built from config (clock, undici agent options). */
  proxyPoolOptions?: ProxyPoolOptions;
  /** How a response is judged blocked; `false` reports only errors as failures. @default 403, 429, captcha titles */
  blocked?: BlockedDetectionOptions | false;
  /** Longest a downloader's health check may take. @default 10000 */
  healthCheckTimeoutMs?: number;
}

/** What the router needs to know about a request's module. */
export interface ModuleDownloadSettings {
  readonly name: string;
  readonly downloader?: string | undefined;
  readonly proxy?: ProxyChoice | undefined;
}

export interface DownloadRouterStats {
  /** Every name that selects a downloader. */
  downloaders: string[];
  /** The last health-check round (empty before the first). */
  health: readonly DownloaderHealth[];
  /** The pool's snapshot, when a pool is configured. */
  proxies: ProxyPoolStats | undefined;
}

interface ProxyPick {
  selection: ProxySelection;
  context: DownloadContext;
}

/** Errors that say nothing about the exit: a response arrived, the target (or the request) was at fault. */
const TARGET_FAULTS = new Set([
  'MOCRA_ERR_BODY_TOO_LARGE',
  'MOCRA_ERR_TOO_MANY_REDIRECTS',
  'MOCRA_ERR_REDIRECT_LOOP',
  'MOCRA_ERR_CONTENT_DECODING',
  'MOCRA_ERR_INVALID_URL',
  'MOCRA_ERR_INVALID_ARGUMENT',
]);

export function createDownloadRouter(options: DownloadRouterOptions): DownloadRouter {
  return new DownloadRouter(options);
}

export class DownloadRouter {
  readonly registry: DownloaderRegistry;
  /** The proxy pool, when one is configured. */
  readonly proxies: ProxyPool | undefined;
  readonly #ownsPool: boolean;
  readonly #blocked: BlockedDetector;
  readonly #retryBlocked: boolean;

  constructor(options: DownloadRouterOptions) {
    this.registry = new DownloaderRegistry(
      options.defaultDownloader,
      options.healthCheckTimeoutMs === undefined
        ? {}
        : { healthCheckTimeoutMs: options.healthCheckTimeoutMs },
    );
    for (const d of options.downloaders ?? []) this.registry.register(d);
    this.#blocked = createBlockedDetector(options.blocked ?? {});
    this.#retryBlocked = options.blocked !== false && options.blocked?.retry === true;
    const proxies = options.proxies;
    if (proxies === undefined) {
      this.proxies = undefined;
      this.#ownsPool = false;
    } else if (isProxyPool(proxies)) {
      this.proxies = proxies;
      this.#ownsPool = false;
    } else {
      // Validates (ProxyConfigError naming every bad key) and starts the pool's timers.
      this.proxies = createProxyPool(proxies as ProxyPoolConfig, options.proxyPoolOptions ?? {});
      this.#ownsPool = true;
    }
  }

  /** The downloader for `request`: its own choice, else its module's, else the default. Throws UnknownDownloaderError. */
  select(request: Request, module?: ModuleDownloadSettings): Downloader {
    return this.registry.select(
      { request: request.downloader, module: module?.downloader },
      { url: request.url, ...(module === undefined ? {} : { module: module.name }) },
    );
  }

  /** Throws UnknownDownloaderError when the module names a downloader that is not registered. */
  validateModule(module: ModuleDownloadSettings): void {
    this.registry.validate([[module.name, module.downloader]]);
    this.#choiceOf(undefined, module);
  }

  /** Download through `downloader` (see {@link select}), with a proxy when one applies, and report the outcome. */
  async download(
    downloader: Downloader,
    request: Request,
    module: ModuleDownloadSettings | undefined,
    signal: AbortSignal,
  ): Promise<Response> {
    const pick = downloader.usesProxy ? await this.#acquire(request, module, signal) : undefined;
    if (pick === undefined) return downloader.download(request, signal);
    let response: Response;
    try {
      response = await downloader.download(request, signal, pick.context);
    } catch (err) {
      this.#reportError(pick.selection, err, signal);
      throw err;
    }
    if (this.#reportResponse(pick.selection, response) && this.#retryBlocked) {
      throw new BlockedResponseError(response.url, response.status, pick.context.proxy?.displayUrl);
    }
    return response;
  }

  /**
   * Run a streaming downloader: `emit` gets every response, in order, and is awaited (so a full
   * response topic slows the stream down instead of growing memory). The proxy outcome is
   * reported once: on the first response, or on the failure before it.
   */
  async stream(
    downloader: Downloader,
    request: Request,
    module: ModuleDownloadSettings | undefined,
    signal: AbortSignal,
    emit: (response: Response) => Promise<void>,
  ): Promise<number> {
    const stream = downloader.stream;
    if (stream === undefined)
      throw new InvalidArgumentError(`downloader '${downloader.name}' does not stream (it has no stream())`);
    const pick = downloader.usesProxy ? await this.#acquire(request, module, signal) : undefined;
    let count = 0;
    try {
      for await (const response of stream.call(downloader, request, signal, pick?.context)) {
        if (count === 0 && pick) this.#reportResponse(pick.selection, response);
        count++;
        await emit(response);
      }
    } catch (err) {
      if (count === 0 && pick) this.#reportError(pick.selection, err, signal);
      throw err;
    }
    if (count === 0 && pick) this.proxies?.reportSuccess(pick.selection);
    return count;
  }

  /** Health of every downloader (see DownloaderRegistry.checkHealth). */
  checkHealth(): Promise<DownloaderHealth[]> {
    return this.registry.checkHealth();
  }

  stats(): DownloadRouterStats {
    return {
      downloaders: this.registry.names(),
      health: this.registry.lastHealth,
      proxies: this.proxies?.stats(),
    };
  }

  /** Close every downloader, then the pool if it was built here. */
  async close(): Promise<void> {
    try {
      await this.registry.close();
    } finally {
      if (this.#ownsPool) await this.proxies?.close();
    }
  }

  // ── proxies ──────────────────────────────────────────────────────────────────

  async #acquire(
    request: Request,
    module: ModuleDownloadSettings | undefined,
    signal: AbortSignal,
  ): Promise<ProxyPick | undefined> {
    const pool = this.proxies;
    const choice = this.#choiceOf(request, module);
    if (pool === undefined || choice === undefined) return undefined;
    const selection = await pool.acquire({
      url: request.url,
      signal,
      ...(choice.session === undefined ? {} : { session: choice.session }),
      ...(choice.provider === undefined ? {} : { provider: choice.provider }),
      ...(choice.tier === undefined ? {} : { tier: choice.tier }),
    });
    const info = selection.proxy;
    const dispatcher = pool.dispatcher(selection);
    if (info === undefined || dispatcher === undefined) return { selection, context: {} };
    const proxy: DownloadProxy = {
      url: info.url,
      displayUrl: info.displayUrl,
      provider: info.provider,
      tier: info.tier,
      dispatcher,
    };
    return { selection, context: { proxy } };
  }

  /**
   * The request's choice, else the module's, else "on". `undefined` means no proxy. A request's
   * `proxy` crossed a queue, so its shape is checked here.
   */
  #choiceOf(
    request: Request | undefined,
    module: ModuleDownloadSettings | undefined,
  ): { provider?: string; tier?: number; session?: string } | undefined {
    const raw: unknown = request?.proxy ?? module?.proxy ?? true;
    const who = request ? `request ${request.url}` : `module '${module?.name}'`;
    if (raw === false) return undefined;
    if (raw === true) {
      if (this.proxies === undefined) return undefined;
      return request?.account === undefined ? {} : { session: request.account };
    }
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
      throw new InvalidArgumentError(`${who}: proxy must be true, false or { provider, tier, session }`);
    const { provider, tier, session, ...rest } = raw as Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0)
      throw new InvalidArgumentError(
        `${who}: proxy has unknown key '${unknown[0]}' (expected provider, tier, session)`,
      );
    if (provider !== undefined && (typeof provider !== 'string' || provider === ''))
      throw new InvalidArgumentError(`${who}: proxy.provider must be a non-empty string`);
    if (tier !== undefined && (typeof tier !== 'number' || !Number.isInteger(tier) || tier < 0))
      throw new InvalidArgumentError(`${who}: proxy.tier must be an integer ≥ 0`);
    if (session !== undefined && typeof session !== 'string')
      throw new InvalidArgumentError(`${who}: proxy.session must be a string`);
    if (this.proxies === undefined) {
      if (provider !== undefined || tier !== undefined)
        throw new InvalidArgumentError(
          `${who} pins a proxy provider or tier, but no proxy pool is configured`,
        );
      return undefined;
    }
    const s = session ?? request?.account;
    return {
      ...(provider === undefined ? {} : { provider }),
      ...(tier === undefined ? {} : { tier }),
      ...(s === undefined ? {} : { session: s }),
    };
  }

  /** Reports the outcome of a response; true when it was judged blocked. */
  #reportResponse(selection: ProxySelection, response: Response): boolean {
    const pool = this.proxies;
    if (pool === undefined) return false;
    if (this.#blocked(response)) {
      pool.reportFailure(selection, 'blocked', { status: response.status });
      return true;
    }
    pool.reportSuccess(selection, { latencyMs: Math.max(0, response.durationMs) });
    return false;
  }

  #reportError(selection: ProxySelection, err: unknown, signal: AbortSignal): void {
    const pool = this.proxies;
    if (pool === undefined) return;
    const code = isMocraError(err) ? err.code : undefined;
    // An abort (shutdown) says nothing about the proxy: leave the selection unreported.
    if (signal.aborted || code === 'MOCRA_ERR_ABORTED') return;
    if (code !== undefined && TARGET_FAULTS.has(code)) pool.reportSuccess(selection);
    else pool.reportFailure(selection, classifyProxyError(err), { error: err });
  }
}

function isProxyPool(value: unknown): value is ProxyPool {
  const v = value as Partial<ProxyPool> | null;
  return (
    v !== null &&
    typeof v === 'object' &&
    typeof v.acquire === 'function' &&
    typeof v.reportSuccess === 'function' &&
    typeof v.dispatcher === 'function'
  );
}
