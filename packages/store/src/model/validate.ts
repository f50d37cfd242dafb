import { InvalidInputError } from '../errors.js';
import { type JsonObject, jsonTypeOf, toJsonObject } from './json.js';

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

/** A row name: a non-empty string of at most 200 characters. */
export function checkName(value: unknown, key: string): string {
  if (typeof value !== 'string')
    throw new InvalidInputError(key, `expected a string, got ${jsonTypeOf(value)}`);
  if (value.trim() === '') throw new InvalidInputError(key, 'must not be empty');
  if (value.length > 200) throw new InvalidInputError(key, 'must be at most 200 characters');
  return value;
}

export function checkString(value: unknown, key: string): string {
  if (typeof value !== 'string')
    throw new InvalidInputError(key, `expected a string, got ${jsonTypeOf(value)}`);
  return value;
}

export function checkNullableString(value: unknown, key: string): string | null {
  return value === null ? null : checkString(value, key);
}

/** A 32-bit integer (the database's `integer`). */
export function checkInt32(value: unknown, key: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new InvalidInputError(
      key,
      `expected an integer, got ${typeof value === 'number' ? value : jsonTypeOf(value)}`,
    );
  }
  if (value < INT32_MIN || value > INT32_MAX)
    throw new InvalidInputError(key, `${value} is out of the 32-bit range`);
  return value;
}

/** A count or id: a non-negative safe integer. */
export function checkCount(value: unknown, key: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidInputError(key, `expected a non-negative integer, got ${String(value)}`);
  }
  return value;
}

export function checkBoolean(value: unknown, key: string): boolean {
  if (typeof value !== 'boolean')
    throw new InvalidInputError(key, `expected a boolean, got ${jsonTypeOf(value)}`);
  return value;
}

export function checkObject(value: unknown, key: string): JsonObject {
  return toJsonObject(value, key);
}

export function checkStringArray(value: unknown, key: string): string[] {
  if (!Array.isArray(value))
    throw new InvalidInputError(key, `expected an array of strings, got ${jsonTypeOf(value)}`);
  return value.map((v, i) => checkString(v, `${key}[${i}]`));
}
