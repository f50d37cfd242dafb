/**
 * `engine.deadLetters`: one view over the dead-letter queues of every stage, with list,
 * inspect, replay and purge.
 *
 * Work lands in a DLQ two ways:
 *
 * ```
 *  source 'policy'  the error stage gave up (not retryable, retries exhausted, a threshold,
 *                   dlq = always): the ErrorEvent — payload, error code and message, stage,
 *                   attempts, time — is dead-lettered on the `error` topic.
 *  source 'queue'   the queue gave up on a message of a stage topic: delivered maxDeliveries
 *                   times without being settled (a worker that died or hung on it each time),
 *                   or not decodable (a poison message; then only its raw bytes are kept).
 * ```
 *
 * Replay puts the *work* back where it failed, not the error: a policy entry's payload is
 * published to its origin topic (`request` for a failed download, `response` for a failed
 * parse or store — so a fixed parser re-parses the stored page without fetching it again) with
 * its attempts starting over; a queue entry is republished by its own queue. The entry is
 * removed only after the publish resolved, so a crash in between replays it twice rather than
 * never (at-least-once, like everything else; items dedupe on `itemId`).
 *
 * Entries live wherever the queue backend keeps its DLQs: in memory for the default backend,
 * on disk for the persistent single-node backend, in Redis/NATS/Kafka when distributed.
 */
import { InvalidArgumentError } from '../errors.js';
import {
  checkStageName,
  type ErrorEvent,
  type StageName,
  TOPICS,
  type TopicName,
  withCurrentStage,
} from '../model/events.js';
import type { DeadLetter, LeaseQueue, PublishMessage } from '../queue/types.js';

/** One dead-lettered piece of work. */
export interface DeadLetterEntry {
  /** `<topic>:<entry id>`; stable while the entry exists. */
  id: string;
  /** `policy`: given up by the error stage; `queue`: given up by a stage topic's queue. */
  source: 'policy' | 'queue';
  /** The stage where the work failed. */
  stage: StageName;
  /** The topic a replay publishes the work to. */
  topic: TopicName;
  /** The work: a Request, Response, FollowUpTask or TaskEvent (plain data after a serializing queue). Undefined when undecodable. */
  payload: unknown;
  error: { code: string; message: string; kind?: string };
  /** Failures (policy) or deliveries (queue) before it was given up. */
  attempts: number;
  /** Epoch ms it was given up. */
  failedAt: number;
  /** Why it was given up. */
  reason: string;
  module?: string;
  url?: string;
}

/** Which entries: every field that is set must match. */
export interface DeadLetterQuery {
  /** Entry ids (as listed). */
  ids?: readonly string[];
  stage?: StageName | readonly StageName[];
  /** Error code(s), e.g. `MOCRA_ERR_PARSE_FAILED`. */
  code?: string | readonly string[];
  /** Failure kind(s) (docs/error-handling.md), e.g. `http-503`. */
  kind?: string | readonly string[];
  module?: string;
  source?: 'policy' | 'queue';
  /** Failed at or after (epoch ms). */
  since?: number;
  /** Failed before (epoch ms). */
  until?: number;
  urlIncludes?: string;
  reasonIncludes?: string;
}

export interface DeadLetterListOptions extends DeadLetterQuery {
  /** @default 100 */
  limit?: number;
  /** @default 0 */
  offset?: number;
}

/** The topics of one engine, by stage. */
export interface StageTopics {
  task: LeaseQueue<unknown>;
  download: LeaseQueue<unknown>;
  parse: LeaseQueue<unknown>;
  followUp: LeaseQueue<unknown>;
  error: LeaseQueue<unknown>;
}

export interface EngineDeadLettersOptions {
  topics: StageTopics;
  /** Called with the entries about to be replayed (the engine lifts terminations they were given up for). */
  beforeReplay?: (entries: readonly DeadLetterEntry[]) => void;
}

const STAGE_OF_TOPIC: Readonly<Record<string, StageName>> = {
  [TOPICS.task]: 'task',
  [TOPICS.request]: 'download',
  [TOPICS.response]: 'parse',
  [TOPICS.followUp]: 'followUp',
  [TOPICS.error]: 'error',
};

/** The header a replayed message carries: the DLQ entry it came from. (No attempt header: attempts start over.) */
export const REPLAYED_HEADER = 'mocra-replayed-from';

/** Read in pages of this many entries. */
const PAGE = 1000;

export class EngineDeadLetters {
  readonly #topics: StageTopics;
  readonly #beforeReplay: ((entries: readonly DeadLetterEntry[]) => void) | undefined;

