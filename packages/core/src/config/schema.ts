/**
 * The schema of mocra's configuration: one zod schema for `config.toml`, for environment
 * overrides and for config given in code. Every key carries {@link ConfigKeyInfo} (whether a
 * running engine applies a change live, what it does, its name in mocra for Rust) in the
 * {@link configKeyInfo} registry; `docs/configuration.md` lists the same keys, and a test keeps
 * the two in step.
 *
 * Keys are snake_case everywhere (TOML, code, `MOCRA_*` variables), and follow the keys of mocra
 * for Rust (the project this one is modelled on) where it has them. Every table is strict: an
 * unknown key is an error, not silently ignored.
 */
import { ProxyConfigError, parseProxyConfig } from '@mocra/proxy';
import type { z } from 'zod';
import { builtOnFirstUse, lazyRequire } from '../optional-dependency.js';
import { policyOverrideSchemas } from '../policy/policy-table.js';

/** What the docs and the reloader need to know about one key. */
export interface ConfigKeyInfo {
  /** A running engine applies a change of this key on reload; otherwise the change waits for a restart. */
  live: boolean;
  /** One or two sentences for docs/configuration.md. */
  description: string;
  /** The key of mocra for Rust (the project this one is modelled on) this one replaces, when there is one. */
  upstream?: string;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * Module-config keys of mocra for Rust that mocra does not read, each with what does that job
 * here. A layer that sets one is refused: a user's own key by one of these names would read as
 * a setting of the engine that silently does nothing.
 */
export const REFUSED_UPSTREAM_MODULE_KEYS: Readonly<Record<string, string>> = Object.freeze({
  wss_timeout:
    'the WebSocket downloader closes an idle connection after its `idleTimeoutMs` option (`createWebSocketDownloader({ idleTimeoutMs })`, in ms)',
  enable_locker:
    'downloads are not locked per module; to run one request at a time per host use `.politeness({ maxConcurrency: 1 })`',
  module_locker:
    'a module is not locked to one node; leader-only work (seeding, cron) is fenced by the coordination lock, and per-host limits are `.politeness()`',
  module_locker_ttl:
    'a module is not locked to one node; leader-only work (seeding, cron) is fenced by the coordination lock, and per-host limits are `.politeness()`',
  enable_rate_limit: 'request rates are limited per host with `.politeness({ delayMs, maxConcurrency })`',
  rate_limit:
    'request rates are limited per host: `.politeness({ delayMs: 1000 / rate_limit })` (cluster-wide with a Redis host budget)',
  limit_id:
    "rate limits are kept per host (the request URL's hostname), not under a chosen key; see `.politeness()`",
  cache_ttl:
    'responses are cached only for development, for the whole run: `--cache <dir> --cache-ttl <duration>` or `.httpCache({ dir, ttlMs })`',
});

/**
 * Keys that were renamed, by dotted path, with the key that does their job now. Like any
 * unknown key they are refused; the message names the new key.
 */
export const RENAMED_CONFIG_KEYS: Readonly<Record<string, string>> = Object.freeze({
  'crawler.parser_task_concurrency': 'crawler.follow_up_concurrency',
});

const zod = lazyRequire<typeof import('zod')>('zod');

/**
 * The schemas, built with zod on first use: a crawl configured in code alone never loads zod.
 * The exported names below stand for them until then.
 */
function buildConfigSchemas() {
  const { z } = zod();
  const { policyOverridesSchema } = policyOverrideSchemas();

  /** Metadata of every key of {@link configSchema} (looked up by the key's schema object). */
  const configKeyInfo = z.registry<ConfigKeyInfo>();

  function key<T extends z.ZodType>(schema: T, info: ConfigKeyInfo): T {
    configKeyInfo.add(schema, info);
    return schema;
  }

  const positiveInt = () => z.int().min(1);
  /**
   * Worker counts: each worker is a loop with its own buffers, so a typo (an extra zero, or six)
   * must be refused, not applied to a running crawl. The same bound as the CLI's `-c`.
   */
  const workerCount = () => positiveInt().max(10_000);
  /** A timeout in ms: a day at most (larger is a unit mistake: seconds typed as ms). */
  const timeoutMs = () => positiveInt().max(86_400_000);
  const nonNegativeInt = () => z.int().min(0);
  const durationMs = () => z.int().min(0);
  const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'not a valid HTTP header name');
  const headerMap = z.record(headerName, z.string());
  const statusCode = z.int().min(100).max(599);
  const name = z.string().min(1);

