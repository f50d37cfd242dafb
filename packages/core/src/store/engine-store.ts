/**
 * What an engine does with its database, in one place, so the engine itself only has a few
 * hook points (`engine.db`):
 *
 * ```
 *   run()        ─▶ open (+ migrate) ─▶ read which modules the database knows
 *                 ─▶ cron: jobs for enabled contexts, refreshed on the change token
 *                 ─▶ seed: one task per enabled account × platform (its linked modules)
 *   task stage   ─▶ modulesFor(task): loadTaskContext → the modules to run (skips reported;
 *                   an account × platform that cannot run throws a typed error → reported)
 *                 ─▶ runStarted → task_result row
 *   any stage    ─▶ module config from the database provider (store-config-provider.ts)
 *   counters     ─▶ counted / reported → task_result counts, log rows
 *   settled      ─▶ runs whose every node finished → task_result finished
 *   stop         ─▶ finish open runs, flush logs, close the store if the engine opened it
 * ```
 */
import { hostname } from 'node:os';
import type { LogEntryInput, LogLevel, StoreRepository, TaskContext } from '@mocra/store';
import { ContextUnavailableError } from '@mocra/store/config';
import type { ModuleConfigResolver } from '../config/module-config.js';
import type { Coordination } from '../coordination/types.js';
import { UnknownMiddlewareError } from '../errors.js';
import type { MiddlewareManager } from '../middleware/manager.js';
import type { ErrorEvent, FollowUpTask, TaskEvent } from '../model/events.js';
import { Request } from '../model/request.js';
import { Response } from '../model/response.js';
import type { ModuleRegistry, RegisteredModule } from '../module/registry.js';
import { DEFAULT_ACCOUNT, DEFAULT_PLATFORM, type ModuleRuntime } from '../module/runtime.js';
import type { Logger } from '../observability/logger.js';
import type { PolicyDecision } from '../policy/types.js';
import type { Clock } from '../schedule/clock.js';
import type { CronScheduler } from '../schedule/scheduler.js';
import { dbChannels, type ModuleSkippedMessage } from './channels.js';
import { createItemStoreMiddleware, type ItemStoreMiddleware } from './item-store-middleware.js';
import { StoreLogWriter } from './log-writer.js';
import type { ResolvedEngineStoreOptions } from './options.js';
import { StoreModuleConfigProvider } from './store-config-provider.js';
import { type StoreCronRefresh, StoreCronSync } from './store-cron.js';
import { TaskResultRecorder, type TaskRunKey } from './task-results.js';

export interface EngineStoreDeps {
  options: ResolvedEngineStoreOptions;
  registry: ModuleRegistry;
  log: Logger;
  namespace: string;
  coordination?: Coordination;
}

const TRACEBACK_LIMIT = 4_000;

export class EngineStore {
  readonly options: ResolvedEngineStoreOptions;
  /** The database config provider, once attached to the engine's resolver. */
  provider: StoreModuleConfigProvider | undefined;
  /** The item-store middleware the engine registered (`store.items`). */
  items: ItemStoreMiddleware | undefined;
  readonly #deps: EngineStoreDeps;
  readonly #results: TaskResultRecorder | undefined;
  readonly #logs: StoreLogWriter | undefined;
  #cron: StoreCronSync | undefined;
  #store: Promise<StoreRepository> | undefined;
  #opened: StoreRepository | undefined;
  /** Names of the modules that have a row in the database, as of the start of the run. */
  #governed: ReadonlySet<string> = new Set();
  #checkQueued = false;
  #isDone: ((key: TaskRunKey) => boolean) | undefined;
  #closed = false;

  constructor(deps: EngineStoreDeps) {
    this.#deps = deps;
    this.options = deps.options;
    const store = () => this.repository();
    const onError = (operation: string, error: unknown) => this.#reportError(operation, error);
    const results = deps.options.taskResults;
    this.#results =
      results === false
        ? undefined
        : new TaskResultRecorder({
            store,
            ...results,
            namespace: deps.namespace,
            nodeId: deps.coordination?.nodeId ?? `${hostname()}-${process.pid}`,
            ...(deps.coordination === undefined ? {} : { coordination: deps.coordination }),
            onError,
            onSwept: (runs) =>
              deps.log.warn({ runs }, 'zombie sweep: runs that stopped reporting were marked failed'),
          });
    const logs = deps.options.logs;
    this.#logs =
      logs === false
        ? undefined
        : new StoreLogWriter({
            store,
            ...logs,
            onError: (err) => deps.log.warn({ err }, 'writing log rows failed; the batch was dropped'),
          });
  }

