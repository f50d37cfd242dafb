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
  RetryLaterError,
  SinkFailedError,
  UnknownModuleError,
} from '../errors.js';
import { fingerprintRequest } from '../frontier/fingerprint.js';
import { Frontier, type FrontierOptions, type FrontierStats } from '../frontier/frontier.js';
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
import { ParseContext } from '../module/parse-context.js';
import { ModuleRegistry, type RegisteredModule } from '../module/registry.js';
import { type RouteTarget, routeFollowUp } from '../module/router.js';
import type { GenerateContext, GenerateOutput, Module, ModuleNode } from '../module/types.js';
import { channels } from '../observability/channels.js';
import { createLogger, type Logger, type LogLevel } from '../observability/logger.js';
import {
  parseRetryAfter,
  SimpleRetryPolicy,
  type SimpleRetryPolicyOptions,
} from '../policy/simple-retry-policy.js';
import type { FailurePolicy, PolicyDecision } from '../policy/types.js';
import { createMemoryQueueBackend } from '../queue/memory-queue.js';
import type { Delivery, LeaseQueue, PublishMessage, QueueBackend, TopicOptions } from '../queue/types.js';
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
  /** @default capacity 1000 */
  parserTask?: TopicOptions;
  error?: Omit<TopicOptions, 'capacity'>;
}

export interface EngineOptions {
  /** Where the stage topics live. Not closed by the engine when given. @default a new in-memory backend */
  queue?: QueueBackend;
  /** Namespace of the in-memory backend the engine creates. @default 'mocra' */
  namespace?: string;
  /** @default an HTTP downloader (undici) built from `download` */
  downloader?: Downloader;
  /** Options of the default HTTP downloader (ignored when `downloader` is given). */
  download?: HttpDownloaderOptions;
  /** Dedup, depth and page limits, the download gate. */
  frontier?: FrontierOptions;
  /** Concurrent downloads. @default 32 */
  concurrency?: number;
  /** Handlers per stage (overrides `concurrency` for download). */
  stages?: StageConcurrency;
  topics?: EngineTopicOptions;
  /** What to do with failures. @default a SimpleRetryPolicy built from `retry` */
  policy?: FailurePolicy;
  /** Options of the default SimpleRetryPolicy (ignored when `policy` is given). */
  retry?: SimpleRetryPolicyOptions;
  /** @default a pino logger on stderr */
  logger?: Logger;
  /** @default 'warn' (see observability/logger.ts for the environment variables) */
  logLevel?: LogLevel;
  /** Stop gracefully on SIGINT/SIGTERM (a second signal aborts work in flight). @default false */
  handleSignals?: boolean;
  /** On stop, how long work in flight may take to finish before it is aborted and put back. @default 10000 */
  shutdownTimeoutMs?: number;
  /** Publish one task per registered module when the run starts. @default true */
  autoSeed?: boolean;
  /** @default a random UUID */
  runId?: string;
  /** Aborting it stops the run gracefully. */
  signal?: AbortSignal;
  /** Called for every reported failure, after the policy decided (also published on `mocra:engine:error`). */
  onError?: (event: ErrorEvent, decision: PolicyDecision) => void;
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
}

