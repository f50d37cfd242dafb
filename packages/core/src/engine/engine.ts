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
 *        └── admit ◀── parserTask stage: requests / generate(target) ◀ [parser_task]   (bounded)
 *
 *   any stage that fails ─▶ [error] (unbounded) ─▶ error stage: report, then policy:
 *                                                  retry (republish to the origin topic, delayed)
 *                                                  or dead-letter (the error topic's DLQ)
 * ```
 *
 * Deadlock freedom (the pipeline is a cycle): a handler only blocks while publishing to a full
 * bounded topic. `request` and `error` are unbounded, so the generate stages (task,
 * parserTask) never block; `parser_task` therefore always drains, so parse never blocks for
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
import {
  DownloadRouter,
  type DownloadRouterOptions,
  type ModuleDownloadSettings,
} from '../downloader/download-router.js';
import { HttpCache, type HttpCacheOptions } from '../downloader/http-cache.js';
import { createHttpDownloader, type HttpDownloaderOptions } from '../downloader/http-downloader.js';
import type { Downloader } from '../downloader/types.js';
import {
  ConnectionError,
  EngineStateError,
  GenerateFailedError,
  HttpStatusError,
  InternalError,
  InvalidArgumentError,
  isMocraError,
  type MocraError,
  ParseFailedError,
  SinkFailedError,
  UnknownModuleError,
} from '../errors.js';
import { TieredDeduplicator } from '../frontier/dedup/tiered-deduplicator.js';
import { fingerprintRequest, requestUrl } from '../frontier/fingerprint.js';
import {
  type AdmissionResult,
  Frontier,
  type FrontierOptions,
  type FrontierStats,
} from '../frontier/frontier.js';
import type { MiddlewareManager } from '../middleware/manager.js';
import {
  ATTEMPT_HEADER,
  type ErrorEvent,
  type FollowUpTask,
  STAGE_TOPICS,
  type StageName,
  type TaskEvent,
  TOPICS,
  type TopicName,
} from '../model/events.js';
import type { DataSink, ItemMeta } from '../model/item.js';
import { Request, type RequestData } from '../model/request.js';
import { Response } from '../model/response.js';
import { scheduleModuleCrons } from '../module/cron-jobs.js';
import type { ModuleGraph } from '../module/graph.js';
import { ParseContext } from '../module/parse-context.js';
import { ModuleRegistry, type RegisteredModule } from '../module/registry.js';
import { type JoinReady, RunLedger } from '../module/run-ledger.js';
import {
  DEFAULT_ACCOUNT,
  DEFAULT_PLATFORM,
  ModuleRuntime,
  type ModuleRuntimeStats,
  type ModuleScope,
} from '../module/runtime.js';
import type { GenerateContext, GenerateOutput, Module, ModuleNode } from '../module/types.js';
import { channels } from '../observability/channels.js';
import { ErrorDigest, type ErrorExample } from '../observability/error-digest.js';
import { createLogger, type Logger, type LogLevel } from '../observability/logger.js';
import { parseRetryAfterMs } from '../policy/backoff.js';
import type { BreakerScope, BreakerSnapshot, BreakerState } from '../policy/circuit-breakers.js';
import type { RecoveryPolicyOptions } from '../policy/recovery-policy.js';
import type { SimpleRetryPolicyOptions } from '../policy/simple-retry-policy.js';
import type { FailurePolicy, PolicyDecision, WorkScope } from '../policy/types.js';
import { LevelQueueBackend } from '../queue/leveldb-queue.js';
import type { Delivery, LeaseQueue, PublishMessage, QueueBackend, TopicOptions } from '../queue/types.js';
import { type Clock, systemClock } from '../schedule/clock.js';
import { CronScheduler } from '../schedule/scheduler.js';
import type { SessionStore } from '../session/session.js';
import { EngineStore } from '../store/engine-store.js';
import { type EngineStoreOptions, resolveEngineStoreOptions } from '../store/options.js';
import { type EngineDeadLetters, REPLAYED_HEADER } from './dead-letters.js';
import { splitFollowUps } from './inline-follow-ups.js';
import { LocalDelivery } from './local-delivery.js';
import { ClaimingDeduplicator, persistPaths, RecoveryJournal } from './persistence.js';
import { EngineRecovery, type PolicyStats, policyFieldsOf, type WatchdogTimeouts } from './recovery.js';
import { type HandlerResult, StageRunner } from './stage-runner.js';

/** Handlers per stage. */
export interface StageConcurrency {
  /** @default 4 */
  task?: number;
  /** @default the engine's `concurrency` (32) */
  download?: number;
  /** @default 16 */
  parse?: number;
  /** @default 8 */
  parserTask?: number;
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
  parserTask?: TopicOptions;
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
   * backend whose lanes spill past 50,000 ready messages to a temporary LevelDB (LevelQueueBackend)
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

export interface EngineStats {
  runId: string;
  state: EngineState;
  paused: boolean;
  /** Epoch ms; undefined before `run()`. */
  startedAt: number | undefined;
  uptimeMs: number;
  stages: Record<StageName, StageStats>;
  /** Responses downloaded (any status), retried attempts excluded. */
  pages: number;
  /** Items written to sinks. */
  items: number;
  /** Body bytes downloaded (after decompression). */
  bytes: number;
  /** Failures reported (each retry attempt counts). */
  errors: number;
  retries: number;
  /** Failures given up on (in the error topic's DLQ). */
  deadLettered: number;
  /** Requests the download gate refused for good. */
  dropped: number;
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

const STAGES: readonly StageName[] = ['task', 'download', 'parse', 'parserTask', 'error'];
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

export function createEngine(options: EngineOptions = {}): Engine {
  return new Engine(options);
}

export class Engine {
  readonly runId: string;
  readonly log: Logger;
  readonly registry = new ModuleRegistry();
  /** Modules' config, sessions, middleware and DAG routing (module/runtime.ts). */
  readonly modules: ModuleRuntime;
  /** Cluster-wide joins (distributed/join-credits.ts): only with shared coordination. */
  readonly #credits: JoinCredits | undefined;
  #cron: CronScheduler | undefined;
  /** The database integration (`store` option). */
  readonly #db: EngineStore | undefined;
  readonly frontier: Frontier;
  readonly #options: EngineOptions;
  readonly #backend: QueueBackend;
  readonly #httpCache: HttpCache | undefined;
  readonly #ownsBackend: boolean;
  /** Selects each request's downloader and proxy, and reports proxy outcomes (downloader/download-router.ts). */
  readonly downloads: DownloadRouter;
  readonly #policy: FailurePolicy;
  readonly #recovery: EngineRecovery;
  /** Set with `persist`: claims and parsed pages (engine/persistence.ts). */
  readonly #journal: RecoveryJournal | undefined;
  readonly #topics: {
    task: LeaseQueue<TaskEvent>;
    request: LeaseQueue<Request | RequestData>;
    response: LeaseQueue<Response>;
    parserTask: LeaseQueue<FollowUpTask>;
    error: LeaseQueue<ErrorEvent>;
  };
  readonly #runners = new Map<StageName, StageRunner<unknown>>();
  readonly #concurrency: Record<StageName, number>;
  readonly #debug: boolean;
  readonly #parseWhereDownloaded: boolean;
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
  readonly #counters = { pages: 0, items: 0, bytes: 0, errors: 0, retries: 0, deadLettered: 0, dropped: 0 };
  readonly #errorsByCode = new Map<string, number>();
  readonly #errorDigest = new ErrorDigest();

  constructor(options: EngineOptions = {}) {
    this.#options = options;
    this.runId = options.runId ?? randomUUID();
    this.log = createLogger({
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.logLevel ? { level: options.logLevel } : {}),
    });
    this.#debug = this.log.isLevelEnabled('debug');
    const download = positiveInt('concurrency', options.stages?.download ?? options.concurrency, 32);
    this.#concurrency = {
      task: positiveInt('stages.task', options.stages?.task, 4),
      download,
      parse: positiveInt('stages.parse', options.stages?.parse, 16),
      parserTask: positiveInt('stages.parserTask', options.stages?.parserTask, 8),
      error: positiveInt('stages.error', options.stages?.error, 4),
    };
    const persisted = options.persist === undefined ? undefined : persistPaths(options.persist);
    this.#journal = persisted === undefined ? undefined : new RecoveryJournal(persisted.journal);
    // A persisted run promises that a page whose items were written is never fetched again after
    // a crash: its response must be on disk (the response topic) before the parse writes items.
    this.#parseWhereDownloaded = (options.parseWhereDownloaded ?? true) && this.#journal === undefined;
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
      parserTask: this.#backend.topic<FollowUpTask>(TOPICS.parserTask, { capacity: 64, ...t.parserTask }),
      error: this.#backend.topic<ErrorEvent>(TOPICS.error, { ...t.error, capacity: UNBOUNDED }),
    };
    this.downloads = new DownloadRouter({
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
        parserTask: this.#topics.parserTask as LeaseQueue<unknown>,
        error: this.#topics.error as LeaseQueue<unknown>,
      },
      pending: async () => {
        let n = 0;
        for (const stage of STAGES) {
          const s = await this.#topicOf(stage).stats();
          n += s.ready + s.inflight;
        }
        return n;
      },
    });
    this.#policy = this.#recovery.policy;
    this.frontier = new Frontier(
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
            registry: this.registry,
            log: this.log,
            namespace: options.namespace ?? 'mocra',
            ...(options.coordination === undefined ? {} : { coordination: options.coordination }),
          });
    this.#httpCache = options.httpCache === undefined ? undefined : new HttpCache(options.httpCache);
    this.modules = new ModuleRuntime({
      registry: this.registry,
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
        const response = await this.downloads.download(
          this.downloads.select(request, module),
          request,
          module,
          signal,
        );
        this.#httpCache?.set(request, response);
        return response;
      },
      validateDownloads: (module) => this.downloads.validateModule(module),
    });
    this.#credits = this.#createJoinCredits(options.coordination, options.namespace ?? 'mocra');
    this.#db?.attach(this.modules.moduleConfig, this.modules.middleware);
    this.#db?.registerItems(this.modules.middleware);
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
    this.downloads.validateModule(module); // an unknown downloader name fails here, not per request
    this.modules.validate(module as Module<unknown>); // so does an unknown middleware name
    const registered = this.registry.register(module, sink);
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
    this.log.info({ runId: this.runId, modules: this.registry.names() }, 'run started');
    if (this.#db !== undefined) {
      // Open the database, then cron and seeds from it; the run cannot end idle before that.
      this.#publishFromOutside(() => this.#startWithStore()).catch((err: unknown) => {
        this.log.error({ err }, 'starting with the database failed; stopping the run');
        void this.#finish('stopped');
      });
      return ended;
    }
    // A module with a cron starts runs on its schedule (runNowAndSchedule also at start), not here.
    const seeded = [...this.registry.values()]
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
    this.modules.modulesOf(payload); // UnknownModuleError for a name that is not registered
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
      this.modules.modulesOf(work.task);
      await this.#publishFromOutside(() => this.#publishTask(work.task));
      return;
    }
    const followUp = work.followUp;
    this.registry.node(this.registry.get(followUp.module), followUp.node);
    await this.#publishFromOutside(() =>
      this.#topics.parserTask.publish([{ payload: followUp, ...keyOf(followUp.account) }]),
    );
    this.modules.onFollowUpsPublished([followUp]);
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
      STAGES.map((s) =>
        this.#topicOf(s)
          .stats()
          .catch(() => undefined),
      ),
    );
    const stages = {} as Record<StageName, StageStats>;
    STAGES.forEach((stage, i) => {
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
      frontier: { ...this.frontier.stats() },
      modules: this.modules.stats(),
    };
  }

  // ── stages ──────────────────────────────────────────────────────────────────

  #startStages(): void {
    this.#addRunner('task', this.#topics.task, (d, signal) => this.#handleTask(d, signal));
    this.#addRunner('download', this.#topics.request, (d, signal) => this.#handleDownload(d, signal));
    this.#addRunner('parse', this.#topics.response, (d, signal) => this.#handleParse(d, signal));
    this.#addRunner('parserTask', this.#topics.parserTask, (d, signal) => this.#handleFollowUp(d, signal));
    this.#addRunner('error', this.#topics.error, (d) => this.#handleError(d));
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
        this.#credits?.wrap(stage, handle) ?? handle,
      ),
      onFailure: (delivery, error) => this.#onStageFailure(stage, delivery, error),
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
    if (isMocraError(error) && error.code === 'MOCRA_ERR_QUEUE_DATA_LOST') {
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
      case 'parserTask':
        return this.#topics.parserTask as LeaseQueue<unknown>;
      default:
        return this.#topics.error as LeaseQueue<unknown>;
    }
  }

  /** task ▶ generate(entry nodes) ▶ admit ▶ request */
  async #handleTask(delivery: Delivery<TaskEvent>, signal: AbortSignal): Promise<HandlerResult> {
    const task = delivery.payload;
    // Every entry node of every module of the task starts, not only the first.
    const modules =
      this.#db === undefined ? this.modules.modulesOf(task) : await this.#db.modulesFor(task, this.modules);
    const first = delivery.attempt === 1 && attemptsOf(delivery) === 0;
    const requests: Request[] = [];
    const started: RegisteredModule[] = [];
    const joins: JoinReady[] = [];
    for (const registered of modules) {
      const moduleName = registered.module.name;
      if (first) this.modules.onTaskStart(registered, task.runId);
      this.#db?.runStarted(task, moduleName);
      const stopped = await this.modules.stoppedReason(task.runId, moduleName);
      if (stopped !== undefined) {
        for (const node of registered.entry) {
          joins.push(
            ...this.modules.dropStopped({
              runId: task.runId,
              module: moduleName,
              node: node.id,
              stage: 'task',
              reason: stopped,
            }),
          );
        }
        continue;
      }
      const scope = await this.modules.scope(
        registered,
        task.account ?? DEFAULT_ACCOUNT,
        task.platform ?? DEFAULT_PLATFORM,
        signal,
      );
      await this.modules.runStart(registered, {
        module: moduleName,
        runId: task.runId,
        task,
        params: task.params ?? {},
        account: scope.account,
        platform: scope.platform,
        config: scope.config,
        settings: scope.settings,
        signal,
        log: this.log,
      });
      for (const node of registered.entry) {
        const ctx = this.#generateContext(registered, node, task.runId, signal, scope, { task });
        const produced = await this.#runGenerate(registered, node, ctx);
        for (const r of produced) {
          this.#claim(r, registered, node, task.runId, task.account, 0);
          if (task.platform !== undefined) r.platform ??= task.platform;
          this.#credits?.stamp(delivery, r);
        }
        requests.push(...produced);
      }
      started.push(registered);
    }
    const router = this.#options.router;
    const here =
      router === undefined || requests.length === 0 ? requests : await router.routeSeeds(requests, task);
    const result = await this.#admitAndPublish(here, 'task', admissionClaimOf(delivery));
    if (result !== undefined) return result; // put back: the entry nodes are not done yet
    for (const registered of started) joins.push(...this.modules.onTaskDone(registered, task.runId));
    await this.#publishJoins(joins, task);
    return undefined;
  }

  /** Join nodes whose predecessors all finished: one hand-off each (module/run-ledger.ts). */
  async #publishJoins(
    ready: readonly JoinReady[],
    origin: { account?: string | undefined; platform?: string | undefined },
    credits?: readonly string[],
  ): Promise<void> {
    // With shared coordination the ledger sees one process's share: join credit decides instead.
    const joins =
      credits === undefined ? ready.filter((j) => this.#credits?.tracks(j.module) !== true) : ready;
    if (joins.length === 0) return;
    const tasks = this.modules.joinTasks(joins, {
      account: origin.account,
      platform: origin.platform,
      depth: 0,
    });
    if (credits !== undefined) {
      for (const [i, task] of tasks.entries()) {
        const credit = credits[i];
        if (credit !== undefined) task.credit = credit;
      }
    }
    await this.#topics.parserTask.publish(tasks.map((payload) => ({ payload, ...keyOf(payload.account) })));
    this.modules.onFollowUpsPublished(tasks);
  }

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
        const graph = this.registry.has(module) ? this.registry.get(module).graph : undefined;
        const joins = graph?.order.some((id) => graph.nodes.get(id)?.join === true) ? graph : undefined;
        if (this.#state !== 'created') joinGraphs.set(module, joins);
        return joins;
      },
      modulesOf: (task) => this.modules.modulesOf(task as TaskEvent).map((r) => r.module.name),
      fire: (joins, origin) =>
        this.#publishJoins(
          joins.map((j) => j.join),
          origin,
          joins.map((j) => j.credit),
        ),
    });
  }

  /** parser_task ▶ (carried requests | generate(target node)) ▶ admit ▶ request */
  async #handleFollowUp(delivery: Delivery<FollowUpTask>, signal: AbortSignal): Promise<HandlerResult> {
    const followUp = delivery.payload;
    const registered = this.registry.get(followUp.module);
    const node = this.registry.node(registered, followUp.node);
    const moduleName = registered.module.name;
    if (
      followUp.trigger === 'join' &&
      this.#credits?.tracks(moduleName) === true &&
      !(await this.#credits.claimJoin(delivery, followUp.runId, moduleName, node.id))
    )
      return undefined; // published twice after a crash: the other message runs the join
    const stopped = await this.modules.stoppedReason(followUp.runId, moduleName);
    if (stopped !== undefined) {
      const joins = this.modules.dropStopped({
        runId: followUp.runId,
        module: moduleName,
        node: node.id,
        stage: 'follow-up',
        reason: stopped,
      });
      await this.#publishJoins(joins, followUp);
      return undefined;
    }
    let requests: Request[];
    if (followUp.requests.length > 0) {
      requests = followUp.requests.map((r) => Request.from(r));
    } else {
      const scope = await this.modules.scope(
        registered,
        followUp.account ?? DEFAULT_ACCOUNT,
        followUp.platform ?? DEFAULT_PLATFORM,
        signal,
      );
      const ctx = this.#generateContext(registered, node, followUp.runId, signal, scope, { followUp });
      requests = await this.#runGenerate(registered, node, ctx);
    }
    for (const r of requests) {
      this.#claim(r, registered, node, followUp.runId, followUp.account, followUp.depth);
      if (followUp.platform !== undefined) r.platform ??= followUp.platform;
      this.#credits?.stamp(delivery, r);
    }
    const result = await this.#admitAndPublish(requests, 'parserTask', admissionClaimOf(delivery));
    if (result !== undefined) return result; // put back: the hand-off is not done yet
    await this.#publishJoins(this.modules.onUnitDone(followUp.runId, moduleName, node.id), followUp);
    return undefined;
  }

  #generateContext(
    registered: RegisteredModule,
    node: ModuleNode,
    runId: string,
    signal: AbortSignal,
    scope: ModuleScope,
    source: { task?: TaskEvent; followUp?: FollowUpTask },
  ): GenerateContext {
    return {
      module: registered.module.name,
      node: node.id,
      runId,
      trigger: source.task ? 'task' : (source.followUp?.trigger ?? 'follow-up'),
      task: source.task,
      followUp: source.followUp,
      params: source.task?.params ?? source.followUp?.meta ?? {},
      account: scope.account,
      platform: scope.platform,
      config: scope.config,
      settings: scope.settings,
      login: scope.login,
      signal,
      log: this.log,
    };
  }

  async #runGenerate(
    registered: RegisteredModule,
    node: ModuleNode,
    ctx: GenerateContext,
  ): Promise<Request[]> {
    if (!node.generate) return [];
    try {
      return await collectRequests(await node.generate(ctx));
    } catch (err) {
      if (isMocraError(err)) throw err;
      throw new GenerateFailedError({ module: registered.module.name, node: node.id }, err);
    }
  }

  /** The engine owns these fields: which node parses the response, in which run. */
  #claim(
    request: Request,
    registered: RegisteredModule,
    node: ModuleNode,
    runId: string,
    account: string | undefined,
    minDepth: number,
  ): void {
    request.module = registered.module.name;
    request.node = node.id;
    request.runId = runId;
    if (account !== undefined && request.account === undefined) request.account = account;
    if (request.depth < minDepth) request.depth = minDepth;
  }

  /**
   * `admission.claim` names the work being handled (admissionClaimOf): a shared deduplicator
   * re-admits what it marked if that work is delivered again (its handler died between marking
   * and publishing). For the same reason a failed publish of the admitted requests puts this
   * same message back (nack), instead of a retry that would be a new message with another id.
   */
  async #admitAndPublish(
    requests: Request[],
    stage: StageName,
    admission: AdmissionClaim,
  ): Promise<HandlerResult> {
    if (requests.length === 0) return undefined;
    const { admitted, invalid } = await this.frontier.admit(requests, admission);
    if (this.#credits !== undefined && admitted.length + invalid.length < requests.length) {
      const kept = new Set<Request>([...admitted, ...invalid.map((i) => i.request)]);
      this.#credits.dropped(requests.filter((r) => !kept.has(r))); // already seen: done now
    }
    // Returned, not awaited (see #publishAdmitted).
    return this.#publishAdmitted(admitted, invalid, stage, admission.claim);
  }

  /**
   * Publish what admission let through and report what it found invalid. Not `async` on
   * purpose: a suspended async function keeps every local and argument alive, and this waits
   * for the queue's write (a frontier spilling to disk) — the admitted requests, a page's
   * thousand links, would be kept on the heap (and promoted) until then. The callbacks below
   * hold only counts and the invalid requests.
   */
  #publishAdmitted(
    admitted: readonly Request[],
    invalid: AdmissionResult['invalid'],
    stage: StageName,
    claim: string,
  ): Promise<HandlerResult> {
    let published: Promise<HandlerResult> = Promise.resolve(undefined);
    if (admitted.length > 0) {
      const messages: PublishMessage<Request>[] = new Array(admitted.length);
      for (let i = 0; i < admitted.length; i++) {
        const r = admitted[i]!;
        messages[i] =
          r.account === undefined
            ? { payload: r, priority: r.priority }
            : { payload: r, priority: r.priority, key: r.account };
      }
      const units = this.modules.unitsOf(admitted);
      // Join credit: a redelivery of this message must admit the same requests again (its
      // dropped ones return their credit), so the claim of a join module's unit only expires.
      const keepClaim = this.#credits !== undefined && admitted.some((r) => this.#credits!.tracks(r.module));
      published = this.#topics.request.publish(messages).then(
        () => {
          if (!keepClaim) this.frontier.releaseClaim(claim);
          this.modules.onAdmitted(units);
          return undefined;
        },
        (err: unknown): HandlerResult => {
          if (!(isMocraError(err) && err.retryable)) throw err;
          this.log.warn({ err, stage }, 'publishing admitted requests failed; the message is put back');
          return { nack: { delayMs: 1_000, reason: err.message } };
        },
      );
    }
    if (invalid.length === 0) return published;
    return published.then(async (putBack) => {
      if (putBack !== undefined) return putBack;
      await this.#topics.error.publish(
        invalid.map(({ request, error }) => ({
          payload: this.#errorEvent(
            stage,
            TOPICS.request,
            request,
            error,
            1,
            request.priority,
            request.account,
          ),
        })),
      );
      return undefined;
    });
  }

  /** request ▶ gate ▶ downloader ▶ response */
  async #handleDownload(
    delivery: Delivery<Request | RequestData>,
    signal: AbortSignal,
  ): Promise<HandlerResult> {
    const request = Request.from(delivery.payload);
    if (this.#journal !== undefined && (await this.#alreadyParsed(delivery, request))) return undefined;
    const registered = this.registry.get(request.module);
    const stopped = await this.modules.stoppedReason(request.runId ?? this.runId, registered.module.name);
    if (stopped !== undefined) {
      const joins = this.modules.dropStopped({
        runId: request.runId ?? this.runId,
        module: registered.module.name,
        node: request.node,
        stage: 'download',
        reason: stopped,
        url: request.url,
      });
      await this.#publishJoins(joins, request);
      return undefined;
    }
    const admission = this.#policy.admit?.('download', workOf(request, attemptsOf(delivery)));
    if (admission !== undefined) {
      if ('error' in admission) throw admission.error;
      // A circuit breaker is open: put the request back without counting a failure.
      this.#credits?.continued(delivery);
      await this.#topics.request.publish([
        {
          payload: request,
          priority: delivery.priority,
          delayMs: admission.deferMs,
          headers: delivery.headers as Record<string, string>,
          ...keyOf(delivery.key),
        },
      ]);
      return undefined;
    }
    const gate = this.frontier.gate;
    const decided = gate.enter(request, signal);
    const decision = decided instanceof Promise ? await decided : decided;
    if (decision !== undefined) {
      // Not downloaded now: a breaker probe this request may have been goes to the next one.
      this.#policy.released?.('download', workOf(request));
      if ('deferMs' in decision) {
        this.#credits?.continued(delivery);
        await this.#topics.request.publish([
          {
            payload: request,
            priority: delivery.priority,
            delayMs: decision.deferMs,
            headers: delivery.headers as Record<string, string>,
            ...keyOf(delivery.key),
          },
        ]);
      } else {
        this.#counters.dropped++;
        if (channels.drop.hasSubscribers) channels.drop.publish({ request, reason: decision.drop });
        if (this.#debug)
          this.log.debug({ url: request.url, reason: decision.drop }, 'dropped by the download gate');
        await this.#publishJoins(this.modules.onAbandoned(request), request);
      }
      return undefined;
    }
    if (channels.request.hasSubscribers) channels.request.publish({ request });
    // The module's config (downloader, middleware, session) for the request's account × platform;
    // a module with shouldLogin logs in here first.
    let scope: ModuleScope;
    let module: ModuleDownloadSettings;
    let downloader: Downloader;
    try {
      scope = await this.modules.scope(
        registered,
        request.account ?? DEFAULT_ACCOUNT,
        request.platform ?? DEFAULT_PLATFORM,
        signal,
      );
      module = this.modules.downloadSettings(registered, scope);
      downloader = this.downloads.select(request, module);
    } catch (err) {
      gate.leave(request, { error: err });
      throw err;
    }
    if (downloader.stream !== undefined)
      return this.#handleStream(delivery, request, module, downloader, signal);
    let response: Response;
    try {
      // Middleware (beforeRequest/afterResponse), the session's cookies and login check.
      const out = await this.modules.download(request, registered, scope, signal);
      if (out.response === undefined) {
        gate.leave(request, {});
        await this.#publishJoins(out.joins, request);
        return undefined;
      }
      response = out.response;
    } catch (err) {
      gate.leave(request, { error: err });
      if (isMocraError(err)) throw err;
      throw new ConnectionError(request.url, 'headers', err instanceof Error ? err.message : String(err), {
        cause: err,
      });
    }
    gate.leave(request, {
      status: response.status,
      durationMs: response.durationMs,
      headers: response.headers,
    });
    if (this.#debug) this.log.debug({ url: response.url, status: response.status }, 'downloaded');
    if (this.#policy.retryStatus(response, attemptsOf(delivery))) {
      throw new HttpStatusError(
        response.url,
        response.status,
        parseRetryAfterMs(response.header('retry-after'), Date.now()),
      );
    }
    this.#policy.succeeded?.('download', { ...workOf(request), status: response.status });
    this.#countResponse(request, response);
    if (this.#parseWhereDownloaded) {
      // Parsed here when the parse stage has a free slot: no broker round trip, the body never
      // leaves the process. The request stays leased until the parse is done, so a crash in
      // between fetches it again instead of losing the page. (docs/architecture.md#two-hops-that-stay-in-the-process)
      const local = new LocalDelivery(this.#topics.response, {
        id: `${delivery.id}>parse`,
        payload: response,
        priority: delivery.priority,
        key: delivery.key,
        headers: parseClaimHeaders(delivery),
      });
      if (this.#runners.get('parse')?.runHere(local)) return { settleAfter: local.settled };
    }
    await this.#publishResponse(delivery, response, parseClaimHeaders(delivery));
    return undefined;
  }

  #countResponse(request: Request, response: Response): void {
    this.#counters.pages++;
    this.#counters.bytes += response.body.length;
    this.#db?.counted(request.runId, request.module, 'requests');
    if (channels.response.hasSubscribers) channels.response.publish({ request, response });
  }

  async #publishResponse(
    delivery: Delivery<Request | RequestData>,
    response: Response,
    headers?: Record<string, string>,
  ): Promise<void> {
    this.#credits?.continued(delivery); // the request's unit goes on in its response
    await this.#topics.response.publish([
      {
        payload: response,
        priority: delivery.priority,
        ...keyOf(delivery.key),
        ...(headers === undefined ? {} : { headers }),
      },
    ]);
  }

  /**
   * request ▶ streaming downloader (WebSocket) ▶ many responses. The request stays leased (the
   * stage extends its lease) while the stream runs; each response is published as it arrives,
   * so a full response topic slows the stream instead of growing memory. The gate is left once
   * the stream delivered its first response: a long stream must not hold a host's download slot.
   * A stream that ends normally acks the request; one that fails takes the retry path.
   */
  async #handleStream(
    delivery: Delivery<Request | RequestData>,
    request: Request,
    module: ModuleDownloadSettings,
    downloader: Downloader,
    signal: AbortSignal,
  ): Promise<HandlerResult> {
    const gate = this.frontier.gate;
    const started = performance.now();
    let left = false;
    const leave = (outcome: { status?: number; error?: unknown }): void => {
      if (left) return;
      left = true;
      gate.leave(request, { ...outcome, durationMs: performance.now() - started });
    };
    try {
      await this.downloads.stream(downloader, request, module, signal, async (response) => {
        leave({ status: response.status });
        this.#countResponse(request, response);
        await this.#publishResponse(delivery, response);
      });
    } catch (err) {
      leave({ error: err });
      if (isMocraError(err)) throw err;
      throw new ConnectionError(request.url, 'body', err instanceof Error ? err.message : String(err), {
        cause: err,
      });
    }
    leave({ status: 200 });
    return undefined;
  }

  /** response ▶ node.parse ▶ items ▶ sink; follow-ups ▶ parser_task */
  async #handleParse(delivery: Delivery<Response>, signal: AbortSignal): Promise<HandlerResult> {
    const response = Response.from(delivery.payload);
    const request = response.request;
    const refused = this.#policy.admit?.('parse', workOf(request));
    if (refused !== undefined && 'error' in refused) throw refused.error;
    const registered = this.registry.get(request.module);
    const node = this.registry.node(registered, request.node);
    const moduleName = registered.module.name;
    const runId = request.runId ?? this.runId;
    const stopped = await this.modules.stoppedReason(runId, moduleName);
    if (stopped !== undefined) {
      const joins = this.modules.dropStopped({
        runId,
        module: moduleName,
        node: node.id,
        stage: 'parse',
        reason: stopped,
        url: response.url,
      });
      await this.#publishJoins(joins, request);
      return undefined;
    }
    const scope = await this.modules.scope(
      registered,
      request.account ?? DEFAULT_ACCOUNT,
      request.platform ?? DEFAULT_PLATFORM,
      signal,
      { login: false },
    );
    const ctx = new ParseContext<unknown>({
      response,
      module: moduleName,
      node: node.id,
      runId,
      log: this.log,
      signal,
      account: scope.account,
      platform: scope.platform,
      config: scope.config,
      settings: scope.settings,
      login: scope.login,
    });
    try {
      await node.parse(response, ctx);
    } catch (err) {
      if (isMocraError(err)) throw err;
      throw new ParseFailedError({ module: moduleName, node: node.id, url: response.url }, err);
    }
    // Before any item is written: from now on a redelivered request must not fetch the page again.
    if (this.#journal !== undefined)
      await this.#journal.markParsed(request.fingerprint ?? fingerprintRequest(request));

    if (ctx.items.length > 0) {
      const fingerprint = request.fingerprint ?? fingerprintRequest(request);
      const sink = registered.sink;
      // Ids are fixed before middleware runs, so a dropped item never shifts the others' ids.
      const emitted = ctx.items.map((item, i) => ({
        item,
        meta: {
          itemId: `${fingerprint}:${i}`,
          index: i,
          url: response.url,
          module: moduleName,
          node: node.id,
          runId,
        } satisfies ItemMeta,
      }));
      const mctx = this.modules.middlewareContext(registered, node.id, runId, scope, signal);
      // Data middleware (transform, drop), then store middleware (beforeStore → store → afterStore).
      const items = await this.modules.processItems(emitted, registered, scope, request, mctx);
      for (const { item, meta } of items) {
        try {
          const written = sink.write(item, meta);
          if (written !== undefined && typeof (written as Promise<void>).then === 'function') await written;
        } catch (err) {
          throw new SinkFailedError({ module: moduleName, itemId: meta.itemId }, err);
        }
        if (channels.item.hasSubscribers) channels.item.publish({ item, meta });
      }
      this.#counters.items += items.length;
      this.#db?.counted(runId, moduleName, 'items', items.length);
    }

    const rejected = ctx.rejected.map(({ request: r, error }) =>
      this.#errorEvent(
        'parse',
        TOPICS.request,
        r ?? { url: (error as unknown as { url?: string }).url },
        error,
        1,
        0,
        undefined,
      ),
    );
    // Follows, hand-offs to successors (fan-out), other modules' runs, the advance gate, the stop
    // signal: decided in one place (module/runtime.ts `route`).
    const routed = await this.modules.route(ctx, registered, request);
    for (const { payload, error } of routed.rejected) {
      rejected.push(this.#errorEvent('parse', TOPICS.request, payload, error, 1, 0, undefined));
    }
    // Follow-ups that carry their requests (cx.follow, cx.enqueueLinks) are admitted right here:
    // the hop through parser_task would only add a queue round trip per page. Hand-offs that
    // run a node's generate still go through parser_task. (engine/inline-follow-ups.ts)
    const { carried, queued } = splitFollowUps(routed.followUps);
    for (const followUp of queued) this.#credits?.stamp(delivery, followUp);
    if (queued.length > 0) {
      await this.#topics.parserTask.publish(
        queued.map((payload) => ({
          payload,
          priority: delivery.priority,
          ...keyOf(payload.account),
        })),
      );
      this.modules.onFollowUpsPublished(queued);
    }
    const nodeId = node.id;
    if (carried.length === 0) return this.#parseDone(rejected, request, runId, moduleName, nodeId);
    // Returned, not awaited: this frame holds the parse context and every follow-up request,
    // which must not stay on the heap while the admitted requests are written (see #publishAdmitted).
    return this.#admitCarried(carried, delivery).then(
      (putBack) => putBack ?? this.#parseDone(rejected, request, runId, moduleName, nodeId),
    );
  }

  /** The end of a parse whose follow-ups are admitted: its rejects reported, its unit done. */
  async #parseDone(
    rejected: ErrorEvent[],
    request: Request,
    runId: string,
    moduleName: string,
    nodeId: string,
  ): Promise<HandlerResult> {
    if (rejected.length > 0) await this.#topics.error.publish(rejected.map((payload) => ({ payload })));
    this.#policy.succeeded?.('parse', workOf(request));
    await this.#publishJoins(this.modules.onUnitDone(runId, moduleName, nodeId), request);
    return undefined;
  }

  /**
   * What the parserTask stage does for follow-ups that carry requests, done inline by the parse
   * that made them: the same stop check, claim, admission (one batch, claimed under the parsed
   * response's message id) and unit bookkeeping, in the same order.
   */
  async #admitCarried(
    followUps: readonly FollowUpTask[],
    delivery: Delivery<Response>,
  ): Promise<HandlerResult> {
    this.modules.onFollowUpsPublished(followUps);
    const requests: Request[] = [];
    const admitted: {
      runId: string;
      module: string;
      node: string;
      account: string | undefined;
      platform: string | undefined;
    }[] = [];
    for (const followUp of followUps) {
      const registered = this.registry.get(followUp.module);
      const node = this.registry.node(registered, followUp.node);
      const stopped = await this.modules.stoppedReason(followUp.runId, registered.module.name);
      if (stopped !== undefined) {
        const joins = this.modules.dropStopped({
          runId: followUp.runId,
          module: registered.module.name,
          node: node.id,
          stage: 'follow-up',
          reason: stopped,
        });
        await this.#publishJoins(joins, followUp);
        continue;
      }
      for (const payload of followUp.requests) {
        const r = Request.from(payload);
        this.#claim(r, registered, node, followUp.runId, followUp.account, followUp.depth);
        if (followUp.platform !== undefined) r.platform ??= followUp.platform;
        this.#credits?.stamp(delivery, r);
        requests.push(r);
      }
      // Only what the unit bookkeeping needs: the task itself holds its requests.
      const { runId, module, account, platform } = followUp;
      admitted.push({ runId, module, node: followUp.node, account, platform });
    }
    // Returned, not awaited: this frame holds the requests (see #publishAdmitted).
    return this.#admitAndPublish(requests, 'parse', admissionClaimOf(delivery)).then(async (result) => {
      if (result !== undefined) return result; // put back: the parse runs again (same item ids)
      for (const unit of admitted) {
        await this.#publishJoins(this.modules.onUnitDone(unit.runId, unit.module, unit.node), unit);
      }
      return undefined;
    });
  }

  /** error ▶ report ▶ policy ▶ retry (republish, delayed) | dead-letter | stop */
  async #handleError(delivery: Delivery<ErrorEvent>): Promise<HandlerResult> {
    const event = delivery.payload;
    let decision: PolicyDecision;
    try {
      decision = this.#policy.decide(event);
    } catch (err) {
      this.log.error({ err }, 'the failure policy threw; dead-lettering the failure');
      decision = {
        action: 'dead-letter',
        reason: `policy failed: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    this.#report(event, decision);
    if (decision.action !== 'retry') {
      // Given up on: its unit of work will never be done, which may let a join fire.
      const joins = this.modules.onAbandoned(event.payload);
      await this.#publishJoins(joins, { account: event.key }).catch((err: unknown) =>
        this.log.error({ err }, 'publishing a join after a dead letter failed'),
      );
      await this.#credits?.done(delivery); // given up: its join credit comes back first
    } else {
      this.#credits?.continued(delivery); // retried: the unit goes on in the republished message
    }
    switch (decision.action) {
      case 'retry': {
        this.#counters.retries++;
        const target = event.kind === 'session-expired' ? this.#reloginRetry(event) : event;
        const topic = this.#topicByName(target.topic);
        await topic.publish([
          {
            payload: target.payload,
            priority: event.priority,
            delayMs: decision.delayMs,
            headers: { [ATTEMPT_HEADER]: String(event.attempt) },
            ...keyOf(event.key),
          },
        ]);
        return undefined;
      }
      case 'stop':
        this.#counters.deadLettered++;
        void this.#finish('critical');
        return { deadLetter: decision.reason };
      case 'drop':
        // dlq = never: given up and not kept (reported above, counted in errors).
        return undefined;
      default:
        this.#counters.deadLettered++;
        return { deadLetter: decision.reason };
    }
  }

  /**
   * `persist`: a first delivery of a request whose page was already parsed (the process died
   * after the parse began but before this request was acked) is acked without fetching again —
   * its response is on the response topic. Retries and replays fetch as they are meant to.
   */
  async #alreadyParsed(delivery: Delivery<unknown>, request: Request): Promise<boolean> {
    if (delivery.headers[ATTEMPT_HEADER] !== undefined || delivery.headers[REPLAYED_HEADER] !== undefined)
      return false;
    const fingerprint = request.fingerprint ?? fingerprintRequest(request);
    if (!(await this.#journal!.parsed(fingerprint))) return false;
    if (this.#debug)
      this.log.debug({ url: request.url }, 'already parsed before a restart; not fetched again');
    return true;
  }

  /**
   * A session expired: end the login (so the retry's download logs in again) and, when parse
   * found out, retry the download rather than re-parse the same stale page. A download that saw
   * a login status has ended the login itself (by generation); here only a login that is older
   * than the failure is ended, so a re-login that already happened is kept.
   */
  #reloginRetry(event: ErrorEvent): { topic: TopicName; payload: unknown } {
    let request: Request;
    try {
      request =
        event.topic === TOPICS.response
          ? Response.from(event.payload as Response).request
          : Request.from(event.payload as Request);
    } catch {
      return event;
    }
    const session = this.modules.sessions.get(
      request.account ?? DEFAULT_ACCOUNT,
      request.platform ?? DEFAULT_PLATFORM,
    );
    const login = session.login;
    if (login !== undefined && login.loggedInAt <= event.at) session.invalidate();
    return event.topic === TOPICS.response ? { topic: TOPICS.request, payload: request } : event;
  }

  #topicByName(name: TopicName): LeaseQueue<unknown> {
    switch (name) {
      case TOPICS.task:
        return this.#topics.task as LeaseQueue<unknown>;
      case TOPICS.request:
        return this.#topics.request as LeaseQueue<unknown>;
      case TOPICS.response:
        return this.#topics.response as LeaseQueue<unknown>;
      case TOPICS.parserTask:
        return this.#topics.parserTask as LeaseQueue<unknown>;
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

  /** A handler threw: turn it into an error event (the error stage decides), then ack. */
  async #onStageFailure(
    stage: StageName,
    delivery: Delivery<unknown>,
    error: unknown,
  ): Promise<HandlerResult> {
    const err = isMocraError(error)
      ? error
      : new InternalError(
          `stage '${stage}' failed: ${error instanceof Error ? error.message : String(error)}`,
          {
            cause: error,
          },
        );
    if (stage === 'error') {
      // Reporting the failure of reporting would loop: put the event back for a later try.
      this.log.error({ err }, 'the error stage failed; retrying the event in 1 s');
      return { nack: { delayMs: 1_000, reason: err.message } };
    }
    const event = this.#errorEvent(
      stage,
      STAGE_TOPICS[stage],
      delivery.payload,
      err,
      attemptsOf(delivery) + 1,
      delivery.priority,
      delivery.key,
    );
    await this.#topics.error.publish([{ payload: event }]);
    return undefined;
  }

  #errorEvent(
    stage: StageName,
    topic: TopicName,
    payload: unknown,
    error: MocraError,
    attempt: number,
    priority: number,
    key: string | undefined,
  ): ErrorEvent {
    const where = describePayload(payload);
    const event: ErrorEvent = {
      stage,
      topic,
      payload,
      error,
      code: error.code,
      message: error.message,
      retryable: error.retryable,
      attempt,
      at: Date.now(),
      priority,
      ...where,
    };
    if (key !== undefined) event.key = key;
    // Kept as a plain field so it survives a serializing queue (error classes do not).
    Object.assign(event, policyFieldsOf(error));
    const errorUrl = (error as unknown as { url?: unknown }).url;
    if (event.url === undefined && typeof errorUrl === 'string') event.url = errorUrl;
    if (error instanceof UnknownModuleError) event.module ??= error.module;
    return event;
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
    const stats = await Promise.all(STAGES.map((s) => this.#topicOf(s).stats()));
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
    if (![...this.registry.values()].some((r) => r.module.cron !== undefined)) return;
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
      this.registry,
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
    const seedable = [...this.registry.values()].filter(
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
    if (!this.registry.has(module)) return true;
    const { graph } = this.registry.get(module);
    return graph.order.every((node) => this.modules.ledger.isFinished(runId, module, node));
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
    const credited = this.#credits?.close();
    await Promise.all([...this.#runners.values()].map((runner) => runner.stop(deadline)));
    await credited;
    await this.modules.runEndsSettled();
    for (const [stage] of this.#runners) {
      if (channels.stage.hasSubscribers) channels.stage.publish({ stage, phase: 'stop' });
    }
    const stats = await this.stats();
    let pending = 0;
    for (const stage of STAGES) {
      const s = await this.#topicOf(stage)
        .stats()
        .catch(() => undefined);
      if (s) pending += s.ready + s.delayed + s.inflight;
    }
    for (const registered of this.registry.values()) {
      try {
        await registered.sink.close?.();
      } catch (err) {
        this.log.error({ err, module: registered.module.name }, 'closing a sink failed');
      }
    }
    await this.#db
      ?.close(reason)
      .catch((err: unknown) => this.log.error({ err }, 'closing the database integration failed'));
    await this.downloads
      .close()
      .catch((err: unknown) => this.log.error({ err }, 'closing the downloaders failed'));
    await this.frontier
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

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new InvalidArgumentError(`${name} must be an integer ≥ 1, got ${value}`);
  }
  return value;
}

/** What the failure policy needs to know about a request. */
function workOf(request: Request, attempt?: number): WorkScope {
  let host: string | undefined;
  try {
    host = requestUrl(request).host.toLowerCase(); // cached on the request: no parse per call
  } catch {
    host = undefined;
  }
  return {
    module: request.module,
    runId: request.runId,
    url: request.url,
    fingerprint: request.fingerprint,
    host,
    attempt,
  };
}

/** Names a delivery in watchdog messages: its URL, or its module. */
function describeDelivery(delivery: Delivery<unknown>): string {
  const where = describePayload(delivery.payload);
  return where.url ?? where.module ?? delivery.id;
}

function keyOf(key: string | undefined): { key?: string } {
  return key === undefined ? {} : { key };
}

/**
 * Who admits a handler's requests, for the shared dedup set (MarkSeenOptions): the message being
 * handled — or, for the parse of a downloaded page, the request message it was downloaded for,
 * so that the parse has one claim whichever way it ran (in the downloading process or from the
 * response topic) and however often the page is fetched again.
 */
interface AdmissionClaim {
  claim: string;
  redelivered: boolean;
}

/** Carried by a page from its download to its parse (see AdmissionClaim). */
const PARSE_CLAIM_HEADER = 'mocra-parse-claim';
/** Set on it when the request message had been delivered before. */
const PARSE_CLAIM_REDELIVERED_HEADER = 'mocra-parse-claim-redelivered';

function parseClaimHeaders(download: Delivery<unknown>): Record<string, string> {
  const headers: Record<string, string> = { [PARSE_CLAIM_HEADER]: `${download.id}>parse` };
  if (download.attempt > 1) headers[PARSE_CLAIM_REDELIVERED_HEADER] = '1';
  return headers;
}

function admissionClaimOf(delivery: Delivery<unknown>): AdmissionClaim {
  const carried = delivery.headers[PARSE_CLAIM_HEADER];
  return {
    claim: carried ?? delivery.id,
    redelivered: delivery.attempt > 1 || delivery.headers[PARSE_CLAIM_REDELIVERED_HEADER] === '1',
  };
}

/** Failures recorded on a message so far (the error stage stamps this header on retries). */
function attemptsOf(delivery: Delivery<unknown>): number {
  const raw = delivery.headers[ATTEMPT_HEADER];
  if (raw === undefined) return 0;
  const n = Number(raw);
  return Number.isInteger(n) && n >= 0 ? n : 0;
}

function describePayload(payload: unknown): { module?: string; node?: string; url?: string } {
  if (payload instanceof Response) return fieldsOf(payload.request, payload.url);
  if (payload instanceof Request) return fieldsOf(payload, payload.url);
  if (payload !== null && typeof payload === 'object') {
    const p = payload as { module?: unknown; node?: unknown; url?: unknown; request?: { url?: unknown } };
    const out: { module?: string; node?: string; url?: string } = {};
    if (typeof p.module === 'string') out.module = p.module;
    if (typeof p.node === 'string') out.node = p.node;
    if (typeof p.url === 'string') out.url = p.url;
    return out;
  }
  return {};
}

function fieldsOf(request: Request, url: string): { module?: string; node?: string; url?: string } {
  const out: { module?: string; node?: string; url?: string } = { url };
  if (request.module !== undefined) out.module = request.module;
  if (request.node !== undefined) out.node = request.node;
  return out;
}

/** Accepts what a generate may reasonably return: Requests, URL strings or request data. */
async function collectRequests(output: GenerateOutput): Promise<Request[]> {
  if (output === undefined || output === null) return [];
  const out: Request[] = [];
  if (Symbol.asyncIterator in (output as object)) {
    for await (const r of output as AsyncIterable<unknown>) out.push(toRequest(r));
  } else {
    for (const r of output as Iterable<unknown>) out.push(toRequest(r));
  }
  return out;
}

function toRequest(value: unknown): Request {
  if (value instanceof Request) return value;
  if (typeof value === 'string') return new Request(value);
  if (value !== null && typeof value === 'object' && typeof (value as { url?: unknown }).url === 'string') {
    return Request.from(value as RequestData);
  }
  throw new InvalidArgumentError(`generate produced something that is not a request: ${String(value)}`);
}
