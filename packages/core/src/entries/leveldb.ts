/**
 * What keeps crawl state on disk in LevelDB: the persistent queue and the tiered deduplicator
 * (an in-memory filter in front of a LevelDB set). classic-level loads when one opens.
 *
 * @module @mocra/core/leveldb
 */
export type {
  TieredDeduplicatorOptions,
  TieredDeduplicatorStats,
} from '../frontier/dedup/tiered-deduplicator.js';
export { createTieredDeduplicator, TieredDeduplicator } from '../frontier/dedup/tiered-deduplicator.js';
export type { LevelQueueBackendOptions } from '../queue/leveldb-queue.js';
export { createLevelQueueBackend, LevelQueueBackend } from '../queue/leveldb-queue.js';
