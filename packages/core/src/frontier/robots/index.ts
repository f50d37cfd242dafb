export type {
  FetchedResource,
  ResourceFetcher,
  ResourceFetcherOptions,
  ResourceFetchInit,
} from './resource-fetcher.js';
export { createResourceFetcher, readLimited } from './resource-fetcher.js';
export type { RobotsCacheOptions, RobotsEntry, RobotsStatus } from './robots-cache.js';
export { createRobotsCache, RobotsCache } from './robots-cache.js';
export type { RobotsKey, RobotsRecord, RobotsRules } from './robots-txt.js';
export { compileRobotsTxt, parseRobotsRecords, productToken } from './robots-txt.js';
