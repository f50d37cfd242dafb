/**
 * `Mocra.builder()`: the no-services, no-config-file way to run spiders.
 *
 * ```ts
 * const summary = await Mocra.builder().spider(spider, onItem((item) => console.log(item))).run();
 * ```
 *
 * The builder only collects settings; `build()` turns them into an @mocra/core Engine with
 * every spider registered (auto-seeded when the run starts) and `run()` runs it until the
 * crawl is idle. Each knob writes one field of the engine options, so a new capability is a
 * new method here and a new option there — the existing ones do not change.
 */
import { readFileSync } from 'node:fs';
import { ClusterConfig } from '@mocra/cluster/config';
import {
  apiOptionsFromConfig,
  applyLiveConfig,
  ConfigReadError,
  type ConfigReloadErrorEvent,
  type ConfigReloadEvent,
  type Coordination,
  createBufferedLogger,
  createEngine,
  createHostScheduler,
  createLogBuffer,
  createMemoryModuleConfigProvider,
  createMiddlewareManager,
  createModuleConfigResolver,
  createRobotsCache,
  type DataSink,
  type Downloader,
  type Engine,
  type EngineApiOptions,
  type EngineCronOptions,
  type EngineOptions,
  type ErrorEvent,
  engineOptionsFromConfig,
  type FailurePolicy,
  type FrontierOptions,
  type HostSchedulerOptions,
  type HttpCacheOptions,
  type HttpDownloaderOptions,
  InvalidArgumentError,
  type ItemMeta,
  LiveConfig,
  type LogBuffer,
  type Logger,
  type LogLevel,
  type LogRecordLevel,
  lockPersistDir,
  type MemoryModuleConfigData,
  type Middleware,
  type MiddlewareManager,
  type MiddlewareOptions,
  type MocraConfig,
  type MocraConfigInput,
  type MocraMetrics,
  type Module,
  type PolicyDecision,
  type QueueBackend,
  type RecoveryPolicyOptions,
  type RobotsCacheOptions,
  type RobotsGuard,
  type RunSummary,
  readEnvOverrides,
  resolveConfig,
  type SimpleRetryPolicyOptions,
  type StageConcurrency,
  startEngineApi,
  unknownEnvVariables,
  type WatchdogTimeouts,
} from '@mocra/core';
// Types only: the cluster code is imported when a run is distributed or defines a DAG job.
import type {
  DagJobOptions,
  DagJobResult,
  DistributedOptions,
  DistributedRuntime,
} from '@mocra/core/cluster';
import type { EngineStoreOptions } from '@mocra/core/store';
import type { Dag } from '@mocra/dag';
import {
  type ClusterOptions,
  type ClusterSettings,
  clusterSettingsFromConfig,
  resolveClusterOptions,
} from './cluster.js';
import { LazyDagJobs } from './lazy-dag-jobs.js';
import { onItem } from './sinks/on-item.js';
import { compileSpider, type Spider } from './spider.js';

/** A sink, or a function called per item (the same as `onItem(fn)`). */
export type SinkLike<TItem> = DataSink<TItem> | ((item: TItem, meta: ItemMeta) => void | Promise<void>);

/** Options of {@link MocraBuilder.dashboard} (the `[api]` config table maps onto them: `apiOptionsFromConfig`). */
export interface DashboardOptions extends Omit<EngineApiOptions, 'logs' | 'port'> {
  /** 0 picks a free port (see `onListen`). @default 8905 */
  port?: number;
  /**
   * Service mode: the engine keeps running when no work is left (work arrives through
   * `/start_work`) until it is stopped by a signal, `.signal()` or the API's caller.
   * @default false (the run ends when idle and the API closes with it)
   */
  keepAlive?: boolean;
  /** Log records kept for the logs panel. @default 1000 */
  logBufferSize?: number;
  /** Lowest level the logs panel records (stderr keeps `.logging()`'s level). @default 'debug' */
  logLevel?: LogRecordLevel;
  /** Called once the API listens, with its URL (the real port when `port` is 0). */
  onListen?: (url: string) => void;
  /**
   * Keep the dashboard and the API up this many milliseconds after the run ended, so a person
   * can read its final state; `run()` resolves after that. A run stopped by a signal or
   * `.signal()` does not linger, and SIGINT/SIGTERM (with `handleSignals`) or `.signal()` end
   * a linger early. @default 0
   */
  lingerMs?: number;
}