  /**
   * The keys a module's config understands (module config, the typed part): found in the
   * `[module_defaults]`, `[modules.<name>]`, `[accounts.<name>]` and `[platforms.<name>]` tables,
   * in programmatic layers and (later) in database layers. Any other key is the user's own (any
   * JSON value) and is read with the typed getters of {@link ModuleConfig}.
   */
  const moduleSettingsShape = {
    downloader: key(name.optional(), {
      live: true,
      description:
        "Name of the downloader this module's requests go through (one registered with `.downloader(d)`); a request can name its own. Unset: the default downloader.",
      upstream: 'module config `downloader`',
    }),
    use_proxy: key(
      z
        .union([
          z.boolean(),
          z.strictObject({
            provider: name.optional(),
            tier: z.int().min(0).optional(),
            session: name.optional(),
          }),
        ])
        .optional(),
      {
        live: true,
        description:
          "Proxy use of the module's requests when `[proxy]` is configured: `false` never, `true` the pool's choice (tiers escalate per host), or `{ provider, tier, session }` to pin one; a request's own `proxy` wins. Unset: the module's code (`proxy` of the spider or module), else `true`.",
        upstream: 'module config `enable_proxy` (boolean only)',
      },
    ),
    enable_session: key(z.boolean().optional(), {
      live: true,
      description:
        'Keep a cookie jar and sticky headers per account × platform and apply them to every request of the module.',
      upstream: 'download_config.enable_session',
    }),
    sticky_headers: key(z.array(headerName).optional(), {
      live: true,
      description:
        'Response headers (by name) written back into the session and sent with later requests of the same account × platform (e.g. a CSRF header).',
      upstream: 'request `cache_headers`',
    }),
    headers: key(headerMap.optional(), {
      live: true,
      description: "Headers added to every request of the module (a request's own headers win).",
    }),
    timeout_ms: key(timeoutMs().optional(), {
      live: true,
      description: 'Timeout of requests that set none, in ms (headers and body each).',
      upstream: 'download_config.timeout / module `default_timeout`',
    }),
    download_middleware: key(z.array(name).optional(), {
      live: true,
      description:
        'Names of non-global download middleware that run for this module (besides every global one).',
      upstream: 'rel_module_download_middleware rows',
    }),
    data_middleware: key(z.array(name).optional(), {
      live: true,
      description: 'Names of non-global data middleware that run for this module.',
      upstream: 'rel_module_data_middleware rows',
    }),
    store_middleware: key(z.array(name).optional(), {
      live: true,
      description: 'Names of non-global store middleware that run for this module.',
    }),
    middleware_weights: key(z.record(name, z.int()).optional(), {
      live: true,
      description:
        'Per-middleware weight overrides for this module (`{ name = weight }`); ascending weight runs first before, last after.',
      upstream: 'middleware `weight` per relation',
    }),
    login_statuses: key(z.array(statusCode).optional(), {
      live: true,
      description:
        'Statuses that mean the session is gone: the module logs in again and the request is retried (only for modules with `shouldLogin`).',
    }),
    login_max_attempts: key(positiveInt().max(100).optional(), {
      live: true,
      description: 'Login attempts in a row before the session fails with MOCRA_ERR_LOGIN_FAILED.',
    }),
    // Two keys of mocra for Rust, read with their meaning there so a module row moved from a Rust
    // deployment keeps working; where a layer also sets the native key, the higher layer wins.
    default_timeout: key(z.number().positive().max(86_400).optional(), {
      live: true,
      description:
        'Timeout of requests that set none, in seconds (the Rust mocra name of `timeout_ms`; the higher layer of the two wins).',
      upstream: 'module config `default_timeout`',
    }),
    enable_proxy: key(z.boolean().optional(), {
      live: true,
      description: 'The Rust mocra name of `use_proxy = true | false` (the higher layer of the two wins).',
      upstream: 'module config `enable_proxy`',
    }),
  } as const;

