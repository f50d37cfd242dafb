import { isIdentifier, quoteIdent, type SqlDriver, type SqlParam, type SqlSession } from '../driver/types.js';
import { InvalidInputError } from '../errors.js';
import { isPlainObject, jsonTypeOf, toJsonValue } from '../model/json.js';
import { channels } from '../observability/channels.js';
import type {
  ItemColumn,
  ItemColumnType,
  ItemStore,
  ItemStoreOptions,
  StoredItem,
  StoreItem,
  WriteBatchResult,
} from './types.js';

/** Runs an idempotent operation with the repository's retry policy. */
export type Retrying = <T>(operation: string, fn: () => Promise<T>) => Promise<T>;

interface ColumnPlan {
  name: string;
  type: ItemColumnType;
  nullable: boolean;
  unique: boolean;
}

interface TablePlan {
  type: string;
  table: string;
  /** Declared columns; in json mode a single `data` json column. */
  columns: ColumnPlan[];
}

const RESERVED = new Set(['item_id', 'type', 'created_at', 'updated_at', 'write_count']);
// Both databases cap parameters per statement (Postgres 65535, SQLite 32766): stay well below.
const MAX_PARAMS = 30_000;

const PG_TYPES: Record<ItemColumnType, string> = {
  text: 'text',
  integer: 'bigint',
  real: 'double precision',
  boolean: 'boolean',
  json: 'jsonb',
  timestamp: 'timestamptz',
};
const SQLITE_TYPES: Record<ItemColumnType, string> = {
  text: 'TEXT',
  integer: 'INTEGER',
  real: 'REAL',
  boolean: 'INTEGER',
  json: 'TEXT',
  timestamp: 'TEXT',
};

function planTables(options: ItemStoreOptions): Map<string, TablePlan> {
  const plans = new Map<string, TablePlan>();
  if (options.mode === 'json') {
    const table = options.table ?? 'items';
    if (!isIdentifier(table)) throw new InvalidInputError('table', `'${table}' is not a valid table name`);
    plans.set('*', {
      type: '*',
      table,
      columns: [{ name: 'data', type: 'json', nullable: false, unique: false }],
    });
    return plans;
  }
  const prefix = options.tablePrefix ?? 'item_';
  const types = Object.entries(options.types ?? {});
  if (types.length === 0) throw new InvalidInputError('types', 'declare at least one item type');
  const tables = new Set<string>();
  for (const [type, schema] of types) {
    const table = schema.table ?? `${prefix}${type}`;
    if (!isIdentifier(table)) {
      throw new InvalidInputError(`types.${type}.table`, `'${table}' is not a valid table name`);
    }
    if (tables.has(table))
      throw new InvalidInputError(`types.${type}.table`, `table '${table}' is used twice`);
    tables.add(table);
    if (!isPlainObject(schema.columns) || Object.keys(schema.columns).length === 0) {
      throw new InvalidInputError(`types.${type}.columns`, 'declare at least one column');
    }
    const columns = Object.entries(schema.columns).map(([name, spec]): ColumnPlan => {
      const key = `types.${type}.columns.${name}`;
      if (!isIdentifier(name)) throw new InvalidInputError(key, 'is not a valid column name');
      if (RESERVED.has(name)) throw new InvalidInputError(key, 'is a reserved column name');
      const col: ItemColumn = typeof spec === 'string' ? { type: spec } : spec;
      if (!(col.type in PG_TYPES)) {
        throw new InvalidInputError(
          `${key}.type`,
          `unknown type '${String(col.type)}'; expected one of ${Object.keys(PG_TYPES).join(', ')}`,
        );
      }
      return { name, type: col.type, nullable: col.nullable ?? true, unique: col.unique ?? false };
    });
    plans.set(type, { type, table, columns });
  }
  return plans;
}

