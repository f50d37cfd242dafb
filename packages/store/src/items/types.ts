/** An item as the engine hands it to a store: `itemId` is stable across redeliveries. */
export interface StoreItem {
  itemId: string;
  type: string;
  data: Record<string, unknown>;
}

export type ItemColumnType = 'text' | 'integer' | 'real' | 'boolean' | 'json' | 'timestamp';

export interface ItemColumn {
  type: ItemColumnType;
  /** Whether the value may be null or absent. @default true */
  nullable?: boolean;
  /** A unique index on the column (applied when the table is created). @default false */
  unique?: boolean;
}

/** The columns of one item type's table. Keys are column names (identifiers) and `data` keys. */
export interface ItemTypeSchema {
  /** @default `${tablePrefix}${type}` */
  table?: string;
  columns: Record<string, ItemColumnType | ItemColumn>;
}

interface CommonItemStoreOptions {
  /** Rows per INSERT statement; a batch larger than this runs several statements in one transaction. @default 500 */
  maxRowsPerStatement?: number;
}

/** One table for every item type: `(type, item_id)` key, `data` as JSONB (Postgres) or JSON text (SQLite). */
export interface JsonItemStoreOptions extends CommonItemStoreOptions {
  mode: 'json';
  /** @default 'items' */
  table?: string;
}

/** A table per item type with typed columns from a declared schema. */
export interface TablePerTypeItemStoreOptions extends CommonItemStoreOptions {
  mode: 'table-per-type';
  types: Record<string, ItemTypeSchema>;
  /** @default 'item_' */
  tablePrefix?: string;
  /** What to do with a `data` key that is not a declared column. @default 'error' */
  unknownKeys?: 'error' | 'ignore';
}

export type ItemStoreOptions = JsonItemStoreOptions | TablePerTypeItemStoreOptions;

export interface WriteBatchResult {
  /** Rows inserted or updated: distinct (type, itemId) pairs in the batch (a later duplicate wins). */
  written: number;
}

export interface StoredItem {
  itemId: string;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
  /** 1 after the first write; +1 for every later write of the same item (a redelivery). */
  writeCount: number;
}

/**
 * An idempotent, engine-agnostic item sink on a database: items are upserted by `itemId`, so a
 * redelivered batch updates rows instead of duplicating them, and a batch is all-or-nothing (one
 * transaction; a bad item fails the whole batch before anything is written).
 */
export interface ItemStore {
  readonly mode: ItemStoreOptions['mode'];
  /** Creates the tables (and, for table-per-type, adds newly declared columns). Idempotent. */
  init(): Promise<void>;
  writeBatch(items: readonly StoreItem[]): Promise<WriteBatchResult>;
  get(type: string, itemId: string): Promise<StoredItem | null>;
  /** Rows of one type, or of every type. */
  count(type?: string): Promise<number>;
}