/** Options of {@link MocraBuilder.proxies}. */
export interface ProxiesOptions {
  /** Which responses count as "this exit was blocked"; `false`: only errors count. @default 403, 429, captcha titles */
  blocked?: EngineOptions['blocked'];
  /** Code options of the pool built from config (clock, undici agent options such as `proxyTls`). */
  pool?: EngineOptions['proxyPoolOptions'];
}

/** Options of {@link MocraBuilder.politeness}: the per-host rules, and robots.txt. */
export interface PolitenessOptions extends Omit<HostSchedulerOptions, 'robots'> {
  /**
   * Obey robots.txt: disallowed URLs are dropped (`mocra:frontier:drop`), Crawl-delay spaces
   * the host's requests. `true`, the cache's options (product token, TTL…), or a cache of your
   * own (to inspect it after the run). @default false
   */
  robots?: boolean | RobotsCacheOptions | RobotsGuard;
}

export interface LoggingOptions {
  /** @default 'warn' ('silent' under a test runner or with MOCRA_DISABLE_LOGS=1) */
  level?: LogLevel;
  /** Log through this pino logger instead. */
  logger?: Logger;
}

interface Registration {
  module: Module<unknown>;
  sink: DataSink<unknown>;
  /** Added with `.spider()`: on a partitioned cluster its entry requests are routed by host. */
  spider?: boolean;
}

export class Mocra {
  private constructor() {}

  /** Start configuring a run. */
  static builder(): MocraBuilder {
    return new MocraBuilder();
  }
}

export class MocraBuilder {
  readonly #registrations: Registration[] = [];
  #options: EngineOptions = { handleSignals: true };
  #middleware: MiddlewareManager | undefined;
  #configFile: { path: string; watch: boolean } | undefined;
  #configValues: MocraConfigInput | undefined;
  #moduleLayers: MemoryModuleConfigData | undefined;
  #config: MocraConfig | undefined;
  readonly #configListeners: ((event: ConfigReloadEvent) => void)[] = [];
  readonly #configErrorListeners: ((event: ConfigReloadErrorEvent) => void)[] = [];
  #dashboard: DashboardOptions | undefined;
  readonly #cluster: ClusterSettings = {};
  /** This process's node of the embedded Raft cluster (`.cluster(ClusterConfig…)`). */
  #raft: ClusterConfig | undefined;
  #dagJobs: LazyDagJobs | undefined;
  readonly #startListeners: ((engine: Engine) => void)[] = [];
  readonly #endListeners: ((summary: RunSummary) => void | Promise<void>)[] = [];

  /**
   * Called with the engine once `run()` has built it, before it starts (progress displays poll
   * its `stats()`). With `.persist(dir)` the directory is already this process's (see
   * `persist`): a listener may open files the run writes. A listener that throws fails `run()`
   * before any work is taken.
   */
  onStart(listener: (engine: Engine) => void): this {
    this.#startListeners.push(listener);
    return this;
  }

  /**
   * Called with the summary as soon as the run ended, and awaited, before a dashboard lingers
   * (`lingerMs`) and closes and before `run()` resolves.
   */
  onEnd(listener: (summary: RunSummary) => void | Promise<void>): this {
    this.#endListeners.push(listener);
    return this;
  }

  /** Run this spider; its items go to `sink`. Repeatable (names must differ). */
  spider<TItem>(spider: Spider<TItem>, sink: SinkLike<TItem>): this {
    this.module(compileSpider(spider), sink);
    this.#registrations.at(-1)!.spider = true;
    return this;
  }

  /** Run a module (nodes with generate/parse) — the advanced form of a spider. */
  module<TItem>(module: Module<TItem>, sink: SinkLike<TItem>): this {
    const dataSink = typeof sink === 'function' ? onItem(sink) : sink;
    if (dataSink === null || typeof dataSink !== 'object' || typeof dataSink.write !== 'function') {
      throw new InvalidArgumentError(
        `'${module.name}': the sink must be a function or have write(item, meta)`,
      );
    }
    if (this.#registrations.some((r) => r.module.name === module.name)) {
      throw new InvalidArgumentError(`a spider or module named '${module.name}' was already added`);
    }
    this.#registrations.push({ module: module as Module<unknown>, sink: dataSink as DataSink<unknown> });
    return this;
  }

