/**
 * Remote placement of DAG nodes over the data-plane queue: a node placed
 * `{ kind: 'remote', workerGroup }` is published to that group's task topic, any worker of the
 * cluster that serves the group runs it (`runNodeTask` on its own copy of the graph) and sends
 * the output back on the dispatcher's reply topic. Built only on {@link QueueBackend}, so it runs
 * on memory (one process), Redis Streams, NATS JetStream and Kafka alike.
 *
 * ```
 *  scheduler ─dispatch(task)─▶ QueueDagDispatcher ──publish──▶ [dag-task-{group}] ──▶ DagWorker (any node)
 *                                     ▲                                                  │ runNodeTask
 *                                     └──────── resolve ◀── [dag-reply-{node}] ◀──publish─┘ (output or error)
 * ```
 *
 * At least once, like every queue: a worker that dies mid-task lets its lease lapse and another
 * worker runs the task again; the dispatcher takes the first reply and drops the rest. A remote
 * node's side effects should therefore be idempotent or fenced (`ctx.fencingToken` travels with
 * the task). A worker extends its lease while a node runs; a task past its deadline is skipped.
 */
import { randomUUID } from 'node:crypto';
import {
  type Dag,
  decodeNodeTask,
  encodeNodeTask,
  type NodeDispatcher,
  type NodeTask,
  type Payload,
  runNodeTask,
} from '@mocra/dag';
import { AbortedError, InvalidArgumentError, RemoteNodeFailedError } from '../errors.js';
import type { Delivery, LeaseQueue, QueueBackend, TopicOptions } from '../queue/types.js';
import { payloadFromText, payloadToText } from './kv-update.js';

/** Prefix of the task topics: one topic per worker group. */
export const DAG_TASK_TOPIC_PREFIX = 'dag-task-';
/** Prefix of the reply topics: one topic per dispatching node. */
export const DAG_REPLY_TOPIC_PREFIX = 'dag-reply-';

/** One dispatched attempt, on `dag-task-{group}`. */
export interface DagTaskMessage {
  readonly v: 1;
  /** Unique per dispatch; the reply carries it. */
  readonly id: string;
  /** Which graph the worker runs the node of. */
  readonly graph: string;
  /** The topic the reply goes to. */
  readonly replyTo: string;
  /** `encodeNodeTask(task)`, base64. */
  readonly task: string;
}

export interface RemoteErrorInfo {
  readonly name: string;
  readonly code: string | undefined;
  readonly message: string;
  readonly retryable: boolean;
  readonly delayMs: number | undefined;
}

/** The outcome of one dispatch, on the dispatcher's reply topic. */
export type DagReplyMessage =
  | {
      readonly v: 1;
      readonly id: string;
      readonly worker: string;
      readonly ok: true;
      readonly output: string;
    }
  | {
      readonly v: 1;
      readonly id: string;
      readonly worker: string;
      readonly ok: false;
      readonly error: RemoteErrorInfo;
    };

/** A topic-name-safe suffix for a node id. */
function topicSuffix(id: string, room: number): string {
  return id.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, room) || 'node';
}

export function dagTaskTopic(group: string, prefix = DAG_TASK_TOPIC_PREFIX): string {
  return `${prefix}${group}`;
}

// ── the dispatching side ─────────────────────────────────────────────────────────────────

export interface QueueDagDispatcherOptions {
  queue: QueueBackend;
  /** This node's id: names the reply topic and is shown to workers. */
  nodeId: string;
  /** Where replies come back. One dispatcher per reply topic. @default `dag-reply-{nodeId}` */
  replyTopic?: string;
  /** Prefix of the task topics. @default 'dag-task-' */
  taskTopicPrefix?: string;
  /** Options of the task topics (lease, deliveries before the DLQ). @default the backend's */
  taskTopicOptions?: TopicOptions;
  /** How long one poll of the reply topic waits. @default 1000 */
  pollWaitMs?: number;
}

interface Pending {
  readonly graph: string;
  readonly nodeId: string;
  resolve(value: DagReplyMessage): void;
}

/**
 * Sends remote-placed nodes to workers and waits for their outputs. `for(graph)` gives the
 * `NodeDispatcher` of one graph (pass it as a DagScheduler's `dispatcher`).
 */
export class QueueDagDispatcher {
  readonly nodeId: string;
  readonly replyTopic: string;
  readonly #queue: QueueBackend;
  readonly #replies: LeaseQueue<DagReplyMessage>;
  readonly #taskPrefix: string;
  readonly #taskOptions: TopicOptions | undefined;
  readonly #pollWaitMs: number;
  readonly #pending = new Map<string, Pending>();
  readonly #stop = new AbortController();
  #loop: Promise<void> | undefined;
  #closed = false;

