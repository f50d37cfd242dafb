/**
 * What the engine asks about modules while it runs them: their config and settings, their
 * sessions and logins, the middleware chains, which downloader fetches a request, and DAG
 * routing (hand-offs, fan-out, the advance gate, joins, the stop signal). The engine keeps the
 * queues and stages; everything module-specific is decided here, so the engine has a few small
 * hook points instead of module logic spread through it.
 *
 * ```
 *   task/hand-off ─▶ stopped? ─▶ scope (config, settings, login) ─▶ generate ─▶ prepare requests
 *   request      ─▶ stopped? ─▶ beforeRequest ─▶ downloader (by name; session) ─▶ session gone? ─▶ afterResponse
 *   response     ─▶ stopped? ─▶ parse ─▶ data mw ─▶ store mw ─▶ sink
 *                                    └─▶ route: follows · cx.next (fan-out) · cx.start · advance gate · cx.stop
 *   every unit done / dead-lettered / dropped ─▶ ledger ─▶ joins that became ready
 * ```
 */
import diagnostics_channel from 'node:diagnostics_channel';
import type { JsonObject, ModuleConfig } from '@mocra/store';
import {
  createModuleConfigResolver,
  type ModuleConfigResolver,
  type ModuleSettings,
} from '../config/module-config.js';
import type { ModuleDownloadSettings } from '../downloader/download-router.js';
import {
  InvalidArgumentError,
  isMocraError,
  type MocraError,
  RunHookFailedError,
  UnknownModuleError,
} from '../errors.js';
import {
  createMiddlewareManager,
  type MiddlewareManager,
  type MiddlewarePlan,
} from '../middleware/manager.js';
import type { MiddlewareContext, MiddlewareSelection } from '../middleware/types.js';
import type { FollowUpTask, TaskEvent } from '../model/events.js';
import type { ItemMeta } from '../model/item.js';
import { Request } from '../model/request.js';
import { Response } from '../model/response.js';
import type { Logger } from '../observability/logger.js';
import { downloadWithSession } from '../session/fetch.js';
import { checkSession, ensureLoggedIn } from '../session/login.js';
import { createSessionStore, type LoginInfo, type Session, type SessionStore } from '../session/session.js';
import type { ParseContext } from './parse-context.js';
import type { ModuleRegistry, RegisteredModule } from './registry.js';
import { routeFollowUp } from './router.js';
import { type JoinReady, RunLedger } from './run-ledger.js';
import type { Module, RunStartContext } from './types.js';

export const DEFAULT_ACCOUNT = 'default';
export const DEFAULT_PLATFORM = 'default';

/** `mocra:module:drop` — work of a stopped run (or dropped by middleware) that was not done. */
export interface ModuleDropMessage {
  runId: string;
  module: string;
  node: string | undefined;
  /** Which kind of work: a task, a hand-off, a request, a response, or items' follow-ups. */
  stage: 'task' | 'followUp' | 'download' | 'parse';
  reason: string;
  url?: string;
}

/** `mocra:module:advance` / `mocra:module:join` — a run moved on to `to`. */
export interface ModuleFlowMessage {
  runId: string;
  module: string;
  from: string | undefined;
  to: string;
}

/** `mocra:module:stop` — a parse stopped its run. */
export interface ModuleStopMessage {
  runId: string;
  module: string;
  node: string;
  reason: string;
}

export const MODULE_CHANNEL_NAMES = {
  drop: 'mocra:module:drop',
  advance: 'mocra:module:advance',
  join: 'mocra:module:join',
  stop: 'mocra:module:stop',
} as const;

const dropChannel = diagnostics_channel.channel(MODULE_CHANNEL_NAMES.drop);
const advanceChannel = diagnostics_channel.channel(MODULE_CHANNEL_NAMES.advance);
const joinChannel = diagnostics_channel.channel(MODULE_CHANNEL_NAMES.join);
const stopChannel = diagnostics_channel.channel(MODULE_CHANNEL_NAMES.stop);

/** Counters of the module runtime (also in the engine's stats as `modules`). */
export interface ModuleRuntimeStats {
  /** Units of work dropped because their run was stopped. */
  droppedAfterStop: number;
  /** Requests, responses and items dropped by middleware. */
  middlewareDrops: number;
  /** Hand-offs to successor nodes (`cx.next`, fan-out counts each successor). */
  handoffs: number;
  /** Advance-gate firings. */
  advances: number;
  /** Join firings. */
  joins: number;
  /** Runs stopped by a parse. */
  stops: number;
  /** `onRunEnd` hooks that threw. */
  runEndFailures: number;
  /** Runs of other modules started by a parse (`cx.start`). */
  starts: number;
}

