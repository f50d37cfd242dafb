import { setTimeout as sleep } from 'node:timers/promises';
import { buildModuleConfig } from '../config/module-config.js';
import type { Row, SqlDriver, SqlParam, SqlSession } from '../driver/types.js';
import {
  ContextUnavailableError,
  InvalidInputError,
  isStoreError,
  NotFoundError,
  StoreClosedError,
} from '../errors.js';
import { createSqlItemStore } from '../items/sql-item-store.js';
import type { ItemStore, ItemStoreOptions } from '../items/types.js';
import type { Migration } from '../migrate/migrations.js';
import { type MigrateResult, type MigrationStatus, migrate, migrationStatus } from '../migrate/migrator.js';
import {
  type Account,
  type AccountPlatformLink,
  ENTITY_TABLES,
  type EntityInputMap,
  type EntityKind,
  type EntityRecordMap,
  LINK_TABLES,
  type LinkInputMap,
  type LinkKey,
  type LinkKind,
  type LinkRecordMap,
  type ModuleRecord,
  type Platform,
} from '../model/entities.js';
import { isPlainObject, jsonTypeOf, toJsonValue } from '../model/json.js';
import {
  checkBoolean,
  checkCount,
  checkInt32,
  checkName,
  checkNullableString,
  checkObject,
  checkString,
  checkStringArray,
} from '../model/validate.js';
import { channels } from '../observability/channels.js';
import {
  emptySeedReport,
  planSeed,
  readSeedFile,
  type SeedData,
  type SeedReport,
} from '../seed/seed-data.js';
import {
  entityColumns,
  readEntity,
  readLink,
  readLog,
  readRelation,
  readTaskResult,
  relationColumns,
  toBool,
  toNum,
} from './rows.js';
import type {
  CronContext,
  CronContextList,
  FinishTaskResultInput,
  LogEntry,
  LogEntryInput,
  LogLevel,
  LogQuery,
  MiddlewareBinding,
  ModuleContext,
  ModuleSkipReason,
  StartTaskResultInput,
  StoreRepository,
  SweepZombiesOptions,
  TaskContext,
  TaskContextQuery,
  TaskCounts,
  TaskResult,
  TaskResultQuery,
  TaskResultStatus,
} from './types.js';

/** Retries of idempotent operations on retryable errors (connection loss, serialization failures). */
export interface RetryOptions {
  /** Retries after the first attempt; 0 turns retrying off. @default 2 */
  maxRetries?: number;
  /** First backoff; doubles per retry, with jitter. @default 50 */
  baseDelayMs?: number;
  /** @default 1000 */
  maxDelayMs?: number;
}

export interface RepositoryOptions {
  clock: () => Date;
  retry: Required<RetryOptions>;
  migrations: readonly Migration[];
}

