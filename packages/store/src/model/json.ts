import { InvalidInputError } from '../errors.js';

/** A JSON value as stored in config, result and item columns. */
export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** The JSON type name of a value, for error messages (`object`, `array`, `string`, …). */
export function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * Checks that `value` is representable as JSON and returns it typed. Rejects what JSON.stringify
 * would silently change (undefined, functions, NaN, Infinity, bigint, class instances other than
 * Date, which becomes its ISO string) so what is read back equals what was written.
 */
export function toJsonValue(value: unknown, key: string): JsonValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new InvalidInputError(key, `${value} is not representable in JSON`);
    return value;
  }
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map((v, i) => toJsonValue(v, `${key}[${i}]`));
  if (isPlainObject(value)) {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue;
      out[k] = toJsonValue(v, `${key}.${k}`);
    }
    return out;
  }
  throw new InvalidInputError(key, `a ${typeof value} is not representable in JSON`);
}

/** Like {@link toJsonValue}, and the value must be an object (config columns hold objects). */
export function toJsonObject(value: unknown, key: string): JsonObject {
  if (!isPlainObject(value)) throw new InvalidInputError(key, `expected an object, got ${jsonTypeOf(value)}`);
  return toJsonValue(value, key) as JsonObject;
}
