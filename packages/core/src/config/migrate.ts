/**
 * From a `config.toml` of mocra for Rust (the project this one is modelled on) to a `mocra.toml`:
 * every key of that file is either carried over (renamed, converted to ms, moved to the table
 * that does its job here) or reported as dropped with why and what does its job in mocra.
 *
 *   config.toml ──parse──▶ walk every key ──▶ values + carried[] + dropped[]
 *                                               │
 *                          configSchema ◀───────┘  a value mocra refuses is dropped with
 *                                                  the loader's own message, so the file
 *                                                  written always loads
 *
 * Rust mocra ignored keys it did not know; mocra refuses them, so a key that was never read
 * there is reported too, not written.
 */
import { lazyRequire } from '../optional-dependency.js';
import { parseToml, resolveConfig, toConfigIssues } from './load.js';
import { configSchema, LOG_LEVELS, REFUSED_UPSTREAM_MODULE_KEYS } from './schema.js';

/** Loaded when a migration writes its TOML (see load.ts for the parser). */
const toml = lazyRequire<typeof import('smol-toml')>('smol-toml');

/** A key of the Rust config that was written, and where. */
export interface CarriedKey {
  /** Dotted key in the Rust file: `download_config.timeout`, `proxy.tunnel[0]`. */
  key: string;
  /** The mocra keys it became (empty when mocra's default already does the same). */
  to: string[];
  /** How the meaning or unit changed, when it did. */
  note?: string;
}

/** A key of the Rust config that was not written, and why. */
export interface DroppedKey {
  key: string;
  /** Why, and what does the job in mocra. */
  reason: string;
}

export interface RustConfigMigration {
  /** The mocra config (the keys of `mocra.toml`). */
  values: Record<string, unknown>;
  /** `values` as TOML, with a header and the dropped keys as comments. */
  toml: string;
  carried: CarriedKey[];
  dropped: DroppedKey[];
}

export interface MigrateRustConfigOptions {
  /** The input's name in errors and in the header of the written file. @default 'config.toml' */
  file?: string;
}

const NOT_READ_THERE = "not a key of Rust mocra's config.toml (it ignored unknown keys; mocra refuses them)";

const CACHE_REASON =
  'read by nothing in Rust mocra, or served a shared cache layer mocra does not have (responses are cached only for development: `--cache`, `.httpCache()`)';
const SYNC_REASON = 'read by nothing in Rust mocra: its engine never used the sync service';
const EVENT_BUS_REASON =
  'no event bus to size: internals are observable through node:diagnostics_channel channels `mocra:<component>:<event>` and the metrics';
const PUBLISH_REASON = 'publishing is not a separate worker pool in mocra; nothing to size';

/** Rust `ErrorKind` → the stage of mocra's failure policy where such failures happen. */
const STAGE_OF_KIND: Readonly<Record<string, string>> = {
  request: 'middleware',
  response: 'middleware',
  datamiddleware: 'middleware',
  download: 'download',
  proxy: 'download',
  ratelimit: 'download',
  parser: 'parse',
  processorchain: 'parse',
  datastore: 'store',
  orm: 'store',
  task: 'generate',
  module: 'generate',
  queue: 'queue',
};

const DLQ_MODES: Readonly<Record<string, string>> = {
  never: 'never',
  onexhausted: 'on-exhaustion',
  always: 'always',
};

type Table = Record<string, unknown>;

