/**
 * `node:diagnostics_channel` channels of the engine's database integration (`mocra:db:*`; the
 * store package's own channels are `mocra:store:*`). Messages are plain objects.
 */
import diagnostics_channel from 'node:diagnostics_channel';

export const DB_CHANNEL_NAMES = {
  /** `{ account, platform, module, reason }` — a module of a task that does not run (not linked, disabled, not registered…). */
  moduleSkipped: 'mocra:db:module-skipped',
  /** `{ token, jobs, added, removed }` — the cron contexts were listed again because the change token moved. */
  cronRefresh: 'mocra:db:cron-refresh',
  /** `{ operation, error }` — a background database write or read failed (task results, logs, cron refresh); the crawl goes on. */
  error: 'mocra:db:error',
  /** `{ count, reason }` — log rows dropped (buffer full, or a failed insert). */
  logDropped: 'mocra:db:log-dropped',
  /** `{ runs: [{ id, runId, module }] }` — the zombie sweep of this node failed runs that stopped reporting. */
  zombies: 'mocra:db:zombies',
  /** `{ items, parses, ms }` — an item-store batch committed. */
  itemsWritten: 'mocra:db:items-written',
} as const;

export const dbChannels = {
  moduleSkipped: diagnostics_channel.channel(DB_CHANNEL_NAMES.moduleSkipped),
  cronRefresh: diagnostics_channel.channel(DB_CHANNEL_NAMES.cronRefresh),
  error: diagnostics_channel.channel(DB_CHANNEL_NAMES.error),
  logDropped: diagnostics_channel.channel(DB_CHANNEL_NAMES.logDropped),
  zombies: diagnostics_channel.channel(DB_CHANNEL_NAMES.zombies),
  itemsWritten: diagnostics_channel.channel(DB_CHANNEL_NAMES.itemsWritten),
};

/** `mocra:db:module-skipped` */
export interface ModuleSkippedMessage {
  account: string;
  platform: string;
  module: string;
  /**
   * The store's reason (`not_linked_to_account`, `disabled`…), `not_registered` (in the
   * database, not in this engine) or `unknown_middleware` (a relation names a middleware that is
   * not registered; a failed task_result row carries MOCRA_ERR_UNKNOWN_MIDDLEWARE).
   */
  reason: string;
}

/** `mocra:db:error` */
export interface DbErrorMessage {
  operation: string;
  error: unknown;
}