/** Checks one value against its column and converts it to a bind parameter. */
function toParam(value: unknown, col: ColumnPlan, key: string): SqlParam {
  if (value === undefined || value === null) {
    if (!col.nullable) throw new InvalidInputError(key, 'is required (the column is not nullable)');
    return null;
  }
  switch (col.type) {
    case 'text':
      if (typeof value !== 'string')
        throw new InvalidInputError(key, `expected a string, got ${jsonTypeOf(value)}`);
      return value;
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
        throw new InvalidInputError(
          key,
          `expected an integer, got ${typeof value === 'number' ? value : jsonTypeOf(value)}`,
        );
      }
      return value;
    case 'real':
      if (typeof value !== 'number' || !Number.isFinite(value)) {
        throw new InvalidInputError(
          key,
          `expected a finite number, got ${typeof value === 'number' ? value : jsonTypeOf(value)}`,
        );
      }
      return value;
    case 'boolean':
      if (typeof value !== 'boolean')
        throw new InvalidInputError(key, `expected a boolean, got ${jsonTypeOf(value)}`);
      return value;
    case 'timestamp': {
      const date = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : undefined;
      if (date === undefined || Number.isNaN(date.getTime())) {
        throw new InvalidInputError(key, 'expected a Date or an ISO-8601 string');
      }
      return date;
    }
    case 'json':
      return JSON.stringify(toJsonValue(value, key));
  }
}

function fromColumn(value: unknown, type: ItemColumnType, driver: SqlDriver): unknown {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'integer':
    case 'real':
      return Number(value);
    case 'boolean':
      return value === true || value === 1;
    case 'timestamp':
      return value instanceof Date ? value : new Date(String(value));
    case 'json':
      return driver.readJson(value);
    default:
      return value;
  }
}

const toDate = (v: unknown): Date => (v instanceof Date ? v : new Date(String(v)));

interface PreparedRow {
  itemId: string;
  type: string;
  values: SqlParam[];
}