function isTable(v: unknown): v is Table {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Seconds to ms; anything that is not a number is left for the schema to refuse. */
function secondsToMs(v: unknown): unknown {
  return typeof v === 'number' ? Math.round(v * 1000) : v;
}

/** The key a path is written as: `proxy.tunnels[0].name`. */
function dotted(path: readonly (string | number)[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? p : `.${p}`;
  return out;
}

type Path = readonly (string | number)[];

class Migration {
  readonly values: Table = {};
  readonly carried: CarriedKey[] = [];
  readonly dropped: DroppedKey[] = [];
  /** Which Rust key wrote each mocra path, to report a value mocra refuses against it. */
  readonly #origins: { path: (string | number)[]; entry: CarriedKey }[] = [];

  /** Writes `value` at each of `to` and records that `key` went there. */
  carry(key: string, to: Path | readonly Path[], value: unknown, note?: string): void {
    if (value === undefined) return;
    const paths = (Array.isArray(to[0]) ? to : [to]) as readonly Path[];
    const entry = this.#record(
      key,
      paths.map((p) => dotted(p)),
      note,
    );
    for (const path of paths) {
      this.set(path, value);
      this.#origins.push({ path: [...path], entry });
    }
  }

  /** Records a key that needs no value here (mocra's default, or another key, does the same). */
  noop(key: string, note: string): void {
    this.#record(key, [], note);
  }

  drop(key: string, reason: string): void {
    this.dropped.push({ key, reason });
  }

  #record(key: string, to: string[], note: string | undefined): CarriedKey {
    const entry: CarriedKey = note === undefined ? { key, to } : { key, to, note };
    this.carried.push(entry);
    return entry;
  }

  set(path: Path, value: unknown): void {
    let at: Table = this.values;
    for (const [i, p] of path.entries()) {
      if (i === path.length - 1) {
        at[p] = value;
        return;
      }
      at[p] ??= typeof path[i + 1] === 'number' ? [] : {};
      at = at[p] as Table;
    }
  }

  get(path: Path): unknown {
    let at: unknown = this.values;
    for (const p of path) at = isTable(at) || Array.isArray(at) ? (at as Table)[p] : undefined;
    return at;
  }

  /**
   * Drops every value the schema refuses, so the written file loads: the written path that
   * holds the bad value (or its closest written ancestor) goes, reported with the loader's
   * own message.
   */
  keepValid(): void {
    for (let round = 0; round < 100; round++) {
      const result = configSchema.safeParse(this.values);
      if (result.success) {
        // List items may have moved up: say where each key went now.
        for (const entry of this.carried) {
          const paths = this.#origins.filter((o) => o.entry === entry).map((o) => dotted(o.path));
          if (paths.length > 0) entry.to = paths;
        }
        return;
      }
      const issue = result.error.issues[0]!;
      const path = issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p));
      const message =
        toConfigIssues([issue], this.values, () => ({ kind: 'code' }))[0]?.message ?? issue.message;
      const startsWith = (long: Path, short: Path) =>
        long.length >= short.length && short.every((p, i) => p === long[i]);
      // The written value that holds the bad one, else (a check of a whole table, such as a
      // proxy pool with no source) every written value inside the table.
      const holder = this.#origins
        .filter((o) => startsWith(path, o.path))
        .sort((a, b) => b.path.length - a.path.length)[0];
      const hit = holder ? [holder] : this.#origins.filter((o) => startsWith(o.path, path));
      if (hit.length === 0) throw new Error(`migrated config fails at ${dotted(path)}: ${message}`);
      for (const origin of hit) {
        if (!this.#origins.includes(origin)) continue; // went with an emptied parent
        this.#removeAt(origin.path);
        if (!this.#origins.some((o) => o.entry === origin.entry)) {
          this.carried.splice(this.carried.indexOf(origin.entry), 1);
        }
        this.drop(origin.entry.key, `mocra does not accept the value for ${dotted(path)}: ${message}`);
      }
    }
    throw new Error('migrated config: too many refused values');
  }

  /** Removes a value; a table or list left empty goes too, and later list items' origins move up. */
  #removeAt(path: Path): void {
    const parentPath = path.slice(0, -1);
    const last = path.at(-1)!;
    const parent = this.get(parentPath) as Table | unknown[];
    const inside = (o: { path: Path }) =>
      o.path.length >= path.length && path.every((p, i) => p === o.path[i]);
    for (let i = this.#origins.length - 1; i >= 0; i--)
      if (inside(this.#origins[i]!)) this.#origins.splice(i, 1);
    if (Array.isArray(parent)) {
      parent.splice(Number(last), 1);
      for (const o of this.#origins) {
        const at = o.path[parentPath.length];
        if (
          o.path.length > parentPath.length &&
          parentPath.every((p, i) => p === o.path[i]) &&
          typeof at === 'number' &&
          at > Number(last)
        ) {
          o.path[parentPath.length] = at - 1;
        }
      }
    } else delete parent[last];
    const empty = Array.isArray(parent) ? parent.length === 0 : Object.keys(parent).length === 0;
    if (empty && parentPath.length > 0) this.#removeAt(parentPath);
  }
}

/** What to do with one scalar key of a Rust table. */
type KeyRule =
  /** `to`: the dotted mocra key(s) it is written to. */
  { to: string | readonly string[]; convert?: (v: unknown) => unknown; note?: string } | { drop: string };

const SECONDS = { convert: secondsToMs, note: 'seconds → ms' } as const;

/** The flat keys of the Rust tables, by table. */
const RULES: Readonly<Record<string, Readonly<Record<string, KeyRule>>>> = {
  db: {
    url: { to: 'db.url' },
    database_schema: { to: 'db.schema' },
    pool_size: { to: 'db.pool_size' },
  },
  download_config: {
    downloader_expire: {
      drop: 'mocra keeps no per-module downloader instance to expire: downloaders are registered once (`.downloader(d)`)',
    },
    timeout: {
      to: 'module_defaults.timeout_ms',
      ...SECONDS,
      note: 'seconds → ms; the timeout of every request that sets none (headers and body each), as a module-config default',
    },
    enable_session: { to: 'module_defaults.enable_session', note: 'as a module-config default' },
    pool_size: { to: 'download.pool_size', note: 'sockets per origin' },
    max_response_size: { to: 'download.max_response_size' },
    proxy_client_cache_capacity: {
      drop: 'mocra keeps one dispatcher per proxy while the proxy is in the pool; there is no client cache to size',
    },
  },
  cache: {
    ttl: { drop: CACHE_REASON },
    compression_threshold: { drop: CACHE_REASON },
    enable_l1: { drop: CACHE_REASON },
    l1_ttl_secs: { drop: CACHE_REASON },
    l1_max_entries: { drop: CACHE_REASON },
  },
  crawler: {
    request_max_retries: {
      to: 'retry.max_retries',
      note: 'retries after the first failure, for downloads, parses and stores',
    },
    task_max_errors: {
      to: 'crawler.task_max_errors',
      note: 'an error score here: each success forgives 10 %',
    },
    module_max_errors: {
      to: 'crawler.module_max_errors',
      note: 'an error score here: each success forgives 10 %',
    },
    node_id: {
      drop: 'a node names itself per process; in an embedded cluster its id is MOCRA_NODE_ID (`ClusterConfig.fromEnv()`)',
    },
    task_concurrency: { to: 'crawler.task_concurrency', note: 'the download workers' },
    publish_concurrency: { drop: PUBLISH_REASON },
    parser_concurrency: {
      to: ['crawler.parser_concurrency', 'crawler.follow_up_concurrency'],
      note: 'two pools here: parse workers and follow-up (next node) workers; both get the value',
    },
    error_task_concurrency: { to: 'crawler.error_task_concurrency' },
    backpressure_retry_delay_ms: {
      drop: 'queues apply real backpressure here; there is no retry loop to tune',
    },
    dedup_ttl_secs: {
      drop: 'read by nothing in Rust mocra; dedup is `frontier.dedup` (on by default, for the whole run)',
    },
    idle_stop_secs: {
      drop: 'a run ends exactly when no work is left anywhere; there is no idle timer to tune',
    },
  },
  scheduler: {
    misfire_tolerance_secs: { to: 'scheduler.misfire_tolerance_ms', ...SECONDS },
    concurrency: {
      drop: 'cron firings are published as tasks, not processed by a pool of their own; nothing to size',
    },
    refresh_interval_secs: {
      to: 'db.cron_refresh_ms',
      ...SECONDS,
      note: 'seconds → ms; how often the database is checked for changed cron contexts',
    },
    max_staleness_secs: {
      drop: "cron contexts are listed again whenever the database's change token moves (`db.cron_refresh_ms`); there is no staleness bound",
    },
  },
  channel_config: {
    minid_time: { drop: 'message ids are not time-based snowflakes here; nothing to set' },
    capacity: {
      drop: 'queue topics have no fixed channel capacity in config; the in-memory queue takes `createMemoryQueueBackend({ capacity })` in code',
    },
    queue_codec: { to: 'channel_config.queue_codec' },
    batch_concurrency: { drop: PUBLISH_REASON },
    compression_threshold: { to: 'channel_config.compression_threshold', note: 'gzip here (zstd there)' },
    nack_max_retries: {
      to: 'channel_config.max_deliveries',
      convert: (v) => (typeof v === 'number' ? v + 1 : v),
      note: 'deliveries before the dead-letter queue, counting the first: retries + 1',
    },
    nack_backoff_ms: {
      drop: "a nacked message is redelivered at once; retry delays are the failure policy's backoff (`[retry]`, `[[policy.overrides]]`)",
    },
  },
  api: {
    port: { to: 'api.port' },
    api_key: { to: 'api.api_key' },
    rate_limit: {
      to: 'api.rate_limit',
      note: 'limits mutating requests per key here (token bucket); reads, the dashboard among them, are never limited',
    },
  },
  event_bus: {
    capacity: { drop: EVENT_BUS_REASON },
    concurrency: { drop: EVENT_BUS_REASON },
  },
  sync: {
    kafka: { drop: SYNC_REASON },
    allow_rollback: { drop: SYNC_REASON },
    envelope_enabled: { drop: SYNC_REASON },
  },
};

/**
 * Module-config keys of Rust mocra (its `download_config` defaults, or a module layer written
 * into the file) onto mocra's: `default_timeout` and `enable_proxy` become `timeout_ms` and
 * `use_proxy`; the keys mocra refuses are reported with what does their job.
 */
function migrateModuleKey(
  m: Migration,
  key: string,
  name: string,
  value: unknown,
  layer: readonly string[],
): void {
  if (name === 'default_timeout') {
    m.carry(key, [...layer, 'timeout_ms'], secondsToMs(value), 'seconds → ms');
    return;
  }
  if (name === 'enable_proxy') {
    m.carry(key, [...layer, 'use_proxy'], value);
    return;
  }
  const refused = REFUSED_UPSTREAM_MODULE_KEYS[name];
  if (refused !== undefined) {
    let reason = refused;
    if (name === 'rate_limit' && typeof value === 'number' && value > 0) {
      reason += `; here that is \`delayMs: ${Math.round(1000 / value)}\``;
    }
    if (name === 'wss_timeout' && typeof value === 'number')
      reason += `; here that is \`idleTimeoutMs: ${value * 1000}\``;
    m.drop(key, reason);
    return;
  }
  m.carry(key, [...layer, name], value);
}

function migrateTable(m: Migration, section: string, table: Table): void {
  const rules = RULES[section]!;
  for (const [name, value] of Object.entries(table)) {
    const key = `${section}.${name}`;
    const rule = rules[name];
    if (rule === undefined) {
      if (Object.hasOwn(REFUSED_UPSTREAM_MODULE_KEYS, name)) {
        // download_config's defaults of the module keys, crawler.module_locker_ttl
        migrateModuleKey(m, key, name, value, ['module_defaults']);
      } else m.drop(key, NOT_READ_THERE);
    } else if ('drop' in rule) {
      m.drop(key, rule.drop);
    } else {
      const to = typeof rule.to === 'string' ? [rule.to] : rule.to;
      m.carry(
        key,
        to.map((t) => t.split('.')),
        rule.convert ? rule.convert(value) : value,
        rule.note,
      );
    }
  }
}

function migrateDb(m: Migration, db: Table): void {
  const { tls, ...rest } = db;
  migrateTable(m, 'db', rest);
  if (tls === undefined) return;
  const url = m.get(['db', 'url']);
  if (tls === true && typeof url === 'string' && /^postgres(ql)?:\/\//i.test(url)) {
    if (!/[?&]sslmode=/.test(url))
      m.set(['db', 'url'], `${url}${url.includes('?') ? '&' : '?'}sslmode=require`);
    m.noop('db.tls', 'written into db.url as `sslmode=require`');
  } else {
    m.drop(
      'db.tls',
      'TLS is part of the database URL here (`?sslmode=require`); there is no PostgreSQL URL to put it in',
    );
  }
}

function migrateChannelConfig(m: Migration, table: Table): void {
  const { kafka, nats, blob_storage: blob, ...rest } = table;
  migrateTable(m, 'channel_config', rest);
  if (blob !== undefined) {
    m.drop(
      'channel_config.blob_storage',
      'large responses are not offloaded to files; `channel_config.max_payload_bytes` bounds a message and `download.max_response_size` a body',
    );
  }
  const coordination =
    'a NATS or Kafka queue also needs `channel_config.coordination` (redis://host:6379): Rust mocra coordinated through its Raft cluster; set it before running';
  let queueSet = false;
  if (isTable(kafka)) {
    const { brokers, ...auth } = kafka;
    if (typeof brokers === 'string') {
      const list = brokers
        .split(',')
        .map((b) => b.trim())
        .filter((b) => b !== '');
      m.carry(
        'channel_config.kafka.brokers',
        ['channel_config', 'queue'],
        `kafka://${list.join(',')}`,
        coordination,
      );
      queueSet = true;
    } else m.drop('channel_config.kafka.brokers', 'expected a comma-separated list of host:port');
    for (const name of Object.keys(auth)) {
      m.drop(
        `channel_config.kafka.${name}`,
        'SASL and TLS take a configured kafkajs client in code: `.queue(createKafkaQueueBackend({ kafka: new Kafka({ sasl, ssl }) }))`',
      );
    }
  }
  if (isTable(nats)) {
    const { url, ...auth } = nats;
    if (queueSet) {
      m.drop('channel_config.nats', 'one queue backend per deployment; channel_config.kafka was carried');
    } else if (typeof url === 'string') {
      const servers = url
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '')
        .map((s) => (/^nats:\/\//i.test(s) ? s : `nats://${s}`));
      m.carry('channel_config.nats.url', ['channel_config', 'queue'], servers.join(','), coordination);
    } else m.drop('channel_config.nats.url', 'expected nats://host:port');
    if (!queueSet) {
      for (const name of Object.keys(auth)) {
        m.drop(
          `channel_config.nats.${name}`,
          'NATS credentials go in code: `.queue(createNatsQueueBackend({ connectionOptions: { user, pass, token } }))`',
        );
      }
    }
  }
}

function migrateApi(m: Migration, table: Table): void {
  m.carry('api', ['api', 'enabled'], true, 'Rust mocra served the API whenever [api] was present');
  migrateTable(m, 'api', table);
}

function logLevel(v: unknown): { level: unknown; note?: string } {
  if (typeof v !== 'string') return { level: v };
  const first = v.split(',')[0]!.trim().toLowerCase();
  const bare = first.includes('=') ? undefined : first;
  const aliases: Record<string, string> = { off: 'silent', warning: 'warn', none: 'silent' };
  const level = bare === undefined ? undefined : (aliases[bare] ?? bare);
  if (level === undefined || !(LOG_LEVELS as readonly string[]).includes(level)) return { level: v };
  return level === v
    ? { level }
    : { level, note: `'${v}' → '${level}': one level for all of mocra, no per-target filters` };
}

function migrateLogger(m: Migration, table: Table): void {
  for (const [name, value] of Object.entries(table)) {
    const key = `logger.${name}`;
    switch (name) {
      case 'enabled':
      case 'enable':
        if (value === false) {
          if (table.level === undefined)
            m.carry(key, ['logger', 'level'], 'silent', 'logs off: level silent');
          else m.drop(key, 'logger.level was carried; `silent` turns logs off');
        } else m.noop(key, 'logs are on by default');
        break;
      case 'level': {
        if (table.enabled === false || table.enable === false) {
          m.drop(key, 'logs are off (logger.enabled = false)');
          break;
        }
        const { level, note } = logLevel(value);
        m.carry(key, ['logger', 'level'], level, note);
        break;
      }
      case 'format':
        m.drop(key, 'log lines are pino JSON on stderr; for text, pipe stderr through pino-pretty');
        break;
      case 'include':
        m.drop(key, 'no per-target log filter: logger.level applies to all of mocra');
        break;
      case 'buffer':
      case 'flush_interval_ms':
        m.drop(key, 'pino writes each line to stderr as it comes; nothing to buffer or flush');
        break;
      case 'outputs':
        migrateLogOutputs(m, value);
        break;
      case 'prometheus':
        migrateLogPrometheus(m, value);
        break;
      default:
        m.drop(key, NOT_READ_THERE);
    }
  }
}

function migrateLogOutputs(m: Migration, outputs: unknown): void {
  const list = Array.isArray(outputs) ? outputs : [outputs];
  if (list.length === 0) {
    m.noop(
      'logger.outputs',
      'no outputs listed; logs go to stderr here (logger.level = "silent" turns them off)',
    );
  }
  for (const [i, output] of list.entries()) {
    const key = `logger.outputs[${i}]`;
    const type = isTable(output) ? output.type : undefined;
    if (type === 'console') m.noop(key, 'logs go to stderr');
    else if (type === 'file') {
      m.drop(
        key,
        'logs go to stderr: redirect it to a file (`2>>mocra.log`), or give `.logger(pino(...))` with a file transport in code',
      );
    } else if (type === 'mq') {
      m.drop(
        key,
        'no log shipping to a queue: ship stderr with your log collector, or give `.logger(pino(...))` with a transport in code',
      );
    } else m.drop(key, NOT_READ_THERE);
  }
}

function migrateLogPrometheus(m: Migration, prometheus: unknown): void {
  if (!isTable(prometheus)) {
    m.drop('logger.prometheus', NOT_READ_THERE);
    return;
  }
  const served = 'metrics are served at /metrics of the control API (`[api]`)';
  for (const [name, value] of Object.entries(prometheus)) {
    const key = `logger.prometheus.${name}`;
    if (name === 'enabled') {
      if (value === true) m.carry(key, ['api', 'enabled'], true, served);
      else m.noop(key, 'no metrics server without `api.enabled`');
    } else if (name === 'port') {
      if (prometheus.enabled !== true) m.drop(key, 'metrics were off (logger.prometheus.enabled)');
      else if (m.get(['api', 'port']) === undefined) m.carry(key, ['api', 'port'], value, served);
      else m.drop(key, `${served}; api.port was carried`);
    } else if (name === 'path') {
      if (value === '/metrics') m.noop(key, served);
      else m.drop(key, `${served}; the path is always /metrics`);
    } else m.drop(key, NOT_READ_THERE);
  }
}

function migratePolicy(m: Migration, policy: Table): void {
  for (const [name, value] of Object.entries(policy)) {
    if (name !== 'overrides') {
      m.drop(`policy.${name}`, NOT_READ_THERE);
      continue;
    }
    const list = Array.isArray(value) ? value : [value];
    let written = 0;
    for (const [i, rule] of list.entries()) {
      const key = `policy.overrides[${i}]`;
      if (!isTable(rule)) {
        m.drop(key, NOT_READ_THERE);
        continue;
      }
      const out: Table = {};
      const stage = typeof rule.kind === 'string' ? STAGE_OF_KIND[rule.kind.toLowerCase()] : undefined;
      if (stage === undefined) {
        m.drop(
          key,
          `mocra's policy matches failures by kind, stage, module and status; the Rust kind ${JSON.stringify(rule.kind)} has no stage here (docs/error-handling.md)`,
        );
        continue;
      }
      out.stage = stage;
      const notes = [`kind ${String(rule.kind)} → stage ${stage}`];
      const matchers = ['domain', 'event_type', 'phase'].filter((f) => rule[f] !== undefined);
      if (matchers.length > 0) {
        notes.push(`${matchers.join(', ')} not kept: the override applies to every ${stage} failure`);
      }
      for (const [field, v] of Object.entries(rule)) {
        switch (field) {
          case 'kind':
          case 'domain':
          case 'event_type':
          case 'phase':
            break;
          case 'retryable':
          case 'max_retries':
            out[field] = v;
            break;
          case 'backoff_ms':
            out.backoff_ms = v;
            break;
          case 'backoff': {
            if (v === 'None') out.backoff = 'none';
            else if (isTable(v) && (isTable(v.Linear) || isTable(v.Exponential))) {
              const shape = (v.Linear ?? v.Exponential) as Table;
              out.backoff = isTable(v.Linear) ? 'linear' : 'exponential';
              if (rule.backoff_ms === undefined && shape.base_ms !== undefined)
                out.backoff_ms = shape.base_ms;
              if (shape.max_ms !== undefined) out.max_backoff_ms = shape.max_ms;
            } else
              notes.push(
                `backoff ${JSON.stringify(v)} is not kept: expected None, { Linear = {…} } or { Exponential = {…} }`,
              );
            break;
          }
          case 'dlq': {
            const mode = typeof v === 'string' ? DLQ_MODES[v.toLowerCase()] : undefined;
            if (mode === undefined) notes.push(`dlq ${JSON.stringify(v)} is not kept`);
            else out.dlq = mode;
            break;
          }
          case 'alert':
            notes.push(
              'alert is not kept: given-up failures are logged at error and counted in mocra_errors_total',
            );
            break;
          default:
            notes.push(`${field} is not kept (${NOT_READ_THERE})`);
        }
      }
      if (Object.keys(out).length === 1) {
        m.drop(
          key,
          `nothing left to change once matched by stage ${stage}: ${notes.slice(1).join('; ') || 'no settings'}`,
        );
        continue;
      }
      m.carry(key, ['policy', 'overrides', written++], out, notes.join('; '));
    }
  }
}

function migrateProxy(m: Migration, proxy: Table): void {
  let tunnels = 0;
  let statics = 0;
  let providers = 0;
  for (const [name, value] of Object.entries(proxy)) {
    const items = Array.isArray(value) ? value : [value];
    switch (name) {
      case 'tunnel':
        for (const [i, t] of items.entries()) {
          const key = `proxy.tunnel[${i}]`;
          if (!isTable(t)) {
            m.drop(key, NOT_READ_THERE);
            continue;
          }
          const endpoint =
            typeof t.endpoint === 'string' && typeof t.tunnel_type === 'string' && !t.endpoint.includes('://')
              ? `${t.tunnel_type}://${t.endpoint}`
              : t.endpoint;
          m.carry(
            key,
            ['proxy', 'tunnels', tunnels++],
            compact({
              name: t.name,
              endpoint,
              username: t.username,
              password: t.password,
              rate_limit: positive(t.rate_limit),
              expires_at: t.expire_time,
            }),
            'tunnel_type is the scheme of the endpoint; expire_time → expires_at',
          );
        }
        break;
      case 'direct':
        for (const [i, d] of items.entries()) {
          const key = `proxy.direct[${i}]`;
          if (!isTable(d)) {
            m.drop(key, NOT_READ_THERE);
            continue;
          }
          const url =
            typeof d.url === 'string' ? d.url.replace(/^ws:/i, 'http:').replace(/^wss:/i, 'https:') : d.url;
          m.carry(
            key,
            ['proxy', 'proxies', statics++],
            compact({
              url,
              provider: d.name,
              // Rust mocra limited a direct proxy to 10 requests per second unless told otherwise.
              rate_limit: d.rate_limit === undefined ? 10 : positive(d.rate_limit),
              expires_at: d.expire_time,
            }),
            'a static proxy (`[[proxy.proxies]]`); name → provider; expire_time → expires_at',
          );
        }
        break;
      case 'ip_provider':
        for (const [i, p] of items.entries()) {
          const key = `proxy.ip_provider[${i}]`;
          if (!isTable(p)) {
            m.drop(key, NOT_READ_THERE);
            continue;
          }
          m.carry(
            key,
            ['proxy', 'providers', providers++],
            compact({
              name: p.name,
              url: p.url,
              timeout: typeof p.timeout === 'number' ? `${p.timeout}s` : p.timeout,
              rate_limit: positive(p.rate_limit),
              proxy_ttl:
                typeof p.proxy_expire_time === 'number' ? `${p.proxy_expire_time}s` : p.proxy_expire_time,
              expires_at: p.provider_expire_time,
            }),
            'a list provider: its URL answers one `ip:port[:user:pass]` per line (a JSON API needs a `load` function in code); provider_expire_time → expires_at, proxy_expire_time → proxy_ttl',
          );
          if (p.retry_codes !== undefined) {
            m.drop(
              `${key}.retry_codes`,
              'a failed list load is retried with backoff (`min_load_interval`); there are no statuses to name',
            );
          }
          if (p.weight !== undefined) {
            m.drop(
              `${key}.weight`,
              'proxies are chosen by tier and score; give the provider a `tier` to prefer or avoid it',
            );
          }
        }
        break;
      case 'pool_config':
        if (!isTable(value)) {
          m.drop('proxy.pool_config', NOT_READ_THERE);
          break;
        }
        for (const [k, v] of Object.entries(value)) {
          const key = `proxy.pool_config.${k}`;
          if (['min_size', 'max_size', 'max_errors', 'refill_threshold'].includes(k))
            m.carry(key, ['proxy', k], v);
          else if (k === 'health_check_interval_secs') {
            m.drop(key, 'a health check needs a URL to probe: `health_check = { url, interval }` in [proxy]');
          } else m.drop(key, NOT_READ_THERE);
        }
        break;
      default:
        m.drop(`proxy.${name}`, NOT_READ_THERE);
    }
  }
}

function positive(v: unknown): unknown {
  return typeof v === 'number' && v <= 0 ? undefined : v;
}

function compact(t: Table): Table {
  return Object.fromEntries(Object.entries(t).filter(([, v]) => v !== undefined));
}

/** Module layers a file may already hold (one converted by hand in part): their Rust keys are mapped. */
function migrateLayers(m: Migration, section: string, table: Table): void {
  if (section === 'module_defaults') {
    for (const [name, value] of Object.entries(table)) {
      migrateModuleKey(m, `module_defaults.${name}`, name, value, ['module_defaults']);
    }
    return;
  }
  for (const [layer, keys] of Object.entries(table)) {
    if (!isTable(keys)) {
      m.drop(`${section}.${layer}`, 'expected a table of module-config keys');
      continue;
    }
    for (const [name, value] of Object.entries(keys)) {
      migrateModuleKey(m, `${section}.${layer}.${name}`, name, value, [section, layer]);
    }
  }
}

/**
 * Translates the text of a Rust mocra `config.toml`. Throws ConfigSyntaxError when it is not
 * TOML; every key is otherwise carried or dropped, and the result always loads.
 */
export function migrateRustConfig(text: string, options: MigrateRustConfigOptions = {}): RustConfigMigration {
  const file = options.file ?? 'config.toml';
  const { values: legacy } = parseToml(text, file);
  const m = new Migration();
  for (const [section, value] of Object.entries(legacy)) {
    if (section === 'name') {
      m.carry('name', ['name'], value);
      continue;
    }
    if (!isTable(value)) {
      m.drop(section, NOT_READ_THERE);
      continue;
    }
    switch (section) {
      case 'db':
        migrateDb(m, value);
        break;
      case 'channel_config':
        migrateChannelConfig(m, value);
        break;
      case 'api':
        migrateApi(m, value);
        break;
      case 'logger':
        migrateLogger(m, value);
        break;
      case 'policy':
        migratePolicy(m, value);
        break;
      case 'proxy':
        migrateProxy(m, value);
        break;
      case 'module_defaults':
      case 'modules':
      case 'accounts':
      case 'platforms':
        migrateLayers(m, section, value);
        break;
      default:
        if (RULES[section] !== undefined) migrateTable(m, section, value);
        else m.drop(section, NOT_READ_THERE);
    }
  }
  m.keepValid();
  const toml = render(m, file);
  // The promise of this function: what it writes loads with mocra's own loader.
  resolveConfig({ toml, file: 'mocra.toml', env: false });
  return { values: m.values, toml, carried: m.carried, dropped: m.dropped };
}

function render(m: Migration, file: string): string {
  const header = [
    `# mocra.toml, migrated from ${file} (mocra for Rust) by \`mocra config migrate\`.`,
    '# Every key is described in docs/configuration.md.',
    '',
  ];
  const body = Object.keys(m.values).length === 0 ? '' : `${toml().stringify(m.values)}\n`;
  const footer =
    m.dropped.length === 0
      ? []
      : [
          '',
          `# Not carried over from ${file}:`,
          ...m.dropped.map((d) => `#   ${d.key}: ${d.reason.replaceAll('\n', ' ')}`),
        ];
  return `${header.join('\n')}\n${body}${footer.join('\n')}${footer.length > 0 ? '\n' : ''}`;
}
