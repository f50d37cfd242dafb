/**
 * Heavy integrations (ioredis, kafkajs, nats, playwright-core, …) are optional peer
 * dependencies (DESIGN.md §1): a single-node user installs `mocra` and nothing else. They are
 * imported on first use through here, so a missing one fails with a clear error naming the
 * package to install instead of a bare ERR_MODULE_NOT_FOUND.
 */
import { MissingDependencyError } from './errors.js';

const cache = new Map<string, Promise<unknown>>();

/**
 * Import `packageName` once per process. `feature` names what needed it, for the error message
 * ("the Redis queue backend needs the optional package 'ioredis'…").
 */
export function importOptional<TModule>(packageName: string, feature: string): Promise<TModule> {
  let loading = cache.get(packageName);
  if (!loading) {
    loading = import(packageName).catch((err: unknown) => {
      cache.delete(packageName);
      const code = (err as { code?: unknown } | undefined)?.code;
      if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
        throw new MissingDependencyError(packageName, feature, { cause: err });
      }
      throw err;
    });
    cache.set(packageName, loading);
  }
  return loading as Promise<TModule>;
}