export function createSqlItemStore(
  driver: SqlDriver,
  options: ItemStoreOptions,
  retrying: Retrying,
  now: () => Date,
): ItemStore {
  const plans = planTables(options);
  const json = options.mode === 'json';
  const maxRows = options.maxRowsPerStatement ?? 500;
  if (!Number.isSafeInteger(maxRows) || maxRows < 1) {
    throw new InvalidInputError('maxRowsPerStatement', 'expected a positive integer');
  }
  const unknownKeys = options.mode === 'table-per-type' ? (options.unknownKeys ?? 'error') : 'error';
  const types = driver.backend === 'postgres' ? PG_TYPES : SQLITE_TYPES;
  const ts = driver.backend === 'postgres' ? 'timestamptz' : 'TEXT';

  const planFor = (type: string, key: string): TablePlan => {
    const plan = plans.get(json ? '*' : type);
    if (plan === undefined) {
      throw new InvalidInputError(
        key,
        `unknown item type '${type}'; declared: ${[...plans.keys()].join(', ')}`,
      );
    }
    return plan;
  };

  async function ensureTable(tx: SqlSession, plan: TablePlan): Promise<void> {
    const keyCols = json
      ? `${quoteIdent('type')} TEXT NOT NULL, item_id TEXT NOT NULL`
      : 'item_id TEXT PRIMARY KEY';
    const cols = plan.columns.map(
      (c) =>
        `${quoteIdent(c.name)} ${types[c.type]}${c.nullable ? '' : ' NOT NULL'}${c.unique ? ' UNIQUE' : ''}`,
    );
    await tx.script(`CREATE TABLE IF NOT EXISTS ${driver.table(plan.table)} (
  ${keyCols},
  ${cols.join(',\n  ')},
  created_at ${ts} NOT NULL,
  updated_at ${ts} NOT NULL,
  write_count INTEGER NOT NULL DEFAULT 1${json ? `,\n  PRIMARY KEY (${quoteIdent('type')}, item_id)` : ''}
)`);
    if (json) return;
    // Columns declared after the table was created are added (nullable; constraints only at creation).
    const existing =
      driver.backend === 'postgres'
        ? await tx.query<{ name: string }>(
            'SELECT column_name AS name FROM information_schema.columns WHERE table_schema = ? AND table_name = ?',
            [driver.schema ?? 'public', plan.table],
          )
        : await tx.query<{ name: string }>('SELECT name FROM pragma_table_info(?)', [plan.table]);
    const have = new Set(existing.map((r) => r.name));
    for (const c of plan.columns) {
      if (have.has(c.name)) continue;
      await tx.script(
        `ALTER TABLE ${driver.table(plan.table)} ADD COLUMN ${quoteIdent(c.name)} ${types[c.type]}`,
      );
    }
  }

  function prepare(items: readonly StoreItem[]): Map<TablePlan, PreparedRow[]> {
    if (!Array.isArray(items))
      throw new InvalidInputError('items', `expected an array, got ${jsonTypeOf(items)}`);
    // Validate everything before touching the database: a bad item fails the batch with nothing written.
    const byKey = new Map<string, { plan: TablePlan; row: PreparedRow }>();
    items.forEach((item: unknown, i) => {
      const at = `items[${i}]`;
      if (!isPlainObject(item))
        throw new InvalidInputError(at, `expected an object, got ${jsonTypeOf(item)}`);
      const { itemId, type, data } = item;
      if (typeof itemId !== 'string' || itemId === '' || itemId.length > 500) {
        throw new InvalidInputError(`${at}.itemId`, 'expected a non-empty string of at most 500 characters');
      }
      if (typeof type !== 'string' || type === '') {
        throw new InvalidInputError(`${at}.type`, 'expected a non-empty string');
      }
      if (!isPlainObject(data))
        throw new InvalidInputError(`${at}.data`, `expected an object, got ${jsonTypeOf(data)}`);
      const plan = planFor(type, `${at}.type`);
      let values: SqlParam[];
      if (json) {
        values = [toParam(data, plan.columns[0]!, `${at}.data`)];
      } else {
        if (unknownKeys === 'error') {
          const declared = new Set(plan.columns.map((c) => c.name));
          const extra = Object.keys(data).find((k) => !declared.has(k) && data[k] !== undefined);
          if (extra !== undefined) {
            throw new InvalidInputError(
              `${at}.data.${extra}`,
              `is not a declared column of item type '${type}'`,
            );
          }
        }
        values = plan.columns.map((c) => toParam(data[c.name], c, `${at}.data.${c.name}`));
      }
      // A batch may carry the same item twice (a retry merged into it): the later one wins.
      byKey.set(`${type}\u0000${itemId}`, { plan, row: { itemId, type, values } });
    });
    const grouped = new Map<TablePlan, PreparedRow[]>();
    for (const { plan, row } of byKey.values()) {
      const rows = grouped.get(plan);
      if (rows === undefined) grouped.set(plan, [row]);
      else rows.push(row);
    }
    // One lock order for every writer: concurrent batches that share items cannot deadlock.
    for (const rows of grouped.values()) {
      rows.sort((a, b) =>
        a.type < b.type ? -1 : a.type > b.type ? 1 : a.itemId < b.itemId ? -1 : a.itemId > b.itemId ? 1 : 0,
      );
    }
    return grouped;
  }

  async function upsertRows(tx: SqlSession, plan: TablePlan, rows: PreparedRow[], at: Date): Promise<void> {
    const names = [
      ...(json ? ['type'] : []),
      'item_id',
      ...plan.columns.map((c) => c.name),
      'created_at',
      'updated_at',
    ];
    const perRow = names.length;
    const chunk = Math.max(1, Math.min(maxRows, Math.floor(MAX_PARAMS / perRow)));
    const conflict = json ? `${quoteIdent('type')}, item_id` : 'item_id';
    const updates = [...plan.columns.map((c) => c.name), 'updated_at']
      .map((n) => `${quoteIdent(n)} = excluded.${quoteIdent(n)}`)
      .join(', ');
    const tuple = `(${names.map(() => '?').join(', ')})`;
    for (let start = 0; start < rows.length; start += chunk) {
      const slice = rows.slice(start, start + chunk);
      const params: SqlParam[] = [];
      for (const row of slice) {
        if (json) params.push(row.type);
        params.push(row.itemId, ...row.values, at, at);
      }
      await tx.execute(
        `INSERT INTO ${driver.table(plan.table)} AS t (${names.map(quoteIdent).join(', ')})
VALUES ${slice.map(() => tuple).join(', ')}
ON CONFLICT (${conflict}) DO UPDATE SET ${updates}, write_count = t.write_count + 1`,
        params,
      );
    }
  }

  return {
    mode: options.mode,

    async init(): Promise<void> {
      return retrying('items.init', () =>
        driver.transaction(async (tx) => {
          if (driver.backend === 'postgres') {
            const schema = driver.schema ?? 'public';
            // Several nodes may init at once; CREATE … IF NOT EXISTS is not safe against that alone.
            await tx.query('SELECT pg_advisory_xact_lock(hashtext(?))', [`mocra:items:${schema}`]);
            await tx.script(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
          }
          for (const plan of plans.values()) await ensureTable(tx, plan);
        }),
      );
    },

    async writeBatch(items: readonly StoreItem[]): Promise<WriteBatchResult> {
      const grouped = prepare(items);
      let written = 0;
      for (const rows of grouped.values()) written += rows.length;
      if (written === 0) return { written };
      await retrying('items.writeBatch', () =>
        driver.transaction(async (tx) => {
          const at = now();
          for (const [plan, rows] of grouped) await upsertRows(tx, plan, rows, at);
        }),
      );
      if (channels.batchWritten.hasSubscribers) {
        channels.batchWritten.publish({
          backend: driver.backend,
          mode: options.mode,
          items: written,
          tables: [...grouped.keys()].map((p) => p.table),
        });
      }
      return { written };
    },

    async get(type: string, itemId: string): Promise<StoredItem | null> {
      const plan = planFor(type, 'type');
      return retrying('items.get', async () => {
        const where = json ? `${quoteIdent('type')} = ? AND item_id = ?` : 'item_id = ?';
        const rows = await driver.query(
          `SELECT * FROM ${driver.table(plan.table)} WHERE ${where}`,
          json ? [type, itemId] : [itemId],
        );
        const row = rows[0];
        if (row === undefined) return null;
        let data: Record<string, unknown>;
        if (json) {
          data = driver.readJson(row.data) as Record<string, unknown>;
        } else {
          data = {};
          for (const c of plan.columns) data[c.name] = fromColumn(row[c.name], c.type, driver);
        }
        return {
          itemId: String(row.item_id),
          type,
          data,
          createdAt: toDate(row.created_at),
          updatedAt: toDate(row.updated_at),
          writeCount: Number(row.write_count),
        };
      });
    },

    async count(type?: string): Promise<number> {
      return retrying('items.count', async () => {
        if (json) {
          const where = type === undefined ? '' : ` WHERE ${quoteIdent('type')} = ?`;
          const rows = await driver.query<{ n: unknown }>(
            `SELECT count(*) AS n FROM ${driver.table(plans.get('*')!.table)}${where}`,
            type === undefined ? [] : [type],
          );
          return Number(rows[0]?.n ?? 0);
        }
        const targets = type === undefined ? [...plans.values()] : [planFor(type, 'type')];
        let total = 0;
        for (const plan of targets) {
          const rows = await driver.query<{ n: unknown }>(
            `SELECT count(*) AS n FROM ${driver.table(plan.table)}`,
          );
          total += Number(rows[0]?.n ?? 0);
        }
        return total;
      });
    },
  };
}
