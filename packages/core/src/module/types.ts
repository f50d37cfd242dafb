/**
 * Modules and nodes: the one shape of work the engine runs. A module has nodes; each node
 * turns a task into requests (`generate`) and a response into output (`parse`: items,
 * follow-ups, errors). A `Spider` is compiled into a module with one node, so there is one
 * engine path.
 *
 * ```
 *   task ─▶ generate(entry node) ─▶ requests ─▶ download ─▶ parse(same node) ─┬─▶ items ─▶ sink
 *                                                                             └─▶ follow-ups ─▶ generate(target node) ─▶ …
 * ```
 */
import type { FollowUpTask, TaskEvent } from '../model/events.js';
import type { Request } from '../model/request.js';
import type { Response } from '../model/response.js';
import type { Logger } from '../observability/logger.js';
import type { ParseContext } from './parse-context.js';

/** What `generate` is given. */
export interface GenerateContext {
  readonly module: string;
  readonly node: string;
  readonly runId: string;
  /** 'task' when a run starts (entry nodes); 'follow-up' when a parse handed work to this node. */
  readonly trigger: 'task' | 'follow-up';
  /** The task that started the run (for 'task'). */
  readonly task: TaskEvent | undefined;
  /** The follow-up that led here (for 'follow-up'). */
  readonly followUp: FollowUpTask | undefined;
  /** `task.params` or `followUp.meta`: the input of this generate. */
  readonly params: Readonly<Record<string, unknown>>;
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
   * Produce requests. Called for a run's task (entry nodes) and for follow-ups without
   * requests. A follow-up that carries requests (`cx.follow(url)`) does not call it.
   * Without `generate`, a node produces nothing on its own.
   */
  generate?(ctx: GenerateContext): GenerateOutput | Promise<GenerateOutput>;
  /** Handle a response of a request this node generated (any status). */
  parse(response: Response, ctx: ParseContext<TItem>): void | Promise<void>;
}

export interface Module<TItem = unknown> {
  /** Unique per engine: namespaces tasks, stats and item ids. */
  readonly name: string;
  readonly nodes: readonly ModuleNode<TItem>[];
  /** Node ids a task starts. @default the first node */
  readonly entry?: readonly string[];
}
