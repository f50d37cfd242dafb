export type { Deduplicator, MarkSeenOptions } from './dedup.js';
export { createMemoryDeduplicator, MemoryDeduplicator } from './dedup.js';
export type { FingerprintOptions } from './fingerprint.js';
export {
  fingerprintParts,
  fingerprintRequest,
  normalizeParsedUrl,
  normalizeUrl,
  parseHttpUrl,
  requestUrl,
} from './fingerprint.js';
export type { AdmissionResult, AdmitOptions, FrontierOptions, FrontierStats } from './frontier.js';
export { createFrontier, Frontier } from './frontier.js';
export type { DownloadGate, DownloadOutcome, GateDecision } from './gate.js';
export { OPEN_GATE } from './gate.js';