  /** One module-config layer: the typed keys above, plus any JSON the user wants. */
  const moduleLayerSchema = z
    .object(moduleSettingsShape)
    .catchall(z.json())
    .check((ctx) => {
      for (const [name, instead] of Object.entries(REFUSED_UPSTREAM_MODULE_KEYS)) {
        if (Object.hasOwn(ctx.value, name)) {
          ctx.issues.push({
            code: 'custom',
            input: ctx.value[name],
            path: [name],
            message: `a key of Rust mocra that mocra does not read: ${instead}`,
          });
        }
      }
      for (const [native, upstream] of [
        ['timeout_ms', 'default_timeout'],
        ['use_proxy', 'enable_proxy'],
      ] as const) {
        if (ctx.value[native] !== undefined && ctx.value[upstream] !== undefined) {
          ctx.issues.push({
            code: 'custom',
            input: ctx.value[upstream],
            path: [upstream],
            message: `set either '${native}' or its Rust mocra name '${upstream}' in one layer, not both`,
          });
        }
      }
    });

  const crawler = z
    .strictObject({
      task_concurrency: key(workerCount().default(32), {
        live: true,
        description: 'Concurrent downloads: the worker pool of the download stage.',
        upstream: 'crawler.task_concurrency',
      }),
      generate_concurrency: key(workerCount().default(4), {
        live: true,
        description: "Task-stage workers: entry nodes' generate for new runs.",
      }),
      parser_concurrency: key(workerCount().default(16), {
        live: true,
        description: 'Parse-stage workers.',
        upstream: 'crawler.parser_concurrency',
      }),
      follow_up_concurrency: key(workerCount().default(8), {
        live: true,
        description: 'Follow-up workers: generate of the next node for work a parse handed on.',
        upstream: 'crawler.parser_concurrency (shared there)',
      }),
      error_task_concurrency: key(workerCount().default(4), {
        live: true,
        description: 'Error-stage workers (retry decisions, dead-lettering).',
        upstream: 'crawler.error_task_concurrency',
      }),
      shutdown_timeout_ms: key(durationMs().default(10_000), {
        live: false,
        description:
          'On stop, how long work in flight may take before it is aborted and put back on its queue.',
      }),
      request_max_errors: key(nonNegativeInt().optional(), {
        live: false,
        description: 'Failures of one request before it is skipped (0: no limit). Unset: 10.',
      }),
      task_max_errors: key(nonNegativeInt().optional(), {
        live: false,
        description:
          'Error score of one run at which the run is terminated (0: no limit; each success forgives 10 %). Unset: 500.',
        upstream: 'crawler.task_max_errors',
      }),
      module_max_errors: key(nonNegativeInt().optional(), {
        live: false,
        description:
          'Error score of a module at which it is terminated (0: no limit; each success forgives 10 %). Unset: 1000.',
        upstream: 'crawler.module_max_errors',
      }),
      parse_where_downloaded: key(z.boolean().default(true), {
        live: false,
        description:
          'Parse a response in the process that downloaded it while its parse stage has a free slot, instead of sending it through the `response` queue (the request is acked after its parse). `false`: every response crosses the queue, e.g. to parse on other machines than the ones that download.',
      }),
      auto_seed: key(z.boolean().default(true), {
        live: false,
        description:
          'Start one run of every registered module when the engine starts — also when the config comes from a file.',
      }),
    })
    .prefault({});