export interface RunSummary extends Omit<EngineStats, 'state' | 'paused' | 'uptimeMs'> {
  reason: StopReason;
  endedAt: number;
  durationMs: number;
  /** Messages left on the topics (ready, delayed or leased) when the run ended; 0 after an idle end. */
  pending: number;
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
  readonly frontier: Frontier;
  readonly #options: EngineOptions;
  readonly #backend: QueueBackend;
  readonly #ownsBackend: boolean;
  readonly #downloader: Downloader;
  readonly #policy: FailurePolicy;
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
  #state: EngineState = 'created';
  #paused = false;
  #startedAt: number | undefined;
  /** Publishes from outside the stages (seeding, submit) in progress: the run is not idle. */
  #seeding = 0;
  #idleCheckQueued = false;
  #ending: Promise<RunSummary> | undefined;
  #resolveRun: ((summary: RunSummary) => void) | undefined;
  #signalCount = 0;
  #removeSignalHandlers: (() => void) | undefined;
  readonly #counters = { pages: 0, items: 0, bytes: 0, errors: 0, retries: 0, deadLettered: 0, dropped: 0 };
  readonly #errorsByCode = new Map<string, number>();

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
    this.#backend = options.queue ?? createMemoryQueueBackend({ namespace: options.namespace ?? 'mocra' });
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
      parserTask: this.#backend.topic<FollowUpTask>(TOPICS.parserTask, { capacity: 1000, ...t.parserTask }),
      error: this.#backend.topic<ErrorEvent>(TOPICS.error, { ...t.error, capacity: UNBOUNDED }),
    };
    this.#downloader =
      options.downloader ?? createHttpDownloader({ connections: download, ...options.download });
    this.#policy = options.policy ?? new SimpleRetryPolicy(options.retry);
    this.frontier = new Frontier(options.frontier);
  }

  get state(): EngineState {
    return this.#state;
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** Add a module and the sink its items go to. Only before `run()`. */
  register<TItem>(module: Module<TItem>, sink: DataSink<TItem>): this {
    if (this.#state !== 'created') throw new EngineStateError('modules can only be registered before run()');
    this.registry.register(module, sink);
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
    this.#installStopTriggers();
    if (channels.run.hasSubscribers) channels.run.publish({ runId: this.runId, phase: 'start' });
    this.log.info({ runId: this.runId, modules: this.registry.names() }, 'run started');
    if (this.#options.autoSeed ?? true) {
      this.#publishFromOutside(() =>
        this.#topics.task.publish(
          this.registry.names().map((module) => ({ payload: { module, runId: this.runId } })),
        ),
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
    this.registry.get(task.module);
    const payload: TaskEvent = { ...task, runId: task.runId ?? this.runId };
    await this.#publishFromOutside(() =>
      this.#topics.task.publish([
        {
          payload,
          ...(task.priority === undefined ? {} : { priority: task.priority }),
          ...keyOf(task.account),
        },
      ]),
    );
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
      handle,
      onFailure: (delivery, error) => this.#onStageFailure(stage, delivery, error),
      onSettled: () => this.#queueIdleCheck(),
      onInternalError: (error, context) =>
        this.log.error({ err: error, stage }, `internal error: ${context}`),
    });
    this.#runners.set(stage, runner as StageRunner<unknown>);
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
    const registered = this.registry.get(task.module);
    const requests: Request[] = [];
    for (const node of registered.entry) {
      const ctx = this.#generateContext(registered, node, task.runId, signal, { task });
      const produced = await this.#runGenerate(registered, node, ctx);
      for (const r of produced) this.#claim(r, registered, node, task.runId, task.account, 0);
      requests.push(...produced);
    }
    await this.#admitAndPublish(requests, 'task');
    return undefined;
  }

  /** parser_task ▶ (carried requests | generate(target node)) ▶ admit ▶ request */
  async #handleFollowUp(delivery: Delivery<FollowUpTask>, signal: AbortSignal): Promise<HandlerResult> {
    const followUp = delivery.payload;
    const registered = this.registry.get(followUp.module);
    const node = this.registry.node(registered, followUp.node);
    let requests: Request[];
    if (followUp.requests.length > 0) {
      requests = followUp.requests.map((r) => Request.from(r));
    } else {
      const ctx = this.#generateContext(registered, node, followUp.runId, signal, { followUp });
      requests = await this.#runGenerate(registered, node, ctx);
    }
    for (const r of requests)
      this.#claim(r, registered, node, followUp.runId, followUp.account, followUp.depth);
    await this.#admitAndPublish(requests, 'parserTask');
    return undefined;
  }

  #generateContext(
    registered: RegisteredModule,
    node: ModuleNode,
    runId: string,
    signal: AbortSignal,
    source: { task?: TaskEvent; followUp?: FollowUpTask },
  ): GenerateContext {
    return {
      module: registered.module.name,
      node: node.id,
      runId,
      trigger: source.task ? 'task' : 'follow-up',
      task: source.task,
      followUp: source.followUp,
      params: source.task?.params ?? source.followUp?.meta ?? {},
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

  async #admitAndPublish(requests: Request[], stage: StageName): Promise<void> {
    if (requests.length === 0) return;
    const { admitted, invalid } = await this.frontier.admit(requests);
    if (admitted.length > 0) {
      const messages: PublishMessage<Request>[] = new Array(admitted.length);
      for (let i = 0; i < admitted.length; i++) {
        const r = admitted[i]!;
        messages[i] =
          r.account === undefined
            ? { payload: r, priority: r.priority }
            : { payload: r, priority: r.priority, key: r.account };
      }
      await this.#topics.request.publish(messages);
    }
    if (invalid.length > 0) {
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
    }
  }

  /** request ▶ gate ▶ downloader ▶ response */
  async #handleDownload(
    delivery: Delivery<Request | RequestData>,
    signal: AbortSignal,
  ): Promise<HandlerResult> {
    const request = Request.from(delivery.payload);
    const gate = this.frontier.gate;
    const decided = gate.enter(request, signal);
    const decision = decided instanceof Promise ? await decided : decided;
    if (decision !== undefined) {
      if ('deferMs' in decision) {
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
      }
      return undefined;
    }
    if (channels.request.hasSubscribers) channels.request.publish({ request });
    let response: Response;
    try {
      response = await this.#downloader.download(request, signal);
    } catch (err) {
      gate.leave(request, { error: err });
      if (isMocraError(err)) throw err;
      throw new ConnectionError(request.url, 'headers', err instanceof Error ? err.message : String(err), {
        cause: err,
      });
    }
    gate.leave(request, { status: response.status, durationMs: response.durationMs });
    if (this.#debug) this.log.debug({ url: response.url, status: response.status }, 'downloaded');
    if (this.#policy.retryStatus(response, attemptsOf(delivery))) {
      throw new HttpStatusError(
        response.url,
        response.status,
        parseRetryAfter(response.header('retry-after')),
      );
    }
    this.#counters.pages++;
    this.#counters.bytes += response.body.length;
    if (channels.response.hasSubscribers) channels.response.publish({ request, response });
    await this.#topics.response.publish([
      { payload: response, priority: delivery.priority, ...keyOf(delivery.key) },
    ]);
    return undefined;
  }

  /** response ▶ node.parse ▶ items ▶ sink; follow-ups ▶ parser_task */
  async #handleParse(delivery: Delivery<Response>, signal: AbortSignal): Promise<HandlerResult> {
    const response = Response.from(delivery.payload);
    const request = response.request;
    const registered = this.registry.get(request.module);
    const node = this.registry.node(registered, request.node);
    const moduleName = registered.module.name;
    const runId = request.runId ?? this.runId;
    const ctx = new ParseContext<unknown>({
      response,
      module: moduleName,
      node: node.id,
      runId,
      log: this.log,
      signal,
    });
    try {
      await node.parse(response, ctx);
    } catch (err) {
      if (isMocraError(err)) throw err;
      throw new ParseFailedError({ module: moduleName, node: node.id, url: response.url }, err);
    }

    const items = ctx.items;
    if (items.length > 0) {
      const fingerprint = request.fingerprint ?? fingerprintRequest(request);
      const sink = registered.sink;
      for (let i = 0; i < items.length; i++) {
        const item = items[i];
        const meta: ItemMeta = {
          itemId: `${fingerprint}:${i}`,
          index: i,
          url: response.url,
          module: moduleName,
          node: node.id,
          runId,
        };
        try {
          const written = sink.write(item, meta);
          if (written !== undefined && typeof (written as Promise<void>).then === 'function') await written;
        } catch (err) {
          throw new SinkFailedError({ module: moduleName, itemId: meta.itemId }, err);
        }
        if (channels.item.hasSubscribers) channels.item.publish({ item, meta });
      }
      this.#counters.items += items.length;
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
    if (ctx.follows.length > 0) {
      const groups = new Map<string, FollowUpTask>();
      const from = { module: moduleName, node: node.id };
      const groupFor = (target: RouteTarget): FollowUpTask => {
        const key = `${target.module}\u0000${target.node}`;
        let group = groups.get(key);
        if (!group) {
          group = {
            module: target.module,
            node: target.node,
            runId,
            requests: [],
            meta: {},
            depth: request.depth + 1,
            ...(request.fingerprint === undefined ? {} : { parent: request.fingerprint }),
            ...(request.account === undefined ? {} : { account: request.account }),
          };
          groups.set(key, group);
        }
        return group;
      };
      // Most follows name no target: route that case once per parse (still through the router).
      let defaultGroups: FollowUpTask[] | undefined;
      for (const follow of ctx.follows) {
        let targets: FollowUpTask[];
        try {
          if (follow.module === undefined && follow.node === undefined) {
            defaultGroups ??= routeFollowUp(this.registry, from, follow).map(groupFor);
            targets = defaultGroups;
          } else {
            targets = routeFollowUp(this.registry, from, follow).map(groupFor);
          }
        } catch (err) {
          rejected.push(
            this.#errorEvent(
              'parse',
              TOPICS.request,
              follow.request,
              err as MocraError,
              1,
              follow.request.priority,
              undefined,
            ),
          );
          continue;
        }
        if (targets.length === 1) targets[0]!.requests.push(follow.request);
        else for (const group of targets) group.requests.push(follow.request.clone());
      }
      if (groups.size > 0) {
        await this.#topics.parserTask.publish(
          [...groups.values()].map((payload) => ({
            payload,
            priority: delivery.priority,
            ...keyOf(payload.account),
          })),
        );
      }
    }
    if (rejected.length > 0) await this.#topics.error.publish(rejected.map((payload) => ({ payload })));
    return undefined;
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
    switch (decision.action) {
      case 'retry': {
        this.#counters.retries++;
        const topic = this.#topicByName(event.topic);
        await topic.publish([
          {
            payload: event.payload,
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
      default:
        this.#counters.deadLettered++;
        return { deadLetter: decision.reason };
    }
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
    if (channels.error.hasSubscribers) channels.error.publish({ event, decision });
    if (this.log.isLevelEnabled('warn')) {
      this.log.warn(
        {
          code: event.code,
          stage: event.stage,
          attempt: event.attempt,
          url: event.url,
          module: event.module,
          decision: decision.action,
          ...(decision.action === 'retry' ? { delayMs: decision.delayMs } : {}),
        },
        event.message,
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
    if (error instanceof RetryLaterError) event.retryAfterMs = error.delayMs;
    else if (error instanceof HttpStatusError && error.retryAfterMs !== undefined)
      event.retryAfterMs = error.retryAfterMs;
    const errorUrl = (error as unknown as { url?: unknown }).url;
    if (event.url === undefined && typeof errorUrl === 'string') event.url = errorUrl;
    if (error instanceof UnknownModuleError) event.module ??= error.module;
    return event;
  }

  // ── idle detection and the end of a run ─────────────────────────────────────

  async #publishFromOutside(publish: () => Promise<void>): Promise<void> {
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
    await Promise.all([...this.#runners.values()].map((runner) => runner.stop(deadline)));
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
    await this.#downloader
      .close()
      .catch((err: unknown) => this.log.error({ err }, 'closing the downloader failed'));
    await this.frontier
      .close()
      .catch((err: unknown) => this.log.error({ err }, 'closing the frontier failed'));
    if (this.#ownsBackend) await this.#backend.close().catch(() => {});
    this.#removeSignalHandlers?.();
    const endedAt = Date.now();
    const { state: _state, paused: _paused, uptimeMs: _uptime, ...rest } = stats;
    const summary: RunSummary = {
      ...rest,
      reason,
      endedAt,
      durationMs: endedAt - (this.#startedAt ?? endedAt),
      pending,
    };
    this.#state = 'stopped';
    if (channels.run.hasSubscribers) channels.run.publish({ runId: this.runId, phase: 'end', reason });
    this.log.info(
      {
        reason,
        pages: summary.pages,
        items: summary.items,
        errors: summary.errors,
        deadLettered: summary.deadLettered,
        pending,
        durationMs: summary.durationMs,
      },
      'run ended',
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

function keyOf(key: string | undefined): { key?: string } {
  return key === undefined ? {} : { key };
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