const LOG_LEVELS = new Set<LogLevel>(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const FINAL_STATUSES = new Set<TaskResultStatus>(['succeeded', 'failed', 'cancelled']);
const ALL_STATUSES = new Set<TaskResultStatus>(['running', 'succeeded', 'failed', 'cancelled']);

function checkLimit(value: unknown, key: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = checkCount(value, key);
  if (n < 1 || n > 10_000) throw new InvalidInputError(key, 'must be between 1 and 10000');
  return n;
}

function checkKind<T extends string>(kind: unknown, table: Record<T, unknown>, key: string): T {
  if (typeof kind !== 'string' || !Object.hasOwn(table, kind)) {
    throw new InvalidInputError(
      key,
      `unknown kind '${String(kind)}'; expected one of ${Object.keys(table).join(', ')}`,
    );
  }
  return kind as T;
}

function compareBindings(a: MiddlewareBinding, b: MiddlewareBinding): number {
  return b.priority - a.priority || b.weight - a.weight || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

/** The repository over either driver. SQL is shared; the few dialect differences live in the drivers. */
export class SqlStoreRepository implements StoreRepository {
  readonly backend: SqlDriver['backend'];
  readonly schema: string | null;
  readonly #driver: SqlDriver;
  readonly #clock: () => Date;
  readonly #retry: Required<RetryOptions>;
  readonly #migrations: readonly Migration[];
  #closed = false;

  constructor(driver: SqlDriver, options: RepositoryOptions) {
    this.#driver = driver;
    this.backend = driver.backend;
    this.schema = driver.schema;
    this.#clock = options.clock;
    this.#retry = options.retry;
    this.#migrations = options.migrations;
  }

  // ── lifecycle ────────────────────────────────────────────────────────────────────────────────

  async migrate(): Promise<MigrateResult> {
    return this.#retrying('migrate', () => migrate(this.#driver, this.#migrations, this.#clock));
  }

  async migrationStatus(): Promise<MigrationStatus> {
    return this.#retrying('migrationStatus', () => migrationStatus(this.#driver, this.#migrations));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#driver.close();
  }

  // ── catalog ──────────────────────────────────────────────────────────────────────────────────

  async upsert<K extends EntityKind>(kind: K, input: EntityInputMap[K]): Promise<EntityRecordMap[K]> {
    checkKind(kind, ENTITY_TABLES, 'kind');
    return this.#retrying(`upsert ${kind}`, () =>
      this.#driver.transaction((tx) => this.#upsertEntity(tx, kind, input, this.#clock(), '')),
    );
  }

  async get<K extends EntityKind>(kind: K, name: string): Promise<EntityRecordMap[K] | null> {
    checkKind(kind, ENTITY_TABLES, 'kind');
    checkName(name, 'name');
    return this.#retrying(`get ${kind}`, async () => {
      const rows = await this.#driver.query(
        `SELECT * FROM ${this.#t(ENTITY_TABLES[kind].table)} WHERE name = ?`,
        [name],
      );
      return rows[0] === undefined ? null : readEntity(this.#driver, kind, rows[0]);
    });
  }

  async list<K extends EntityKind>(kind: K): Promise<EntityRecordMap[K][]> {
    checkKind(kind, ENTITY_TABLES, 'kind');
    return this.#retrying(`list ${kind}`, async () => {
      const rows = await this.#driver.query(
        `SELECT * FROM ${this.#t(ENTITY_TABLES[kind].table)} ORDER BY name`,
      );
      return rows.map((r) => readEntity(this.#driver, kind, r));
    });
  }

  async remove(kind: EntityKind, name: string): Promise<boolean> {
    checkKind(kind, ENTITY_TABLES, 'kind');
    checkName(name, 'name');
    return this.#retrying(`remove ${kind}`, async () => {
      const n = await this.#driver.execute(
        `DELETE FROM ${this.#t(ENTITY_TABLES[kind].table)} WHERE name = ?`,
        [name],
      );
      return n > 0;
    });
  }

  async link<K extends LinkKind>(kind: K, input: LinkInputMap[K]): Promise<LinkRecordMap[K]> {
    checkKind(kind, LINK_TABLES, 'kind');
    return this.#retrying(`link ${kind}`, () =>
      this.#driver.transaction((tx) => this.#link(tx, kind, input, this.#clock(), '')),
    );
  }

  async getLink<K extends LinkKind>(kind: K, key: LinkKey<K>): Promise<LinkRecordMap[K] | null> {
    checkKind(kind, LINK_TABLES, 'kind');
    const names = this.#linkNames(kind, key);
    return this.#retrying(`getLink ${kind}`, async () => {
      const rows = await this.#driver.query(
        `${this.#linkSelect(kind)} WHERE l.name = ? AND rr.name = ?`,
        names,
      );
      return rows[0] === undefined ? null : readLink(this.#driver, kind, rows[0]);
    });
  }

  async listLinks<K extends LinkKind>(kind: K): Promise<LinkRecordMap[K][]> {
    checkKind(kind, LINK_TABLES, 'kind');
    return this.#retrying(`listLinks ${kind}`, async () => {
      const rows = await this.#driver.query(`${this.#linkSelect(kind)} ORDER BY l.name, rr.name`);
      return rows.map((r) => readLink(this.#driver, kind, r));
    });
  }

  async unlink<K extends LinkKind>(kind: K, key: LinkKey<K>): Promise<boolean> {
    checkKind(kind, LINK_TABLES, 'kind');
    const { table, left, right } = LINK_TABLES[kind];
    const names = this.#linkNames(kind, key);
    return this.#retrying(`unlink ${kind}`, async () => {
      const n = await this.#driver.execute(
        `DELETE FROM ${this.#t(table)}
WHERE ${left.column} = (SELECT id FROM ${this.#t(ENTITY_TABLES[left.entity].table)} WHERE name = ?)
  AND ${right.column} = (SELECT id FROM ${this.#t(ENTITY_TABLES[right.entity].table)} WHERE name = ?)`,
        names,
      );
      return n > 0;
    });
  }

  // ── engine queries ───────────────────────────────────────────────────────────────────────────

  async loadTaskContext(query: TaskContextQuery): Promise<TaskContext> {
    if (!isPlainObject(query))
      throw new InvalidInputError('query', `expected an object, got ${jsonTypeOf(query)}`);
    const accountName = checkName(query.account, 'account');
    const platformName = checkName(query.platform, 'platform');
    const listed =
      query.modules === undefined ? undefined : [...new Set(checkStringArray(query.modules, 'modules'))];
    return this.#retrying('loadTaskContext', () =>
      this.#driver.transaction((tx) => this.#loadTaskContext(tx, accountName, platformName, listed), {
        readOnly: true,
      }),
    );
  }

  async listCronContexts(): Promise<CronContextList> {
    return this.#retrying('listCronContexts', () =>
      this.#driver.transaction(
        async (tx) => {
          const rows =
            await tx.query(`SELECT ${entityColumns('module', 'm', 'm_')}, ${entityColumns('account', 'a', 'a_')},
  ${entityColumns('platform', 'p', 'p_')}, ${relationColumns('ap', 'ap_')}, ${relationColumns('ma', 'ma_')},
  ${relationColumns('mp', 'mp_')}
FROM ${this.#t('module')} m
JOIN ${this.#t('rel_module_account')} ma ON ma.module_id = m.id
JOIN ${this.#t('account')} a ON a.id = ma.account_id
JOIN ${this.#t('rel_account_platform')} ap ON ap.account_id = a.id
JOIN ${this.#t('platform')} p ON p.id = ap.platform_id
JOIN ${this.#t('rel_module_platform')} mp ON mp.module_id = m.id AND mp.platform_id = p.id
WHERE m.enabled AND ma.enabled AND a.enabled AND ap.enabled AND p.enabled AND mp.enabled
ORDER BY a.name, p.name, m.priority DESC, m.name`);
          const download = await this.#bindings(tx, 'module_download_middleware', undefined);
          const data = await this.#bindings(tx, 'module_data_middleware', undefined);
          const contexts = rows.map((row): CronContext => {
            const account = readEntity(this.#driver, 'account', row, 'a_');
            const platform = readEntity(this.#driver, 'platform', row, 'p_');
            const accountPlatform: AccountPlatformLink = {
              account: account.name,
              platform: platform.name,
              accountId: account.id,
              platformId: platform.id,
              ...readRelation(this.#driver, row, 'ap_'),
            };
            const ctx = this.#moduleContext(row, account, platform, accountPlatform, download, data);
            return {
              key: `${account.name}/${platform.name}/${ctx.module.name}`,
              account,
              platform,
              accountPlatform,
              ...ctx,
            };
          });
          return { token: await this.#token(tx), contexts };
        },
        { readOnly: true },
      ),
    );
  }

  async changeToken(): Promise<string> {
    return this.#retrying('changeToken', () => this.#token(this.#driver));
  }

  // ── task results ─────────────────────────────────────────────────────────────────────────────

  async startTaskResult(input: StartTaskResultInput): Promise<TaskResult> {
    if (!isPlainObject(input))
      throw new InvalidInputError('input', `expected an object, got ${jsonTypeOf(input)}`);
    const runId = checkName(input.runId, 'runId');
    const account = checkName(input.account, 'account');
    const platform = checkName(input.platform, 'platform');
    const module = input.module === undefined ? '' : checkName(input.module, 'module');
    const taskId = input.taskId === undefined ? `${account}-${platform}` : checkName(input.taskId, 'taskId');
    const nodeId = input.nodeId === undefined ? null : checkString(input.nodeId, 'nodeId');
    return this.#retrying('startTaskResult', async () => {
      const at = this.#clock();
      // Starting the same run × module again (a redelivered task) reopens the row instead of adding one.
      const rows = await this.#driver.query(
        `INSERT INTO ${this.#t('task_result')} AS t
  (task_id, run_id, account, platform, module, node_id, status, attempt, start_time, heartbeat_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, 'running', 1, ?, ?, ?)
ON CONFLICT (run_id, module) DO UPDATE SET
  status = 'running', attempt = t.attempt + 1, node_id = excluded.node_id, heartbeat_at = excluded.heartbeat_at,
  end_time = NULL, error = NULL, error_code = NULL, updated_at = excluded.updated_at
RETURNING *`,
        [taskId, runId, account, platform, module, nodeId, at, at, at],
      );
      return readTaskResult(this.#driver, rows[0]!);
    });
  }

  async heartbeatTaskResult(id: number, counts?: Partial<TaskCounts>): Promise<boolean> {
    checkCount(id, 'id');
    const c = this.#counts(counts);
    return this.#retrying('heartbeatTaskResult', async () => {
      const at = this.#clock();
      const n = await this.#driver.execute(
        `UPDATE ${this.#t('task_result')} SET heartbeat_at = ?, updated_at = ?,
  request_count = COALESCE(?, request_count), item_count = COALESCE(?, item_count), error_count = COALESCE(?, error_count)
WHERE id = ? AND status = 'running'`,
        [at, at, c.requests, c.items, c.errors, id],
      );
      return n > 0;
    });
  }

  async finishTaskResult(id: number, input: FinishTaskResultInput): Promise<TaskResult> {
    checkCount(id, 'id');
    if (!isPlainObject(input))
      throw new InvalidInputError('input', `expected an object, got ${jsonTypeOf(input)}`);
    if (!FINAL_STATUSES.has(input.status)) {
      throw new InvalidInputError(
        'status',
        `expected one of ${[...FINAL_STATUSES].join(', ')}, got '${String(input.status)}'`,
      );
    }
    const c = this.#counts(input.counts);
    const result = input.result === undefined ? null : JSON.stringify(toJsonValue(input.result, 'result'));
    let error: string | null = null;
    let errorCode: string | null = null;
    if (input.error instanceof Error) {
      error = input.error.message;
      const code = (input.error as { code?: unknown }).code;
      if (typeof code === 'string') errorCode = code;
    } else if (input.error !== undefined) {
      error = checkString(input.error, 'error');
    }
    if (input.errorCode !== undefined) errorCode = checkString(input.errorCode, 'errorCode');
    return this.#retrying('finishTaskResult', async () => {
      const at = this.#clock();
      const rows = await this.#driver.query(
        `UPDATE ${this.#t('task_result')} SET status = ?, end_time = ?, heartbeat_at = ?, updated_at = ?,
  request_count = COALESCE(?, request_count), item_count = COALESCE(?, item_count), error_count = COALESCE(?, error_count),
  result = ?, error = ?, error_code = ?
WHERE id = ?
RETURNING *`,
        [input.status, at, at, at, c.requests, c.items, c.errors, result, error, errorCode, id],
      );
      if (rows[0] === undefined) throw new NotFoundError('task_result', String(id));
      return readTaskResult(this.#driver, rows[0]);
    });
  }

  async getTaskResult(id: number): Promise<TaskResult | null> {
    checkCount(id, 'id');
    return this.#retrying('getTaskResult', async () => {
      const rows = await this.#driver.query(`SELECT * FROM ${this.#t('task_result')} WHERE id = ?`, [id]);
      return rows[0] === undefined ? null : readTaskResult(this.#driver, rows[0]);
    });
  }

  async listTaskResults(query: TaskResultQuery = {}): Promise<TaskResult[]> {
    const where: string[] = [];
    const params: SqlParam[] = [];
    if (query.runId !== undefined) {
      where.push('run_id = ?');
      params.push(checkString(query.runId, 'runId'));
    }
    if (query.taskId !== undefined) {
      where.push('task_id = ?');
      params.push(checkString(query.taskId, 'taskId'));
    }
    if (query.status !== undefined) {
      if (!ALL_STATUSES.has(query.status))
        throw new InvalidInputError('status', `unknown status '${String(query.status)}'`);
      where.push('status = ?');
      params.push(query.status);
    }
    params.push(checkLimit(query.limit, 'limit', 100));
    return this.#retrying('listTaskResults', async () => {
      const rows = await this.#driver.query(
        `SELECT * FROM ${this.#t('task_result')}${where.length ? ` WHERE ${where.join(' AND ')}` : ''}
ORDER BY start_time DESC, id DESC LIMIT ?`,
        params,
      );
      return rows.map((r) => readTaskResult(this.#driver, r));
    });
  }

  async sweepZombies(options: SweepZombiesOptions): Promise<TaskResult[]> {
    if (!isPlainObject(options))
      throw new InvalidInputError('options', `expected an object, got ${jsonTypeOf(options)}`);
    const staleAfterMs = checkCount(options.staleAfterMs, 'staleAfterMs');
    return this.#retrying('sweepZombies', async () => {
      const at = this.#clock();
      const cutoff = new Date(at.getTime() - staleAfterMs);
      // One statement: two sweepers on two nodes cannot both claim a row, and a heartbeat that
      // lands first keeps its run alive.
      const rows = await this.#driver.query(
        `UPDATE ${this.#t('task_result')} SET status = 'failed', end_time = ?, updated_at = ?, error = ?, error_code = ?
WHERE status = 'running' AND heartbeat_at < ?
RETURNING *`,
        [
          at,
          at,
          `no heartbeat for more than ${staleAfterMs} ms; marked failed by the zombie sweep`,
          'MOCRA_ERR_STORE_ZOMBIE_RUN',
          cutoff,
        ],
      );
      const swept = rows.map((r) => readTaskResult(this.#driver, r)).sort((a, b) => a.id - b.id);
      if (swept.length > 0 && channels.zombieSwept.hasSubscribers) {
        channels.zombieSwept.publish({
          backend: this.backend,
          runs: swept.map((r) => ({ id: r.id, runId: r.runId, module: r.module })),
        });
      }
      return swept;
    });
  }

  // ── logs ─────────────────────────────────────────────────────────────────────────────────────

  async writeLogs(entries: readonly LogEntryInput[]): Promise<number> {
    if (!Array.isArray(entries))
      throw new InvalidInputError('entries', `expected an array, got ${jsonTypeOf(entries)}`);
    const now = this.#clock();
    const rows = entries.map((e: unknown, i): SqlParam[] => {
      const at = `entries[${i}]`;
      if (!isPlainObject(e)) throw new InvalidInputError(at, `expected an object, got ${jsonTypeOf(e)}`);
      if (!LOG_LEVELS.has(e.level as LogLevel)) {
        throw new InvalidInputError(`${at}.level`, `expected one of ${[...LOG_LEVELS].join(', ')}`);
      }
      const opt = (k: string) => (e[k] === undefined ? null : checkString(e[k], `${at}.${k}`));
      let timestamp = now;
      if (e.timestamp !== undefined) {
        if (!(e.timestamp instanceof Date) || Number.isNaN(e.timestamp.getTime())) {
          throw new InvalidInputError(`${at}.timestamp`, 'expected a valid Date');
        }
        timestamp = e.timestamp;
      }
      return [
        checkString(e.taskId, `${at}.taskId`),
        opt('runId'),
        opt('module'),
        opt('requestId'),
        opt('status'),
        e.level as string,
        checkString(e.message, `${at}.message`),
        timestamp,
        opt('traceback'),
      ];
    });
    if (rows.length === 0) return 0;
    this.#guard();
    // Not retried: after a lost COMMIT acknowledgement a retry could write every line twice.
    await this.#driver.transaction(async (tx) => {
      for (let i = 0; i < rows.length; i += 500) {
        const slice = rows.slice(i, i + 500);
        await tx.execute(
          `INSERT INTO ${this.#t('log')} (task_id, run_id, module, request_id, status, level, message, "timestamp", traceback)
VALUES ${slice.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
          slice.flat(),
        );
      }
    });
    return rows.length;
  }

  async listLogs(query: LogQuery = {}): Promise<LogEntry[]> {
    const where: string[] = [];
    const params: SqlParam[] = [];
    if (query.taskId !== undefined) {
      where.push('task_id = ?');
      params.push(checkString(query.taskId, 'taskId'));
    }
    if (query.runId !== undefined) {
      where.push('run_id = ?');
      params.push(checkString(query.runId, 'runId'));
    }
    if (query.level !== undefined) {
      if (!LOG_LEVELS.has(query.level))
        throw new InvalidInputError('level', `unknown level '${String(query.level)}'`);
      where.push('level = ?');
      params.push(query.level);
    }
    params.push(checkLimit(query.limit, 'limit', 200));
    return this.#retrying('listLogs', async () => {
      const rows = await this.#driver.query(
        `SELECT * FROM ${this.#t('log')}${where.length ? ` WHERE ${where.join(' AND ')}` : ''}
ORDER BY "timestamp" DESC, id DESC LIMIT ?`,
        params,
      );
      return rows.map(readLog);
    });
  }

  async pruneLogs(before: Date): Promise<number> {
    if (!(before instanceof Date) || Number.isNaN(before.getTime())) {
      throw new InvalidInputError('before', 'expected a valid Date');
    }
    return this.#retrying('pruneLogs', () =>
      this.#driver.execute(`DELETE FROM ${this.#t('log')} WHERE "timestamp" < ?`, [before]),
    );
  }

  // ── seed ─────────────────────────────────────────────────────────────────────────────────────

  async seed(data: SeedData): Promise<SeedReport> {
    const steps = planSeed(data);
    return this.#retrying('seed', () =>
      this.#driver.transaction(async (tx) => {
        const report = emptySeedReport();
        const at = this.#clock();
        for (const step of steps) {
          if (step.link) await this.#link(tx, step.kind, step.input, at, `${step.key}.`);
          else await this.#upsertEntity(tx, step.kind, step.input, at, `${step.key}.`);
          report[step.section] += 1;
        }
        return report;
      }),
    );
  }

  async seedFromFile(path: string): Promise<SeedReport> {
    checkString(path, 'path');
    return this.seed((await readSeedFile(path)) as SeedData);
  }

  // ── items ────────────────────────────────────────────────────────────────────────────────────

  createItemStore(options: ItemStoreOptions): ItemStore {
    if (!isPlainObject(options))
      throw new InvalidInputError('options', `expected an object, got ${jsonTypeOf(options)}`);
    if (options.mode !== 'json' && options.mode !== 'table-per-type') {
      throw new InvalidInputError('mode', "expected 'json' or 'table-per-type'");
    }
    return createSqlItemStore(this.#driver, options, (op, fn) => this.#retrying(op, fn), this.#clock);
  }

  // ── internals ────────────────────────────────────────────────────────────────────────────────

  #t(table: string): string {
    return this.#driver.table(table);
  }

  #guard(): void {
    if (this.#closed) throw new StoreClosedError();
  }

  async #retrying<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    this.#guard();
    const { maxRetries, baseDelayMs, maxDelayMs } = this.#retry;
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (this.#closed || !isStoreError(err) || !err.retryable || attempt >= maxRetries) throw err;
        const delayMs = Math.round(
          Math.min(maxDelayMs, baseDelayMs * 2 ** attempt) * (0.5 + Math.random() / 2),
        );
        if (channels.retry.hasSubscribers) {
          channels.retry.publish({
            backend: this.backend,
            operation,
            attempt: attempt + 1,
            delayMs,
            error: err,
          });
        }
        await sleep(delayMs);
      }
    }
  }

  #counts(counts: Partial<TaskCounts> | undefined): {
    requests: number | null;
    items: number | null;
    errors: number | null;
  } {
    if (counts === undefined) return { requests: null, items: null, errors: null };
    if (!isPlainObject(counts))
      throw new InvalidInputError('counts', `expected an object, got ${jsonTypeOf(counts)}`);
    const pick = (k: 'requests' | 'items' | 'errors') =>
      counts[k] === undefined ? null : checkCount(counts[k], `counts.${k}`);
    return { requests: pick('requests'), items: pick('items'), errors: pick('errors') };
  }

  async #token(session: SqlSession): Promise<string> {
    const rows = await session.query<{ revision: unknown }>(
      `SELECT revision FROM ${this.#t('mocra_revision')} WHERE id = 1`,
    );
    return `r${String(rows[0]?.revision ?? 0)}`;
  }

  async #upsertEntity<K extends EntityKind>(
    tx: SqlSession,
    kind: K,
    input: EntityInputMap[K],
    at: Date,
    key: string,
  ): Promise<EntityRecordMap[K]> {
    if (!isPlainObject(input))
      throw new InvalidInputError(key || 'input', `expected an object, got ${jsonTypeOf(input)}`);
    const meta = ENTITY_TABLES[kind];
    const name = checkName(input.name, `${key}name`);
    const values: SqlParam[] = [name];
    for (const col of meta.columns) {
      const raw = (input as Record<string, unknown>)[col.prop];
      const k = `${key}${col.prop}`;
      if (raw === undefined) {
        values.push(col.kind === 'json' ? JSON.stringify(col.fallback) : (col.fallback as SqlParam));
        continue;
      }
      switch (col.kind) {
        case 'boolean':
          values.push(checkBoolean(raw, k));
          break;
        case 'integer':
          values.push(checkInt32(raw, k));
          break;
        case 'text':
          values.push(col.nullable ? checkNullableString(raw, k) : checkString(raw, k));
          break;
        case 'json':
          values.push(
            JSON.stringify(col.prop === 'modules' ? checkStringArray(raw, k) : checkObject(raw, k)),
          );
          break;
      }
    }
    const cols = ['name', ...meta.columns.map((c) => c.column), 'created_at', 'updated_at'];
    const set = [
      ...meta.columns.map((c) => `${c.column} = excluded.${c.column}`),
      'updated_at = excluded.updated_at',
    ];
    // Skipping no-op updates keeps updated_at and the change token still when a seed is re-applied.
    const changed = meta.columns
      .map((c) => `t.${c.column} IS DISTINCT FROM excluded.${c.column}`)
      .join(' OR ');
    await tx.execute(
      `INSERT INTO ${this.#t(meta.table)} AS t (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})
ON CONFLICT (name) DO UPDATE SET ${set.join(', ')} WHERE ${changed}`,
      [...values, at, at],
    );
    const rows = await tx.query(`SELECT * FROM ${this.#t(meta.table)} WHERE name = ?`, [name]);
    return readEntity(this.#driver, kind, rows[0]!);
  }

  async #idOf(tx: SqlSession, entity: EntityKind, name: string, key: string): Promise<number> {
    const rows = await tx.query<{ id: unknown }>(
      `SELECT id FROM ${this.#t(ENTITY_TABLES[entity].table)} WHERE name = ?`,
      [name],
    );
    if (rows[0] === undefined) throw new NotFoundError(entity, name, key);
    return toNum(rows[0].id);
  }

  #linkNames<K extends LinkKind>(kind: K, key: LinkKey<K>): [string, string] {
    if (!isPlainObject(key)) throw new InvalidInputError('key', `expected an object, got ${jsonTypeOf(key)}`);
    const { left, right } = LINK_TABLES[kind];
    const names = key as Record<string, unknown>;
    return [checkName(names[left.prop], left.prop), checkName(names[right.prop], right.prop)];
  }

  #linkSelect(kind: LinkKind): string {
    const { table, left, right } = LINK_TABLES[kind];
    return `SELECT r.*, l.name AS left_name, rr.name AS right_name
FROM ${this.#t(table)} r
JOIN ${this.#t(ENTITY_TABLES[left.entity].table)} l ON l.id = r.${left.column}
JOIN ${this.#t(ENTITY_TABLES[right.entity].table)} rr ON rr.id = r.${right.column}`;
  }

  async #link<K extends LinkKind>(
    tx: SqlSession,
    kind: K,
    input: LinkInputMap[K],
    at: Date,
    key: string,
  ): Promise<LinkRecordMap[K]> {
    if (!isPlainObject(input))
      throw new InvalidInputError(key || 'input', `expected an object, got ${jsonTypeOf(input)}`);
    const { table, left, right } = LINK_TABLES[kind];
    const fields = input as Record<string, unknown>;
    const leftName = checkName(fields[left.prop], `${key}${left.prop}`);
    const rightName = checkName(fields[right.prop], `${key}${right.prop}`);
    const enabled = fields.enabled === undefined ? true : checkBoolean(fields.enabled, `${key}enabled`);
    const priority = fields.priority === undefined ? 0 : checkInt32(fields.priority, `${key}priority`);
    const config = fields.config === undefined ? {} : checkObject(fields.config, `${key}config`);
    const leftId = await this.#idOf(tx, left.entity, leftName, `${key}${left.prop}`);
    const rightId = await this.#idOf(tx, right.entity, rightName, `${key}${right.prop}`);
    await tx.execute(
      `INSERT INTO ${this.#t(table)} AS t (${left.column}, ${right.column}, enabled, priority, config, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (${left.column}, ${right.column}) DO UPDATE SET
  enabled = excluded.enabled, priority = excluded.priority, config = excluded.config, updated_at = excluded.updated_at
WHERE t.enabled IS DISTINCT FROM excluded.enabled OR t.priority IS DISTINCT FROM excluded.priority
   OR t.config IS DISTINCT FROM excluded.config`,
      [leftId, rightId, enabled, priority, JSON.stringify(config), at, at],
    );
    const rows = await tx.query(
      `${this.#linkSelect(kind)} WHERE r.${left.column} = ? AND r.${right.column} = ?`,
      [leftId, rightId],
    );
    return readLink(this.#driver, kind, rows[0]!);
  }

  /** Enabled middleware (and enabled relation) per module id. */
  async #bindings(
    tx: SqlSession,
    kind: 'module_download_middleware' | 'module_data_middleware',
    moduleIds: readonly number[] | undefined,
  ): Promise<Map<number, MiddlewareBinding[]>> {
    const { table, right } = LINK_TABLES[kind];
    const out = new Map<number, MiddlewareBinding[]>();
    if (moduleIds !== undefined && moduleIds.length === 0) return out;
    const filter =
      moduleIds === undefined ? '' : ` AND r.module_id IN (${moduleIds.map(() => '?').join(', ')})`;
    const rows = await tx.query(
      `SELECT r.module_id AS module_id, r.priority AS rel_priority, r.config AS rel_config,
  w.id AS id, w.name AS name, w.weight AS weight, w.config AS config
FROM ${this.#t(table)} r
JOIN ${this.#t(ENTITY_TABLES[right.entity].table)} w ON w.id = r.${right.column}
WHERE r.enabled AND w.enabled${filter}`,
      moduleIds ?? [],
    );
    for (const row of rows) {
      const moduleId = toNum(row.module_id);
      let list = out.get(moduleId);
      if (list === undefined) {
        list = [];
        out.set(moduleId, list);
      }
      list.push({
        id: toNum(row.id),
        name: String(row.name),
        weight: toNum(row.weight),
        priority: toNum(row.rel_priority),
        config: this.#driver.readJson(row.config) as MiddlewareBinding['config'],
        relationConfig: this.#driver.readJson(row.rel_config) as MiddlewareBinding['relationConfig'],
      });
    }
    for (const list of out.values()) list.sort(compareBindings);
    return out;
  }

  /** A module row joined with its `ma_`/`mp_` relation columns, turned into a ready context. */
  #moduleContext(
    row: Row,
    account: Account,
    platform: Platform,
    accountPlatform: AccountPlatformLink,
    download: Map<number, MiddlewareBinding[]>,
    data: Map<number, MiddlewareBinding[]>,
  ): ModuleContext {
    const module: ModuleRecord = readEntity(this.#driver, 'module', row, 'm_');
    const moduleAccount = {
      module: module.name,
      account: account.name,
      moduleId: module.id,
      accountId: account.id,
      ...readRelation(this.#driver, row, 'ma_'),
    };
    const modulePlatform = {
      module: module.name,
      platform: platform.name,
      moduleId: module.id,
      platformId: platform.id,
      ...readRelation(this.#driver, row, 'mp_'),
    };
    const downloadMiddleware = download.get(module.id) ?? [];
    const dataMiddleware = data.get(module.id) ?? [];
    const config = buildModuleConfig({
      module: module.config,
      modulePlatform: modulePlatform.config,
      moduleAccount: moduleAccount.config,
      moduleDataMiddleware: dataMiddleware.map((b) => ({ name: b.name, config: b.relationConfig })),
      moduleDownloadMiddleware: downloadMiddleware.map((b) => ({ name: b.name, config: b.relationConfig })),
      accountPlatform: accountPlatform.config,
      platform: platform.config,
      account: account.config,
      downloadMiddleware: downloadMiddleware.map((b) => ({ name: b.name, config: b.config })),
      dataMiddleware: dataMiddleware.map((b) => ({ name: b.name, config: b.config })),
    });
    return { module, moduleAccount, modulePlatform, downloadMiddleware, dataMiddleware, config };
  }

  async #loadTaskContext(
    tx: SqlSession,
    accountName: string,
    platformName: string,
    listed: string[] | undefined,
  ): Promise<TaskContext> {
    const accountRows = await tx.query(`SELECT * FROM ${this.#t('account')} WHERE name = ?`, [accountName]);
    if (accountRows[0] === undefined)
      throw new ContextUnavailableError(accountName, platformName, 'account_not_found');
    const account = readEntity(this.#driver, 'account', accountRows[0]);
    if (!account.enabled) throw new ContextUnavailableError(accountName, platformName, 'account_disabled');

    const platformRows = await tx.query(`SELECT * FROM ${this.#t('platform')} WHERE name = ?`, [
      platformName,
    ]);
    if (platformRows[0] === undefined)
      throw new ContextUnavailableError(accountName, platformName, 'platform_not_found');
    const platform = readEntity(this.#driver, 'platform', platformRows[0]);
    if (!platform.enabled) throw new ContextUnavailableError(accountName, platformName, 'platform_disabled');

    const apRows = await tx.query(
      `SELECT * FROM ${this.#t('rel_account_platform')} WHERE account_id = ? AND platform_id = ?`,
      [account.id, platform.id],
    );
    if (apRows[0] === undefined) {
      throw new ContextUnavailableError(accountName, platformName, 'account_platform_not_linked');
    }
    const accountPlatform: AccountPlatformLink = {
      account: account.name,
      platform: platform.name,
      accountId: account.id,
      platformId: platform.id,
      ...readRelation(this.#driver, apRows[0]),
    };
    if (!accountPlatform.enabled) {
      throw new ContextUnavailableError(accountName, platformName, 'account_platform_disabled');
    }

    const filter =
      listed === undefined
        ? 'ma.module_id IS NOT NULL AND mp.module_id IS NOT NULL'
        : listed.length === 0
          ? '1 = 0'
          : `m.name IN (${listed.map(() => '?').join(', ')})`;
    const rows = await tx.query(
      `SELECT ${entityColumns('module', 'm', 'm_')},
  ma.module_id AS ma_present, ${relationColumns('ma', 'ma_')}, mp.module_id AS mp_present, ${relationColumns('mp', 'mp_')}
FROM ${this.#t('module')} m
LEFT JOIN ${this.#t('rel_module_account')} ma ON ma.module_id = m.id AND ma.account_id = ?
LEFT JOIN ${this.#t('rel_module_platform')} mp ON mp.module_id = m.id AND mp.platform_id = ?
WHERE ${filter}
ORDER BY m.priority DESC, m.name`,
      [account.id, platform.id, ...(listed ?? [])],
    );
    const skipped: TaskContext['skipped'] = [];
    const runnable: Row[] = [];
    for (const row of rows) {
      const reason: ModuleSkipReason | undefined = !toBool(row.m_enabled)
        ? 'disabled'
        : row.ma_present == null
          ? 'not_linked_to_account'
          : !toBool(row.ma_enabled)
            ? 'account_link_disabled'
            : row.mp_present == null
              ? 'not_linked_to_platform'
              : !toBool(row.mp_enabled)
                ? 'platform_link_disabled'
                : undefined;
      if (reason === undefined) runnable.push(row);
      else if (listed !== undefined) skipped.push({ module: String(row.m_name), reason });
    }
    if (listed !== undefined) {
      const found = new Set(rows.map((r) => String(r.m_name)));
      for (const name of listed) if (!found.has(name)) skipped.push({ module: name, reason: 'not_found' });
    }
    const ids = runnable.map((r) => toNum(r.m_id));
    const download = await this.#bindings(tx, 'module_download_middleware', ids);
    const data = await this.#bindings(tx, 'module_data_middleware', ids);
    return {
      account,
      platform,
      accountPlatform,
      modules: runnable.map((row) =>
        this.#moduleContext(row, account, platform, accountPlatform, download, data),
      ),
      skipped,
      token: await this.#token(tx),
    };
  }
}
