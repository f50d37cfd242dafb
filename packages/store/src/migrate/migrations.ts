import { LINK_TABLES } from '../model/entities.js';

/**
 * A versioned schema change, with one SQL script per backend. The Postgres script names tables as
 * `{{schema}}.table`; the migrator substitutes the quoted schema. Once released a migration never
 * changes: its checksum is recorded when applied, and a changed script stops `migrate()`.
 */
export interface Migration {
  version: number;
  name: string;
  postgres: string;
  sqlite: string;
}

const CATALOG_TABLES = [
  'account',
  'platform',
  'module',
  'download_middleware',
  'data_middleware',
  ...Object.values(LINK_TABLES).map((l) => l.table),
];

const SQLITE_NOW = "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))";

function pgTimestamps(): string {
  return `created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()`;
}
function sqliteTimestamps(): string {
  return `created_at TEXT NOT NULL DEFAULT ${SQLITE_NOW},
  updated_at TEXT NOT NULL DEFAULT ${SQLITE_NOW}`;
}
const PG_CONFIG = `config jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object')`;
const SQLITE_CONFIG = `config TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(config) AND json_type(config) = 'object')`;
const SQLITE_ENABLED = 'enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1))';

function pgRelations(): string {
  return Object.values(LINK_TABLES)
    .map(
      ({ table, left, right }) => `CREATE TABLE {{schema}}.${table} (
  ${left.column} integer NOT NULL REFERENCES {{schema}}.${left.entity} (id) ON DELETE CASCADE,
  ${right.column} integer NOT NULL REFERENCES {{schema}}.${right.entity} (id) ON DELETE CASCADE,
  enabled boolean NOT NULL DEFAULT true,
  priority integer NOT NULL DEFAULT 0,
  ${PG_CONFIG},
  ${pgTimestamps()},
  PRIMARY KEY (${left.column}, ${right.column})
);
CREATE INDEX ${table}_${right.column}_idx ON {{schema}}.${table} (${right.column});`,
    )
    .join('\n');
}

function sqliteRelations(): string {
  return Object.values(LINK_TABLES)
    .map(
      ({ table, left, right }) => `CREATE TABLE ${table} (
  ${left.column} INTEGER NOT NULL REFERENCES ${left.entity} (id) ON DELETE CASCADE,
  ${right.column} INTEGER NOT NULL REFERENCES ${right.entity} (id) ON DELETE CASCADE,
  ${SQLITE_ENABLED},
  priority INTEGER NOT NULL DEFAULT 0,
  ${SQLITE_CONFIG},
  ${sqliteTimestamps()},
  PRIMARY KEY (${left.column}, ${right.column})
);
CREATE INDEX ${table}_${right.column}_idx ON ${table} (${right.column});`,
    )
    .join('\n');
}

// updated_at follows every change, also ones made by hand in SQL; the revision counter is the
// cheap change token callers poll (see changeToken()). A no-op upsert changes neither.
function pgTriggers(): string {
  const functions = `CREATE FUNCTION {{schema}}.mocra_touch() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END
$fn$;
CREATE FUNCTION {{schema}}.mocra_bump_revision() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE {{schema}}.mocra_revision SET revision = revision + 1 WHERE id = 1;
  RETURN NULL;
END
$fn$;`;
  const perTable = CATALOG_TABLES.map(
    (t) => `CREATE TRIGGER ${t}_touch BEFORE UPDATE ON {{schema}}.${t}
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.mocra_touch();
CREATE TRIGGER ${t}_revision AFTER INSERT OR UPDATE OR DELETE ON {{schema}}.${t}
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.mocra_bump_revision();
CREATE TRIGGER ${t}_revision_truncate AFTER TRUNCATE ON {{schema}}.${t}
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.mocra_bump_revision();`,
  );
  return [functions, ...perTable].join('\n');
}

function sqliteTriggers(): string {
  return CATALOG_TABLES.map(
    (t) => `CREATE TRIGGER ${t}_touch AFTER UPDATE ON ${t} FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN UPDATE ${t} SET updated_at = ${SQLITE_NOW} WHERE rowid = NEW.rowid; END;
CREATE TRIGGER ${t}_revision_insert AFTER INSERT ON ${t}
BEGIN UPDATE mocra_revision SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER ${t}_revision_update AFTER UPDATE ON ${t}
BEGIN UPDATE mocra_revision SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER ${t}_revision_delete AFTER DELETE ON ${t}
BEGIN UPDATE mocra_revision SET revision = revision + 1 WHERE id = 1; END;`,
  ).join('\n');
}

