/**
 * The messages that cross the stage boundaries. Each boundary is one topic of
 * the queue backend:
 *
 * ```
 *  topic         payload       produced by                     consumed by (stage)
 *  task          TaskEvent     seeding, submit()               task        → generate of entry nodes
 *  request       Request       generate (after admission)      download
 *  response      Response      download                        parse
 *  parser_task   FollowUpTask  parse (cx.follow …)             followUp    → generate of the target node
 *  error         ErrorEvent    any stage that failed           error       → policy: retry / dead-letter
 * ```
 *
 * In memory, payloads are passed by reference; a serializing backend round-trips them through
 * `Request.from` / `Response.from` (the engine calls those on every consumed payload).
 */
import { InvalidArgumentError, type MocraError } from '../errors.js';
import type { Request, RequestData } from './request.js';

/**
 * Topic names are on the wire: queues of a running cluster and a persisted run's queue on disk
 * are named by them, so the follow-up topic keeps the name `parser_task` (also the name mocra
 * for Rust gives it) while everything in code calls it `followUp`.
 */
export const TOPICS = {
  task: 'task',
  request: 'request',
  response: 'response',
  followUp: 'parser_task',
  error: 'error',
} as const;

export type TopicName = (typeof TOPICS)[keyof typeof TOPICS];

/** The five worker pools of the engine, one per topic. */
export type StageName = 'task' | 'download' | 'parse' | 'followUp' | 'error';

export const STAGE_TOPICS: Readonly<Record<StageName, TopicName>> = Object.freeze({
  task: TOPICS.task,
  download: TOPICS.request,
  parse: TOPICS.response,
  followUp: TOPICS.followUp,
  error: TOPICS.error,
});

/** The stages in pipeline order. */
export const STAGE_NAMES: readonly StageName[] = Object.freeze([
  'task',
  'download',
  'parse',
  'followUp',
  'error',
]);

/**
 * Former stage names and the stage each became. Code that names one (an option, a call, a
 * filter) is refused with the new name; an error event that carries one was written before the
 * rename (a persisted run's error topic, a dead letter) and is read as the new stage.
 */
export const RENAMED_STAGES: Readonly<Record<string, StageName>> = Object.freeze({ parserTask: 'followUp' });

/** `name` as a stage name; a former name or another string is refused, naming what to use. */
export function checkStageName(name: string, what = 'stage'): StageName {
  if ((STAGE_NAMES as readonly string[]).includes(name)) return name as StageName;
  const now = Object.hasOwn(RENAMED_STAGES, name) ? RENAMED_STAGES[name] : undefined;
  throw new InvalidArgumentError(
    now === undefined
      ? `${what} '${name}' is not a stage (${STAGE_NAMES.join(', ')})`
      : `${what} '${name}' was renamed: use '${now}'`,
  );
}

/** An error event read from a queue, with a former stage name read as the stage it became. */
export function withCurrentStage(event: ErrorEvent): ErrorEvent {
  const now = Object.hasOwn(RENAMED_STAGES, event.stage) ? RENAMED_STAGES[event.stage] : undefined;
  return now === undefined ? event : { ...event, stage: now };
}

/** Starts a run of a module: its entry nodes' `generate` runs (a spider's `start`). */
export interface TaskEvent {
  /** The module to run. With neither `module` nor `modules`, every registered module runs. */
  module?: string;
  /** Several modules in one task. */
  modules?: string[];
  runId: string;
  /** Partition key on distributed queues; with `platform`, names the session. @default undefined (one partition; account 'default') */
  account?: string;
  /** @default 'default' */
  platform?: string;
  /** Free-form parameters handed to `generate`. */
  params?: Record<string, unknown>;
  /** Queue priority of the task message. @default 0 */
  priority?: number;
  /** Set by the engine: join credit (distributed/credit.ts); a task without it seeds its run. */
  credit?: string;
}

/**
 * Work a parse handed on: to the same node (the default), a named node, or another module.
 * A follow-up that carries requests is fulfilled by them (they go through admission to the
 * `request` topic); one without requests runs the target node's `generate` with its `meta`.
 */
export interface FollowUpTask {
  module: string;
  node: string;
  runId: string;
  account?: string;
  platform?: string;
  requests: (Request | RequestData)[];
  meta: Record<string, unknown>;
  /** Depth of the response whose parse produced this follow-up, plus one. */
  depth: number;
  /** Fingerprint of that response's request. */
  parent?: string;
  /** Why the target's generate runs: a hand-off (default), the advance gate, or a join. */
  trigger?: 'follow-up' | 'advance' | 'join';
  /** Set by the engine for modules with join nodes on shared coordination (distributed/credit.ts). */
  credit?: string;
}

/**
 * A failure, reported once on `mocra:engine:error` and handed to the failure policy, which
 * decides: republish `payload` to `topic` after a delay, or dead-letter this event (the DLQ of
 * the `error` topic then holds the payload, the error, the stage and the attempt count).
 */
export interface ErrorEvent {
  stage: StageName;
  /** The topic `payload` came from (and goes back to on retry). */
  topic: TopicName;
  payload: unknown;
  /** The typed error (by reference in memory). Use `code`/`message` for anything serialized. */
  error: MocraError;
  code: string;
  message: string;
  retryable: boolean;
  /** Failures of this piece of work so far, this one included (1 on the first failure). */
  attempt: number;
  /** The delay the failure asked for: a RetryLaterError's `delayMs` or a Retry-After header. */
  retryAfterMs?: number;
  /**
   * The failure kind (policy/failure-kind.ts), classified from the live error — a steering error
   * wrapped by a middleware included — so it survives a serializing queue.
   */
  kind?: string;
  /** The HTTP status, for a status failure (HttpStatusError). */
  status?: number;
  module?: string;
  node?: string;
  url?: string;
  /** Epoch ms. */
  at: number;
  /** Queue priority and partition key of the failed message, kept for the retry. */
  priority: number;
  key?: string;
}

/** Message header that counts failures of a piece of work across retries. */
export const ATTEMPT_HEADER = 'mocra-attempt';
