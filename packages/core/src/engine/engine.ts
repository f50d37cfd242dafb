/**
 * The engine: five stages, each a bounded worker pool over one topic of the queue backend.
 *
 * ```
 *  seed/submit ─▶ [task] ─▶ task stage: generate(entry nodes) ─▶ admit ─┐
 *                                                                      ▼
 *        ┌──────────────────────────────────────────────────────── [request]   (unbounded: the frontier)
 *        │                                                              │
 *        │                                          download stage: gate ─▶ downloader
 *        │                                                              ▼
 *        │                                                         [response]   (bounded)
 *        │                                                              │
 *        │                 parse stage: node.parse ─▶ items ─▶ sink (inline, before the ack)
 *        │                                                              │ follow-ups
 *        │                                                              ▼
 *        └── admit ◀── followUp stage: requests / generate(target) ◀── [parser_task]   (bounded)
 *
 *   any stage that fails ─▶ [error] (unbounded) ─▶ error stage: report, then policy:
 *                                                  retry (republish to the origin topic, delayed)
 *                                                  or dead-letter (the error topic's DLQ)
 * ```
 *
 * Deadlock freedom (the pipeline is a cycle): a handler only blocks while publishing to a full
 * bounded topic. `request` and `error` are unbounded, so the generate stages (task,
 * followUp) never block; `parser_task` therefore always drains, so parse never blocks for
 * long, so `response` drains, so download progresses. Bounding `request` would close the
 * cycle (download ▶ response ▶ parse ▶ parser_task ▶ generate ▶ request ▶ download) into a
 * possible deadlock — that is why the frontier grows instead (and spills to disk once the
 * frontier work adds that).
 *
 * The run ends exactly when nothing is left anywhere: no message ready, delayed or leased on
 * any topic, no handler running and no seeding in progress. That is re-checked whenever a
 * stage settles a message — there is no idle timer.
 */

import { randomUUID } from 'node:crypto';
import type { ModuleConfigResolver } from '../config/module-config.js';
import type { Coordination } from '../coordination/types.js';
import { JoinCredits } from '../distributed/join-credits.js';
import type { BlockedDetectionOptions } from '../downloader/blocked.js';
import { DownloadRouter, type DownloadRouterOptions } from '../downloader/download-router.js';
import { HttpCache, type HttpCacheOptions } from '../downloader/http-cache.js';
import { createHttpDownloader, type HttpDownloaderOptions } from '../downloader/http-downloader.js';
import type { Downloader } from '../downloader/types.js';
import { EngineStateError, InvalidArgumentError, isDataLost, isMocraError } from '../errors.js';
import { TieredDeduplicator } from '../frontier/dedup/tiered-deduplicator.js';
import { Frontier, type FrontierOptions, type FrontierStats } from '../frontier/frontier.js';
import type { MiddlewareManager } from '../middleware/manager.js';
import {
  checkStageName,
  type ErrorEvent,
  type FollowUpTask,
  RENAMED_STAGES,
  STAGE_NAMES,
  type StageName,
  type TaskEvent,
  TOPICS,
} from '../model/events.js';
import type { DataSink } from '../model/item.js';
import type { Request, RequestData } from '../model/request.js';
import type { Response } from '../model/response.js';
import { scheduleModuleCrons } from '../module/cron-jobs.js';
import type { ModuleGraph } from '../module/graph.js';
import { ModuleRegistry, type RegisteredModule } from '../module/registry.js';
import { RunLedger } from '../module/run-ledger.js';
import { ModuleRuntime, type ModuleRuntimeStats } from '../module/runtime.js';
import type { Module } from '../module/types.js';
import { channels } from '../observability/channels.js';
import { ErrorDigest, type ErrorExample } from '../observability/error-digest.js';
import { createLogger, type Logger, type LogLevel } from '../observability/logger.js';
import type { BreakerScope, BreakerSnapshot, BreakerState } from '../policy/circuit-breakers.js';
import type { RecoveryPolicyOptions } from '../policy/recovery-policy.js';
import type { SimpleRetryPolicyOptions } from '../policy/simple-retry-policy.js';
import type { FailurePolicy, PolicyDecision } from '../policy/types.js';
import { LevelQueueBackend } from '../queue/leveldb-queue.js';
import type { Delivery, LeaseQueue, QueueBackend, TopicOptions } from '../queue/types.js';
import { type Clock, systemClock } from '../schedule/clock.js';
import { CronScheduler } from '../schedule/scheduler.js';
import type { SessionStore } from '../session/session.js';
import { EngineStore } from '../store/engine-store.js';
import { type EngineStoreOptions, resolveEngineStoreOptions } from '../store/options.js';
import type { EngineDeadLetters } from './dead-letters.js';
import { ClaimingDeduplicator, persistPaths, RecoveryJournal } from './persistence.js';
import { EngineRecovery, type PolicyStats, type WatchdogTimeouts } from './recovery.js';
import { type HandlerResult, StageRunner } from './stage-runner.js';
import { publishJoins } from './stages/common-steps.js';
import { downloadStage } from './stages/download-stage.js';
import { errorStage, reportStageFailure } from './stages/error-stage.js';
import { followUpStage } from './stages/follow-up-stage.js';
import { parseStage } from './stages/parse-stage.js';
import {
  describeDelivery,
  type EngineCounters,
  type EngineTopics,
  keyOf,
  type StageEnv,
} from './stages/stage-env.js';
import { taskStage } from './stages/task-stage.js';

/** Handlers per stage. */
export interface StageConcurrency {
  /** @default 4 */
  task?: number;
  /** @default the engine's `concurrency` (32) */
  download?: number;
  /** @default 16 */
  parse?: number;
  /** @default 8 */
  followUp?: number;
  /** @default 4 */
  error?: number;
}