const V1_POSTGRES = `
CREATE TABLE {{schema}}.mocra_revision (
  id integer PRIMARY KEY CHECK (id = 1),
  revision bigint NOT NULL
);
INSERT INTO {{schema}}.mocra_revision (id, revision) VALUES (1, 0);

CREATE TABLE {{schema}}.account (
  id serial PRIMARY KEY,
  name text NOT NULL UNIQUE CHECK (name <> ''),
  modules jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(modules) = 'array'),
  enabled boolean NOT NULL DEFAULT true,
  ${PG_CONFIG},
  priority integer NOT NULL DEFAULT 0,
  ${pgTimestamps()}
);
CREATE TABLE {{schema}}.platform (
  id serial PRIMARY KEY,
  name text NOT NULL UNIQUE CHECK (name <> ''),
  description text,
  base_url text,
  enabled boolean NOT NULL DEFAULT true,
  ${PG_CONFIG},
  ${pgTimestamps()}
);
CREATE TABLE {{schema}}.module (
  id serial PRIMARY KEY,
  name text NOT NULL UNIQUE CHECK (name <> ''),
  enabled boolean NOT NULL DEFAULT true,
  ${PG_CONFIG},
  priority integer NOT NULL DEFAULT 0,
  version integer NOT NULL DEFAULT 1,
  ${pgTimestamps()}
);
CREATE TABLE {{schema}}.download_middleware (
  id serial PRIMARY KEY,
  name text NOT NULL UNIQUE CHECK (name <> ''),
  weight integer NOT NULL DEFAULT 0,
  enabled boolean NOT NULL DEFAULT true,
  ${PG_CONFIG},
  ${pgTimestamps()}
);
CREATE TABLE {{schema}}.data_middleware (
  id serial PRIMARY KEY,
  name text NOT NULL UNIQUE CHECK (name <> ''),
  weight integer NOT NULL DEFAULT 0,
  enabled boolean NOT NULL DEFAULT true,
  ${PG_CONFIG},
  ${pgTimestamps()}
);
${pgRelations()}

CREATE TABLE {{schema}}.log (
  id bigserial PRIMARY KEY,
  task_id text NOT NULL,
  run_id text,
  module text,
  request_id text,
  status text,
  level text NOT NULL CHECK (level IN ('trace', 'debug', 'info', 'warn', 'error', 'fatal')),
  message text NOT NULL,
  "timestamp" timestamptz NOT NULL DEFAULT now(),
  traceback text
);
CREATE INDEX log_task_idx ON {{schema}}.log (task_id, "timestamp");
CREATE INDEX log_run_idx ON {{schema}}.log (run_id, "timestamp");

CREATE TABLE {{schema}}.task_result (
  id bigserial PRIMARY KEY,
  task_id text NOT NULL,
  run_id text NOT NULL,
  account text NOT NULL,
  platform text NOT NULL,
  module text NOT NULL DEFAULT '',
  node_id text,
  status text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')),
  attempt integer NOT NULL DEFAULT 1,
  start_time timestamptz NOT NULL,
  end_time timestamptz,
  heartbeat_at timestamptz NOT NULL,
  request_count bigint NOT NULL DEFAULT 0,
  item_count bigint NOT NULL DEFAULT 0,
  error_count bigint NOT NULL DEFAULT 0,
  result jsonb,
  error text,
  error_code text,
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (run_id, module)
);
CREATE INDEX task_result_running_idx ON {{schema}}.task_result (status, heartbeat_at);
CREATE INDEX task_result_task_idx ON {{schema}}.task_result (task_id, start_time);

${pgTriggers()}
`;

const V1_SQLITE = `
CREATE TABLE mocra_revision (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  revision INTEGER NOT NULL
);
INSERT INTO mocra_revision (id, revision) VALUES (1, 0);

CREATE TABLE account (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE CHECK (name <> ''),
  modules TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(modules) AND json_type(modules) = 'array'),
  ${SQLITE_ENABLED},
  ${SQLITE_CONFIG},
  priority INTEGER NOT NULL DEFAULT 0,
  ${sqliteTimestamps()}
);
CREATE TABLE platform (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE CHECK (name <> ''),
  description TEXT,
  base_url TEXT,
  ${SQLITE_ENABLED},
  ${SQLITE_CONFIG},
  ${sqliteTimestamps()}
);
CREATE TABLE module (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE CHECK (name <> ''),
  ${SQLITE_ENABLED},
  ${SQLITE_CONFIG},
  priority INTEGER NOT NULL DEFAULT 0,
  version INTEGER NOT NULL DEFAULT 1,
  ${sqliteTimestamps()}
);
CREATE TABLE download_middleware (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE CHECK (name <> ''),
  weight INTEGER NOT NULL DEFAULT 0,
  ${SQLITE_ENABLED},
  ${SQLITE_CONFIG},
  ${sqliteTimestamps()}
);
CREATE TABLE data_middleware (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE CHECK (name <> ''),
  weight INTEGER NOT NULL DEFAULT 0,
  ${SQLITE_ENABLED},
  ${SQLITE_CONFIG},
  ${sqliteTimestamps()}
);
${sqliteRelations()}

CREATE TABLE log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT NOT NULL,
  run_id TEXT,
  module TEXT,
  request_id TEXT,
  status TEXT,
  level TEXT NOT NULL CHECK (level IN ('trace', 'debug', 'info', 'warn', 'error', 'fatal')),
  message TEXT NOT NULL,
  "timestamp" TEXT NOT NULL DEFAULT ${SQLITE_NOW},
  traceback TEXT
);
CREATE INDEX log_task_idx ON log (task_id, "timestamp");
CREATE INDEX log_run_idx ON log (run_id, "timestamp");

CREATE TABLE task_result (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  account TEXT NOT NULL,
  platform TEXT NOT NULL,
  module TEXT NOT NULL DEFAULT '',
  node_id TEXT,
  status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')),
  attempt INTEGER NOT NULL DEFAULT 1,
  start_time TEXT NOT NULL,
  end_time TEXT,
  heartbeat_at TEXT NOT NULL,
  request_count INTEGER NOT NULL DEFAULT 0,
  item_count INTEGER NOT NULL DEFAULT 0,
  error_count INTEGER NOT NULL DEFAULT 0,
  result TEXT CHECK (result IS NULL OR json_valid(result)),
  error TEXT,
  error_code TEXT,
  updated_at TEXT NOT NULL DEFAULT ${SQLITE_NOW},
  UNIQUE (run_id, module)
);
CREATE INDEX task_result_running_idx ON task_result (status, heartbeat_at);
CREATE INDEX task_result_task_idx ON task_result (task_id, start_time);

${sqliteTriggers()}
`;

/** The migrations this version ships, in order. Append only. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: 'catalog, log and task_result', postgres: V1_POSTGRES, sqlite: V1_SQLITE },
];