  const download = z
    .strictObject({
      user_agent: key(z.string().min(1).optional(), {
        live: false,
        description:
          'User-Agent of every request that sets none. Unset: `mocra/<version> (+https://github.com/mocra-ts/mocra)`.',
      }),
      headers: key(headerMap.default({}), {
        live: false,
        description: "Headers sent with every request (a request's own headers win).",
      }),
      connect_timeout_ms: key(positiveInt().default(10_000), {
        live: false,
        description: 'Time to establish a TCP/TLS connection.',
      }),
      headers_timeout_ms: key(positiveInt().default(30_000), {
        live: false,
        description: 'Time from sending a request to receiving the response headers.',
        upstream: 'download_config.timeout',
      }),
      body_timeout_ms: key(positiveInt().default(30_000), {
        live: false,
        description: 'Longest pause between two body chunks.',
      }),
      request_timeout_ms: key(positiveInt().default(120_000), {
        live: false,
        description:
          'Longest a whole request may take (redirects, headers and body together); a body trickling in slowly fails with MOCRA_ERR_TIMEOUT (phase request) when it is passed.',
      }),
      max_response_size: key(positiveInt().default(10 * 1024 * 1024), {
        live: false,
        description:
          'Largest body kept, in bytes after decompression; larger ones fail with MOCRA_ERR_BODY_TOO_LARGE.',
        upstream: 'download_config.max_response_size',
      }),
      max_redirects: key(nonNegativeInt().default(10), {
        live: false,
        description: 'Redirects followed per request (0 = none).',
      }),
      decompress: key(z.boolean().default(true), {
        live: false,
        description: 'Ask for and decode gzip, deflate and br bodies.',
      }),
      pool_size: key(positiveInt().default(64), {
        live: false,
        description: 'Sockets per origin.',
        upstream: 'download_config.pool_size',
      }),
      keep_alive_timeout_ms: key(positiveInt().default(10_000), {
        live: false,
        description: 'Idle keep-alive sockets close after this long.',
      }),
    })
    .prefault({});

  const frontier = z
    .strictObject({
      dedup: key(z.boolean().default(true), {
        live: false,
        description: 'Drop requests whose fingerprint was seen before in the run.',
        upstream: 'crawler.dedup_ttl_secs (read by nothing there)',
      }),
      max_depth: key(nonNegativeInt().optional(), {
        live: false,
        description: 'Drop requests deeper than this (seeds are depth 0). Unset: no limit.',
      }),
      max_pages: key(positiveInt().optional(), {
        live: false,
        description: 'Admit at most this many requests per run (retries do not count). Unset: no limit.',
      }),
    })
    .prefault({});

  // `[retry]` is a shorthand over `[[policy.overrides]]` for the retryable kinds. Every key is
  // optional: a key left unset keeps the per-kind default of docs/error-handling.md (a default
  // here would silently override those for every config-built engine).
  const retry = z
    .strictObject({
      max_retries: key(nonNegativeInt().optional(), {
        live: false,
        description:
          'Retries after the first failure of a download, parse or store (so up to max_retries + 1 attempts). Unset: per failure kind (docs/error-handling.md).',
        upstream: 'crawler.request_max_retries',
      }),
      base_delay_ms: key(durationMs().optional(), {
        live: false,
        description: 'First backoff delay; it doubles with every attempt. Unset: per failure kind.',
      }),
      max_delay_ms: key(durationMs().optional(), {
        live: false,
        description: 'Longest backoff delay, also the cap on Retry-After. Unset: per failure kind.',
      }),
      retry_statuses: key(z.array(statusCode).optional(), {
        live: false,
        description:
          'Statuses retried (while retries remain) instead of reaching parse; other statuses reach parse at once. Unset: 408, 429 and 5xx are retried.',
      }),
      jitter: key(z.boolean().optional(), {
        live: false,
        description: 'Spread delays so retries of many requests do not arrive together. Unset: on.',
      }),
    })
    .prefault({})
    .check((ctx) => {
      const { base_delay_ms: base, max_delay_ms: max } = ctx.value;
      if (base !== undefined && max !== undefined && max < base) {
        ctx.issues.push({
          code: 'custom',
          input: max,
          path: ['max_delay_ms'],
          message: `must be at least base_delay_ms (${base})`,
        });
      }
    });

  const policy = z
    .strictObject({
      overrides: key(policyOverridesSchema.default([]), {
        live: false,
        description:
          'Rules that change the failure policy for matching errors (`[[policy.overrides]]`: `kind`, `stage`, `module`, `status` matchers → `retryable`, `max_retries`, `backoff`, `dlq`, …; every field in docs/error-handling.md). Later rules win.',
        upstream: '`[[policy.overrides]]`',
      }),
    })
    .prefault({});

