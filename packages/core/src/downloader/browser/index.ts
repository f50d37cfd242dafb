/**
 * The browser downloader: pages rendered in Chromium through playwright-core (which loads when
 * the first browser launches), its page pool and render options.
 *
 * @module @mocra/core/browser
 */
export type { BrowserDownloaderOptions } from './browser-downloader.js';
export {
  BROWSER_META_KEY,
  BrowserDownloader,
  BrowserResponse,
  createBrowserDownloader,
} from './browser-downloader.js';
export type { ChromiumLaunchOptions, PlaywrightPackage } from './launch.js';
export { chromiumPath, DEFAULT_CHROMIUM_FLAGS, DEFAULT_CHROMIUM_PATH, launchChromium } from './launch.js';
export type {
  BrowserContextSettings,
  BrowserPagePoolOptions,
  BrowserPagePoolStats,
  RenderRequest,
  RenderResult,
} from './page-pool.js';
export { BrowserPagePool, createBrowserPagePool } from './page-pool.js';
export type {
  BlockableResource,
  RenderOptions,
  ScreenshotOptions,
  ScrollOptions,
  WaitUntil,
} from './render-options.js';
export { DEFAULT_BLOCKED_RESOURCES, parseRenderOptions } from './render-options.js';