  constructor(options: EngineDeadLettersOptions) {
    this.#topics = options.topics;
    this.#beforeReplay = options.beforeReplay;
  }

  /** Entries, oldest first within a topic (policy entries first, then each stage topic's own). */
  async list(options: DeadLetterListOptions = {}): Promise<DeadLetterEntry[]> {
    const limit = options.limit ?? 100;
    const offset = options.offset ?? 0;
    if (!Number.isInteger(limit) || limit < 0)
      throw new InvalidArgumentError(`limit must be an integer ≥ 0, got ${limit}`);
    if (!Number.isInteger(offset) || offset < 0) {
      throw new InvalidArgumentError(`offset must be an integer ≥ 0, got ${offset}`);
    }
    const out: DeadLetterEntry[] = [];
    let skipped = 0;
    for await (const { entry } of this.#scan(options)) {
      if (skipped < offset) {
        skipped++;
        continue;
      }
      if (out.length >= limit) break;
      out.push(entry);
    }
    return out;
  }

  async get(id: string): Promise<DeadLetterEntry | undefined> {
    const parsed = parseId(id);
    if (!parsed) return undefined;
    const queue = this.#queueOf(parsed.topic);
    if (!queue) return undefined;
    const letter = await queue.deadLetters.get(parsed.entryId);
    return letter === undefined ? undefined : toEntry(letter);
  }