  const logger = z
    .strictObject({
      level: key(z.enum(LOG_LEVELS).optional(), {
        live: true,
        description:
          'Log level. Unset: `MOCRA_LOG_LEVEL`, else `info` (`silent` under a test runner); `MOCRA_DISABLE_LOGS=1` silences everything.',
        upstream: 'logger.level',
      }),
    })
    .prefault({});

  const scheduler = z
    .strictObject({
      enabled: key(z.boolean().default(true), {
        live: false,
        description: 'Fire the cron schedules of modules and spiders on this node.',
      }),
      misfire_tolerance_ms: key(durationMs().default(300_000), {
        live: true,
        description:
          'A firing missed by more than this (the process was stopped or blocked) is skipped and reported instead of run late.',
        upstream: 'scheduler.misfire_tolerance_secs',
      }),
    })
    .prefault({});

  /** A web origin (`scheme://host[:port]`, nothing after it) or `*`. */
  const corsOrigin = z
    .string()
    .refine(
      (v) => v === '*' || /^https?:\/\/[^/?#\s]+$/i.test(v),
      'an origin such as https://dashboard.example.com (scheme and host, no path), or "*"',
    );
  /** A host name or address as it appears in a `Host` header (without the port), or `*`. */
  const hostName = z
    .string()
    .regex(/^(\*|[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])$/, 'a host name such as host.docker.internal, or "*"');

  /** `[api]`: the control API and dashboard (packages/core/src/api; docs/api-reference.md). */
  const api = z
    .strictObject({
      enabled: key(z.boolean().default(false), {
        live: false,
        description:
          'Serve the control API and the dashboard next to the crawl (`.dashboard()` does the same in code).',
      }),
      host: key(z.string().min(1).default('127.0.0.1'), {
        live: false,
        description:
          'Interface the API binds. `0.0.0.0` makes it reachable from other machines and containers (Prometheus in Docker).',
      }),
      port: key(z.int().min(0).max(65535).default(8905), {
        live: false,
        description:
          'Port of the API; 0 picks a free one. A port that cannot be bound stops start-up (`MOCRA_ERR_API_BIND`).',
        upstream: 'api.port',
      }),
      api_key: key(z.string().min(1).optional(), {
        live: false,
        description:
          'Key of the authenticated endpoints (`Authorization: Bearer <key>` or `x-api-key`). Unset: they answer 403.',
        upstream: 'api.api_key',
      }),
      cors_origins: key(z.array(corsOrigin).default([]), {
        live: false,
        description:
          'Origins (`https://grafana.example.com`) whose web pages may read the API from a browser (CORS); `"*"` allows every origin. The dashboard the API serves itself needs none. Empty: no cross-origin reads.',
      }),
      allowed_hosts: key(z.array(hostName).default([]), {
        live: false,
        description:
          'Host names requests may be addressed to (the `Host` header) besides `host`, the host name of the machine, `localhost` and IP addresses, e.g. `host.docker.internal` for Prometheus in Docker; `"*"` accepts any. Other names are refused (HTTP 421), so a web page cannot reach the API through DNS rebinding.',
      }),
      rate_limit: key(z.number().min(0).default(10), {
        live: false,
        description:
          "Mutating API requests per second per key (token bucket); 0 turns the limit off. Reads, the dashboard's polling among them, are never limited.",
        upstream: 'api.rate_limit',
      }),
      rate_limit_burst: key(positiveInt().optional(), {
        live: false,
        description: 'Requests a key may make at once before the rate applies. Unset: twice `rate_limit`.',
      }),
      dashboard: key(z.boolean().default(true), {
        live: false,
        description: 'Serve the dashboard page at `/` (the JSON endpoints are served either way).',
      }),
      keep_alive: key(z.boolean().default(false), {
        live: false,
        description:
          'Service mode: keep the engine running when no work is left, taking work from `/start_work`, until it is stopped.',
      }),
      log_buffer_size: key(positiveInt().default(1000), {
        live: false,
        description: 'Log records kept for `/observability/logs` and the logs panel.',
      }),
      log_level: key(z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal']).default('debug'), {
        live: false,
        description:
          'Lowest level the logs panel records (independent of `logger.level`, which is what goes to stderr); `debug` includes one line per download.',
      }),
    })
    .prefault({});

