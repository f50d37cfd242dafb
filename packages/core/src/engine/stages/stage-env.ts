/**
 * What the stages see of the engine: its parts (registry, module runtime, frontier,
 * downloaders, policy), the topics and the run's counters — one object the engine builds once.
 * The engine keeps its lifecycle (start, idleness, shutdown) to itself.
 */
import type { JoinCredits } from '../../distributed/join-credits.js';
import type { DownloadRouter } from '../../downloader/download-router.js';
import { type MocraError, UnknownModuleError } from '../../errors.js';
import { requestUrl } from '../../frontier/fingerprint.js';
import type { Frontier } from '../../frontier/frontier.js';
import {
  ATTEMPT_HEADER,
  type ErrorEvent,
  type FollowUpTask,
  type StageName,
  type TaskEvent,
  TOPICS,
  type TopicName,
} from '../../model/events.js';
import { Request, type RequestData } from '../../model/request.js';
import { Response } from '../../model/response.js';
import type { ModuleRegistry } from '../../module/registry.js';
import type { ModuleRuntime } from '../../module/runtime.js';
import type { Logger } from '../../observability/logger.js';
import type { FailurePolicy, PolicyDecision, WorkScope } from '../../policy/types.js';
import type { Delivery, LeaseQueue } from '../../queue/types.js';
import type { EngineStore } from '../../store/engine-store.js';
import type { EngineRouter } from '../engine.js';
import type { LocalDelivery } from '../local-delivery.js';
import type { RecoveryJournal } from '../persistence.js';
import { policyFieldsOf } from '../recovery.js';

export interface EngineTopics {
  task: LeaseQueue<TaskEvent>;
  request: LeaseQueue<Request | RequestData>;
  response: LeaseQueue<Response>;
  followUp: LeaseQueue<FollowUpTask>;
  error: LeaseQueue<ErrorEvent>;
}

/** The run's totals (part of EngineStats and the run summary). */
export interface EngineCounters {
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
}

export interface StageEnv {
  readonly runId: string;
  readonly log: Logger;
  /** Debug logging is on (checked once: the hot path logs per page only then). */
  readonly debug: boolean;
  readonly registry: ModuleRegistry;
  readonly modules: ModuleRuntime;
  readonly frontier: Frontier;
  readonly downloads: DownloadRouter;
  readonly policy: FailurePolicy;
  /** Set with `persist`: claims and parsed pages. */
  readonly journal: RecoveryJournal | undefined;
  /** The database integration (`store` option). */
  readonly db: EngineStore | undefined;
  readonly topics: EngineTopics;
  readonly counters: EngineCounters;
  /** Cluster-wide joins (join credit), only with shared coordination. */
  readonly credits: JoinCredits | undefined;
  /** Partitioned cluster: hands a task's entry requests other nodes own to them. */
  readonly router: EngineRouter | undefined;
  /**
   * Start the parse of a just-downloaded response in this process, if the parse stage has a
   * free slot; false: publish it to the response topic. Undefined when every response crosses
   * the topic (`parseWhereDownloaded: false`, or a persisted run).
   */
  readonly parseHere: ((delivery: LocalDelivery<Response>) => boolean) | undefined;
  /** A failure the policy decided on: counted, logged once per kind, handed to `onError`. */
  report(event: ErrorEvent, decision: PolicyDecision): void;
  /** End the run (a `stop` decision of the policy). */
  stopCritical(): void;
}

export function topicByName(topics: EngineTopics, name: TopicName): LeaseQueue<unknown> {
  switch (name) {
    case TOPICS.task:
      return topics.task as LeaseQueue<unknown>;
    case TOPICS.request:
      return topics.request as LeaseQueue<unknown>;
    case TOPICS.response:
      return topics.response as LeaseQueue<unknown>;
    case TOPICS.followUp:
      return topics.followUp as LeaseQueue<unknown>;
    default:
      return topics.error as LeaseQueue<unknown>;
  }
}

export function keyOf(key: string | undefined): { key?: string } {
  return key === undefined ? {} : { key };
}

/** Failures recorded on a message so far (the error stage stamps this header on retries). */
export function attemptsOf(delivery: Delivery<unknown>): number {
  const raw = delivery.headers[ATTEMPT_HEADER];
  if (raw === undefined) return 0;
  const n = Number(raw);
  return Number.isInteger(n) && n >= 0 ? n : 0;
}

/** What the failure policy needs to know about a request. */
export function workOf(request: Request, attempt?: number): WorkScope {
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

/**
 * Who admits a handler's requests, for the shared dedup set (MarkSeenOptions): the message being
 * handled — or, for the parse of a downloaded page, the request message it was downloaded for,
 * so that the parse has one claim whichever way it ran (in the downloading process or from the
 * response topic) and however often the page is fetched again.
 */
export interface AdmissionClaim {
  claim: string;
  redelivered: boolean;
}

/** Carried by a page from its download to its parse (see AdmissionClaim). */
const PARSE_CLAIM_HEADER = 'mocra-parse-claim';
/** Set on it when the claim may have marked before: the request message was delivered before, or this parse's put back. */
const PARSE_CLAIM_REDELIVERED_HEADER = 'mocra-parse-claim-redelivered';

export function parseClaimHeaders(
  download: Delivery<unknown>,
  redelivered = download.attempt > 1,
): Record<string, string> {
  const headers: Record<string, string> = { [PARSE_CLAIM_HEADER]: `${download.id}>parse` };
  if (redelivered) headers[PARSE_CLAIM_REDELIVERED_HEADER] = '1';
  return headers;
}

export function admissionClaimOf(delivery: Delivery<unknown>): AdmissionClaim {
  const carried = delivery.headers[PARSE_CLAIM_HEADER];
  return {
    claim: carried ?? delivery.id,
    redelivered: delivery.attempt > 1 || delivery.headers[PARSE_CLAIM_REDELIVERED_HEADER] === '1',
  };
}

type Where = { module?: string; node?: string; url?: string };

export function describePayload(payload: unknown): Where {
  if (payload instanceof Response) return fieldsOf(payload.request, payload.url);
  if (payload instanceof Request) return fieldsOf(payload, payload.url);
  if (payload !== null && typeof payload === 'object') {
    const p = payload as { module?: unknown; node?: unknown; url?: unknown };
    const out: Where = {};
    if (typeof p.module === 'string') out.module = p.module;
    if (typeof p.node === 'string') out.node = p.node;
    if (typeof p.url === 'string') out.url = p.url;
    return out;
  }
  return {};
}

function fieldsOf(request: Request, url: string): Where {
  const out: Where = { url };
  if (request.module !== undefined) out.module = request.module;
  if (request.node !== undefined) out.node = request.node;
  return out;
}

/** Names a delivery in watchdog messages: its URL, or its module. */
export function describeDelivery(delivery: Delivery<unknown>): string {
  const where = describePayload(delivery.payload);
  return where.url ?? where.module ?? delivery.id;
}

/** The event the error stage decides on, for a failure of `payload` that came from `topic`. */
export function errorEvent(
  stage: StageName,
  topic: TopicName,
  payload: unknown,
  error: MocraError,
  attempt: number,
  priority: number,
  key: string | undefined,
): ErrorEvent {
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
    ...describePayload(payload),
  };
  if (key !== undefined) event.key = key;
  // Kept as plain fields so they survive a serializing queue (error classes do not).
  Object.assign(event, policyFieldsOf(error));
  const errorUrl = (error as unknown as { url?: unknown }).url;
  if (event.url === undefined && typeof errorUrl === 'string') event.url = errorUrl;
  if (error instanceof UnknownModuleError) event.module ??= error.module;
  return event;
}