  /** Entries matching the query (all when omitted). */
  async size(query: DeadLetterQuery = {}): Promise<number> {
    if (isEmpty(query)) {
      let n = 0;
      for (const queue of this.#queues()) n += await queue.deadLetters.size();
      return n;
    }
    let n = 0;
    for await (const _ of this.#scan(query)) n++;
    return n;
  }

  /**
   * Put the work back where it failed (see the module comment): one entry by id, the entries
   * matching a query, or every entry when called without an argument. Returns how many.
   */
  async replay(selection?: string | DeadLetterQuery): Promise<number> {
    const query = typeof selection === 'string' ? { ids: [selection] } : (selection ?? {});
    const matched: { entry: DeadLetterEntry; letter: DeadLetter<unknown>; queue: LeaseQueue<unknown> }[] = [];
    for await (const m of this.#scan(query)) matched.push(m);
    if (matched.length === 0) return 0;
    this.#beforeReplay?.(matched.map((m) => m.entry));
    let n = 0;
    for (const { entry, letter, queue } of matched) {
      if (entry.source === 'queue') {
        n += await queue.deadLetters.replay({ ids: [letter.id] });
        continue;
      }
      const event = letter.payload as ErrorEvent;
      const target = this.#queueOf(event.topic);
      if (!target) continue;
      const message: PublishMessage<unknown> = {
        payload: event.payload,
        priority: event.priority ?? 0,
        headers: { [REPLAYED_HEADER]: entry.id },
        ...(event.key === undefined ? {} : { key: event.key }),
      };
      await target.publish([message]);
      await queue.deadLetters.purge({ ids: [letter.id] });
      n++;
    }
    return n;
  }

  /** Remove entries for good: one by id, those matching a query, or all. Returns how many. */
  async purge(selection?: string | DeadLetterQuery): Promise<number> {
    const query = typeof selection === 'string' ? { ids: [selection] } : (selection ?? {});
    if (isEmpty(query)) {
      let n = 0;
      for (const queue of this.#queues()) n += await queue.deadLetters.purge();
      return n;
    }
    const byQueue = new Map<LeaseQueue<unknown>, string[]>();
    for await (const { letter, queue } of this.#scan(query)) {
      const ids = byQueue.get(queue);
      if (ids) ids.push(letter.id);
      else byQueue.set(queue, [letter.id]);
    }
    let n = 0;
    for (const [queue, ids] of byQueue) n += await queue.deadLetters.purge({ ids });
    return n;
  }

  /** Every matching entry with where it lives; reads each DLQ in pages. */
  async *#scan(
    query: DeadLetterQuery,
  ): AsyncGenerator<{ entry: DeadLetterEntry; letter: DeadLetter<unknown>; queue: LeaseQueue<unknown> }> {
    // A filter on a stage that does not exist would match nothing, silently.
    const stages = typeof query.stage === 'string' ? [query.stage] : (query.stage ?? []);
    for (const stage of stages) checkStageName(stage, 'stage filter');
    const wanted =
      query.ids === undefined ? undefined : new Set(query.ids.map(parseId).filter((p) => p !== undefined));
    for (const queue of this.#queues()) {
      let idsHere: string[] | undefined;
      if (wanted !== undefined) {
        idsHere = [...wanted].filter((p) => p.topic === queue.name).map((p) => p.entryId);
        if (idsHere.length === 0) continue;
      }
      const filter = {
        ...(idsHere === undefined ? {} : { ids: idsHere }),
        ...(query.since === undefined ? {} : { since: query.since }),
        ...(query.reasonIncludes === undefined ? {} : { reasonIncludes: query.reasonIncludes }),
      };
      // Snapshot first: replay and purge change the DLQ under a paging cursor.
      const letters: DeadLetter<unknown>[] = [];
      for (let offset = 0; ; offset += PAGE) {
        const page = await queue.deadLetters.list({ limit: PAGE, offset, filter });
        letters.push(...page);
        if (page.length < PAGE) break;
      }
      for (const letter of letters) {
        const entry = toEntry(letter);
        if (matches(entry, query)) yield { entry, letter, queue };
      }
    }
  }

  #queues(): LeaseQueue<unknown>[] {
    const t = this.#topics;
    return [t.error, t.task, t.download, t.parse, t.followUp];
  }

  #queueOf(topic: string): LeaseQueue<unknown> | undefined {
    return this.#queues().find((q) => q.name === topic);
  }
}

function toEntry(letter: DeadLetter<unknown>): DeadLetterEntry {
  const id = `${letter.topic}:${letter.id}`;
  if (letter.topic === TOPICS.error && isErrorEvent(letter.payload)) {
    const event = withCurrentStage(letter.payload);
    return {
      id,
      source: 'policy',
      stage: event.stage,
      topic: event.topic,
      payload: event.payload,
      error: {
        code: event.code,
        message: event.message,
        ...(event.kind === undefined ? {} : { kind: event.kind }),
      },
      attempts: event.attempt,
      failedAt: letter.deadLetteredAt,
      reason: letter.reason,
      ...(event.module === undefined ? {} : { module: event.module }),
      ...(event.url === undefined ? {} : { url: event.url }),
    };
  }
  const payload = letter.payload as
    | { module?: unknown; url?: unknown; request?: { module?: unknown } }
    | undefined;
  const module = typeof payload?.module === 'string' ? payload.module : payload?.request?.module;
  const url = typeof payload?.url === 'string' ? payload.url : undefined;
  const decoded = letter.payload !== undefined;
  return {
    id,
    source: 'queue',
    stage: STAGE_OF_TOPIC[letter.topic] ?? 'error',
    topic: letter.topic as TopicName,
    payload: letter.payload,
    error: decoded
      ? { code: 'MOCRA_ERR_LEASE_EXPIRED', message: letter.reason }
      : { code: 'MOCRA_ERR_QUEUE_DECODE', message: letter.reason },
    attempts: letter.attempts,
    failedAt: letter.deadLetteredAt,
    reason: letter.reason,
    ...(typeof module === 'string' ? { module } : {}),
    ...(url === undefined ? {} : { url }),
  };
}

function isErrorEvent(value: unknown): value is ErrorEvent {
  const v = value as Partial<ErrorEvent> | null | undefined;
  return (
    v !== null &&
    typeof v === 'object' &&
    typeof v.stage === 'string' &&
    typeof v.topic === 'string' &&
    typeof v.code === 'string' &&
    typeof v.attempt === 'number'
  );
}

function matches(entry: DeadLetterEntry, q: DeadLetterQuery): boolean {
  if (!oneOf(entry.stage, q.stage)) return false;
  if (!oneOf(entry.error.code, q.code)) return false;
  if (q.kind !== undefined && (entry.error.kind === undefined || !oneOf(entry.error.kind, q.kind)))
    return false;
  if (q.module !== undefined && entry.module !== q.module) return false;
  if (q.source !== undefined && entry.source !== q.source) return false;
  if (q.since !== undefined && entry.failedAt < q.since) return false;
  if (q.until !== undefined && entry.failedAt >= q.until) return false;
  if (q.urlIncludes !== undefined && !(entry.url ?? '').includes(q.urlIncludes)) return false;
  if (q.reasonIncludes !== undefined && !entry.reason.includes(q.reasonIncludes)) return false;
  return true;
}

function oneOf<T extends string>(value: T, wanted: T | readonly T[] | undefined): boolean {
  if (wanted === undefined) return true;
  return typeof wanted === 'string' ? value === wanted : (wanted as readonly T[]).includes(value);
}

function isEmpty(q: DeadLetterQuery): boolean {
  return Object.values(q).every((v) => v === undefined);
}

function parseId(id: string): { topic: string; entryId: string } | undefined {
  const at = id.indexOf(':');
  if (at <= 0 || at === id.length - 1) return undefined;
  return { topic: id.slice(0, at), entryId: id.slice(at + 1) };
}
