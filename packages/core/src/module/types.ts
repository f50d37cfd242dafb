/**
 * Modules and nodes: the one shape of work the engine runs. A module has nodes; each node
 * turns a task into requests (`generate`) and a response into output (`parse`: items,
 * follow-ups, a hand-off to the next nodes, a stop). Nodes form a DAG (`steps` for a chain,
 * `graph` for a graph); a `Spider` is compiled into a module with one node, so there is one
 * engine path.
 *
 * ```
 *   task ─▶ generate(every entry node) ─▶ requests ─▶ download ─▶ parse(same node) ─┬─▶ items ─▶ middleware ─▶ sink
 *                                                                                   ├─▶ cx.follow(url, { node }) ─▶ parse(node)
 *                                                                                   └─▶ cx.next(meta) ─▶ generate(each successor)
 *   a parse with no follow-ups advances the run to the successors once (the advance gate)
 * ```
 */
import type { JsonObject, ModuleConfig } from '@mocra/store';
import type { ModuleSettings } from '../config/module-config.js';
import type { FollowUpTask, TaskEvent } from '../model/events.js';
import type { ProxyChoice, Request } from '../model/request.js';
import type { Response } from '../model/response.js';
import type { Logger } from '../observability/logger.js';
import type { CronInput } from '../schedule/cron.js';
import type { LoginHook } from '../session/login.js';
import type { LoginInfo } from '../session/session.js';
import type { ParseContext } from './parse-context.js';

/** Why a generate runs. */
export type GenerateTrigger =
  /** a run's task (entry nodes) */
  | 'task'
  /** a parse handed work to this node (`cx.next`, `cx.start`, or a follow-up without requests) */
  | 'follow-up'
  /** the advance gate: a predecessor's parse produced no follow-ups (once per run) */
  | 'advance'
  /** a join node: every predecessor finished for this run */
  | 'join';