  /** The store: opened (and migrated, with `migrate`) on first use. */
  repository(): Promise<StoreRepository> {
    this.#store ??= (async () => {
      const given = this.options.store;
      // The repository and its drivers load with the first store a run opens, not with the engine.
      const store = given ?? (await (await import('@mocra/store')).createStore(this.options.open!));
      if (given === undefined) this.#opened = store;
      if (this.options.migrate) {
        const { applied } = await store.migrate();
        if (applied.length > 0) this.#deps.log.info({ applied }, 'database migrations applied');
      }
      return store;
    })().catch((err: unknown) => {
      this.#store = undefined; // a later call tries again
      throw err;
    });
    return this.#store;
  }

  /** Puts the database provider under the engine's resolver (over whatever layers it had). */
  attach(resolver: ModuleConfigResolver, middleware: MiddlewareManager): void {
    if (!this.options.moduleConfig) return;
    const registry = this.#deps.registry;
    this.provider = new StoreModuleConfigProvider({
      store: () => this.repository(),
      under: resolver.provider,
      cacheMs: this.options.configCacheMs,
      middleware,
      codeConfig: (module) =>
        registry.has(module)
          ? (registry.get(module).module.config as Record<string, never> | undefined)
          : undefined,
    });
    resolver.setProvider(this.provider);
  }

  /** Registers the item-store middleware (`store.items`) on the engine's manager. */
  registerItems(middleware: MiddlewareManager): void {
    const settings = this.options.items;
    if (settings === false) return;
    const { global, ...rest } = settings;
    this.items = createItemStoreMiddleware({ ...rest, store: () => this.repository() });
    middleware.register(this.items, { global: global ?? true });
  }

  /** Opens the store and reads which modules it knows; starts heartbeats and the zombie sweep. */
  async start(isDone: (key: TaskRunKey) => boolean): Promise<void> {
    this.#isDone = isDone;
    const store = await this.repository();
    this.#governed = new Set((await store.list('module')).map((m) => m.name));
    this.#results?.start();
  }

  /** Whether the database governs a module (it has a row): its cron targets and seeds come from there. */
  governs(module: string): boolean {
    return this.#governed.has(module);
  }

  /** Cron jobs for the database's contexts on the engine's scheduler. */
  async startCron(
    scheduler: CronScheduler,
    submit: (task: TaskEvent) => Promise<void>,
    clock: Clock,
  ): Promise<void> {
    const cron = this.options.cron;
    if (cron === false) return;
    this.#cron = new StoreCronSync({
      store: () => this.repository(),
      scheduler,
      registry: this.#deps.registry,
      submit,
      clock,
      refreshMs: cron.refreshMs,
      partition: cron.partition,
      ...(this.#deps.coordination === undefined ? {} : { coordination: this.#deps.coordination }),
      onError: (operation, error) => this.#reportError(operation, error),
    });
    await this.#cron.start();
  }

  /** Reads the change token now and reconciles the cron jobs if it moved (the interval does this too). */
  refreshCron(): Promise<StoreCronRefresh | undefined> {
    return this.#cron?.refresh() ?? Promise.resolve(undefined);
  }

  /** The scheduler's gate for database jobs (partition ownership by context key). */
  cronGate(job: { id: string; key: string }): boolean {
    return this.#cron?.gate(job) ?? true;
  }

  /**
   * The tasks auto-seed starts: one per enabled account × platform with its linked modules
   * (each pair its own run id, so its task_result rows stay apart), and one per module the
   * database does not know, as without a database.
   */
  async seedTasks(modules: readonly RegisteredModule[], runId: string): Promise<TaskEvent[]> {
    const names = modules.map((r) => r.module.name);
    if (!this.options.seed) return names.map((module) => ({ module, runId }));
    const store = await this.repository();
    const { contexts } = await store.listCronContexts();
    const pairs = new Map<string, TaskEvent & { modules: string[] }>();
    for (const context of contexts) {
      if (!names.includes(context.module.name)) continue;
      const account = context.account.name;
      const platform = context.platform.name;
      const key = `${account}\u0000${platform}`;
      let task = pairs.get(key);
      if (task === undefined) {
        task = {
          modules: [],
          runId: `${runId}/${account}/${platform}`,
          account,
          platform,
          ...(context.account.priority === 0 ? {} : { priority: context.account.priority }),
        };
        pairs.set(key, task);
      }
      task.modules.push(context.module.name);
    }
    const ungoverned = names.filter((n) => !this.#governed.has(n)).map((module) => ({ module, runId }));
    return [...pairs.values(), ...ungoverned];
  }

  /**
   * The modules a task runs. With an account and a platform, modules the database knows must be
   * enabled and linked to both (else they are skipped and reported); modules it does not know
   * run as without a database. An account × platform that is disabled or not linked throws the
   * store's ContextUnavailableError (the task is reported, with a failed task_result row).
   */
  async modulesFor(task: TaskEvent, runtime: ModuleRuntime): Promise<RegisteredModule[]> {
    if (!this.options.moduleConfig || task.account === undefined || task.platform === undefined) {
      return runtime.modulesOf(task);
    }
    const listed = task.modules ?? (task.module === undefined ? undefined : [task.module]);
    const governed = listed?.filter((m) => this.#governed.has(m));
    if (governed !== undefined && governed.length === 0) return runtime.modulesOf(task);
    const { account, platform } = task;
    const store = await this.repository();
    let context: TaskContext;
    try {
      context = await store.loadTaskContext({
        account,
        platform,
        ...(governed === undefined ? {} : { modules: governed }),
      });
    } catch (err) {
      if (err instanceof ContextUnavailableError) this.#rejected(task, err);
      throw err;
    }
    const run = new Set<string>();
    for (const module of context.modules) {
      const name = module.module.name;
      if (!this.#deps.registry.has(name)) {
        // Linked in the database but not registered here: report only when the task asked for it.
        this.#skipped({ account, platform, module: name, reason: 'not_registered' }, listed !== undefined);
        continue;
      }
      try {
        this.#checkMiddleware(name, runtime.middleware, this.provider?.selection(module));
      } catch (err) {
        // One module's bad relation row must not keep the task's other modules from running.
        this.#skipped({ account, platform, module: name, reason: 'unknown_middleware' }, true);
        this.#results?.rejected(
          { runId: task.runId, account, platform, module: name },
          err as Error & { code?: string },
        );
        continue;
      }
      run.add(name);
    }
    for (const { module, reason } of context.skipped)
      this.#skipped({ account, platform, module, reason }, true);
    for (const name of listed ?? []) if (!this.#governed.has(name)) run.add(name);
    return [...run].map((name) => this.#deps.registry.get(name));
  }

  /** A run of a module started (every delivery of its task: the store reopens a redelivered run's row). */
  runStarted(task: TaskEvent, module: string): void {
    const account = task.account ?? DEFAULT_ACCOUNT;
    const platform = task.platform ?? DEFAULT_PLATFORM;
    this.#results?.started({ runId: task.runId, module, account, platform });
    if (this.#logs?.enabled('info')) {
      this.#logs.log({
        taskId: `${account}-${platform}`,
        runId: task.runId,
        module,
        level: 'info',
        message: 'run started',
        status: 'running',
      });
    }
  }

  counted(runId: string | undefined, module: string | undefined, field: 'requests' | 'items', n = 1): void {
    this.#results?.count(runId, module, field, n);
  }

  /** A failure was reported and the policy decided: task_result counts and a log row. */
  reported(event: ErrorEvent, decision: PolicyDecision): void {
    const where = whereOf(event.payload);
    const givenUp = decision.action !== 'retry';
    const module = event.module ?? where.module;
    this.#results?.failed(where.runId, module, { message: event.message, code: event.code }, givenUp);
    const level: LogLevel = decision.action === 'stop' ? 'fatal' : givenUp ? 'error' : 'warn';
    if (this.#logs?.enabled(level)) {
      const entry: LogEntryInput = {
        taskId: `${where.account ?? DEFAULT_ACCOUNT}-${where.platform ?? DEFAULT_PLATFORM}`,
        level,
        message: `${event.code}: ${event.message}`,
        status: decision.action,
        timestamp: new Date(event.at),
      };
      if (where.runId !== undefined) entry.runId = where.runId;
      if (module !== undefined) entry.module = module;
      if (where.requestId !== undefined) entry.requestId = where.requestId;
      const stack = event.error instanceof Error ? event.error.stack : undefined;
      if (stack !== undefined) entry.traceback = stack.slice(0, TRACEBACK_LIMIT);
      this.#logs.log(entry);
    }
  }

  /** Something settled: runs whose every node is finished get their end recorded (coalesced). */
  settled(): void {
    if (this.#results === undefined || this.#checkQueued || this.#isDone === undefined) return;
    this.#checkQueued = true;
    setImmediate(() => {
      this.#checkQueued = false;
      const isDone = this.#isDone;
      if (isDone !== undefined && !this.#closed)
        this.#results?.settle((key) => this.#finishedRun(key, isDone));
    });
  }

  /** Writes heartbeats now (the interval does this too). */
  heartbeat(): Promise<void> {
    return this.#results?.heartbeat() ?? Promise.resolve();
  }

  /** Runs the zombie sweep now; returns how many runs it failed. */
  sweepZombies(): Promise<number> {
    return this.#results?.sweep() ?? Promise.resolve(0);
  }

  /** Writes buffered log rows now. */
  flushLogs(): Promise<void> {
    return this.#logs?.flush() ?? Promise.resolve();
  }

  /** Log-row counters (written, dropped, buffered). */
  logStats() {
    return this.#logs?.stats();
  }

  /** The run ended: finish open runs (not done: cancelled, or failed after a critical stop), flush, close. */
  async close(reason: string): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#cron?.stop();
    const isDone = this.#isDone;
    await this.#results?.close(
      (key) => isDone !== undefined && this.#finishedRun(key, isDone),
      reason === 'critical' ? 'failed' : 'cancelled',
    );
    await this.#logs?.close();
    await this.items?.flush().catch(() => undefined);
    if (this.#opened !== undefined) await this.#opened.close();
  }

  #finishedRun(key: TaskRunKey, isDone: (key: TaskRunKey) => boolean): boolean {
    const done = isDone(key);
    if (done && this.#logs?.enabled('info')) {
      this.#logs.log({
        taskId: `${key.account}-${key.platform}`,
        runId: key.runId,
        module: key.module,
        level: 'info',
        message: 'run finished',
        status: 'finished',
      });
    }
    return done;
  }

  #rejected(task: TaskEvent, error: ContextUnavailableError): void {
    this.#results?.rejected(
      {
        runId: task.runId,
        account: task.account ?? DEFAULT_ACCOUNT,
        platform: task.platform ?? DEFAULT_PLATFORM,
      },
      error,
    );
  }

  #checkMiddleware(
    module: string,
    middleware: MiddlewareManager,
    selection: ReturnType<StoreModuleConfigProvider['selection']> | undefined,
  ): void {
    if (selection === undefined) return;
    const by = `the database relations of module '${module}'`;
    for (const name of selection.download)
      if (!middleware.has('download', name)) throw new UnknownMiddlewareError('download', name, by);
    for (const name of selection.data)
      if (!middleware.has('data', name)) throw new UnknownMiddlewareError('data', name, by);
    for (const name of selection.store)
      if (!middleware.has('store', name)) throw new UnknownMiddlewareError('store', name, by);
  }

  #skipped(message: ModuleSkippedMessage, loud: boolean): void {
    if (dbChannels.moduleSkipped.hasSubscribers) dbChannels.moduleSkipped.publish(message);
    const log = this.#deps.log;
    if (loud)
      log.warn(
        message,
        `module '${message.module}' does not run for ${message.account} × ${message.platform}: ${message.reason}`,
      );
    else if (log.isLevelEnabled('debug')) log.debug(message, 'module in the database is not registered here');
    if (loud && this.#logs?.enabled('warn')) {
      this.#logs.log({
        taskId: `${message.account}-${message.platform}`,
        module: message.module,
        level: 'warn',
        message: `module skipped: ${message.reason}`,
        status: 'skipped',
      });
    }
  }

  #reportError(operation: string, error: unknown): void {
    if (dbChannels.error.hasSubscribers) dbChannels.error.publish({ operation, error });
    this.#deps.log.warn(
      { err: error, operation },
      'a database operation of the engine failed; the crawl goes on',
    );
  }
}

/** Run, module, account, platform and request of a failed payload (live or serialized). */
function whereOf(payload: unknown): {
  runId?: string;
  module?: string;
  account?: string;
  platform?: string;
  requestId?: string;
} {
  let request: Request | undefined;
  if (payload instanceof Response) request = payload.request;
  else if (payload instanceof Request) request = payload;
  if (request !== undefined)
    return definedOf({
      runId: request.runId,
      module: request.module,
      account: request.account,
      platform: request.platform,
      requestId: request.fingerprint,
    });
  if (payload === null || typeof payload !== 'object') return {};
  const p = payload as Partial<FollowUpTask & TaskEvent> & { request?: Record<string, unknown> };
  const from =
    p.request !== undefined && typeof p.request === 'object'
      ? (p.request as Record<string, unknown>)
      : (p as Record<string, unknown>);
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return definedOf({
    runId: str(from.runId),
    module: str(from.module),
    account: str(from.account),
    platform: str(from.platform),
    requestId: str(from.fingerprint),
  });
}

function definedOf<T extends Record<string, string | undefined>>(o: T): { [K in keyof T]?: string } {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as { [K in keyof T]?: string };
}
