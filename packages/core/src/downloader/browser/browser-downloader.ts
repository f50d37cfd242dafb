/**
 * A downloader that renders pages in Chromium: for sites whose content exists only after
 * JavaScript runs. Each request is loaded in a pooled page (see `page-pool.ts`); the response
 * body is the rendered DOM as UTF-8 HTML, and the status and headers are the main document's.
 *
 * Per request, `request.meta.browser` overrides the render options (wait conditions, blocked
 * resources, a screenshot, scrolling, the time budget); it is validated, since meta crosses
 * queues.
 */
import { requestUrl } from '../../frontier/fingerprint.js';
import type { Request } from '../../model/request.js';
import { BrowserResponse } from '../../model/response.js';
import type { DownloadContext, Downloader } from '../types.js';
import { BrowserPagePool, type BrowserPagePoolOptions, type BrowserPagePoolStats } from './page-pool.js';
import { parseRenderOptions } from './render-options.js';

// Defined in the model so it survives serializing queues; re-exported where it always was.
export { BrowserResponse };

/** The `request.meta` key whose value overrides the render options for that request. */
export const BROWSER_META_KEY = 'browser';

export interface BrowserDownloaderOptions extends BrowserPagePoolOptions {
  /** The name modules and requests select it by. @default 'browser' */
  name?: string;
}

export function createBrowserDownloader(options: BrowserDownloaderOptions = {}): BrowserDownloader {
  return new BrowserDownloader(options);
}

export class BrowserDownloader implements Downloader {
  readonly name: string;
  /** Renders through `context.proxy` when the engine chose one (each proxy gets its own pages). */
  readonly usesProxy = true;
  readonly pool: BrowserPagePool;

  constructor(options: BrowserDownloaderOptions = {}) {
    const { name, ...poolOptions } = options;
    this.name = name ?? 'browser';
    this.pool = new BrowserPagePool(poolOptions);
  }

  async download(request: Request, signal: AbortSignal, context?: DownloadContext): Promise<BrowserResponse> {
    const url = requestUrl(request).href;
    const overrides = parseRenderOptions(request.meta[BROWSER_META_KEY], `meta.${BROWSER_META_KEY}`);
    const result = await this.pool.render(
      {
        url,
        method: request.method,
        headers: request.headers,
        ...(request.body === undefined ? {} : { body: request.body }),
        ...(context?.proxy === undefined ? {} : { proxy: context.proxy.url }),
      },
      overrides,
      signal,
    );
    return new BrowserResponse({
      url: result.url,
      status: result.status,
      headers: result.headers,
      body: result.body,
      request,
      redirects: result.redirects,
      durationMs: result.durationMs,
      screenshot: result.screenshot,
      rendered: result.rendered,
    });
  }

  /** Launches Chromium if needed and asks it for its version; throws BrowserLaunchError when it cannot start. */
  async healthCheck(): Promise<void> {
    await this.pool.version();
  }

  stats(): BrowserPagePoolStats {
    return this.pool.stats();
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