/** What `generate` is given. */
export interface GenerateContext {
  readonly module: string;
  readonly node: string;
  readonly runId: string;
  readonly trigger: GenerateTrigger;
  /** The task that started the run (for 'task'). */
  readonly task: TaskEvent | undefined;
  /** The follow-up that led here (for the other triggers). */
  readonly followUp: FollowUpTask | undefined;
  /** `task.params`, or the meta the previous node handed on: the input of this generate. */
  readonly params: Readonly<Record<string, unknown>>;
  /** The account and platform the run is for. @default 'default' */
  readonly account: string;
  readonly platform: string;
  /** The module's layered config for this account × platform (typed getters for your own keys). */
  readonly config: ModuleConfig | undefined;
  /** The typed module settings mocra reads (downloader, middleware, login…). */
  readonly settings: ModuleSettings | undefined;
  /** The session's login, for modules with `shouldLogin` (after the login ran). */
  readonly login: LoginInfo | undefined;
  /** Aborted when the engine stops. */
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/** Requests, in any iterable form, or nothing. */
// biome-ignore lint/suspicious/noConfusingVoidType: a generate written without a return statement is typed void
export type GenerateOutput = Iterable<Request> | AsyncIterable<Request> | undefined | void;

export interface ModuleNode<TItem = unknown> {
  /** Unique within its module. */
  readonly id: string;
  /**
   * Produce requests. Called for a run's task (entry nodes), for hand-offs from a predecessor
   * (`cx.next`, the advance gate, a join) and for follow-ups without requests. A follow-up that
   * carries requests (`cx.follow(url)`) does not call it. Without `generate`, a node produces
   * nothing on its own.
   */
  generate?(ctx: GenerateContext): GenerateOutput | Promise<GenerateOutput>;
  /** Handle a response of a request this node generated (any status). */
  parse(response: Response, ctx: ParseContext<TItem>): void | Promise<void>;
  /**
   * Fan-in: run `generate` once per run after every predecessor finished (trigger 'join'),
   * instead of once per incoming hand-off. @default false
   */
  readonly join?: boolean;
}

/** A node, or the id of a node listed in the module's `nodes`. */
export type NodeRef<TItem = unknown> = ModuleNode<TItem> | string;

/** A graph of nodes: what `graph().edge(a, b)…build()` returns. */
export interface ModuleGraphDefinition<TItem = unknown> {
  readonly nodes: readonly ModuleNode<TItem>[];
  readonly edges: readonly (readonly [from: string, to: string])[];
}

/** What `onRunStart` is given: the task that starts the run, and its account × platform. */
export interface RunStartContext {
  readonly module: string;
  readonly runId: string;
  readonly task: TaskEvent;
  /** `task.params`. */
  readonly params: Readonly<Record<string, unknown>>;
  readonly account: string;
  readonly platform: string;
  /** The module's layered config for this account × platform. */
  readonly config: ModuleConfig | undefined;
  readonly settings: ModuleSettings | undefined;
  /** Aborted when the engine stops. */
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/** What `onRunEnd` is given. */
export interface RunEndContext {
  readonly module: string;
  readonly runId: string;
  /** The reason when the run was stopped (`cx.stop`); undefined when its work ran out. */
  readonly stopped: string | undefined;
  readonly log: Logger;
}

/** Which accounts × platforms a module's cron starts runs for. */
export interface CronTarget {
  /** @default 'default' */
  account?: string;
  /** @default 'default' */
  platform?: string;
  params?: Record<string, unknown>;
  /** Queue priority of the task. @default 0 */
  priority?: number;
}

export interface ModuleCron {
  schedule: CronInput;
  /** @default one run for the default account and platform */
  targets?: readonly CronTarget[];
}

export interface Module<TItem = unknown> {
  /** Unique per engine: namespaces tasks, stats and item ids. */
  readonly name: string;
  /** @default 1 */
  readonly version?: number;
  /**
   * The nodes. With `steps` or `graph` they may be left out (the nodes come from there); nodes
   * listed here and in `steps`/`graph` are the same nodes.
   */
  readonly nodes?: readonly ModuleNode<TItem>[];
  /** A linear chain: each node hands on to the next. */
  readonly steps?: readonly NodeRef<TItem>[];
  /** A graph (see `graph()`): fan-out, fan-in, several entry nodes. */
  readonly graph?: ModuleGraphDefinition<TItem>;
  /**
   * Node ids a task starts. @default every node without a predecessor when `steps`/`graph` is
   * given, else the first node
   */
  readonly entry?: readonly string[];
  /**
   * The registered downloader (by name) for this module's requests; a request's own choice wins,
   * and a `downloader` key in the module's config layers (config.toml, account, platform) wins
   * over this. @default the default downloader
   */
  readonly downloader?: string;
  /** Proxy use for this module's requests (a request's own choice wins). @default true when proxies are configured */
  readonly proxy?: ProxyChoice;
  /** Headers every request of the module carries unless it sets them itself. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The module's own config layer, in code (module-config keys, see docs/configuration.md). */
  readonly config?: JsonObject;
  /** Start runs on a schedule (croner: 6 fields with seconds, or 5). */
  readonly cron?: CronInput | ModuleCron;
  /** Run `login` for the account × platform session before the first generate. @default false */
  readonly shouldLogin?: boolean;
  /** Logs the session in (required with `shouldLogin`). Throw when it did not work. */
  readonly login?: LoginHook;
  /** Besides the `login_statuses`, a response for which this returns true means the session is gone. */
  readonly sessionGone?: (response: Response) => boolean;
  /**
   * Runs before the entry nodes' generate of each task that starts a run of this module
   * (e.g. to open a resource or check a precondition). Throwing fails the task like a generate
   * that threw (MOCRA_ERR_RUN_HOOK_FAILED, dead-lettered); throw `RetryLaterError` to have the
   * task retried, and this runs again with it.
   */
  readonly onRunStart?: (ctx: RunStartContext) => void | Promise<void>;
  /**
   * Runs once per run of this module, when every node of the run has finished in this process:
   * its work ran out (requests parsed, given up or dropped) or it was stopped. The engine's run
   * does not end before it returns. Throwing is logged with the stack and counted as
   * MOCRA_ERR_RUN_HOOK_FAILED; the run is over either way.
   */
  readonly onRunEnd?: (ctx: RunEndContext) => void | Promise<void>;
}