  constructor(options: QueueDagDispatcherOptions) {
    this.#queue = options.queue;
    this.nodeId = options.nodeId;
    this.replyTopic =
      options.replyTopic ??
      `${DAG_REPLY_TOPIC_PREFIX}${topicSuffix(options.nodeId, 64 - DAG_REPLY_TOPIC_PREFIX.length)}`;
    this.#replies = options.queue.topic<DagReplyMessage>(this.replyTopic);
    this.#taskPrefix = options.taskTopicPrefix ?? DAG_TASK_TOPIC_PREFIX;
    this.#taskOptions = options.taskTopicOptions;
    this.#pollWaitMs = options.pollWaitMs ?? 1_000;
  }

  /** Dispatches in flight (waiting for a worker's reply). */
  get pending(): number {
    return this.#pending.size;
  }

  /** The dispatcher of one graph: workers look the graph up by this name. */
  for(graph: string): NodeDispatcher {
    if (typeof graph !== 'string' || graph === '')
      throw new InvalidArgumentError('graph name must be non-empty');
    return { dispatch: (task, signal) => this.#dispatch(graph, task, signal) };
  }

  async #dispatch(graph: string, task: NodeTask, signal: AbortSignal): Promise<Payload> {
    if (this.#closed) throw new AbortedError('the DAG dispatcher is closed');
    if (!task.workerGroup) throw new InvalidArgumentError(`node '${task.nodeId}' has no worker group`);
    signal.throwIfAborted();
    const id = randomUUID();
    const reply = new Promise<DagReplyMessage>((resolve, reject) => {
      const onAbort = () => {
        this.#pending.delete(id);
        reject(signal.reason ?? new AbortedError('dispatch aborted'));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#pending.set(id, {
        graph,
        nodeId: task.nodeId,
        resolve: (value) => {
          signal.removeEventListener('abort', onAbort);
          this.#pending.delete(id);
          resolve(value);
        },
      });
    });
    this.#ensureLoop();
    const message: DagTaskMessage = {
      v: 1,
      id,
      graph,
      replyTo: this.replyTopic,
      task: Buffer.from(encodeNodeTask(task)).toString('base64'),
    };
    try {
      await this.#queue
        .topic<DagTaskMessage>(dagTaskTopic(task.workerGroup, this.#taskPrefix), this.#taskOptions)
        .publish([{ payload: message, key: task.runId, headers: { graph, node: task.nodeId } }]);
    } catch (err) {
      this.#pending.get(id)?.resolve({
        v: 1,
        id,
        worker: this.nodeId,
        ok: false,
        error: errorInfo(err),
      });
    }
    const answer = await reply;
    if (answer.ok) return payloadFromText(answer.output);
    const e = answer.error;
    throw new RemoteNodeFailedError(graph, task.nodeId, e.code, answer.worker, e.message, {
      retryable: e.retryable,
      ...(e.delayMs === undefined ? {} : { delayMs: e.delayMs }),
    });
  }

  /** Reads replies while dispatches are pending; stops when none are. */
  #ensureLoop(): void {
    if (this.#loop !== undefined || this.#closed) return;
    this.#loop = (async () => {
      while (!this.#closed && this.#pending.size > 0) {
        let batch: Delivery<DagReplyMessage>[];
        try {
          batch = await this.#replies.consume({
            max: 64,
            waitMs: this.#pollWaitMs,
            signal: this.#stop.signal,
          });
        } catch (err) {
          if (this.#closed) return;
          if (isQueueClosed(err)) {
            // The queue went away under us (its engine stopped): nothing will answer any more.
            void this.close();
            return;
          }
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
        if (batch.length === 0 && backendClosed(this.#queue, this.replyTopic)) {
          void this.close();
          return;
        }
        for (const d of batch) {
          const reply = readReply(d.payload);
          // A reply to a dispatch that was aborted, or to an earlier life of this node: drop it.
          if (reply) this.#pending.get(reply.id)?.resolve(reply);
          await d.ack().catch(() => undefined);
        }
      }
    })().finally(() => {
      this.#loop = undefined;
      if (!this.#closed && this.#pending.size > 0) this.#ensureLoop();
    });
  }