  /**
   * `[channel_config]`: where the stage queues live and how their messages are encoded — the switch
   * between one process and a cluster (docs/deployment.md). `MOCRA_QUEUE` / `MOCRA_COORDINATION`
   * are short forms of the first two keys.
   */
  const backendUrl = z.string().regex(/^[a-z][a-z0-9+.-]*:/i, 'a URL with a scheme (redis://, nats://, …)');
  const channelConfig = z
    .strictObject({
      queue: key(backendUrl.optional(), {
        live: false,
        description:
          'Queue backend of the stage topics: `memory://` (one process), `redis://host:6379`, `nats://host:4222` or `kafka://host:9092`. Anything but memory makes the run distributed; with `.cluster(ClusterConfig…)`, unset or memory makes a partitioned Raft cluster (no queue service). Unset: `MOCRA_QUEUE`, else memory.',
        upstream: 'channel_config.kafka / channel_config.nats',
      }),
      coordination: key(backendUrl.optional(), {
        live: false,
        description:
          'Coordination backend of a distributed run (membership, seeding lock, completion): `redis://host:6379`, or `local://` for one process. Unset: `MOCRA_COORDINATION`, else the queue URL when it is Redis.',
      }),
      run_id: key(
        z
          .string()
          .regex(/^[A-Za-z0-9_.:-]{1,128}$/)
          .optional(),
        {
          live: false,
          description:
            'Id shared by every process of one distributed crawl (its seeding marker, dedup set and end marker). A finished run stays finished: give a new crawl a new id. Unset: `MOCRA_RUN_ID`, else `name`.',
        },
      ),
      service: key(z.boolean().optional(), {
        live: false,
        description:
          'Keep this node up until it is stopped (SIGTERM/SIGINT, `POST /control/stop`), even when the whole cluster is idle: a service node fed by cron and `/start_work`. `false` makes a node with cron modules end with the crawl. Unset: a service node when `api.keep_alive` is set or a module has a cron.',
      }),
      queue_codec: key(z.enum(['msgpack', 'json']).default('msgpack'), {
        live: false,
        description: 'How messages are encoded on Redis, NATS and Kafka.',
        upstream: 'channel_config.queue_codec',
      }),
      compression_threshold: key(nonNegativeInt().default(16_384), {
        live: false,
        description: 'Encoded messages at least this large are gzip-compressed (0 = never).',
        upstream: 'channel_config.compression_threshold',
      }),
      max_payload_bytes: key(positiveInt().optional(), {
        live: false,
        description:
          "Largest encoded message accepted; a larger one (a huge response) fails with MOCRA_ERR_PAYLOAD_TOO_LARGE and is dead-lettered. Unset: the backend's limit (Redis 16 MiB, NATS the server's max_payload, Kafka 1 MB).",
      }),
      lease_ms: key(positiveInt().optional(), {
        live: false,
        description:
          "How long a worker holds a message before it is redelivered elsewhere (a dead worker's work comes back after this). Unset: 30000.",
      }),
      max_deliveries: key(positiveInt().optional(), {
        live: false,
        description: 'Deliveries of one message before it goes to the dead-letter queue. Unset: 5.',
        upstream: 'channel_config.nack_max_retries',
      }),
    })
    .prefault({});

