import diagnostics from 'node:diagnostics_channel';

/**
 * `node:diagnostics_channel` channels this package publishes on. Subscribing costs nothing when
 * nobody listens; messages are plain objects, documented in docs/store.md.
 */
export const STORE_CHANNELS = {
  /** `{ backend, version, name }` after a migration committed. */
  migrationApplied: 'mocra:store:migration-applied',
  /** `{ backend, operation, attempt, delayMs, error }` before an operation is retried. */
  retry: 'mocra:store:retry',
  /** `{ backend, error }` when an idle pooled connection died (the pool replaces it). */
  connectionError: 'mocra:store:connection-error',
  /** `{ backend, mode, items, tables }` after an item batch committed. */
  batchWritten: 'mocra:store:batch-written',
  /** `{ backend, runs: [{ id, runId, module }] }` after the zombie sweep failed some runs. */
  zombieSwept: 'mocra:store:zombie-swept',
} as const;

export const channels = {
  migrationApplied: diagnostics.channel(STORE_CHANNELS.migrationApplied),
  retry: diagnostics.channel(STORE_CHANNELS.retry),
  connectionError: diagnostics.channel(STORE_CHANNELS.connectionError),
  batchWritten: diagnostics.channel(STORE_CHANNELS.batchWritten),
  zombieSwept: diagnostics.channel(STORE_CHANNELS.zombieSwept),
};
