// The tiered deduplicator (LevelDB) is listed by @mocra/core/leveldb (src/entries/leveldb.ts).
export type { BloomFilterOptions } from './bloom-filter.js';
export { ScalableBloomFilter } from './bloom-filter.js';
export { KEY_BYTES, keyOf } from './fingerprint-key.js';
export { FingerprintSet } from './fingerprint-set.js';
