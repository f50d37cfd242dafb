/**
 * Diagnostics channels (`node:diagnostics_channel`), named `mocra:<component>:<event>`. They
 * cost nothing without subscribers: the engine checks `hasSubscribers` before building a
 * message. Metrics, the dashboard and tests subscribe here instead of the engine sprinkling
 * logs.
 *
 * ```ts
 * import diagnostics_channel from 'node:diagnostics_channel';
 * diagnostics_channel.subscribe('mocra:engine:error', (msg) => console.log(msg));
 * ```
 */
import diagnostics_channel from 'node:diagnostics_channel';
import type { DagEvent } from '@mocra/dag';
import type { ErrorEvent, StageName } from '../model/events.js';
import type { ItemMeta } from '../model/item.js';
import type { Request } from '../model/request.js';
import type { Response } from '../model/response.js';
import type { PolicyDecision } from '../policy/types.js';

/** `mocra:downloader:request` — a download starts (after the gate let it through). */
export interface RequestMessage {
  request: Request;
}

/** `mocra:downloader:response` — a download finished with a response (any status). */
export interface ResponseMessage {
  request: Request;
  response: Response;
}

/** `mocra:engine:item` — an item was written to its sink. */
export interface ItemMessage {
  item: unknown;
  meta: ItemMeta;
}

/** `mocra:engine:error` — a failure was reported and the policy decided what happens next. */
export interface ErrorMessage {
  event: ErrorEvent;
  decision: PolicyDecision;
}

/** `mocra:frontier:drop` — the download gate refused a request for good. */
export interface DropMessage {
  request: Request;
  reason: string;
}

/** `mocra:engine:run` — a run started or ended. */
export interface RunMessage {
  runId: string;
  phase: 'start' | 'end';
  /** Why it ended (only for 'end'). */
  reason?: string;
}

/** `mocra:engine:stage` — a stage was paused, resumed or stopped. */
export interface StageMessage {
  stage: StageName;
  phase: 'pause' | 'resume' | 'stop';
}

/**
 * `mocra:engine:handler` — a stage handler finished (work aborted by shutdown is not reported):
 * per-stage throughput and latency for metrics and the dashboard. `runId` names the engine.
 */
export interface HandlerMessage {
  runId: string;
  stage: StageName;
  durationMs: number;
  /** false: the handler threw (the failure goes to the error stage). */
  ok: boolean;
}

/**
 * `mocra:engine:dag` — an event of a DAG job's run (`@mocra/dag`'s own event, as its scheduler
 * emitted it). `runId` names the engine run whose task started the DAG run; the DAG run's own id
 * is `event.runId`.
 */
export interface DagMessage {
  runId: string;
  job: string;
  event: DagEvent;
}

export const CHANNEL_NAMES = {
  request: 'mocra:downloader:request',
  response: 'mocra:downloader:response',
  item: 'mocra:engine:item',
  error: 'mocra:engine:error',
  drop: 'mocra:frontier:drop',
  run: 'mocra:engine:run',
  stage: 'mocra:engine:stage',
  handler: 'mocra:engine:handler',
  dag: 'mocra:engine:dag',
} as const;

export const channels = {
  request: diagnostics_channel.channel(CHANNEL_NAMES.request),
  response: diagnostics_channel.channel(CHANNEL_NAMES.response),
  item: diagnostics_channel.channel(CHANNEL_NAMES.item),
  error: diagnostics_channel.channel(CHANNEL_NAMES.error),
  drop: diagnostics_channel.channel(CHANNEL_NAMES.drop),
  run: diagnostics_channel.channel(CHANNEL_NAMES.run),
  stage: diagnostics_channel.channel(CHANNEL_NAMES.stage),
  handler: diagnostics_channel.channel(CHANNEL_NAMES.handler),
  dag: diagnostics_channel.channel(CHANNEL_NAMES.dag),
} as const;