/** Topic settings. `request` and `error` have no capacity: they must be allowed to grow (see the module comment). */
export interface EngineTopicOptions {
  /** @default capacity 1000 */
  task?: TopicOptions;
  request?: Omit<TopicOptions, 'capacity'>;
  /** Responses hold bodies in memory. @default capacity max(64, 2 × download concurrency) */
  response?: TopicOptions;
  /**
   * Follow-up tasks carry every request a parse followed (a page with 1,000 links is one
   * message of 1,000 requests), so the cap is kept low: parse waits instead of the frontier
   * piling up in memory before admission. @default capacity 64
   */
  followUp?: TopicOptions;
  error?: Omit<TopicOptions, 'capacity'>;
}

/**
 * Where work runs in a partitioned cluster (several nodes, each on its own queues; see
 * distributed/partition-router.ts). The engine asks it twice and nowhere else:
 *
 * ```
 *  submit(task)            seeding, cron, /start_work   routeTask: forwarded to its owner, or here
 *  task ▶ generate(entry)  a task's first requests      routeSeeds: each to its owner, the rest here
 * ```
 *
 * Everything after that (follow-ups, retries) stays on the node that runs it. Both calls run
 * while the engine counts itself busy, so a forward in flight keeps the cluster from ending.
 */
export interface EngineRouter {
  /** True when `task` was handed to (and accepted by) another node; false: run it here. */
  routeTask(task: TaskEvent): Promise<boolean>;
  /** Hand the entry requests other nodes own to them; returns those that run here. */
  routeSeeds(requests: Request[], task: TaskEvent): Promise<Request[]>;
}

/** Work another node of a partitioned cluster routed here (see {@link EngineRouter}). */
export type ForwardedWork =
  | { readonly kind: 'task'; readonly task: TaskEvent }
  | { readonly kind: 'seeds'; readonly followUp: FollowUpTask };

export interface EngineOptions {
  /**
   * Where the stage topics live. Not closed by the engine when given. @default a new in-memory
   * backend whose lanes spill past 16,384 ready messages to a temporary LevelDB (LevelQueueBackend)
   */
  queue?: QueueBackend;
  /** Namespace of the in-memory backend the engine creates. @default 'mocra' */
  namespace?: string;
  /** @default an HTTP downloader (undici) built from `download` */
  downloader?: Downloader;
  /** Options of the default HTTP downloader (ignored when `downloader` is given). */
  download?: HttpDownloaderOptions;
  /**
   * Named downloaders (a browser, a WebSocket downloader, your own), each registered under its
   * `name`; modules and requests select them with `downloader: '<name>'`. Closed when the engine stops.
   */
  downloaders?: readonly Downloader[];
  /**
   * A proxy pool (`@mocra/proxy`), or its config (a `[proxy]` table or `ProxyPoolConfig`) to
   * build one from. Requests of downloaders that use proxies go through it and every outcome
   * is reported back. A pool built from config is closed when the engine stops; one passed in is not.
   */
  proxies?: DownloadRouterOptions['proxies'];
  /** Code options of a pool built from `proxies` config (clock, undici agent options). */
  proxyPoolOptions?: DownloadRouterOptions['proxyPoolOptions'];
  /** Which responses count as "this exit was blocked" for the proxy pool; `false`: only errors count. @default 403, 429, captcha titles */
  blocked?: BlockedDetectionOptions | false;
  /** Dedup, depth and page limits, the download gate. */
  frontier?: FrontierOptions;
  /** Concurrent downloads. @default 32 */
  concurrency?: number;
  /** Handlers per stage (overrides `concurrency` for download). */
  stages?: StageConcurrency;
  topics?: EngineTopicOptions;
  /**
   * Parse a response in the process that downloaded it while its parse stage has a free slot,
   * instead of sending it through the `response` topic (it still goes there when the parse
   * stage is full, paused or stopping, and for streamed responses). Saves a broker round trip
   * per page and the body's trip through the broker; the request is acked after its parse.
   * `false`: every response crosses the topic (say, to parse on other machines than the ones
   * that download). A run with `persist` always sends responses through its on-disk topic: a
   * page whose items were written must not be fetched again after a crash. @default true
   */
  parseWhereDownloaded?: boolean;
  /**
   * What to do with failures. @default a RecoveryPolicy (policy table, error thresholds, circuit
   * breakers; docs/error-handling.md) built from `recovery` and `retry`
   */
  policy?: FailurePolicy;
  /** Simple retry settings, applied to the default policy as overrides (ignored when `policy` is given). */
  retry?: SimpleRetryPolicyOptions;
  /** Overrides, thresholds and breakers of the default policy (ignored when `policy` is given). */
  recovery?: RecoveryPolicyOptions;
  /** Deadline of each stage's handlers; a handler past it is aborted and retried. `false`: none. @default see DEFAULT_WATCHDOG_TIMEOUTS */
  watchdog?: WatchdogTimeouts | false;
  /** Report loudly (error log, `mocra:policy:stall`) when nothing moved this long while work is pending. `false`: off. @default 120000 */
  stallMs?: number | false;
  /**
   * Directory of a crash-safe single-node run: the stage topics (with retries and DLQs), the
   * dedup set and a small recovery journal live there in LevelDB, so a process killed (even with
   * SIGKILL) and started again on the same directory resumes where it was: nothing acknowledged
   * is lost, pages already parsed are not fetched again, work in flight is redone. Ignored for
   * the queue when `queue` is given, for the dedup set when `frontier.deduplicator` is.
   * (docs/error-handling.md, "Crash-safe runs")
   */
  persist?: string;
  /** Partitioned cluster: which node runs which task and entry request. Set by the distributed runtime. @default undefined (all here) */
  router?: EngineRouter;
  /** @default a pino logger on stderr */
  logger?: Logger;
  /** @default 'warn' (see observability/logger.ts for the environment variables) */
  logLevel?: LogLevel;
  /** Stop gracefully on SIGINT/SIGTERM (a second signal aborts work in flight). @default false */
  handleSignals?: boolean;
  /** On stop, how long work in flight may take to finish before it is aborted and put back. @default 10000 */
  shutdownTimeoutMs?: number;
  /**
   * A response cache for development: responses are stored by request fingerprint and replayed
   * from disk on later runs (no request reaches the site) until `ttlMs` has passed. @default off
   */
  httpCache?: HttpCacheOptions;
  /** Publish one task per registered module when the run starts. @default true */
  autoSeed?: boolean;
  /**
   * End the run once no work is left anywhere. `false` is service mode: the engine keeps
   * running, idle, until `stop()`, a signal or the abort signal (work comes from `submit()` or
   * the control API's `/start_work`). @default true
   */
  endWhenIdle?: boolean;
  /** Download, data and store middleware (docs/middleware-guide.md). @default none */
  middleware?: MiddlewareManager;
  /** Where modules' config comes from: provider layers over config.toml defaults. @default built-in defaults only */
  moduleConfig?: ModuleConfigResolver;
  /** Sessions per account × platform (cookie jars, sticky headers, logins). @default a new store */
  sessions?: SessionStore;
  /** Cron of modules and spiders that have a `cron`. */
  cron?: EngineCronOptions;
  /** Cluster-wide claims: one cron firing per scheduled time, the advance gate once per run, stop flags. @default this process only */
  coordination?: Coordination;
  /**
   * A database (`@mocra/store`, PostgreSQL or SQLite), by URL or options: module config and
   * middleware selection from its account × platform × module tables, cron targets and seeds
   * from its enabled contexts, `task_result` and `log` rows, optionally the items
   * (docs/store.md, "The engine and the database"). @default none
   */
  store?: string | EngineStoreOptions;
  /** @default a random UUID */
  runId?: string;
  /** Aborting it stops the run gracefully. */
  signal?: AbortSignal;
  /** Called for every reported failure, after the policy decided (also published on `mocra:engine:error`). */
  onError?: (event: ErrorEvent, decision: PolicyDecision) => void;
}

