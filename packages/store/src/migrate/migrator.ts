import { createHash } from 'node:crypto';
import { quoteIdent, type SqlDriver, type SqlSession } from '../driver/types.js';
import { isStoreError, MigrationChecksumError, MigrationFailedError } from '../errors.js';
import { channels } from '../observability/channels.js';
import type { Migration } from './migrations.js';

export type MigrationState = 'applied' | 'pending' | 'changed' | 'unknown';

/** One migration as seen by `migrationStatus`. */
export interface MigrationStatusEntry {
  version: number;
  name: string;
  /**
   * `applied` — recorded with the checksum this version ships; `pending` — not applied yet;
   * `changed` — applied with another checksum (migrate refuses to run); `unknown` — applied by a
   * newer version of mocra that this one does not know.
   */
  state: MigrationState;
  /** sha256 of the script this version ships for the backend (`null` for `unknown`). */
  checksum: string | null;
  /** The checksum recorded when it was applied (`null` if pending). */
  appliedChecksum: string | null;
  appliedAt: Date | null;
}

export interface MigrationStatus {
  backend: SqlDriver['backend'];
  /** Postgres schema, or `null` for SQLite. */
  schema: string | null;
  migrations: MigrationStatusEntry[];
  applied: number;
  pending: number;
  /** False when an applied migration's checksum changed. */
  ok: boolean;
}

export interface MigrateResult {
  /** Migrations applied by this call, in order (empty when the database was up to date). */
  applied: { version: number; name: string }[];
  status: MigrationStatus;
}

const TABLE = 'mocra_migrations';

export function migrationChecksum(migration: Migration, backend: SqlDriver['backend']): string {
  return createHash('sha256')
    .update(backend === 'postgres' ? migration.postgres : migration.sqlite)
    .digest('hex');
}

function render(migration: Migration, driver: SqlDriver): string {
  if (driver.backend === 'sqlite') return migration.sqlite;
  return migration.postgres.replaceAll('{{schema}}', quoteIdent(driver.schema ?? 'public'));
}

interface AppliedRow extends Record<string, unknown> {
  version: number;
  name: string;
  checksum: string;
  applied_at: unknown;
}

async function migrationsTableExists(session: SqlSession, driver: SqlDriver): Promise<boolean> {
  if (driver.backend === 'postgres') {
    const rows = await session.query<{ t: string | null }>('SELECT to_regclass(?) AS t', [
      `${quoteIdent(driver.schema ?? 'public')}.${TABLE}`,
    ]);
    return rows[0]?.t != null;
  }
  const rows = await session.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", [
    TABLE,
  ]);
  return rows.length > 0;
}

async function readApplied(session: SqlSession, driver: SqlDriver): Promise<Map<number, AppliedRow>> {
  const rows = await session.query<AppliedRow>(
    `SELECT version, name, checksum, applied_at FROM ${driver.table(TABLE)} ORDER BY version`,
  );
  return new Map(rows.map((r) => [Number(r.version), { ...r, version: Number(r.version) }]));
}

function toDate(value: unknown): Date | null {
  if (value == null) return null;
  return value instanceof Date ? value : new Date(String(value));
}

function buildStatus(
  driver: SqlDriver,
  migrations: readonly Migration[],
  applied: Map<number, AppliedRow>,
): MigrationStatus {
  const entries: MigrationStatusEntry[] = migrations.map((m) => {
    const checksum = migrationChecksum(m, driver.backend);
    const row = applied.get(m.version);
    if (row === undefined) {
      return {
        version: m.version,
        name: m.name,
        state: 'pending',
        checksum,
        appliedChecksum: null,
        appliedAt: null,
      };
    }
    return {
      version: m.version,
      name: m.name,
      state: row.checksum === checksum ? 'applied' : 'changed',
      checksum,
      appliedChecksum: row.checksum,
      appliedAt: toDate(row.applied_at),
    };
  });
  const known = new Set(migrations.map((m) => m.version));
  for (const row of applied.values()) {
    if (known.has(row.version)) continue;
    entries.push({
      version: row.version,
      name: row.name,
      state: 'unknown',
      checksum: null,
      appliedChecksum: row.checksum,
      appliedAt: toDate(row.applied_at),
    });
  }
  entries.sort((a, b) => a.version - b.version);
  return {
    backend: driver.backend,
    schema: driver.schema,
    migrations: entries,
    applied: entries.filter((e) => e.state !== 'pending').length,
    pending: entries.filter((e) => e.state === 'pending').length,
    ok: entries.every((e) => e.state !== 'changed'),
  };
}

/** Applied and pending migrations with checksums. Reads only; creates nothing. */
export async function migrationStatus(
  driver: SqlDriver,
  migrations: readonly Migration[],
): Promise<MigrationStatus> {
  return driver.transaction(
    async (tx) => {
      const exists = await migrationsTableExists(tx, driver);
      return buildStatus(driver, migrations, exists ? await readApplied(tx, driver) : new Map());
    },
    { readOnly: true },
  );
}

/**
 * Applies pending migrations in order, all in one transaction: either every pending migration is
 * applied or none is. On Postgres an advisory lock serialises concurrent migrators (several nodes
 * starting at once); SQLite's write lock does the same. Refuses to run, before changing anything,
 * when an applied migration's checksum differs from the one shipped.
 */
export async function migrate(
  driver: SqlDriver,
  migrations: readonly Migration[],
  now: () => Date,
): Promise<MigrateResult> {
  const applied: { version: number; name: string }[] = [];
  const status = await driver.transaction(async (tx) => {
    if (driver.backend === 'postgres') {
      const schema = driver.schema ?? 'public';
      await tx.query('SELECT pg_advisory_xact_lock(hashtext(?))', [`mocra:migrate:${schema}`]);
      await tx.script(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
      await tx.script(`CREATE TABLE IF NOT EXISTS ${driver.table(TABLE)} (
  version integer PRIMARY KEY,
  name text NOT NULL,
  checksum text NOT NULL,
  applied_at timestamptz NOT NULL
)`);
    } else {
      await tx.script(`CREATE TABLE IF NOT EXISTS ${driver.table(TABLE)} (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  checksum TEXT NOT NULL,
  applied_at TEXT NOT NULL
)`);
    }
    const rows = await readApplied(tx, driver);
    const before = buildStatus(driver, migrations, rows);
    const changed = before.migrations.find((m) => m.state === 'changed');
    if (changed) {
      throw new MigrationChecksumError(
        changed.version,
        changed.name,
        changed.checksum ?? '',
        changed.appliedChecksum ?? '',
      );
    }
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (rows.has(m.version)) continue;
      try {
        await tx.script(render(m, driver));
      } catch (err) {
        // Connection loss stays a connection error (retryable); anything else names the migration.
        if (isStoreError(err) && err.retryable) throw err;
        throw new MigrationFailedError(m.version, m.name, { cause: err });
      }
      const at = now();
      await tx.execute(
        `INSERT INTO ${driver.table(TABLE)} (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)`,
        [m.version, m.name, migrationChecksum(m, driver.backend), at],
      );
      rows.set(m.version, {
        version: m.version,
        name: m.name,
        checksum: migrationChecksum(m, driver.backend),
        applied_at: at,
      });
      applied.push({ version: m.version, name: m.name });
    }
    return buildStatus(driver, migrations, rows);
  });
  for (const m of applied) {
    if (channels.migrationApplied.hasSubscribers) {
      channels.migrationApplied.publish({ backend: driver.backend, version: m.version, name: m.name });
    }
  }
  return { applied, status };
}