  /** Stop reading replies; dispatches still waiting fail with AbortedError (their nodes retry or fail). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stop.abort();
    for (const [id, p] of this.#pending) {
      p.resolve({
        v: 1,
        id,
        worker: this.nodeId,
        ok: false,
        error: {
          name: 'AbortedError',
          code: 'MOCRA_ERR_ABORTED',
          message: 'the dispatcher closed',
          retryable: true,
          delayMs: undefined,
        },
      });
    }
    await this.#loop;
  }
}

export function createQueueDagDispatcher(options: QueueDagDispatcherOptions): QueueDagDispatcher {
  return new QueueDagDispatcher(options);
}

// ── the worker side ──────────────────────────────────────────────────────────────────────

export interface DagWorkerOptions {
  queue: QueueBackend;
  /** The graphs this worker can run nodes of, by the name dispatchers use. */
  graphs: ReadonlyMap<string, Dag> | ((name: string) => Dag | undefined);
  /** Worker groups served (task topics consumed). */
  groups: readonly string[];
  /** This worker's id, shown in replies and errors. */
  nodeId: string;
  /** Nodes run at once, over all groups. @default 4 */
  concurrency?: number;
  /** Prefix of the task topics. @default 'dag-task-' */
  taskTopicPrefix?: string;
  /** Options of the task topics. @default the backend's */
  taskTopicOptions?: TopicOptions;
  /** How long one poll of a task topic waits. @default 1000 */
  pollWaitMs?: number;
}

export interface DagWorkerStats {
  /** Nodes run to an output. */
  succeeded: number;
  /** Nodes that threw (the error went back to the dispatcher). */
  failed: number;
  /** Tasks skipped because their deadline had passed (nobody waits for them). */
  expired: number;
  /** Running now. */
  running: number;
}

/** Runs the remote-placed nodes of its graphs for any dispatcher in the cluster. */
export class DagWorker {
  readonly nodeId: string;
  readonly #queue: QueueBackend;
  readonly #graph: (name: string) => Dag | undefined;
  readonly #topics: LeaseQueue<DagTaskMessage>[];
  readonly #concurrency: number;
  readonly #pollWaitMs: number;
  readonly #stop = new AbortController();
  readonly #running = new Set<Promise<void>>();
  readonly #aborts = new Set<AbortController>();
  #slotFreed: (() => void) | undefined;
  #loops: Promise<void>[] = [];
  #closed = false;
  readonly #stats = { succeeded: 0, failed: 0, expired: 0 };