/** Cron of modules and spiders (see docs/module-development.md). */
export interface EngineCronOptions {
  /** @default true */
  enabled?: boolean;
  /** Time for the scheduler (a ManualClock in tests). @default the system clock */
  clock?: Clock;
  /** A firing missed by more than this is skipped and reported. @default 300000 */
  misfireToleranceMs?: number;
  /** Whether this node fires a job (partition ownership by account in a cluster). @default every job */
  gate?: (job: { id: string; key: string }) => boolean;
  /**
   * Ask the gate again, this often, about a time it refused, so a partition's new owner fires
   * the times its old owner (a node that died) left unfired. @default 0 (never)
   */
  recheckRefusedMs?: number;
}

export type EngineState = 'created' | 'running' | 'stopping' | 'stopped';

/** Why a run ended. */
export type StopReason = 'idle' | 'stopped' | 'signal' | 'critical' | 'aborted';

export interface StageStats {
  /** Ready on the stage's topic. */
  queued: number;
  /** Waiting on the topic for a delay (retries, deferrals). */
  delayed: number;
  /** Handlers running in this process. */
  inFlight: number;
  done: number;
  failed: number;
  concurrency: number;
  paused: boolean;
}

export interface EngineStats extends EngineCounters {
  runId: string;
  state: EngineState;
  paused: boolean;
  /** Epoch ms; undefined before `run()`. */
  startedAt: number | undefined;
  uptimeMs: number;
  stages: Record<StageName, StageStats>;
  errorsByCode: Record<string, number>;
  frontier: FrontierStats;
  /** Modules: hand-offs, advance-gate and join firings, stops, work dropped after a stop or by middleware. */
  modules: ModuleRuntimeStats;
}

export interface RunSummary extends Omit<EngineStats, 'state' | 'paused' | 'uptimeMs'> {
  reason: StopReason;
  endedAt: number;
  durationMs: number;
  /** Messages left on the topics (ready, delayed or leased) when the run ended; 0 after an idle end. */
  pending: number;
  /** Per error code (most frequent first): the count and the first occurrence's URL and message. */
  errorExamples: Record<string, ErrorExample>;
}

const UNBOUNDED = Number.MAX_SAFE_INTEGER;

export function createEngine(options: EngineOptions = {}): Engine {
  return new Engine(options);
}

/** What the engine shows of its module registry. */
export type RegisteredModules = Pick<ModuleRegistry, 'get' | 'has' | 'names' | 'values' | 'node'>;

