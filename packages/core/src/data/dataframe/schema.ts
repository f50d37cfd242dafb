/**
 * Columns of a DataFrame store: the types an item's fields may have, how a schema is inferred
 * from the first batch, and how a value is checked against its column.
 */
import { DataFrameSchemaError, InvalidArgumentError } from '../../errors.js';
import type { DataFrame, PolarsModule } from './polars.js';

/**
 * A column type. `json` stores any JSON value (objects, arrays) as its JSON text; `datetime`
 * takes a `Date` (millisecond precision, UTC) and `date` a `Date` whose day is kept.
 */
export type ColumnType = 'string' | 'float64' | 'int64' | 'int32' | 'bool' | 'datetime' | 'date' | 'json';

export interface ColumnSpec {
  type: ColumnType;
  /** Whether the column may be missing or `null` in an item. @default true */
  nullable?: boolean;
}

/** Column name → type, in column order. */
export type DataFrameSchema = Record<string, ColumnType | ColumnSpec>;

/** A schema with every column spelled out. */
export interface ResolvedColumn {
  name: string;
  type: ColumnType;
  nullable: boolean;
}

const TYPES = new Set<ColumnType>([
  'string',
  'float64',
  'int64',
  'int32',
  'bool',
  'datetime',
  'date',
  'json',
]);

export function resolveSchema(schema: DataFrameSchema): ResolvedColumn[] {
  const columns = Object.entries(schema).map(([name, spec]) => {
    const { type, nullable = true } = typeof spec === 'string' ? { type: spec } : spec;
    if (!TYPES.has(type)) {
      throw new InvalidArgumentError(
        `schema column '${name}': unknown type '${String(type)}' (${[...TYPES].join(', ')})`,
      );
    }
    return { name, type, nullable };
  });
  if (columns.length === 0) throw new InvalidArgumentError('a DataFrame schema needs at least one column');
  return columns;
}

/** What a JS value looks like as a column type, or null for null/undefined. */
function typeOfValue(value: unknown): ColumnType | null {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'string':
      return 'string';
    case 'boolean':
      return 'bool';
    case 'number':
      return Number.isSafeInteger(value) ? 'int64' : 'float64';
    case 'bigint':
      return 'int64';
    default:
      return value instanceof Date ? 'datetime' : 'json';
  }
}

/**
 * Infer a schema from items: columns in the order keys are first seen, each nullable; integers
 * and fractions in one column make `float64`; a column that is only ever null is a `string`.
 * Other mixtures are refused with the first row that disagrees.
 */
export function inferSchema(items: readonly unknown[], firstRow = 0): ResolvedColumn[] {
  const types = new Map<string, ColumnType | null>();
  items.forEach((item, i) => {
    for (const [key, value] of Object.entries(asRecord(item, firstRow + i))) {
      const seen = types.get(key) ?? null;
      const next = typeOfValue(value);
      if (next === null) {
        if (!types.has(key)) types.set(key, null);
        continue;
      }
      if (seen === null || seen === next) types.set(key, next);
      else if ((seen === 'int64' && next === 'float64') || (seen === 'float64' && next === 'int64'))
        types.set(key, 'float64');
      else {
        throw new DataFrameSchemaError(
          key,
          firstRow + i,
          `holds both ${seen} and ${next} values in the first batch; pass a schema to say which it is`,
        );
      }
    }
  });
  if (types.size === 0)
    throw new DataFrameSchemaError('*', firstRow, 'the first batch has no fields to infer a schema from');
  return [...types].map(([name, type]) => ({ name, type: type ?? 'string', nullable: true }));
}

export function asRecord(item: unknown, row: number): Record<string, unknown> {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) {
    throw new DataFrameSchemaError(
      '*',
      row,
      `an item must be a plain object (got ${item === null ? 'null' : Array.isArray(item) ? 'an array' : typeof item})`,
    );
  }
  return item as Record<string, unknown>;
}

/** `value` as it is stored in a column of `column.type`, or a DataFrameSchemaError. */
export function checkValue(column: ResolvedColumn, value: unknown, row: number): unknown {
  if (value === null || value === undefined) {
    if (!column.nullable)
      throw new DataFrameSchemaError(column.name, row, 'is missing or null but the column is not nullable');
    return null;
  }
  const refuse = (): never => {
    throw new DataFrameSchemaError(column.name, row, `expected ${column.type}, got ${describeValue(value)}`);
  };
  switch (column.type) {
    case 'string':
      return typeof value === 'string' ? value : refuse();
    case 'float64':
      return typeof value === 'number' ? value : refuse();
    case 'int64':
      if (
        typeof value === 'bigint' &&
        value >= BigInt(Number.MIN_SAFE_INTEGER) &&
        value <= BigInt(Number.MAX_SAFE_INTEGER)
      ) {
        return Number(value);
      }
      return Number.isSafeInteger(value) ? value : refuse();
    case 'int32':
      return Number.isInteger(value) && (value as number) >= -(2 ** 31) && (value as number) < 2 ** 31
        ? value
        : refuse();
    case 'bool':
      return typeof value === 'boolean' ? value : refuse();
    case 'datetime':
    case 'date':
      return value instanceof Date && !Number.isNaN(value.getTime()) ? value : refuse();
    case 'json':
      try {
        const text = JSON.stringify(value);
        return text === undefined ? refuse() : text;
      } catch (err) {
        throw new DataFrameSchemaError(
          column.name,
          row,
          `cannot be written as JSON (${(err as Error).message})`,
        );
      }
  }
}

function describeValue(value: unknown): string {
  if (value instanceof Date) return 'a Date';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number')
    return Number.isInteger(value) ? `the number ${value}` : `the fraction ${value}`;
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return typeof value;
}

function dtypeOf(pl: PolarsModule, type: ColumnType) {
  switch (type) {
    case 'string':
    case 'json':
      return pl.Utf8;
    case 'float64':
      return pl.Float64;
    case 'int64':
      return pl.Int64;
    case 'int32':
      return pl.Int32;
    case 'bool':
      return pl.Bool;
    case 'datetime':
      return pl.Datetime('ms');
    case 'date':
      return pl.Date;
  }
}

/** A DataFrame from checked column values (one array per column, all the same length). */
export function frameOf(
  pl: PolarsModule,
  columns: readonly ResolvedColumn[],
  values: readonly unknown[][],
): DataFrame {
  return pl.DataFrame(columns.map((c, i) => pl.Series(c.name, values[i] as unknown[], dtypeOf(pl, c.type))));
}