  constructor(options: DagWorkerOptions) {
    this.#queue = options.queue;
    this.nodeId = options.nodeId;
    const graphs = options.graphs;
    this.#graph = typeof graphs === 'function' ? graphs : (name) => graphs.get(name);
    this.#concurrency = options.concurrency ?? 4;
    if (!(Number.isSafeInteger(this.#concurrency) && this.#concurrency > 0))
      throw new InvalidArgumentError(`concurrency must be a positive integer, got ${this.#concurrency}`);
    if (options.groups.length === 0)
      throw new InvalidArgumentError('a DAG worker needs at least one worker group');
    const prefix = options.taskTopicPrefix ?? DAG_TASK_TOPIC_PREFIX;
    this.#topics = [...new Set(options.groups)].map((g) =>
      options.queue.topic<DagTaskMessage>(dagTaskTopic(g, prefix), options.taskTopicOptions),
    );
    this.#pollWaitMs = options.pollWaitMs ?? 1_000;
  }

  stats(): DagWorkerStats {
    return { ...this.#stats, running: this.#running.size };
  }

  /** Start consuming the task topics. */
  start(): void {
    if (this.#loops.length > 0 || this.#closed) return;
    this.#loops = this.#topics.map((topic) => this.#consume(topic));
  }

  async #consume(topic: LeaseQueue<DagTaskMessage>): Promise<void> {
    while (!this.#closed) {
      const free = this.#concurrency - this.#running.size;
      if (free <= 0) {
        await new Promise<void>((resolve) => {
          this.#slotFreed = resolve;
        });
        continue;
      }
      let batch: Delivery<DagTaskMessage>[];
      try {
        batch = await topic.consume({ max: free, waitMs: this.#pollWaitMs, signal: this.#stop.signal });
      } catch (err) {
        if (this.#closed || isQueueClosed(err)) return;
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      // Some backends answer a closed topic with nothing at once rather than an error.
      if (batch.length === 0 && backendClosed(this.#queue, topic.name)) return;
      for (const d of batch) {
        const run = this.#handle(d).finally(() => {
          this.#running.delete(run);
          const wake = this.#slotFreed;
          this.#slotFreed = undefined;
          wake?.();
        });
        this.#running.add(run);
      }
    }
  }

  async #handle(delivery: Delivery<DagTaskMessage>): Promise<void> {
    const message = readTask(delivery.payload);
    if (message === undefined) {
      await delivery.deadLetter('not a DAG task message').catch(() => undefined);
      return;
    }
    let task: NodeTask;
    try {
      task = decodeNodeTask(new Uint8Array(Buffer.from(message.task, 'base64')));
    } catch (err) {
      await delivery.deadLetter(`undecodable node task: ${errorInfo(err).message}`).catch(() => undefined);
      return;
    }
    if (task.deadline !== undefined && task.deadline <= Date.now()) {
      // The dispatcher stopped waiting at the deadline: running it now helps nobody.
      this.#stats.expired++;
      await delivery.ack().catch(() => undefined);
      return;
    }
    const abort = new AbortController();
    this.#aborts.add(abort);
    const leaseMs = delivery.leaseDeadline - Date.now();
    const keepAlive = setInterval(
      () => void delivery.extendLease().catch(() => undefined),
      Math.max(100, Math.floor(leaseMs / 3)),
    );
    keepAlive.unref();
    const deadline =
      task.deadline === undefined
        ? undefined
        : setTimeout(
            () => abort.abort(new AbortedError('the node passed its deadline')),
            task.deadline - Date.now(),
          );
    let reply: DagReplyMessage;
    try {
      const dag = this.#graph(message.graph);
      if (dag === undefined)
        throw new InvalidArgumentError(`no graph named '${message.graph}' is registered on ${this.nodeId}`);
      const output = await runNodeTask(dag, task, { signal: abort.signal });
      reply = { v: 1, id: message.id, worker: this.nodeId, ok: true, output: payloadToText(output) };
      this.#stats.succeeded++;
    } catch (err) {
      reply = { v: 1, id: message.id, worker: this.nodeId, ok: false, error: errorInfo(err) };
      this.#stats.failed++;
    } finally {
      clearInterval(keepAlive);
      if (deadline) clearTimeout(deadline);
      this.#aborts.delete(abort);
    }
    if (this.#closed && abort.signal.aborted) {
      // Stopped by close(): put it back for another worker rather than report a failure.
      await delivery.nack({ reason: 'worker closing' }).catch(() => undefined);
      return;
    }
    try {
      await this.#queue.topic<DagReplyMessage>(message.replyTo).publish([{ payload: reply }]);
      await delivery.ack();
    } catch (err) {
      await delivery.nack({ reason: `reply not sent: ${errorInfo(err).message}` }).catch(() => undefined);
    }
  }

  /** Stop taking tasks; nodes still running are aborted and their tasks put back on the queue. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stop.abort();
    this.#slotFreed?.();
    for (const a of this.#aborts) a.abort(new AbortedError('the DAG worker is closing'));
    await Promise.all(this.#loops);
    await Promise.all(this.#running);
  }
}

export function createDagWorker(options: DagWorkerOptions): DagWorker {
  return new DagWorker(options);
}

// ── messages at the boundary ─────────────────────────────────────────────────────────────

function isQueueClosed(err: unknown): boolean {
  return (err as { code?: unknown } | undefined)?.code === 'MOCRA_ERR_QUEUE_CLOSED';
}

/** A closed backend refuses `topic()`: the cheap way to tell "nothing yet" from "never again". */
function backendClosed(queue: QueueBackend, topic: string): boolean {
  try {
    queue.topic(topic);
    return false;
  } catch (err) {
    return isQueueClosed(err);
  }
}

function errorInfo(err: unknown): RemoteErrorInfo {
  const e = err as {
    name?: unknown;
    code?: unknown;
    message?: unknown;
    retryable?: unknown;
    delayMs?: unknown;
  };
  const isObj = typeof err === 'object' && err !== null;
  return {
    name: isObj && typeof e.name === 'string' ? e.name : 'Error',
    code: isObj && typeof e.code === 'string' ? e.code : undefined,
    message: isObj && typeof e.message === 'string' ? e.message : String(err),
    // As @mocra/dag decides locally: an error is retried unless it says it is not.
    retryable: !(isObj && e.retryable === false),
    delayMs: isObj && typeof e.delayMs === 'number' && e.delayMs >= 0 ? e.delayMs : undefined,
  };
}

function readTask(value: unknown): DagTaskMessage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const r = value as Record<string, unknown>;
  if (
    r.v !== 1 ||
    typeof r.id !== 'string' ||
    typeof r.graph !== 'string' ||
    typeof r.replyTo !== 'string' ||
    typeof r.task !== 'string'
  )
    return undefined;
  return { v: 1, id: r.id, graph: r.graph, replyTo: r.replyTo, task: r.task };
}

function readReply(value: unknown): DagReplyMessage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const r = value as Record<string, unknown>;
  if (r.v !== 1 || typeof r.id !== 'string' || typeof r.worker !== 'string') return undefined;
  if (r.ok === true && typeof r.output === 'string')
    return { v: 1, id: r.id, worker: r.worker, ok: true, output: r.output };
  const e = r.error as Record<string, unknown> | undefined;
  if (r.ok === false && typeof e === 'object' && e !== null && typeof e.message === 'string') {
    return {
      v: 1,
      id: r.id,
      worker: r.worker,
      ok: false,
      error: {
        name: typeof e.name === 'string' ? e.name : 'Error',
        code: typeof e.code === 'string' ? e.code : undefined,
        message: e.message,
        retryable: e.retryable !== false,
        delayMs: typeof e.delayMs === 'number' ? e.delayMs : undefined,
      },
    };
  }
  return undefined;
}
