/**
 * Heavy integrations (ioredis, kafkajs, nats, playwright-core, …) are optional peer
 * dependencies: a single-node user installs `mocra` and nothing else. They are
 * imported on first use through here, so a missing one fails with a clear error naming the
 * package to install instead of a bare ERR_MODULE_NOT_FOUND.
 */
import { createRequire } from 'node:module';
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

const requireCjs = createRequire(import.meta.url);

/**
 * A dependency of @mocra/core that a crawl may never need (cheerio until `res.$` is touched,
 * fastify until the control API starts, prom-client until metrics are on, tough-cookie until a
 * session exists), loaded synchronously on first call instead of at import: loading them all
 * up front costs tens of MB of RSS and hundreds of ms of start-up. Each one ships a CommonJS
 * entry, so `require` works.
 */
export function lazyRequire<TModule>(packageName: string): () => TModule {
  let loaded: TModule | undefined;
  return () => {
    loaded ??= requireCjs(packageName) as TModule;
    return loaded;
  };
}

/**
 * An object that is built on its first use, standing in for it until then: every property read,
 * call of a method, `in`, key listing and `instanceof` goes to the built object. For values
 * whose construction needs a dependency that a crawl may never load (the zod schemas of config
 * and policy overrides), exported under their usual names.
 */
export function builtOnFirstUse<T extends object>(build: () => T): T {
  let built: T | undefined;
  const real = (): T => {
    built ??= build();
    return built;
  };
  return new Proxy({} as T, {
    get: (_, key) => Reflect.get(real(), key),
    set: (_, key, value) => Reflect.set(real(), key, value),
    has: (_, key) => Reflect.has(real(), key),
    ownKeys: () => Reflect.ownKeys(real()),
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(real(), key);
      // The stand-in has none of the built object's properties: reporting one as fixed would
      // break the Proxy invariants, so every one is reported as configurable.
      if (descriptor !== undefined) descriptor.configurable = true;
      return descriptor;
    },
    getPrototypeOf: () => Reflect.getPrototypeOf(real()),
  });
}

/**
 * `importOptional` for a CommonJS optional peer (nodejs-polars, exceljs, isolated-vm) that
 * synchronous code needs: loaded with `require` on the first call, a missing one raising
 * {@link MissingDependencyError}. A package that is there but cannot load (a native binary
 * missing for this platform) keeps its own error as the cause.
 */
export function requireOptional<TModule>(packageName: string, feature: string): TModule {
  try {
    return requireCjs(packageName) as TModule;
  } catch (err) {
    const code = (err as { code?: unknown } | undefined)?.code;
    if (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') {
      throw new MissingDependencyError(packageName, feature, { cause: err });
    }
    throw err;
  }
}