  /**
   * `[db]`: the database of accounts × platforms × modules, task results, logs and (optionally)
   * items (`@mocra/store`; docs/store.md). Without `url` the engine runs as without a database.
   */
  const db = z
    .strictObject({
      url: key(
        z
          .string()
          .regex(/^(postgres(ql)?:\/\/|sqlite:)/i, 'postgres://… or sqlite:<path>')
          .optional(),
        {
          live: false,
          description:
            'The database: `postgres://user@host:5432/db` (TLS with `?sslmode=require`) or `sqlite:<path>`. Unset: no database.',
          upstream: 'db.url',
        },
      ),
      schema: key(
        z
          .string()
          .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'letters, digits and `_` only')
          .default('mocra'),
        {
          live: false,
          description: 'PostgreSQL schema that holds the tables (ignored for SQLite).',
          upstream: 'db.database_schema',
        },
      ),
      pool_size: key(positiveInt().default(10), {
        live: false,
        description: 'PostgreSQL connections at most.',
        upstream: 'db.pool_size',
      }),
      connect_timeout_ms: key(positiveInt().default(10_000), {
        live: false,
        description: 'Time to open a PostgreSQL connection.',
      }),
      migrate: key(z.boolean().default(false), {
        live: false,
        description:
          'Apply pending migrations when the engine opens the database (`mocra store migrate` does it by hand).',
      }),
      module_config: key(z.boolean().default(true), {
        live: false,
        description:
          "Build modules' config from the database's ten layers and select their middleware by the relation tables.",
      }),
      config_cache_ms: key(nonNegativeInt().default(1_000), {
        live: false,
        description:
          'How long a read of the change token is trusted; configs are cached until the token moves.',
      }),
      seed: key(z.boolean().default(true), {
        live: false,
        description:
          'With auto-seed, start one task per enabled account × platform of the database (its linked modules).',
      }),
      cron: key(z.boolean().default(true), {
        live: false,
        description:
          'Cron targets from the database: every enabled module × account × platform of a module with a `cron`.',
      }),
      cron_refresh_ms: key(positiveInt().default(30_000), {
        live: false,
        description:
          'How often the change token is compared and, when it moved, the cron contexts listed again.',
        upstream: 'scheduler.refresh_interval_secs',
      }),
      task_results: key(z.boolean().default(true), {
        live: false,
        description:
          'Write a `task_result` row per run × module (start, heartbeats, end, status, counts, error).',
      }),
      heartbeat_ms: key(positiveInt().default(15_000), {
        live: false,
        description: 'How often running `task_result` rows get a heartbeat with their counts.',
      }),
      zombie_after_ms: key(positiveInt().default(120_000), {
        live: false,
        description:
          'A running row without a heartbeat for this long is marked failed by the zombie sweep. Must be longer than heartbeat_ms.',
      }),
      zombie_sweep_ms: key(nonNegativeInt().default(60_000), {
        live: false,
        description: 'How often the zombie sweep runs (one node per interval in a cluster); 0 = never.',
      }),
      log_level: key(z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'off']).default('warn'), {
        live: false,
        description:
          'Lowest level of the `log` rows: failures retried are warn, given up error, run start/end info; `off` writes none.',
      }),
      log_batch_size: key(positiveInt().default(100), {
        live: false,
        description: 'Log rows per insert.',
      }),
      log_flush_ms: key(positiveInt().default(1_000), {
        live: false,
        description: 'Longest a log row waits before its batch is written.',
      }),
      log_buffer: key(positiveInt().default(10_000), {
        live: false,
        description: 'Log rows held at most while the database is slow; more are dropped and counted.',
      }),
      items: key(z.boolean().default(false), {
        live: false,
        description:
          "Write every module's items to a JSON table, upserted by item id (exactly once across redeliveries).",
      }),
      items_table: key(
        z
          .string()
          .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'letters, digits and `_` only')
          .default('items'),
        {
          live: false,
          description: 'Table of the items (with `items = true`).',
        },
      ),
    })
    .prefault({})
    .check((ctx) => {
      const { heartbeat_ms: beat, zombie_after_ms: stale } = ctx.value;
      if (stale <= beat) {
        ctx.issues.push({
          code: 'custom',
          input: stale,
          path: ['zombie_after_ms'],
          message: `must be longer than heartbeat_ms (${beat})`,
        });
      }
    });

  /**
   * `[proxy]`: the proxy pool (docs/proxies.md). Its keys are @mocra/proxy's, validated by
   * `parseProxyConfig` (camelCase or snake_case; durations as '30s'), whose issues are mapped
   * back to `proxy.<key>` paths so they get file positions like any other key.
   */
  const proxy = key(
    z
      .record(z.string(), z.unknown())
      .optional()
      .check((ctx) => {
        if (ctx.value === undefined) return;
        try {
          parseProxyConfig(ctx.value);
        } catch (err) {
          if (!(err instanceof ProxyConfigError)) throw err;
          for (const issue of err.issues) {
            ctx.issues.push({
              code: 'custom',
              input: ctx.value,
              path: proxyIssuePath(issue.key),
              message: issue.message,
            });
          }
        }
      }),
    {
      live: false,
      description:
        'The proxy pool: `proxies`, `tunnels`, `providers`, `direct`, tiers, rate limits, health checks (every key in docs/proxies.md). Requests of the HTTP and browser downloaders go through it and every outcome is reported back. Unset: no proxies.',
      upstream: '`[proxy]` (mocra-proxy `ProxyConfig`)',
    },
  );

  /** `proxy.providers[0].url` → `['providers', 0, 'url']` (relative to the `[proxy]` table). */
  function proxyIssuePath(issueKey: string): (string | number)[] {
    const out: (string | number)[] = [];
    for (const m of issueKey.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
      if (m[2] !== undefined) out.push(Number(m[2]));
      else if (m[1] !== undefined) out.push(m[1]);
    }
    return out[0] === 'proxy' ? out.slice(1) : out;
  }

  const layerTable = (description: string) =>
    key(z.record(name, moduleLayerSchema).default({}), { live: true, description });

  /** The whole configuration. Every table and key is optional; defaults fill what is missing. */
  const configSchema = z.strictObject({
    name: key(
      z
        .string()
        .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/, 'letters, digits, `_`, `.`, `:` and `-` only')
        .default('mocra'),
      {
        live: false,
        description: 'Name of this deployment: the namespace of its queue topics and coordination keys.',
        upstream: 'name',
      },
    ),
    crawler,
    download,
    frontier,
    retry,
    policy,
    logger,
    scheduler,
    api,
    channel_config: channelConfig,
    db,
    module_defaults: key(moduleLayerSchema.default({}), {
      live: true,
      description:
        "The config.toml layer of every module's config: below the module/account/platform layers, above built-in defaults.",
    }),
    modules: layerTable('Module layers without a database, by module name (`[modules.catalog]`).'),
    accounts: layerTable('Account layers without a database, by account name (`[accounts.alice]`).'),
    platforms: layerTable('Platform layers without a database, by platform name (`[platforms.shop]`).'),
    proxy,
  });

  return { configKeyInfo, moduleSettingsShape, moduleLayerSchema, configSchema };
}