  /** Concurrent downloads (the other stages size themselves from their own defaults). @default 32 */
  concurrency(downloads: number): this {
    return this.#set({ concurrency: downloads });
  }

  /** Handlers per stage, for fine tuning. */
  stages(stages: StageConcurrency): this {
    return this.#set({ stages: { ...this.#options.stages, ...stages } });
  }

  /** Options of the default HTTP downloader: timeouts, size cap, redirects, User-Agent, headers. */
  download(options: HttpDownloaderOptions): this {
    return this.#set({ download: { ...this.#options.download, ...options } });
  }

  /** Replace the default HTTP downloader (requests that name no downloader use it). */
  defaultDownloader(downloader: Downloader): this {
    return this.#set({ downloader });
  }

  /**
   * Register a named downloader (a browser, a WebSocket downloader, your own). A spider, module
   * or request selects it with `downloader: '<name>'`. Repeatable; names must differ.
   */
  downloader(downloader: Downloader): this {
    return this.#set({ downloaders: [...(this.#options.downloaders ?? []), downloader] });
  }

  /**
   * Send requests through a proxy pool: its config (the keys of the TOML `[proxy]` section, in
   * camelCase or snake_case) or a pool you built with `createProxyPool`. Every outcome is
   * reported back to the pool; `blocked` says which responses count as a block (default 403,
   * 429 and captcha pages). A spider, module or request can set `proxy: false` or pin a
   * provider or tier.
   */
  proxies(proxies: NonNullable<EngineOptions['proxies']>, options: ProxiesOptions = {}): this {
    return this.#set({
      proxies,
      ...(options.blocked === undefined ? {} : { blocked: options.blocked }),
      ...(options.pool === undefined ? {} : { proxyPoolOptions: options.pool }),
    });
  }

  /** Dedup, fingerprint normalization, max pages / max depth, the download gate. */
  frontier(options: FrontierOptions): this {
    return this.#set({ frontier: { ...this.#options.frontier, ...options } });
  }

  /**
   * Per-host politeness at the download gate: concurrency per host, a minimum delay with
   * jitter, an optional autothrottle, 429/503 backoff with Retry-After, and (with `robots`)
   * robots.txt. docs/crawling.md#politeness
   */
  politeness(options: PolitenessOptions = {}): this {
    const { robots, ...rules } = options;
    const guard =
      robots === undefined || robots === false
        ? undefined
        : robots === true
          ? createRobotsCache()
          : 'check' in robots && typeof robots.check === 'function'
            ? robots
            : createRobotsCache(robots as RobotsCacheOptions);
    return this.frontier({
      gate: createHostScheduler({ ...rules, ...(guard === undefined ? {} : { robots: guard }) }),
    });
  }

  /** Retries of the default failure policy (count, backoff, retried statuses). */
  retry(options: SimpleRetryPolicyOptions): this {
    return this.#set({ retry: { ...this.#options.retry, ...options } });
  }

  /** Replace the failure policy. */
  policy(policy: FailurePolicy): this {
    return this.#set({ policy });
  }

  /**
   * Tune the default failure policy: `[[policy.overrides]]`-style entries (snake_case keys),
   * error thresholds, circuit breakers (docs/error-handling.md). Later calls merge; overrides add up.
   */
  recovery(options: RecoveryPolicyOptions): this {
    const previous = this.#options.recovery ?? {};
    return this.#set({
      recovery: {
        ...previous,
        ...options,
        overrides: [...(previous.overrides ?? []), ...(options.overrides ?? [])],
      },
    });
  }

  /** Deadline of each stage's handlers (a handler past it is aborted and retried); `false`: none. */
  watchdog(timeouts: WatchdogTimeouts | false): this {
    return this.#set({ watchdog: timeouts });
  }

  /**
   * Make the run crash-safe on this machine: queues, retries, dead letters and the dedup set
   * live in LevelDB under `dir`. A process killed (even with SIGKILL) and started again with
   * the same `dir` resumes: nothing acknowledged is lost and finished pages are not fetched again.
   * `run()` takes the directory first: while another process has it, `run()` rejects with
   * `MOCRA_ERR_STORE_LOCKED` before anything is opened or fetched.
   */
  persist(dir: string): this {
    return this.#set({ persist: dir });
  }

  /**
   * Cache responses on disk for development (Scrapy's HTTPCACHE): a page fetched once is
   * replayed on later runs by its request fingerprint, without a request to the site, until
   * `ttlMs` (0: forever) has passed. See docs/crawling.md.
   */
  httpCache(options: string | HttpCacheOptions): this {
    return this.#set({ httpCache: typeof options === 'string' ? { dir: options } : options });
  }

  /**
   * Use a database (`postgres://…` or `sqlite:<path>`, or options): accounts × platforms ×
   * modules and their layered config and middleware from its tables, cron targets and seeds from
   * its enabled contexts, `task_result` and `log` rows, and with `items` the items themselves,
   * upserted by item id. Wins over config.toml's `[db]`. docs/store.md
   */
  store(store: string | EngineStoreOptions): this {
    return this.#set({ store });
  }

  /** Put the stage topics on this queue backend (in memory by default). */
  queueBackend(queue: QueueBackend): this {
    return this.#set({ queue });
  }

  logging(options: LoggingOptions): this {
    return this.#set({
      ...(options.level === undefined ? {} : { logLevel: options.level }),
      ...(options.logger === undefined ? {} : { logger: options.logger }),
    });
  }

  /**
   * Stop gracefully on SIGINT/SIGTERM (work in flight finishes within the shutdown timeout,
   * the rest is put back; a second signal aborts at once). @default true
   */
  handleSignals(enabled = true): this {
    return this.#set({ handleSignals: enabled });
  }

  /** How long work in flight may take to finish when stopping. @default 10000 */
  shutdownTimeout(ms: number): this {
    return this.#set({ shutdownTimeoutMs: ms });
  }

  /** Aborting this signal stops the run gracefully. */
  signal(signal: AbortSignal): this {
    return this.#set({ signal });
  }

  /** Called for every failure (after the policy decided). */
  onError(fn: (event: ErrorEvent, decision: PolicyDecision) => void): this {
    return this.#set({ onError: fn });
  }

  /** Any other engine option (escape hatch; later calls of the typed methods still apply). */
  engineOptions(options: EngineOptions): this {
    return this.#set(options);
  }

  /**
   * Serve the control API and the live dashboard while the crawl runs: `GET /` is the
   * dashboard, `/metrics` the Prometheus families, `/observability/*` the read-only views, and
   * with an `apiKey` the control endpoints (pause, resume, `/start_work`, dead letters). The
   * API binds before the engine starts: a port that cannot be bound fails `run()` with
   * `MOCRA_ERR_API_BIND` and no work is taken. See docs/api-reference.md.
   */
  dashboard(port: number | DashboardOptions = {}, options: DashboardOptions = {}): this {
    this.#dashboard = typeof port === 'number' ? { ...options, port } : { ...port };
    return this;
  }

  /**
   * Run on this queue backend: `redis://host:6379`, `nats://host:4222`, `kafka://host:9092` make
   * this process one worker of a crawl shared by every process with the same settings (seeded
   * once, deduplicated and finished cluster-wide; docs/deployment.md). `memory://` is the
   * default. Unset: `MOCRA_QUEUE`.
   */
  queue(url: string): this {
    this.#cluster.queue = url;
    return this;
  }

  /** Coordination of a distributed run: `redis://…` or `local://`. Unset: `MOCRA_COORDINATION`, else the Redis queue's URL. */
  coordination(url: string): this {
    this.#cluster.coordination = url;
    return this;
  }

  /**
   * Settings of a distributed run: run id, member id, shared politeness, dedup, completion timing.
   *
   * Given a `ClusterConfig` (`ClusterConfig.bootstrap(id, addr, dir)` on one node,
   * `ClusterConfig.join(id, addr, dir, seed)` on the others, or `ClusterConfig.fromEnv()`), this
   * process runs a node of the embedded Raft cluster and coordinates through it (leader, locks,
   * membership, cron ownership, checkpoints) — no Redis needed for coordination. With a queue
   * (`.queue(url)` / `MOCRA_QUEUE`) the nodes share one crawl's queues; with none (unset or
   * `'none'`) the cluster is partitioned: each node runs on its own queues (LevelDB with
   * `persist`), and each account (module) or host (spider) is crawled by one node, the owner of
   * its key among the live members; seeds, cron runs and `/start_work` tasks are forwarded to it.
   * See docs/deployment.md, "Topologies".
   */
  cluster(config: ClusterConfig | ClusterOptions, options: ClusterOptions = {}): this {
    if (config instanceof ClusterConfig) this.#raft = config;
    const more = config instanceof ClusterConfig ? options : { ...config, ...options };
    this.#cluster.cluster = { ...this.#cluster.cluster, ...more };
    return this;
  }

  /**
   * Run a `@mocra/dag` graph as a job of this engine (docs/deployment.md, "Cluster (Raft)", DAG jobs):
   * seeded once per crawl run (or on its `cron`), run on one node at a time under a fenced run
   * guard, checkpointed after every node so a run interrupted by a node's death resumes on
   * another one, with remote-placed nodes run by any node's worker. Each finished run writes one
   * {@link DagJobResult} to `sink` (itemId `dag:{name}:{key}`).
   */
  dag(name: string, build: () => Dag, options: DagJobOptions & { sink?: SinkLike<DagJobResult> } = {}): this {
    this.#dagJobs ??= new LazyDagJobs();
    const { sink, ...jobOptions } = options;
    const module = this.#dagJobs.module(name, build, jobOptions);
    const target = sink === undefined ? { write() {} } : typeof sink === 'function' ? onItem(sink) : sink;
    this.#registrations.push({ module: module as Module<unknown>, sink: target as DataSink<unknown> });
    return this;
  }

  /**
   * Add a download, data or store middleware (docs/middleware-guide.md). Global by default; with
   * `{ global: false }` it runs only where a module's config or a request selects it by name.
   */
  middleware(middleware: Middleware, options: MiddlewareOptions = {}): this {
    this.#middleware ??= createMiddlewareManager();
    this.#middleware.register(middleware, options);
    return this;
  }

  /**
   * Take settings from a TOML file (docs/configuration.md), validated at build; keys given in
   * code (`.config()`) and `MOCRA_*` variables win over it. With `watch` (the default) the file
   * is reloaded while the run lasts and its live keys apply at once. A file does not switch
   * auto-seeding off (`crawler.auto_seed` does).
   */
  fromToml(path: string, options: { watch?: boolean } = {}): this {
    this.#configFile = { path, watch: options.watch ?? true };
    this.#config = undefined;
    return this;
  }

  /** Settings in code, with the keys of config.toml (docs/configuration.md). Wins over the file. */
  config(values: MocraConfigInput): this {
    this.#configValues = values;
    this.#config = undefined;
    return this;
  }

  /**
   * Module-config layers in code (module, account, platform, relations; no database needed).
   * config.toml's `[modules]`, `[accounts]` and `[platforms]` tables win over them.
   */
  moduleConfig(layers: MemoryModuleConfigData): this {
    this.#moduleLayers = layers;
    return this;
  }

  /** Cron options: a clock (a ManualClock in tests), the misfire tolerance, a partition gate, or `enabled: false`. */
  cron(options: EngineCronOptions): this {
    return this.#set({ cron: { ...this.#options.cron, ...options } });
  }

  /** Called after a reload of the `.fromToml()` file changed something. */
  onConfigChange(listener: (event: ConfigReloadEvent) => void): this {
    this.#configListeners.push(listener);
    return this;
  }

  /** Called when a reload of the `.fromToml()` file failed (the last good config stays). */
  onConfigError(listener: (event: ConfigReloadErrorEvent) => void): this {
    this.#configErrorListeners.push(listener);
    return this;
  }

  /** The engine, with every spider registered, not yet running (for `stats()`, `pause()`, `stop()`). */
  build(): Engine {
    if (this.#distributed() !== undefined) {
      throw new InvalidArgumentError(
        'a distributed run (a queue other than memory://) connects first: use run(), or buildDistributed()',
      );
    }
    const { engine } = this.#assemble();
    // Closed with the engine's queue: the worker and dispatcher stop when it does. Attached once
    // the jobs' code has loaded; their nodes wait for it, and a failure is theirs to report.
    this.#dagJobs?.attach({ engine }).catch(() => {});
    return engine;
  }

  /**
   * For a distributed run: connect (queue, coordination, shared dedup and budget) and build the
   * engine. `run()` runs it as one worker of the cluster; `close()` the connections after.
   */
  async buildDistributed(): Promise<{
    engine: Engine;
    runtime: DistributedRuntime;
    run(): Promise<RunSummary>;
  }> {
    const options = this.#distributed();
    if (options === undefined)
      throw new InvalidArgumentError('no distributed queue configured: call .queue(url)');
    const runtime = await this.#connect(options);
    try {
      const { engine } = this.#assemble(runtime);
      const jobs = this.#dagJobs;
      await jobs?.attach({ engine, coordination: runtime.coordination });
      const run = async () => {
        try {
          return await runtime.run(engine);
        } finally {
          await jobs?.close();
        }
      };
      return { engine, runtime, run };
    } catch (err) {
      await runtime.close();
      throw err;
    }
  }

  /** Connect a distributed run; with a `ClusterConfig`, start this process's Raft node first. */
  async #connect(options: DistributedOptions): Promise<DistributedRuntime> {
    const { connectDistributed, createRaftCoordination } = await import('@mocra/core/cluster');
    if (this.#raft === undefined) return connectDistributed(options);
    const coordinationOptions = options.coordinationOptions ?? {};
    const coordination: Coordination = await createRaftCoordination({
      config: this.#raft,
      namespace: options.namespace ?? 'mocra',
      ...(coordinationOptions.memberTtlMs === undefined
        ? {}
        : { memberTtlMs: coordinationOptions.memberTtlMs }),
      ...coordinationOptions.raft,
    });
    // The runtime owns it from here (closes it on failure and at the end).
    return connectDistributed({ ...options, coordination });
  }

  #distributed() {
    const config = this.#resolvedConfig();
    const namespace = this.#options.namespace ?? config?.name;
    // `[channel_config]` of a `.fromToml()`/`.config()` config, under what the builder set.
    const fromConfig = config === undefined ? {} : clusterSettingsFromConfig(config);
    const resolved = resolveClusterOptions(
      {
        ...fromConfig,
        ...this.#cluster,
        cluster: { ...fromConfig.cluster, ...this.#cluster.cluster },
        ...(namespace === undefined ? {} : { namespace }),
      },
      process.env,
      { raft: this.#raft !== undefined },
    );
    // No queue service: each node runs on its own queues, spiders' entry requests routed by host.
    if (resolved !== undefined && resolved.queue === undefined) {
      const spiders = this.#registrations.filter((r) => r.spider).map((r) => r.module.name);
      return { ...resolved, partitionByHost: spiders };
    }
    return resolved;
  }

  /**
   * Build and run until the crawl is idle (or stopped); resolves with the run summary. With
   * `.dashboard()`, the API is up before the first task is taken and closes after the run.
   */
  async run(): Promise<RunSummary> {
    const persist = this.#options.persist;
    const lock = persist === undefined ? undefined : await lockPersistDir(persist);
    try {
      const distributed = this.#distributed();
      const runtime = distributed === undefined ? undefined : await this.#connect(distributed);
      try {
        return await this.#runOn(runtime);
      } finally {
        await runtime?.close();
      }
    } finally {
      await lock?.release();
    }
  }

  async #runOn(runtime: DistributedRuntime | undefined): Promise<RunSummary> {
    const { engine, logs, metricsRef } = this.#assemble(runtime);
    // A `MOCRA_*` typo would otherwise change nothing without a word.
    for (const unknown of unknownEnvVariables(process.env)) {
      engine.log.warn({ variable: unknown.variable, suggestion: unknown.suggestion }, unknown.message);
    }
    for (const listener of this.#startListeners) listener(engine);
    // Names a config layer selects (middleware) must exist: a typo fails here, not per request.
    await engine.validateModules();
    const live = this.#watchConfig(engine);
    const runEngine = async () => {
      // DAG jobs: this node's dispatcher and worker, on the engine's queue and the coordination.
      await this.#dagJobs?.attach({
        engine,
        ...(runtime === undefined ? {} : { coordination: runtime.coordination }),
      });
      try {
        return await (runtime === undefined ? engine.run() : runtime.run(engine));
      } finally {
        live?.close();
        await this.#dagJobs?.close();
      }
    };
    const ended = async (summary: RunSummary) => {
      for (const listener of this.#endListeners) await listener(summary);
      return summary;
    };
    const dashboard = this.#effectiveDashboard();
    if (dashboard === undefined) return ended(await runEngine());
    const {
      keepAlive: _keepAlive,
      logBufferSize: _size,
      logLevel: _level,
      onListen,
      lingerMs = 0,
      ...apiOptions
    } = dashboard;
    if (!(Number.isFinite(lingerMs) && lingerMs >= 0)) {
      throw new InvalidArgumentError(
        `dashboard lingerMs must be a number of milliseconds ≥ 0, got ${lingerMs}`,
      );
    }
    const api = await startEngineApi(engine, {
      // In a cluster: pause/resume on every node, `/nodes`, and the cluster view (Raft: roles,
      // term, commit index, partition map).
      ...(runtime === undefined ? {} : { coordination: runtime.coordination }),
      // Partitioned: which node owns which host / account, in `/nodes`.
      ...(runtime?.router === undefined ? {} : { partitions: () => runtime.router!.partitionMap() }),
      ...apiOptions,
      ...(logs === undefined ? {} : { logs }),
    });
    metricsRef.current = api.metrics;
    engine.log.info({ url: api.url }, 'dashboard listening');
    onListen?.(api.url);
    try {
      const summary = await ended(await runEngine());
      if (lingerMs > 0 && summary.reason !== 'signal' && summary.reason !== 'aborted') {
        await this.#linger(lingerMs);
      }
      return summary;
    } finally {
      await api.close();
    }
  }

  /** Wait `ms`, or less when `.signal()` aborts or (with `handleSignals`) SIGINT/SIGTERM comes. */
  async #linger(ms: number): Promise<void> {
    const { signal, handleSignals } = this.#options;
    if (signal?.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        if (handleSignals) {
          process.off('SIGINT', done);
          process.off('SIGTERM', done);
        }
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      if (handleSignals) {
        process.once('SIGINT', done);
        process.once('SIGTERM', done);
      }
    });
  }

  #assemble(runtime?: DistributedRuntime): {
    engine: Engine;
    logs: LogBuffer | undefined;
    metricsRef: { current: MocraMetrics | undefined };
  } {
    if (this.#registrations.length === 0) {
      throw new InvalidArgumentError('nothing to run: add a spider with .spider(spider, sink)');
    }
    const metricsRef: { current: MocraMetrics | undefined } = { current: undefined };
    let options = this.#withConfig(this.#options);
    let logs: LogBuffer | undefined;
    const dashboard = this.#effectiveDashboard();
    if (dashboard !== undefined) {
      if (dashboard.keepAlive === true) options = { ...options, endWhenIdle: false };
      // The logs panel is fed by a second pino stream; a logger passed to .logging() is used as
      // is (add `buffer.destination` to its streams yourself to fill the panel).
      logs = createLogBuffer({
        ...(dashboard.logBufferSize === undefined ? {} : { capacity: dashboard.logBufferSize }),
        onRecord: (level) => metricsRef.current?.inc('logEvents', { sink: 'buffer', level }),
        onDrop: (reason) =>
          metricsRef.current?.inc('logDropped', { sink: 'buffer', level: 'unknown', reason }),
      });
      if (options.logger === undefined) {
        options = {
          ...options,
          logger: createBufferedLogger({
            buffer: logs,
            ...(options.logLevel === undefined ? {} : { level: options.logLevel }),
            ...(dashboard.logLevel === undefined ? {} : { bufferLevel: dashboard.logLevel }),
          }),
        };
      }
    }
    if (runtime !== undefined) options = runtime.engineOptions(options);
    const engine = createEngine(options);
    for (const { module, sink } of this.#registrations) engine.register(module, sink);
    return { engine, logs, metricsRef };
  }

  #set(options: EngineOptions): this {
    this.#options = { ...this.#options, ...options };
    return this;
  }

  /**
   * The config from `.fromToml()` / `.config()` / `MOCRA_*`, read and validated once. The
   * environment is read even without a file or values: a run with no `MOCRA_*` key set keeps
   * the engine's own defaults (no config at all).
   */
  #resolvedConfig(): MocraConfig | undefined {
    if (this.#configFile === undefined && this.#configValues === undefined) {
      const env = readEnvOverrides(process.env);
      if (env.variables.size === 0 && env.issues.length === 0) return undefined;
    }
    if (this.#config === undefined) {
      let toml: string | undefined;
      if (this.#configFile !== undefined) {
        try {
          toml = readFileSync(this.#configFile.path, 'utf8');
        } catch (err) {
          throw new ConfigReadError(this.#configFile.path, { cause: err });
        }
      }
      this.#config = resolveConfig({
        ...(toml === undefined ? {} : { toml, file: this.#configFile!.path }),
        ...(this.#configValues === undefined ? {} : { values: this.#configValues }),
      });
    }
    return this.#config;
  }

  /** Engine options from the config, under the options set by the typed builder methods. */
  #withConfig(options: EngineOptions): EngineOptions {
    const config = this.#resolvedConfig();
    const layers = this.#moduleLayers;
    const middleware = this.#middleware === undefined ? {} : { middleware: this.#middleware };
    if (config === undefined) {
      const moduleConfig =
        layers === undefined
          ? {}
          : {
              moduleConfig: createModuleConfigResolver({
                provider: createMemoryModuleConfigProvider(layers),
              }),
            };
      return { ...moduleConfig, ...middleware, ...options };
    }
    const base = {
      ...engineOptionsFromConfig(config, layers === undefined ? {} : { moduleLayers: layers }),
      // `[proxy]`: the proxy pool (docs/proxies.md), unless `.proxies()` set one.
      ...(config.proxy === undefined ? {} : { proxies: config.proxy }),
    };
    // `.concurrency(n)` sizes the download stage; the config's own size must not shadow it.
    const stages = {
      ...base.stages,
      ...(options.concurrency === undefined ? {} : { download: options.concurrency }),
    };
    return {
      ...base,
      ...middleware,
      ...options,
      stages: { ...stages, ...options.stages },
      download: { ...base.download, ...options.download },
      frontier: { ...base.frontier, ...options.frontier },
      retry: { ...base.retry, ...options.retry },
      cron: { ...base.cron, ...options.cron },
    };
  }

  /** `.dashboard()` settings, else the config's `[api]` table when it enables the API. */
  #effectiveDashboard(): DashboardOptions | undefined {
    if (this.#dashboard !== undefined) return this.#dashboard;
    const config = this.#resolvedConfig();
    const api = config === undefined ? undefined : apiOptionsFromConfig(config);
    return api === undefined ? undefined : { ...api };
  }

  /** Watches the `.fromToml()` file while the engine runs and applies live keys (docs/configuration.md#hot-reload). */
  #watchConfig(engine: Engine): LiveConfig | undefined {
    const file = this.#configFile;
    const config = this.#config;
    if (file === undefined || !file.watch || config === undefined) return undefined;
    const layers = this.#moduleLayers;
    const live = new LiveConfig(
      { file: file.path, ...(this.#configValues === undefined ? {} : { values: this.#configValues }) },
      config,
    );
    live.onChange((event) => {
      const applied = applyLiveConfig(
        engine,
        event.config,
        event.applied,
        layers === undefined ? {} : { moduleLayers: layers },
      );
      engine.log.info(
        { applied, restartRequired: event.restartRequired.map((c) => c.key) },
        'config reloaded',
      );
      for (const listener of this.#configListeners) listener(event);
    });
    live.onError((event) => {
      engine.log.error({ err: event.error }, 'config reload failed; the last good config stays');
      for (const listener of this.#configErrorListeners) listener(event);
    });
    live.watch();
    return live;
  }
}