/** Everything a generate, download or parse of a module needs to know about its account × platform. */
export interface ModuleScope {
  readonly account: string;
  readonly platform: string;
  readonly config: ModuleConfig;
  readonly settings: ModuleSettings;
  /** The account × platform session, when the module uses one (`enable_session` or `shouldLogin`). */
  readonly session: Session | undefined;
  readonly login: LoginInfo | undefined;
}

export interface ModuleRuntimeOptions {
  registry: ModuleRegistry;
  log: Logger;
  /** @default an empty manager (no middleware) */
  middleware?: MiddlewareManager;
  /** @default a resolver over an empty in-memory provider */
  moduleConfig?: ModuleConfigResolver;
  /** @default a new store */
  sessions?: SessionStore;
  /** @default a per-process ledger */
  ledger?: RunLedger;
  /**
   * Downloads one request with the downloader it selects (its own choice by name, else its
   * module's, else the default) — the engine's download router. Redirects are followed by the
   * session layer when the module uses a session.
   */
  fetch: ModuleFetch;
  /** Throws when a module's downloader choice names no registered downloader (the router's check). */
  validateDownloads?: (module: ModuleDownloadSettings) => void;
}

/** Downloads a request for a module (downloader selection, proxies, outcome reporting). */
export type ModuleFetch = (
  request: Request,
  module: ModuleDownloadSettings,
  signal: AbortSignal,
) => Promise<Response>;

/** Output of routing one parse. */
/** Admitted requests counted per run, module and node (see `ModuleRuntime.unitsOf`). */
export type AdmittedUnits = { runId: string; module: string; node: string; n: number }[];

/** What every follow-up of one parse shares: its run, depth, parent, account and platform. */
type FollowUpBase = Omit<FollowUpTask, 'module' | 'node' | 'requests' | 'meta'>;

export interface RouteResult {
  followUps: FollowUpTask[];
  /** Follows and hand-offs that could not be routed (reported as errors). */
  rejected: { payload: unknown; error: MocraError }[];
  /** Follow-ups dropped because the parse stopped its run (already reported). */
  droppedByStop: number;
}

