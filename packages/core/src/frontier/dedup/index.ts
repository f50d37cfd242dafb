export type { BloomFilterOptions } from './bloom-filter.js';
export { ScalableBloomFilter } from './bloom-filter.js';
export { KEY_BYTES, keyOf } from './fingerprint-key.js';
export { FingerprintSet } from './fingerprint-set.js';
export type { TieredDeduplicatorOptions, TieredDeduplicatorStats } from './tiered-deduplicator.js';
export { createTieredDeduplicator, TieredDeduplicator } from './tiered-deduplicator.js';
