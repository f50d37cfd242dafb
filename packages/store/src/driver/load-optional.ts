import { DriverMissingError } from '../errors.js';

/**
 * Imports an optional peer dependency on first use. A missing package becomes a
 * {@link DriverMissingError} that names it; any other failure (a broken native build) is rethrown.
 */
export async function importOptional<T>(packageName: string, backend: string): Promise<T> {
  try {
    return (await import(packageName)) as T;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const message = err instanceof Error ? err.message : '';
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && message.includes(packageName)) {
      throw new DriverMissingError(packageName, backend, { cause: err });
    }
    throw err;
  }
}

/** The CommonJS export of a package imported from ESM (`module.default`), or the namespace itself. */
export function defaultExport<T>(namespace: unknown): T {
  const ns = namespace as { default?: unknown };
  return (ns.default ?? namespace) as T;
}