export class ModuleRuntime {
  readonly registry: ModuleRegistry;
  readonly middleware: MiddlewareManager;
  readonly moduleConfig: ModuleConfigResolver;
  readonly sessions: SessionStore;
  readonly ledger: RunLedger;
  readonly #log: Logger;
  readonly #fetch: ModuleFetch;
  readonly #validateDownloads: ((module: ModuleDownloadSettings) => void) | undefined;
  readonly #stats: ModuleRuntimeStats = {
    droppedAfterStop: 0,
    middlewareDrops: 0,
    handoffs: 0,
    advances: 0,
    joins: 0,
    stops: 0,
    starts: 0,
    runEndFailures: 0,
  };
  /** `onRunEnd` hooks still running: the engine's run waits for them. */
  readonly #runEndHooks = new Set<Promise<void>>();
  /** Meta handed to a join node before it fired, per run × module × node. */
  readonly #joinInputs = new Map<string, Record<string, unknown>[]>();

  constructor(options: ModuleRuntimeOptions) {
    this.registry = options.registry;
    this.#log = options.log;
    this.middleware = options.middleware ?? createMiddlewareManager();
    this.moduleConfig = options.moduleConfig ?? createModuleConfigResolver();
    this.sessions = options.sessions ?? createSessionStore();
    this.ledger = options.ledger ?? new RunLedger();
    this.ledger.onRunFinished((runId, module) => this.#runFinished(runId, module));
    this.#fetch = options.fetch;
    this.#validateDownloads = options.validateDownloads;
  }

  stats(): ModuleRuntimeStats {
    return { ...this.#stats };
  }

  /** The modules a task starts: `modules`, else `module`, else every registered module. */
  modulesOf(task: TaskEvent): RegisteredModule[] {
    const names = task.modules ?? (task.module === undefined ? this.registry.names() : [task.module]);
    return names.map((name) => this.registry.get(name));
  }

  /**
   * Checks a module's own choices against what is registered (middleware names in its code
   * config, its downloader): a typo fails at start, not at the first request.
   */
  validate(module: Module<unknown>): void {
    const config = (module.config ?? {}) as JsonObject;
    this.middleware.validate(selectionOf(config, undefined, module.name));
    this.moduleConfig.setCodeLayer(module.name, module.config);
  }

  /**
   * Checks what each module's config layers select for the default account and platform
   * (downloader and middleware names; the layers' typed keys): call before a run so a typo
   * fails at start.
   */
  async validateAll(): Promise<void> {
    for (const registered of this.registry.values()) {
      const { config, settings } = await this.moduleConfig.resolve({
        module: registered.module.name,
        account: DEFAULT_ACCOUNT,
        platform: DEFAULT_PLATFORM,
      });
      this.#validateDownloads?.(
        this.downloadSettings(registered, {
          account: DEFAULT_ACCOUNT,
          platform: DEFAULT_PLATFORM,
          config,
          settings,
          session: undefined,
          login: undefined,
        }),
      );
      this.middleware.validate({
        download: settings.downloadMiddleware,
        data: settings.dataMiddleware,
        store: settings.storeMiddleware,
        selectedBy: `module '${registered.module.name}'`,
      });
    }
  }

  /** What the download router needs: the module's name, its downloader choice and its proxy use. */
  downloadSettings(registered: RegisteredModule, scope: ModuleScope): ModuleDownloadSettings {
    const module = registered.module;
    const downloader = scope.settings.downloader ?? module.downloader;
    const proxy = scope.settings.proxy ?? module.proxy;
    return {
      name: module.name,
      ...(downloader === undefined ? {} : { downloader }),
      ...(proxy === undefined ? {} : { proxy }),
    };
  }

  // ── scope: config, settings, session, login ────────────────────────────────────

  /**
   * Config and settings of a module for an account × platform; logs the session in when the
   * module needs it (unless `login: false`, for stages that send nothing).
   */
  scope(
    registered: RegisteredModule,
    account: string,
    platform: string,
    signal: AbortSignal,
    options: { login?: boolean } = {},
  ): ModuleScope | Promise<ModuleScope> {
    const query = { module: registered.module.name, account, platform };
    const cached = this.moduleConfig.cached(query);
    if (cached !== undefined) return this.#scopeOf(registered, account, platform, signal, options, cached);
    return this.moduleConfig
      .resolve(query)
      .then((resolved) => this.#scopeOf(registered, account, platform, signal, options, resolved));
  }

  #scopeOf(
    registered: RegisteredModule,
    account: string,
    platform: string,
    signal: AbortSignal,
    options: { login?: boolean },
    { config, settings }: { config: ModuleConfig; settings: ModuleSettings },
  ): ModuleScope | Promise<ModuleScope> {
    const module = registered.module;
    const needsSession = settings.enableSession || module.shouldLogin === true;
    const session = needsSession ? this.sessions.get(account, platform) : undefined;
    const scope: ModuleScope = { account, platform, config, settings, session, login: session?.login };
    if (!(session && module.shouldLogin === true && module.login && options.login !== false)) return scope;
    const downloadSettings = this.downloadSettings(registered, { ...scope, login: undefined });
    return ensureLoggedIn(session, {
      module: module.name,
      login: module.login,
      download: (r, s) => this.#fetch(r, downloadSettings, s),
      signal,
      maxAttempts: settings.loginMaxAttempts,
      stickyHeaders: settings.stickyHeaders,
    }).then(() => ({ ...scope, login: session.login }));
  }

  /** Module headers, settings headers and timeout onto requests (a request's own values win). */
  prepare(requests: readonly Request[], registered: RegisteredModule, scope: ModuleScope): void {
    const moduleHeaders = registered.module.headers;
    const settingsHeaders = scope.settings.headers;
    const hasHeaders =
      (moduleHeaders && Object.keys(moduleHeaders).length > 0) || Object.keys(settingsHeaders).length > 0;
    for (const request of requests) {
      if (hasHeaders) {
        const present = new Set(Object.keys(request.headers).map((h) => h.toLowerCase()));
        for (const [name, value] of [
          ...Object.entries(settingsHeaders),
          ...Object.entries(moduleHeaders ?? {}),
        ]) {
          if (!present.has(name.toLowerCase())) {
            request.headers[name] = value;
            present.add(name.toLowerCase());
          }
        }
      }
      if (request.timeoutMs === undefined && scope.settings.timeoutMs !== undefined) {
        request.timeoutMs = scope.settings.timeoutMs;
      }
    }
  }

  /** The middleware context of a piece of work. */
  middlewareContext(
    registered: RegisteredModule,
    node: string | undefined,
    runId: string,
    scope: ModuleScope,
    signal: AbortSignal,
  ): MiddlewareContext {
    return {
      module: registered.module.name,
      node,
      runId,
      account: scope.account,
      platform: scope.platform,
      config: scope.config,
      signal,
    };
  }

  /** The middleware plan for a module's settings and a request's own selection. */
  plan(registered: RegisteredModule, scope: ModuleScope, request: Request | undefined): MiddlewarePlan {
    const s = scope.settings;
    return this.middleware.plan({
      download: s.downloadMiddleware,
      data: s.dataMiddleware,
      store: s.storeMiddleware,
      ...(request?.middleware === undefined ? {} : { request: request.middleware }),
      weights: s.middlewareWeights,
      selectedBy: `module '${registered.module.name}'`,
    });
  }

  // ── run hooks ───────────────────────────────────────────────────────────────────

  /** The module's `onRunStart`, before its entry nodes generate; a throw becomes RunHookFailedError. */
  async runStart(registered: RegisteredModule, ctx: RunStartContext): Promise<void> {
    const hook = registered.module.onRunStart;
    if (hook === undefined) return;
    try {
      await hook(ctx);
    } catch (err) {
      // A MocraError steers the policy itself (RetryLaterError, NonRetryableError…).
      if (isMocraError(err)) throw err;
      throw new RunHookFailedError({ module: ctx.module, hook: 'onRunStart', runId: ctx.runId }, err);
    }
  }

  /** Resolves when every `onRunEnd` started so far has returned. */
  async runEndsSettled(): Promise<void> {
    while (this.#runEndHooks.size > 0) await Promise.all(this.#runEndHooks);
  }

  #runFinished(runId: string, module: string): void {
    const hook = this.registry.has(module) ? this.registry.get(module).module.onRunEnd : undefined;
    if (hook === undefined) return;
    const running = (async () => {
      const stopped = await Promise.resolve(this.ledger.stoppedReason(runId, module)).catch(() => undefined);
      try {
        await hook({ module, runId, stopped, log: this.#log });
      } catch (cause) {
        this.#stats.runEndFailures++;
        const err = new RunHookFailedError({ module, hook: 'onRunEnd', runId }, cause);
        this.#log.error({ err, module, runId, code: err.code }, err.message);
      }
    })();
    this.#runEndHooks.add(running);
    void running.finally(() => this.#runEndHooks.delete(running));
  }

  // ── the stop signal ─────────────────────────────────────────────────────────────

  /** The reason, when the run of the module was stopped. */
  stoppedReason(runId: string, module: string): string | undefined | Promise<string | undefined> {
    return this.ledger.stoppedReason(runId, module);
  }

  /** Reports a unit of work that is not done because its run stopped, and settles it in the ledger. */
  dropStopped(message: ModuleDropMessage): JoinReady[] {
    this.#stats.droppedAfterStop++;
    if (dropChannel.hasSubscribers) dropChannel.publish(message);
    this.#log.info(
      {
        runId: message.runId,
        module: message.module,
        node: message.node,
        stage: message.stage,
        url: message.url,
      },
      `dropped: the run was stopped (${message.reason})`,
    );
    return message.node === undefined ? [] : this.ledger.done(message.runId, message.module, message.node);
  }

  // ── download ───────────────────────────────────────────────────────────────────

  /**
   * Downloads a request through its module's middleware, downloader and session. Returns the
   * response, or `undefined` when a middleware dropped the request or the response (reported
   * and settled in the ledger). A response that says the session is gone throws
   * SessionExpiredError after invalidating the session (the retry logs in again).
   */
  async download(
    request: Request,
    registered: RegisteredModule,
    scope: ModuleScope,
    signal: AbortSignal,
  ): Promise<{ response: Response; joins?: undefined } | { response?: undefined; joins: JoinReady[] }> {
    const module = registered.module;
    this.prepare([request], registered, scope);
    const plan = this.plan(registered, scope, request);
    const mctx = this.middlewareContext(registered, request.node, request.runId ?? '', scope, signal);
    let outgoing = request;
    if (plan.beforeRequest.length > 0) {
      const before = await this.middleware.beforeRequest(request, mctx, plan);
      if (before.droppedBy !== undefined) return { joins: this.#middlewareDrop(request) };
      outgoing = before.value;
    }
    const downloadSettings = this.downloadSettings(registered, scope);
    let response: Response;
    if (scope.session) {
      const generation = scope.session.generation;
      response = await downloadWithSession(
        (r, s) => this.#fetch(r, downloadSettings, s),
        scope.session,
        outgoing,
        signal,
        {
          stickyHeaders: scope.settings.stickyHeaders,
        },
      );
      if (module.shouldLogin === true) {
        const gone = checkSession(scope.session, response, generation, {
          statuses: scope.settings.loginStatuses,
          ...(module.sessionGone ? { predicate: module.sessionGone } : {}),
        });
        if (gone) throw gone;
      }
    } else {
      response = await this.#fetch(outgoing, downloadSettings, signal);
    }
    if (response.request !== request) response = withRequest(response, request);
    if (plan.afterResponse.length > 0) {
      const after = await this.middleware.afterResponse(response, mctx, plan);
      if (after.droppedBy !== undefined) return { joins: this.#middlewareDrop(request) };
      response = after.value.request === request ? after.value : withRequest(after.value, request);
    }
    return { response };
  }

  #middlewareDrop(request: Request): JoinReady[] {
    this.#stats.middlewareDrops++;
    if (request.runId === undefined || request.module === undefined || request.node === undefined) return [];
    return this.ledger.done(request.runId, request.module, request.node);
  }

  // ── items ──────────────────────────────────────────────────────────────────────

  /**
   * Runs items through the data and store chains; returns the items the sink gets (at once when
   * the module has no such middleware).
   */
  processItems<TItem>(
    items: { item: TItem; meta: ItemMeta }[],
    registered: RegisteredModule,
    scope: ModuleScope,
    request: Request,
    mctx: MiddlewareContext,
  ): { item: TItem; meta: ItemMeta }[] | Promise<{ item: TItem; meta: ItemMeta }[]> {
    const plan = this.plan(registered, scope, request);
    if (plan.data.length === 0 && plan.store.length === 0) return items;
    return this.#runItemMiddleware(items, mctx, plan);
  }

  async #runItemMiddleware<TItem>(
    items: { item: TItem; meta: ItemMeta }[],
    mctx: MiddlewareContext,
    plan: MiddlewarePlan,
  ): Promise<{ item: TItem; meta: ItemMeta }[]> {
    const { kept, dropped } = await this.middleware.handleItems(items, mctx, plan);
    this.#stats.middlewareDrops += dropped.length;
    await this.middleware.store({ items: kept }, mctx, plan);
    return kept;
  }

  // ── routing ────────────────────────────────────────────────────────────────────

  /**
   * Turns a parse's output into follow-up tasks: follows (same node, a named node or another
   * module), hand-offs to every successor (`cx.next`, fan-out), runs of other modules
   * (`cx.start`), and — when the parse produced none of these — the advance gate (once per run).
   * A parse that called `cx.stop()` stops the run and drops its follow-ups (reported).
   */
  route(
    ctx: ParseContext<unknown>,
    registered: RegisteredModule,
    request: Request,
  ): RouteResult | Promise<RouteResult> {
    const moduleName = registered.module.name;
    const from = { module: moduleName, node: ctx.node };
    const runId = ctx.runId;
    const result: RouteResult = { followUps: [], rejected: [], droppedByStop: 0 };
    const base = {
      runId,
      depth: request.depth + 1,
      ...(request.fingerprint === undefined ? {} : { parent: request.fingerprint }),
      ...(request.account === undefined ? {} : { account: request.account }),
      ...(request.platform === undefined ? {} : { platform: request.platform }),
    };

    if (ctx.stopReason !== undefined)
      return this.#routeStopped(ctx, ctx.stopReason, moduleName, base, result);
    return this.#routeOutputs(ctx, registered, request, from, base, result);
  }

  /** A parse that called `cx.stop()`: the run stops and the parse's follow-ups are dropped (reported). */
  async #routeStopped(
    ctx: ParseContext<unknown>,
    reason: string,
    moduleName: string,
    base: FollowUpBase,
    result: RouteResult,
  ): Promise<RouteResult> {
    const runId = ctx.runId;
    await this.ledger.stop(runId, moduleName, reason);
    this.#stats.stops++;
    if (stopChannel.hasSubscribers) {
      stopChannel.publish({ runId, module: moduleName, node: ctx.node, reason } satisfies ModuleStopMessage);
    }
    this.#log.info({ runId, module: moduleName, node: ctx.node, reason }, 'run stopped by parse');
    for (const follow of ctx.follows) {
      this.#reportStopDrop({
        runId,
        module: moduleName,
        node: follow.node ?? ctx.node,
        stage: 'parse',
        reason,
        url: follow.request.url,
      });
    }
    for (let i = 0; i < ctx.handoffs.length; i++) {
      this.#reportStopDrop({ runId, module: moduleName, node: ctx.node, stage: 'parse', reason });
    }
    result.droppedByStop = ctx.follows.length + ctx.handoffs.length;
    // Starting other modules is their business, not this run's: those still go.
    this.#routeStarts(ctx, base, result);
    return result;
  }

  /** Follows, hand-offs and starts of a parse that did not stop its run; the advance gate. */
  #routeOutputs(
    ctx: ParseContext<unknown>,
    registered: RegisteredModule,
    request: Request,
    from: { module: string; node: string },
    base: FollowUpBase,
    result: RouteResult,
  ): RouteResult | Promise<RouteResult> {
    const moduleName = registered.module.name;
    const runId = ctx.runId;
    // Follows: grouped per target node (one parser_task message per target).
    const groups = new Map<string, FollowUpTask>();
    let defaultTargets: FollowUpTask[] | undefined;
    const groupFor = (module: string, node: string): FollowUpTask => {
      const key = `${module}\u0000${node}`;
      let group = groups.get(key);
      if (!group) {
        // Field by field, not `{ ...base, module, … }`: V8 builds an object spread together with
        // other properties on a slow path (a new hidden class each time), and every page with
        // links makes one of these.
        group = { runId: base.runId, depth: base.depth, module, node, requests: [], meta: {} };
        if (base.parent !== undefined) group.parent = base.parent;
        if (base.account !== undefined) group.account = base.account;
        if (base.platform !== undefined) group.platform = base.platform;
        groups.set(key, group);
        result.followUps.push(group);
      }
      return group;
    };
    for (const follow of ctx.follows) {
      let targets: FollowUpTask[];
      try {
        if (follow.module === undefined && follow.node === undefined) {
          defaultTargets ??= routeFollowUp(this.registry, from, follow).map((t) =>
            groupFor(t.module, t.node),
          );
          targets = defaultTargets;
        } else {
          targets = routeFollowUp(this.registry, from, follow).map((t) => groupFor(t.module, t.node));
        }
      } catch (err) {
        result.rejected.push({ payload: follow.request, error: err as MocraError });
        continue;
      }
      if (targets.length === 1) targets[0]!.requests.push(follow.request);
      else for (const group of targets) group.requests.push(follow.request.clone());
    }

    // Hand-offs: every successor gets its own copy (fan-out); a join collects them instead.
    const successors = registered.graph.successors(ctx.node);
    for (const handoff of ctx.handoffs) {
      if (successors.length === 0) {
        result.rejected.push({
          payload: { module: moduleName, node: ctx.node, url: request.url },
          error: new InvalidArgumentError(
            `cx.next() in ${moduleName}/${ctx.node}: the node has no successor`,
          ),
        });
        continue;
      }
      for (const to of successors)
        this.#handOff(registered, runId, ctx.node, to, handoff.meta, base, result, 'follow-up');
    }

    this.#routeStarts(ctx, base, result);

    // The advance gate: a parse with no output of its own moves the run on, once per run.
    if (
      ctx.follows.length === 0 &&
      ctx.handoffs.length === 0 &&
      ctx.starts.length === 0 &&
      successors.length > 0
    ) {
      return this.#advance(ctx, registered, request, successors, base, result);
    }
    return result;
  }

  /** The advance gate: a parse with no output of its own moves the run on, once per run. */
  async #advance(
    ctx: ParseContext<unknown>,
    registered: RegisteredModule,
    request: Request,
    successors: readonly string[],
    base: FollowUpBase,
    result: RouteResult,
  ): Promise<RouteResult> {
    const moduleName = registered.module.name;
    const runId = ctx.runId;
    if (!(await this.ledger.claimAdvance(runId, moduleName, ctx.node))) return result;
    this.#stats.advances++;
    for (const to of successors) {
      if (advanceChannel.hasSubscribers) {
        advanceChannel.publish({ runId, module: moduleName, from: ctx.node, to } satisfies ModuleFlowMessage);
      }
      this.#handOff(registered, runId, ctx.node, to, { ...request.meta }, base, result, 'advance');
    }
    return result;
  }

  #routeStarts(ctx: ParseContext<unknown>, base: FollowUpBase, result: RouteResult): void {
    for (const start of ctx.starts) {
      let target: RegisteredModule;
      try {
        target = this.registry.get(start.module);
      } catch (err) {
        result.rejected.push({ payload: { module: start.module }, error: err as MocraError });
        continue;
      }
      this.#stats.starts++;
      const account = start.account ?? base.account;
      const platform = start.platform ?? base.platform;
      for (const entry of target.entry) {
        result.followUps.push({
          ...base,
          ...(account === undefined ? {} : { account }),
          ...(platform === undefined ? {} : { platform }),
          module: target.module.name,
          node: entry.id,
          depth: 0,
          requests: [],
          meta: { ...start.params },
        });
      }
    }
  }

  #handOff(
    registered: RegisteredModule,
    runId: string,
    from: string,
    to: string,
    meta: Record<string, unknown>,
    base: FollowUpBase,
    result: RouteResult,
    trigger: 'follow-up' | 'advance',
  ): void {
    const moduleName = registered.module.name;
    if (registered.nodes.get(to)?.join === true) {
      // A join runs once, after every predecessor finished; it gets what was handed in.
      const key = `${runId}\u0000${moduleName}\u0000${to}`;
      const inputs = this.#joinInputs.get(key) ?? [];
      inputs.push({ ...meta, from });
      // Joins of runs that never finish (stopped, abandoned) must not grow this without bound.
      if (!this.#joinInputs.has(key) && this.#joinInputs.size >= 10_000) {
        const oldest = this.#joinInputs.keys().next().value;
        if (oldest !== undefined) this.#joinInputs.delete(oldest);
      }
      this.#joinInputs.set(key, inputs);
      return;
    }
    if (trigger === 'follow-up') this.#stats.handoffs++;
    result.followUps.push({
      ...base,
      module: moduleName,
      node: to,
      requests: [],
      meta: { ...meta },
      trigger,
    });
  }

  /** Follow-up tasks for joins that became ready. */
  joinTasks(
    joins: readonly JoinReady[],
    base: { account?: string | undefined; platform?: string | undefined; depth: number },
  ): FollowUpTask[] {
    const tasks: FollowUpTask[] = [];
    for (const join of joins) {
      const key = `${join.runId}\u0000${join.module}\u0000${join.node}`;
      const inputs = this.#joinInputs.get(key) ?? [];
      this.#joinInputs.delete(key);
      this.#stats.joins++;
      if (joinChannel.hasSubscribers) {
        joinChannel.publish({
          runId: join.runId,
          module: join.module,
          from: undefined,
          to: join.node,
        } satisfies ModuleFlowMessage);
      }
      tasks.push({
        module: join.module,
        node: join.node,
        runId: join.runId,
        ...(base.account === undefined ? {} : { account: base.account }),
        ...(base.platform === undefined ? {} : { platform: base.platform }),
        requests: [],
        meta: { inputs },
        depth: base.depth,
        trigger: 'join',
      });
    }
    return tasks;
  }

  // ── the ledger, from the engine's point of view ─────────────────────────────────

  /** Follow-ups were published: each is a unit of work for its target node. */
  onFollowUpsPublished(tasks: readonly FollowUpTask[]): void {
    for (const task of tasks) {
      const registered = this.registry.has(task.module) ? this.registry.get(task.module) : undefined;
      if (registered) this.ledger.add(task.runId, registered.graph, task.module, task.node);
    }
  }

  /**
   * The units of work a batch of requests stands for, counted per run, module and node (for
   * {@link onAdmitted}): the engine takes them before publishing, so that the requests
   * themselves need not stay referenced while the publish is written.
   */
  unitsOf(requests: readonly Request[]): AdmittedUnits {
    const units: AdmittedUnits = [];
    let last: AdmittedUnits[number] | undefined;
    for (const request of requests) {
      const { runId, module, node } = request;
      if (runId === undefined || module === undefined || node === undefined) continue;
      // Requests of one batch nearly always share their run, module and node: one entry.
      if (last !== undefined && last.runId === runId && last.module === module && last.node === node) {
        last.n++;
      } else {
        last = { runId, module, node, n: 1 };
        units.push(last);
      }
    }
    return units;
  }

  /** Requests were admitted to the `request` topic: each is a unit of work for its node until parsed. */
  onAdmitted(units: AdmittedUnits): void {
    for (const { runId, module, node, n } of units) {
      const registered = this.registry.has(module) ? this.registry.get(module) : undefined;
      if (registered) this.ledger.add(runId, registered.graph, module, node, n);
    }
  }

  /** A task starts the entry nodes of its modules (counted once, on its first delivery). */
  onTaskStart(registered: RegisteredModule, runId: string): void {
    for (const entry of registered.entry)
      this.ledger.add(runId, registered.graph, registered.module.name, entry.id);
  }

  /** The entry nodes' generate finished. */
  onTaskDone(registered: RegisteredModule, runId: string): JoinReady[] {
    const joins: JoinReady[] = [];
    for (const entry of registered.entry)
      joins.push(...this.ledger.done(runId, registered.module.name, entry.id));
    return joins;
  }

  /** A unit of a node is done (a response parsed, a hand-off generated). */
  onUnitDone(runId: string, module: string, node: string): JoinReady[] {
    return this.ledger.done(runId, module, node);
  }

  /**
   * A payload was given up on (dead-lettered): its unit will never be done, so settle it.
   * Requests that never passed admission (no fingerprint) were never counted.
   */
  onAbandoned(payload: unknown): JoinReady[] {
    if (payload instanceof Response) return this.onAbandoned(payload.request);
    if (payload instanceof Request) {
      if (
        payload.fingerprint === undefined ||
        payload.runId === undefined ||
        payload.module === undefined ||
        payload.node === undefined
      )
        return [];
      return this.ledger.done(payload.runId, payload.module, payload.node);
    }
    if (payload === null || typeof payload !== 'object') return [];
    const p = payload as Record<string, unknown>;
    // Serialized payloads (a queue that does not pass objects by reference).
    if (typeof p.status === 'number' && typeof p.request === 'object') {
      return this.onAbandoned(Response.from(payload as Parameters<typeof Response.from>[0]));
    }
    if (typeof p.url === 'string')
      return this.onAbandoned(Request.from(payload as Parameters<typeof Request.from>[0]));
    if (typeof p.runId !== 'string') return [];
    if (Array.isArray(p.requests)) {
      // A follow-up: one unit of its target node.
      return typeof p.module === 'string' && typeof p.node === 'string'
        ? this.ledger.done(p.runId, p.module, p.node)
        : [];
    }
    // A task: its entry nodes were counted when it was first handled.
    const joins: JoinReady[] = [];
    try {
      for (const registered of this.modulesOf(payload as TaskEvent))
        joins.push(...this.onTaskDone(registered, p.runId));
    } catch (err) {
      if (!(err instanceof UnknownModuleError)) throw err;
    }
    return joins;
  }

  #reportStopDrop(message: ModuleDropMessage): void {
    this.#stats.droppedAfterStop++;
    if (dropChannel.hasSubscribers) dropChannel.publish(message);
  }
}

function selectionOf(config: JsonObject, request: Request | undefined, module: string): MiddlewareSelection {
  const list = (key: string) => (Array.isArray(config[key]) ? (config[key] as string[]) : []);
  return {
    download: list('download_middleware'),
    data: list('data_middleware'),
    store: list('store_middleware'),
    ...(request?.middleware === undefined ? {} : { request: request.middleware }),
    selectedBy: `module '${module}'`,
  };
}

/** The same response, attributed to `request` (session hops and middleware may have replaced it). */
function withRequest(response: Response, request: Request): Response {
  return new Response({
    url: response.url,
    status: response.status,
    headers: response.headers,
    body: response.body,
    request,
    redirects: response.redirects,
    durationMs: response.durationMs,
  });
}