export class Engine {
  readonly runId: string;
  readonly log: Logger;
  readonly #registry = new ModuleRegistry();
  /** Modules' config, sessions, middleware and DAG routing (module/runtime.ts). */
  readonly #modules: ModuleRuntime;
  #cron: CronScheduler | undefined;
  /** The database integration (`store` option). */
  readonly #db: EngineStore | undefined;
  readonly #frontier: Frontier;
  readonly #options: EngineOptions;
  readonly #backend: QueueBackend;
  readonly #httpCache: HttpCache | undefined;
  readonly #ownsBackend: boolean;
  /** Selects each request's downloader and proxy, and reports proxy outcomes (downloader/download-router.ts). */
  readonly #downloads: DownloadRouter;
  readonly #recovery: EngineRecovery;
  /** Set with `persist`: claims and parsed pages (engine/persistence.ts). */
  readonly #journal: RecoveryJournal | undefined;
  readonly #topics: EngineTopics;
  /** What the stages see of the engine (engine/stages/stage-env.ts). */
  readonly #env: StageEnv;
  readonly #runners = new Map<StageName, StageRunner<unknown>>();
  readonly #concurrency: Record<StageName, number>;
  #state: EngineState = 'created';
  #paused = false;
  #startedAt: number | undefined;
  /** Publishes from outside the stages (seeding, submit) in progress: the run is not idle. */
  #seeding = 0;
  /** Outside publishes started so far (see activity()). */
  #outsideStarted = 0;
  #idleCheckQueued = false;
  #ending: Promise<RunSummary> | undefined;
  #resolveRun: ((summary: RunSummary) => void) | undefined;
  #signalCount = 0;
  #removeSignalHandlers: (() => void) | undefined;
  readonly #counters: EngineCounters = {
    pages: 0,
    items: 0,
    bytes: 0,
    errors: 0,
    retries: 0,
    deadLettered: 0,
    dropped: 0,
  };
  readonly #errorsByCode = new Map<string, number>();
  readonly #errorDigest = new ErrorDigest();

  constructor(options: EngineOptions = {}) {
    refuseRenamedOptions(options);
    this.#options = options;
    this.runId = options.runId ?? randomUUID();
    this.log = createLogger({
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.logLevel ? { level: options.logLevel } : {}),
    });
    const download = positiveInt('concurrency', options.stages?.download ?? options.concurrency, 32);
    this.#concurrency = {
      task: positiveInt('stages.task', options.stages?.task, 4),
      download,
      parse: positiveInt('stages.parse', options.stages?.parse, 16),
      followUp: positiveInt('stages.followUp', options.stages?.followUp, 8),
      error: positiveInt('stages.error', options.stages?.error, 4),
    };
    const persisted = options.persist === undefined ? undefined : persistPaths(options.persist);
    this.#journal = persisted === undefined ? undefined : new RecoveryJournal(persisted.journal);
    // A persisted run promises that a page whose items were written is never fetched again after
    // a crash: its response must be on disk (the response topic) before the parse writes items.
    const parseWhereDownloaded = (options.parseWhereDownloaded ?? true) && this.#journal === undefined;
    this.#backend =
      options.queue ??
      (persisted === undefined
        ? // In memory, spilling the overflow of a lane to a temporary LevelDB (queue/leveldb-queue.ts):
          // a frontier of millions of requests does not hold them all in the heap.
          new LevelQueueBackend({ namespace: options.namespace ?? 'mocra' })
        : new LevelQueueBackend({ dir: persisted.queue, namespace: options.namespace ?? 'mocra' }));
    this.#ownsBackend = options.queue === undefined;
    const t = options.topics ?? {};
    this.#topics = {
      task: this.#backend.topic<TaskEvent>(TOPICS.task, { capacity: 1000, ...t.task }),
      request: this.#backend.topic<Request | RequestData>(TOPICS.request, {
        ...t.request,
        capacity: UNBOUNDED,
      }),
      response: this.#backend.topic<Response>(TOPICS.response, {
        capacity: Math.max(64, 2 * download),
        ...t.response,
      }),
      followUp: this.#backend.topic<FollowUpTask>(TOPICS.followUp, { capacity: 64, ...t.followUp }),
      error: this.#backend.topic<ErrorEvent>(TOPICS.error, { ...t.error, capacity: UNBOUNDED }),
    };
    this.#downloads = new DownloadRouter({
      defaultDownloader:
        options.downloader ?? createHttpDownloader({ connections: download, ...options.download }),
      ...(options.downloaders === undefined ? {} : { downloaders: options.downloaders }),
      ...(options.proxies === undefined ? {} : { proxies: options.proxies }),
      ...(options.proxyPoolOptions === undefined ? {} : { proxyPoolOptions: options.proxyPoolOptions }),
      ...(options.blocked === undefined ? {} : { blocked: options.blocked }),
    });
    this.#recovery = new EngineRecovery({
      policy: options.policy,
      retry: options.retry,
      recovery: options.recovery,
      watchdog: options.watchdog,
      stallMs: options.stallMs,
      log: this.log,
      topics: {
        task: this.#topics.task as LeaseQueue<unknown>,
        download: this.#topics.request as LeaseQueue<unknown>,
        parse: this.#topics.response as LeaseQueue<unknown>,
        followUp: this.#topics.followUp as LeaseQueue<unknown>,
        error: this.#topics.error as LeaseQueue<unknown>,
      },
      pending: async () => {
        let n = 0;
        for (const stage of STAGE_NAMES) {
          const s = await this.#topicOf(stage).stats();
          n += s.ready + s.inflight;
        }
        return n;
      },
    });
    this.#frontier = new Frontier(
      persisted === undefined || this.#journal === undefined || options.frontier?.deduplicator !== undefined
        ? options.frontier
        : {
            ...options.frontier,
            deduplicator: new ClaimingDeduplicator(
              new TieredDeduplicator({ dir: persisted.dedup }),
              this.#journal,
            ),
          },
    );
    this.#db =
      options.store === undefined
        ? undefined
        : new EngineStore({
            options: resolveEngineStoreOptions(options.store),
            registry: this.#registry,
            log: this.log,
            namespace: options.namespace ?? 'mocra',
            ...(options.coordination === undefined ? {} : { coordination: options.coordination }),
          });
    this.#httpCache = options.httpCache === undefined ? undefined : new HttpCache(options.httpCache);
    this.#modules = new ModuleRuntime({
      registry: this.#registry,
      log: this.log,
      ...(options.middleware === undefined ? {} : { middleware: options.middleware }),
      ...(options.moduleConfig === undefined ? {} : { moduleConfig: options.moduleConfig }),
      ...(options.sessions === undefined ? {} : { sessions: options.sessions }),
      ledger: new RunLedger({
        ...(options.coordination === undefined ? {} : { coordination: options.coordination }),
        namespace: options.namespace ?? 'mocra',
      }),
      fetch: async (request, module, signal) => {
        const cached = this.#httpCache?.get(request);
        if (cached !== undefined) return cached;
        const response = await this.#downloads.download(
          this.#downloads.select(request, module),
          request,
          module,
          signal,
        );
        this.#httpCache?.set(request, response);
        return response;
      },
      validateDownloads: (module) => this.#downloads.validateModule(module),
    });
    this.#db?.attach(this.#modules.moduleConfig, this.#modules.middleware);
    this.#db?.registerItems(this.#modules.middleware);
    this.#env = {
      runId: this.runId,
      log: this.log,
      debug: this.log.isLevelEnabled('debug'),
      registry: this.#registry,
      modules: this.#modules,
      frontier: this.#frontier,
      downloads: this.#downloads,
      policy: this.#recovery.policy,
      journal: this.#journal,
      db: this.#db,
      topics: this.#topics,
      counters: this.#counters,
      router: options.router,
      credits: this.#createJoinCredits(options.coordination, options.namespace ?? 'mocra'),
      parseHere: parseWhereDownloaded
        ? (delivery) => this.#runners.get('parse')?.runHere(delivery) ?? false
        : undefined,
      report: (event, decision) => this.#report(event, decision),
      stopCritical: () => void this.#finish('critical'),
    };
  }

  /** Join credit for modules with join nodes, with shared coordination (distributed/join-credits.ts). */
  #createJoinCredits(coordination: Coordination | undefined, namespace: string): JoinCredits | undefined {
    if (coordination === undefined || coordination.kind === 'local') return undefined;
    const joinGraphs = new Map<string, ModuleGraph | undefined>();
    return new JoinCredits({
      coordination,
      namespace,
      log: this.log,
      graphOf: (module) => {
        // Asked for every delivery: modules are registered before run(), so cache the answer.
        if (joinGraphs.has(module)) return joinGraphs.get(module);
        const graph = this.#registry.has(module) ? this.#registry.get(module).graph : undefined;
        const joins = graph?.order.some((id) => graph.nodes.get(id)?.join === true) ? graph : undefined;
        if (this.#state !== 'created') joinGraphs.set(module, joins);
        return joins;
      },
      modulesOf: (task) => this.#modules.modulesOf(task as TaskEvent).map((r) => r.module.name),
      fire: (joins, origin) =>
        publishJoins(
          this.#env,
          joins.map((j) => j.join),
          origin,
          joins.map((j) => j.credit),
        ),
    });
  }

  /** The registered modules (read only: `register()` adds them). */
  get registry(): RegisteredModules {
    return this.#registry;
  }

  /** Sessions per account × platform (cookie jars, sticky headers, logins). */
  get sessions(): SessionStore {
    return this.#modules.sessions;
  }

  /** Where modules' config comes from; a live config reload re-layers it. */
  get moduleConfig(): ModuleConfigResolver {
    return this.#modules.moduleConfig;
  }

  /** The downloaders: their health checks and stats, and the proxy pool they use. */
  get downloaders(): Pick<DownloadRouter, 'checkHealth' | 'stats' | 'proxies'> {
    return this.#downloads;
  }

  /**
   * Checks what each module's config layers select for the default account and platform
   * (downloader and middleware names, typed keys): call before `run()` so a typo fails at start.
   */
  validateModules(): Promise<void> {
    return this.#modules.validateAll();
  }

  /** The database integration (`store` option): its store, cron refresh, task results and logs. */
  get db(): EngineStore | undefined {
    return this.#db;
  }

  /** The cron scheduler, while a run with cron modules is running. */
  get cron(): CronScheduler | undefined {
    return this.#cron;
  }

  /** Changes a stage's worker count, also while running (a live config reload does this). */
  setConcurrency(stage: StageName, concurrency: number): void {
    checkStageName(stage);
    const n = positiveInt(`stages.${stage}`, concurrency, concurrency);
    this.#concurrency[stage] = n;
    this.#runners.get(stage)?.setConcurrency(n);
  }

  get state(): EngineState {
    return this.#state;
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** The backend the stage topics live on (the control API lists and replays their dead letters). */
  /** Dead-lettered work of every stage: list, inspect, replay (one, by query, all), purge. */
  get deadLetters(): EngineDeadLetters {
    return this.#recovery.deadLetters;
  }

  /** Circuit-breaker states of hosts and modules, open first (empty with a custom policy). */
  breakers(filter: { scope?: BreakerScope; state?: BreakerState } = {}): BreakerSnapshot[] {
    return this.#recovery.breakers(filter);
  }

  /** Threshold decisions, terminations, watchdog timeouts and stall reports so far. */
  policyStats(): PolicyStats {
    return this.#recovery.stats();
  }

  get queue(): QueueBackend {
    return this.#backend;
  }

  /** Add a module and the sink its items go to. Only before `run()`. */
  register<TItem>(module: Module<TItem>, sink: DataSink<TItem>): this {
    if (this.#state !== 'created') throw new EngineStateError('modules can only be registered before run()');
    this.#downloads.validateModule(module); // an unknown downloader name fails here, not per request
    this.#modules.validate(module as Module<unknown>); // so does an unknown middleware name
    this.#registry.register(module, sink);
    return this;
  }

  /**
   * Start every stage, seed (one task per module unless `autoSeed: false`) and resolve with a
   * summary once the run ends: idle, stopped, a signal, a CriticalError or the abort signal.
   */
  run(): Promise<RunSummary> {
    if (this.#state !== 'created')
      throw new EngineStateError(`run() was already called (state: ${this.#state})`);
    this.#state = 'running';
    this.#startedAt = Date.now();
    const ended = new Promise<RunSummary>((resolve) => {
      this.#resolveRun = resolve;
    });
    this.#startStages();
    this.#recovery.start();
    this.#installStopTriggers();
    if (this.#db === undefined) this.#startCron();
    if (channels.run.hasSubscribers) channels.run.publish({ runId: this.runId, phase: 'start' });
    this.log.info({ runId: this.runId, modules: this.#registry.names() }, 'run started');
    if (this.#db !== undefined) {
      // Open the database, then cron and seeds from it; the run cannot end idle before that.
      this.#publishFromOutside(() => this.#startWithStore()).catch((err: unknown) => {
        this.log.error({ err }, 'starting with the database failed; stopping the run');
        void this.#finish('stopped');
      });
      return ended;
    }
    // A module with a cron starts runs on its schedule (runNowAndSchedule also at start), not here.
    const seeded = [...this.#registry.values()]
      .filter((r) => r.module.cron === undefined || this.#cron === undefined)
      .map((r) => r.module.name);
    if ((this.#options.autoSeed ?? true) && seeded.length > 0) {
      this.#publishFromOutside(() =>
        this.#topics.task.publish(seeded.map((module) => ({ payload: { module, runId: this.runId } }))),
      ).catch((err: unknown) => {
        this.log.error({ err }, 'seeding failed; stopping the run');
        void this.#finish('stopped');
      });
    } else {
      this.#queueIdleCheck();
    }
    return ended;
  }

  /** Start a module's run (its entry nodes' generate) with these parameters. */
  async submit(task: Omit<TaskEvent, 'runId'> & { runId?: string }): Promise<void> {
    if (this.#state === 'stopping' || this.#state === 'stopped') {
      throw new EngineStateError(`cannot submit a task to an engine that is ${this.#state}`);
    }
    const payload: TaskEvent = { ...task, runId: task.runId ?? this.runId };
    this.#modules.modulesOf(payload); // UnknownModuleError for a name that is not registered
    const router = this.#options.router;
    await this.#publishFromOutside(async () => {
      if (router !== undefined && (await router.routeTask(payload))) return;
      await this.#publishTask(payload);
    });
  }

  /**
   * Take work another node routed here (it runs here, whoever owns it by now: routing again
   * could bounce it between nodes whose member lists differ for a moment). Resolves once it is
   * on this node's queue — with `persist`, on disk.
   */
  async accept(work: ForwardedWork): Promise<void> {
    if (this.#state !== 'running') {
      throw new EngineStateError(`cannot accept forwarded work: the engine is ${this.#state}`);
    }
    if (work.kind === 'task') {
      this.#modules.modulesOf(work.task);
      await this.#publishFromOutside(() => this.#publishTask(work.task));
      return;
    }
    const followUp = work.followUp;
    this.#registry.node(this.#registry.get(followUp.module), followUp.node);
    await this.#publishFromOutside(() =>
      this.#topics.followUp.publish([{ payload: followUp, ...keyOf(followUp.account) }]),
    );
    this.#modules.onFollowUpsPublished([followUp]);
  }

  #publishTask(payload: TaskEvent): Promise<void> {
    return this.#topics.task.publish([
      {
        payload,
        ...(payload.priority === undefined ? {} : { priority: payload.priority }),
        ...keyOf(payload.account),
      },
    ]);
  }

  /**
   * Stop pulling new work on every stage (work in flight finishes). The run does not end while
   * paused. Before `run()`, the run starts paused.
   */
  pause(): void {
    if ((this.#state !== 'running' && this.#state !== 'created') || this.#paused) return;
    this.#paused = true;
    for (const [stage, runner] of this.#runners) {
      runner.pause();
      if (channels.stage.hasSubscribers) channels.stage.publish({ stage, phase: 'pause' });
    }
    this.log.info('paused');
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    for (const [stage, runner] of this.#runners) {
      runner.resume();
      if (channels.stage.hasSubscribers) channels.stage.publish({ stage, phase: 'resume' });
    }
    this.log.info('resumed');
    this.#queueIdleCheck();
  }

  /**
   * End the run gracefully: stop pulling, let work in flight finish within
   * `shutdownTimeoutMs`, put back (nack) what did not, close sinks and connections.
   * Resolves with the run summary (the same one `run()` resolves with).
   */
  stop(reason: StopReason = 'stopped'): Promise<RunSummary> {
    if (this.#state === 'created') throw new EngineStateError('stop() before run()');
    return this.#finish(reason);
  }

  /** A snapshot for progress bars and dashboards: cheap enough to poll every few hundred ms. */
  async stats(): Promise<EngineStats> {
    const queueStats = await Promise.all(
      STAGE_NAMES.map((s) =>
        this.#topicOf(s)
          .stats()
          .catch(() => undefined),
      ),
    );
    const stages = {} as Record<StageName, StageStats>;
    STAGE_NAMES.forEach((stage, i) => {
      const runner = this.#runners.get(stage);
      const q = queueStats[i];
      const r = runner?.stats();
      stages[stage] = {
        queued: q?.ready ?? 0,
        delayed: q?.delayed ?? 0,
        inFlight: r?.inFlight ?? 0,
        done: r?.done ?? 0,
        failed: r?.failed ?? 0,
        concurrency: this.#concurrency[stage],
        paused: r?.paused ?? false,
      };
    });
    return {
      runId: this.runId,
      state: this.#state,
      paused: this.#paused,
      startedAt: this.#startedAt,
      uptimeMs: this.#startedAt === undefined ? 0 : Date.now() - this.#startedAt,
      stages,
      ...this.#counters,
      errorsByCode: Object.fromEntries(this.#errorsByCode),
      frontier: { ...this.#frontier.stats() },
      modules: this.#modules.stats(),
    };
  }

  // ── stages ──────────────────────────────────────────────────────────────────

  #startStages(): void {
    const env = this.#env;
    this.#addRunner('task', this.#topics.task, taskStage(env));
    this.#addRunner('download', this.#topics.request, downloadStage(env));
    this.#addRunner('parse', this.#topics.response, parseStage(env));
    this.#addRunner('followUp', this.#topics.followUp, followUpStage(env));
    this.#addRunner('error', this.#topics.error, errorStage(env));
    for (const runner of this.#runners.values()) {
      if (this.#paused) runner.pause();
      runner.start();
    }
  }

  #addRunner<T>(
    stage: StageName,
    queue: LeaseQueue<T>,
    handle: (delivery: Delivery<T>, signal: AbortSignal) => Promise<HandlerResult>,
  ): void {
    const runner = new StageRunner<T>({
      name: stage,
      queue,
      concurrency: this.#concurrency[stage],
      handle: this.#recovery.guard(
        stage,
        (d: Delivery<T>) => `${stage} ${describeDelivery(d)}`,
        this.#env.credits?.wrap(stage, handle) ?? handle,
      ),
      onFailure: (delivery, error) => reportStageFailure(this.#env, stage, delivery, error),
      onSettled: () => {
        this.#recovery.progress();
        this.#queueIdleCheck();
        this.#db?.settled();
      },
      onInternalError: (error, context) => this.#onInternalError(stage, error, context),
      onHandled: (durationMs, ok) => {
        if (channels.handler.hasSubscribers)
          channels.handler.publish({ runId: this.runId, stage, durationMs, ok });
      },
    });
    this.#runners.set(stage, runner as StageRunner<unknown>);
  }

  /**
   * Outside a handler: a broker that is down is waited for (the backend says so on
   * mocra:backend:connection, so a log record per failed call is only detail); a broker that
   * came back without the crawl's data stops the run, which must not end as if it were done.
   */
  #onInternalError(stage: StageName, error: unknown, context: string): void {
    if (isDataLost(error)) {
      if (this.state !== 'running') return;
      this.log.error({ err: error, stage }, error.message);
      void this.#finish('critical');
      return;
    }
    if (isMocraError(error) && error.code === 'MOCRA_ERR_BACKEND_UNAVAILABLE' && error.retryable) {
      this.log.warn({ err: error, stage }, `waiting for the backend: ${context}`);
      return;
    }
    this.log.error({ err: error, stage }, `internal error: ${context}`);
  }

  #topicOf(stage: StageName): LeaseQueue<unknown> {
    switch (stage) {
      case 'task':
        return this.#topics.task as LeaseQueue<unknown>;
      case 'download':
        return this.#topics.request as LeaseQueue<unknown>;
      case 'parse':
        return this.#topics.response as LeaseQueue<unknown>;
      case 'followUp':
        return this.#topics.followUp as LeaseQueue<unknown>;
      default:
        return this.#topics.error as LeaseQueue<unknown>;
    }
  }

  #report(event: ErrorEvent, decision: PolicyDecision): void {
    this.#counters.errors++;
    this.#errorsByCode.set(event.code, (this.#errorsByCode.get(event.code) ?? 0) + 1);
    this.#db?.reported(event, decision);
    if (channels.error.hasSubscribers) channels.error.publish({ event, decision });
    // The first failure of each kind is logged with its error (the stack into the code that
    // threw); repeats only at debug: the run summary counts them (errorsByCode, errorExamples).
    const first = this.#errorDigest.record(event);
    const level = first ? 'warn' : 'debug';
    if (this.log.isLevelEnabled(level)) {
      this.log[level](
        {
          code: event.code,
          stage: event.stage,
          attempt: event.attempt,
          url: event.url,
          module: event.module,
          decision: decision.action,
          ...(decision.action === 'retry' ? { delayMs: decision.delayMs } : {}),
          ...(first ? { err: event.error } : {}),
        },
        first
          ? `${event.message} (the first of its kind; repeats are counted in the run summary)`
          : event.message,
      );
    }
    try {
      this.#options.onError?.(event, decision);
    } catch (err) {
      this.log.error({ err }, 'onError threw');
    }
  }

  // ── idle detection and the end of a run ─────────────────────────────────────

  /**
   * What this process is doing now, for cluster-wide completion detection
   * (distributed/cluster-run.ts): `idle` when no handler runs and no outside publish (seeding,
   * `submit`) is in progress; `started` moves whenever a handler or an outside publish starts.
   */
  activity(): { idle: boolean; started: number } {
    let idle = this.#seeding === 0;
    let started = this.#outsideStarted;
    for (const runner of this.#runners.values()) {
      if (runner.inFlight > 0) idle = false;
      started += runner.started;
    }
    return { idle, started };
  }

  async #publishFromOutside(publish: () => Promise<void>): Promise<void> {
    this.#outsideStarted++;
    this.#seeding++;
    try {
      await publish();
    } finally {
      this.#seeding--;
      this.#queueIdleCheck();
    }
  }

  /** Coalesced: at most one check is queued however many stages settle meanwhile. */
  #queueIdleCheck(): void {
    if (this.#idleCheckQueued || this.#state !== 'running') return;
    this.#idleCheckQueued = true;
    setImmediate(() => {
      this.#idleCheckQueued = false;
      this.#checkIdle().catch((err: unknown) => this.log.error({ err }, 'idle check failed'));
    });
  }

  async #checkIdle(): Promise<void> {
    if (this.#state !== 'running' || this.#paused || this.#seeding > 0) return;
    if (this.#options.endWhenIdle === false) return;
    // Scheduled modules bring more work later: the run lasts until stop().
    if (this.#cron !== undefined && this.#cron.jobs().length > 0) return;
    let started = 0;
    for (const runner of this.#runners.values()) {
      if (runner.inFlight > 0) return; // a settle is coming, and it re-checks
      started += runner.started;
    }
    const stats = await Promise.all(STAGE_NAMES.map((s) => this.#topicOf(s).stats()));
    // Anything that moved while we read means a settle is coming: that one decides.
    let startedAfter = 0;
    for (const runner of this.#runners.values()) {
      if (runner.inFlight > 0) return;
      startedAfter += runner.started;
    }
    if (startedAfter !== started || this.#seeding > 0 || this.#paused || this.#state !== 'running') return;
    for (const s of stats) if (s.ready + s.delayed + s.inflight > 0) return;
    void this.#finish('idle');
  }

  /**
   * Schedules every module (and spider) that has a `cron`; each firing submits a fresh run.
   * `include` leaves out modules whose targets come from elsewhere (the database).
   */
  #startCron(include?: (registered: RegisteredModule) => boolean): void {
    const options = this.#options.cron ?? {};
    if (options.enabled === false) return;
    if (![...this.#registry.values()].some((r) => r.module.cron !== undefined)) return;
    const gate = options.gate;
    const db = this.#db;
    this.#cron = new CronScheduler({
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(this.#options.coordination === undefined ? {} : { coordination: this.#options.coordination }),
      ...(options.misfireToleranceMs === undefined ? {} : { misfireToleranceMs: options.misfireToleranceMs }),
      ...(options.recheckRefusedMs === undefined ? {} : { recheckRefusedMs: options.recheckRefusedMs }),
      ...(gate === undefined && db === undefined
        ? {}
        : { gate: (job) => (gate === undefined || gate(job)) && (db === undefined || db.cronGate(job)) }),
      namespace: this.#options.namespace ?? 'mocra',
      onError: (jobId, err) => this.log.error({ err, jobId }, 'a cron firing failed to submit its task'),
    });
    const jobs = scheduleModuleCrons(
      this.#registry,
      this.#cron,
      (task) => this.submit(task),
      undefined,
      include,
    );
    this.log.info({ jobs }, 'cron scheduled');
    this.#cron.start();
  }

  /**
   * With a database: open it, schedule cron (database contexts for the modules it knows, code
   * targets for the others) and seed one task per enabled account × platform.
   */
  async #startWithStore(): Promise<void> {
    const db = this.#db!;
    await db.start((key) => this.#runFinished(key.runId, key.module));
    const fromDb = db.options.cron !== false;
    this.#startCron((registered) => !fromDb || !db.governs(registered.module.name));
    if (this.#cron !== undefined && fromDb) {
      await db.startCron(this.#cron, (task) => this.submit(task), this.#options.cron?.clock ?? systemClock);
    }
    if (!(this.#options.autoSeed ?? true)) return;
    // A module with a cron starts runs on its schedule (runNowAndSchedule also at start), not here.
    const seedable = [...this.#registry.values()].filter(
      (r) => r.module.cron === undefined || this.#cron === undefined,
    );
    if (seedable.length === 0) return;
    const tasks = await db.seedTasks(seedable, this.runId);
    await this.#topics.task.publish(
      tasks.map((payload) => ({
        payload,
        ...(payload.priority === undefined ? {} : { priority: payload.priority }),
        ...keyOf(payload.account),
      })),
    );
  }

  /** Whether every node of a run of a module is finished (the run ledger), for task_result. */
  #runFinished(runId: string, module: string): boolean {
    if (!this.#registry.has(module)) return true;
    const { graph } = this.#registry.get(module);
    return graph.order.every((node) => this.#modules.ledger.isFinished(runId, module, node));
  }

  #installStopTriggers(): void {
    const external = this.#options.signal;
    const onAbort = () => void this.#finish('aborted');
    if (external) {
      if (external.aborted) queueMicrotask(onAbort);
      else external.addEventListener('abort', onAbort, { once: true });
    }
    let onSignal: ((signal: NodeJS.Signals) => void) | undefined;
    if (this.#options.handleSignals) {
      onSignal = (sig) => {
        this.#signalCount++;
        if (this.#signalCount === 1) {
          this.log.info({ signal: sig }, 'stopping: finishing work in flight (send again to abort it)');
          void this.#finish('signal');
        } else {
          this.log.warn({ signal: sig }, 'aborting work in flight; it is put back on its queue');
          for (const runner of this.#runners.values()) runner.abort();
        }
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    }
    this.#removeSignalHandlers = () => {
      external?.removeEventListener('abort', onAbort);
      if (onSignal) {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    };
  }

  #finish(reason: StopReason): Promise<RunSummary> {
    this.#ending ??= this.#shutdown(reason);
    return this.#ending;
  }

  async #shutdown(reason: StopReason): Promise<RunSummary> {
    this.#state = 'stopping';
    this.log.info(
      { reason },
      reason === 'idle' ? 'crawl finished: nothing left to do' : `stopping (${reason})`,
    );
    const deadline = reason === 'idle' ? 0 : (this.#options.shutdownTimeoutMs ?? 10_000);
    await this.#cron
      ?.stop()
      .catch((err: unknown) => this.log.error({ err }, 'stopping the cron scheduler failed'));
    this.#recovery.stop();
    // Held acks wait for join credit: write it now rather than when the run would go quiet.
    const credited = this.#env.credits?.close();
    await Promise.all([...this.#runners.values()].map((runner) => runner.stop(deadline)));
    await credited;
    await this.#modules.runEndsSettled();
    for (const [stage] of this.#runners) {
      if (channels.stage.hasSubscribers) channels.stage.publish({ stage, phase: 'stop' });
    }
    const stats = await this.stats();
    let pending = 0;
    for (const stage of STAGE_NAMES) {
      const s = await this.#topicOf(stage)
        .stats()
        .catch(() => undefined);
      if (s) pending += s.ready + s.delayed + s.inflight;
    }
    for (const registered of this.#registry.values()) {
      try {
        await registered.sink.close?.();
      } catch (err) {
        this.log.error({ err, module: registered.module.name }, 'closing a sink failed');
      }
    }
    await this.#db
      ?.close(reason)
      .catch((err: unknown) => this.log.error({ err }, 'closing the database integration failed'));
    await this.#downloads
      .close()
      .catch((err: unknown) => this.log.error({ err }, 'closing the downloaders failed'));
    await this.#frontier
      .close()
      .catch((err: unknown) => this.log.error({ err }, 'closing the frontier failed'));
    if (this.#ownsBackend) await this.#backend.close().catch(() => {});
    await this.#journal
      ?.close()
      .catch((err: unknown) => this.log.error({ err }, 'closing the recovery journal failed'));
    this.#removeSignalHandlers?.();
    const endedAt = Date.now();
    const { state: _state, paused: _paused, uptimeMs: _uptime, ...rest } = stats;
    const summary: RunSummary = {
      ...rest,
      reason,
      endedAt,
      durationMs: endedAt - (this.#startedAt ?? endedAt),
      pending,
      errorExamples: this.#errorDigest.byCode(),
    };
    this.#state = 'stopped';
    if (channels.run.hasSubscribers) channels.run.publish({ runId: this.runId, phase: 'end', reason });
    // With failures, at warn: the default level then shows how often each first failure repeated.
    this.log[summary.errors > 0 ? 'warn' : 'info'](
      {
        reason,
        pages: summary.pages,
        items: summary.items,
        errors: summary.errors,
        deadLettered: summary.deadLettered,
        pending,
        durationMs: summary.durationMs,
        ...(summary.errors > 0 ? { errorsByCode: summary.errorsByCode } : {}),
      },
      summary.errors > 0 ? `run ended with ${summary.errors} errors` : 'run ended',
    );
    this.#resolveRun?.(summary);
    return summary;
  }
}

// ── helpers ─────────────────────────────────────────────────────────────────────

/**
 * Per-stage option keys under a stage's former name: such a key would configure nothing, so it
 * is refused with the key that does its job now.
 */
function refuseRenamedOptions(options: EngineOptions): void {
  for (const group of ['stages', 'topics', 'watchdog'] as const) {
    const perStage: unknown = options[group];
    if (typeof perStage !== 'object' || perStage === null) continue;
    for (const [old, now] of Object.entries(RENAMED_STAGES)) {
      if (Object.hasOwn(perStage, old)) {
        throw new InvalidArgumentError(`${group}.${old} was renamed: use ${group}.${now}`);
      }
    }
  }
}

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new InvalidArgumentError(`${name} must be an integer ≥ 1, got ${value}`);
  }
  return value;
}