type ConfigSchemas = ReturnType<typeof buildConfigSchemas>;
let configSchemas: ConfigSchemas | undefined;
const schemas = (): ConfigSchemas => {
  configSchemas ??= buildConfigSchemas();
  return configSchemas;
};

/** Metadata of every key of {@link configSchema} (looked up by the key's schema object). */
export const configKeyInfo: ConfigSchemas['configKeyInfo'] = builtOnFirstUse(() => schemas().configKeyInfo);
/**
 * The keys a module's config understands (module config, the typed part): found in the
 * `[module_defaults]`, `[modules.<name>]`, `[accounts.<name>]` and `[platforms.<name>]` tables,
 * in programmatic layers and (later) in database layers. Any other key is the user's own (any
 * JSON value) and is read with the typed getters of {@link ModuleConfig}.
 */
export const moduleSettingsShape: ConfigSchemas['moduleSettingsShape'] = builtOnFirstUse(
  () => schemas().moduleSettingsShape,
);
/** One module-config layer: the typed keys of `moduleSettingsShape`, plus any JSON the user wants. */
export const moduleLayerSchema: ConfigSchemas['moduleLayerSchema'] = builtOnFirstUse(
  () => schemas().moduleLayerSchema,
);
/** The whole configuration. Every table and key is optional; defaults fill what is missing. */
export const configSchema: ConfigSchemas['configSchema'] = builtOnFirstUse(() => schemas().configSchema);

export type ModuleLayerInput = z.input<typeof moduleLayerSchema>;

/** The configuration after validation, with every default filled in. */
export type MocraConfig = z.output<typeof configSchema>;
/** What a TOML file, the environment or code may give: any subset of the keys. */
export type MocraConfigInput = z.input<typeof configSchema>;
