export type { HttpCacheOptions, HttpCacheStats } from './http-cache.js';
export { createHttpCache, HttpCache } from './http-cache.js';
export type { HttpDownloaderOptions } from './http-downloader.js';
export { createHttpDownloader, HttpDownloader } from './http-downloader.js';
export type { Downloader } from './types.js';
export { DEFAULT_USER_AGENT, MOCRA_VERSION } from './version.js';
