import type { Row, SqlDriver } from '../driver/types.js';
import {
  ENTITY_TABLES,
  type EntityKind,
  type EntityRecordMap,
  LINK_TABLES,
  type LinkKind,
  type LinkRecordMap,
} from '../model/entities.js';
import type { JsonObject, JsonValue } from '../model/json.js';
import type { LogEntry, LogLevel, TaskResult, TaskResultStatus } from './types.js';

// Readers accept what either driver returns: Postgres gives booleans, Dates, parsed jsonb and int8
// as strings; SQLite gives 0/1, ISO text and JSON text.

export const toBool = (v: unknown): boolean => v === true || v === 1 || v === '1' || v === 't';
export const toNum = (v: unknown): number => Number(v);
export const toDate = (v: unknown): Date => (v instanceof Date ? v : new Date(String(v)));
export const toDateOrNull = (v: unknown): Date | null => (v == null ? null : toDate(v));
export const toStrOrNull = (v: unknown): string | null => (v == null ? null : String(v));

/** SQL select list of an entity's columns, aliased with a prefix (`m.id AS m_id, …`). */
export function entityColumns(kind: EntityKind, alias: string, prefix: string): string {
  const cols = [
    'id',
    'name',
    ...ENTITY_TABLES[kind].columns.map((c) => c.column),
    'created_at',
    'updated_at',
  ];
  return cols.map((c) => `${alias}.${c} AS ${prefix}${c}`).join(', ');
}

/** SQL select list of a relation's own fields, aliased with a prefix. */
export function relationColumns(alias: string, prefix: string): string {
  return ['enabled', 'priority', 'config', 'created_at', 'updated_at']
    .map((c) => `${alias}.${c} AS ${prefix}${c}`)
    .join(', ');
}

export function readEntity<K extends EntityKind>(
  driver: SqlDriver,
  kind: K,
  row: Row,
  prefix = '',
): EntityRecordMap[K] {
  const out: Record<string, unknown> = {
    id: toNum(row[`${prefix}id`]),
    name: String(row[`${prefix}name`]),
  };
  for (const col of ENTITY_TABLES[kind].columns) {
    const v = row[`${prefix}${col.column}`];
    out[col.prop] =
      col.kind === 'boolean'
        ? toBool(v)
        : col.kind === 'integer'
          ? toNum(v)
          : col.kind === 'json'
            ? driver.readJson(v)
            : toStrOrNull(v);
  }
  out.createdAt = toDate(row[`${prefix}created_at`]);
  out.updatedAt = toDate(row[`${prefix}updated_at`]);
  return out as unknown as EntityRecordMap[K];
}

export interface RelationRead {
  enabled: boolean;
  priority: number;
  config: JsonObject;
  createdAt: Date;
  updatedAt: Date;
}

export function readRelation(driver: SqlDriver, row: Row, prefix = ''): RelationRead {
  return {
    enabled: toBool(row[`${prefix}enabled`]),
    priority: toNum(row[`${prefix}priority`]),
    config: driver.readJson(row[`${prefix}config`]) as JsonObject,
    createdAt: toDate(row[`${prefix}created_at`]),
    updatedAt: toDate(row[`${prefix}updated_at`]),
  };
}

/** A relation row joined with the two names (`left_name`, `right_name`). */
export function readLink<K extends LinkKind>(driver: SqlDriver, kind: K, row: Row): LinkRecordMap[K] {
  const { left, right } = LINK_TABLES[kind];
  return {
    [left.prop]: String(row.left_name),
    [right.prop]: String(row.right_name),
    [left.idProp]: toNum(row[left.column]),
    [right.idProp]: toNum(row[right.column]),
    ...readRelation(driver, row),
  } as unknown as LinkRecordMap[K];
}

export function readTaskResult(driver: SqlDriver, row: Row): TaskResult {
  return {
    id: toNum(row.id),
    taskId: String(row.task_id),
    runId: String(row.run_id),
    account: String(row.account),
    platform: String(row.platform),
    module: row.module === '' || row.module == null ? null : String(row.module),
    nodeId: toStrOrNull(row.node_id),
    status: String(row.status) as TaskResultStatus,
    attempt: toNum(row.attempt),
    startTime: toDate(row.start_time),
    endTime: toDateOrNull(row.end_time),
    heartbeatAt: toDate(row.heartbeat_at),
    counts: {
      requests: toNum(row.request_count),
      items: toNum(row.item_count),
      errors: toNum(row.error_count),
    },
    result: row.result == null ? null : (driver.readJson(row.result) as JsonValue),
    error: toStrOrNull(row.error),
    errorCode: toStrOrNull(row.error_code),
    updatedAt: toDate(row.updated_at),
  };
}

export function readLog(row: Row): LogEntry {
  return {
    id: toNum(row.id),
    taskId: String(row.task_id),
    level: String(row.level) as LogLevel,
    message: String(row.message),
    runId: toStrOrNull(row.run_id),
    module: toStrOrNull(row.module),
    requestId: toStrOrNull(row.request_id),
    status: toStrOrNull(row.status),
    timestamp: toDate(row.timestamp),
    traceback: toStrOrNull(row.traceback),
  };
}
