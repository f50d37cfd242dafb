/**
 * DAG jobs: a `@mocra/dag` graph that the engine runs as a module, so a run is started like any
 * other module's (seeding, `submit`, cron, `/start_work`), travels on the task topic, and is
 * distributed, resumed and accounted for by the same machinery as a crawl.
 *
 * ```
 *   task {module: name, params: {key?}} ─▶ task stage (any node) ─▶ DagScheduler.run, with
 *        run guard    a coordination lock per run key: one node runs it; its token fences the rest
 *        fencing      every node output committed under that token (coordination KV)
 *        checkpoints  one entry per finished node (coordination KV)
 *        idempotency  singleflight by idempotency key across nodes (coordination KV)
 *        dispatcher   nodes placed { kind: 'remote', workerGroup } ─▶ [dag-task-{group}] ─▶ a DagWorker
 *                     on any node (every node serves the groups its graphs use)
 *     ─▶ one item per finished run to the job's sink (itemId `dag:{name}:{key}`)
 * ```
 *
 * A node that dies mid-run stops renewing its lease on the task and on the run guard: the task is
 * delivered again to another node, which waits (RetryLaterError) until the guard lapses, takes it
 * with a higher token, loads the checkpoint and runs only what had not finished. A run whose task
 * was done once is not run again (a `done` marker in coordination), so a redelivered task after a
 * finished run only writes its (idempotent) item again.
 *
 * A run that lasts longer than the task stage's watchdog (`watchdog.task`, 120 s by default) is
 * aborted by it and resumes from its checkpoint on the retry: raise it for long jobs.
 */
import {
  type Dag,
  DagError,
  type DagEvent,
  type DagReport,
  DagScheduler,
  type DagSchedulerOptions,
  type EventSink,
  isJsonContentType,
  type Payload,
  readJson,
  readText,
} from '@mocra/dag';
import { createLocalCoordination } from '../coordination/local-coordination.js';
import type { Coordination } from '../coordination/types.js';
import type { Engine } from '../engine/engine.js';
import { InvalidArgumentError, RetryLaterError } from '../errors.js';
import type { GenerateContext, Module, ModuleCron } from '../module/types.js';
import { channels, type DagMessage } from '../observability/channels.js';
import type { CronInput } from '../schedule/cron.js';
import { createCoordinationFencingStore } from './dag-fencing-store.js';
import { createCoordinationIdempotencyStore } from './dag-idempotency-store.js';
import {
  createDagWorker,
  createQueueDagDispatcher,
  type DagWorker,
  type QueueDagDispatcher,
} from './dag-queue-dispatch.js';
import { createCoordinationRunGuard } from './dag-run-guard.js';
import { createCoordinationRunStateStore } from './dag-run-state-store.js';

/** The item a finished run writes to its job's sink. */
export interface DagJobResult {
  readonly job: string;
  readonly key: string;
  readonly runId: string;
  readonly fencingToken: number | undefined;
  /** Every node's output: JSON decoded, text as a string, other bytes base64. */
  readonly outputs: Readonly<Record<string, unknown>>;
  /** Nodes restored from a checkpoint instead of run (a resumed run). */
  readonly restored: readonly string[];
}

export interface DagJobOptions {
  /** Start runs on a schedule (like a module's cron). @default none (seeded once per crawl run) */
  readonly cron?: CronInput | ModuleCron;
  /** How long a run's guard lasts without renewal (renewed every third of it). @default 30000 */
  readonly guardTtlMs?: number;
  /** Scheduler options (retries, timeouts, concurrency). The stores and the dispatcher are set here. */
  readonly scheduler?: Omit<
    DagSchedulerOptions,
    'key' | 'runGuard' | 'fencing' | 'runState' | 'idempotency' | 'dispatcher'
  >;
}

export interface DagJobsOptions {
  /** Remote nodes this node runs at once for the cluster. @default 4 */
  readonly workerConcurrency?: number;
  /** How long a finished run's `done` marker is kept (a redelivered task finds it). @default 86400000 */
  readonly doneTtlMs?: number;
}

export interface DagJobsAttachOptions {
  readonly engine: Engine;
  /** Where guards, checkpoints and markers live. @default a private local coordination (one process) */
  readonly coordination?: Coordination;
  /** This node's id (reply topic, worker id). @default the coordination's node id */
  readonly nodeId?: string;
}

interface Job {
  readonly name: string;
  readonly dag: Dag;
  readonly options: DagJobOptions;
}

interface Attached {
  readonly engine: Engine;
  readonly coordination: Coordination;
  readonly ownsCoordination: boolean;
  readonly dispatcher: QueueDagDispatcher;
  readonly worker: DagWorker | undefined;
}

const MODULE_NODE = 'run';

/** The DAG jobs of one engine: their modules, and this node's dispatcher and worker. */
export class DagJobs {
  readonly #jobs = new Map<string, Job>();
  readonly #options: DagJobsOptions;
  #attached: Attached | undefined;

  constructor(options: DagJobsOptions = {}) {
    this.#options = options;
  }

  /** Names of the jobs defined so far. */
  names(): string[] {
    return [...this.#jobs.keys()];
  }

  /**
   * Define a job; returns the module to register with the engine (its sink gets one
   * {@link DagJobResult} per finished run). Every node of a cluster defines the same jobs.
   */
  module(name: string, build: () => Dag, options: DagJobOptions = {}): Module<DagJobResult> {
    if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('a DAG job needs a name');
    if (this.#jobs.has(name)) throw new InvalidArgumentError(`a DAG job named '${name}' is already defined`);
    const dag = build();
    this.#jobs.set(name, { name, dag, options });
    return {
      name,
      ...(options.cron === undefined ? {} : { cron: options.cron }),
      nodes: [
        {
          id: MODULE_NODE,
          generate: async (ctx) => {
            await this.#run(name, ctx);
            return undefined;
          },
          // The node makes no requests, so there is never a response to parse.
          parse() {},
        },
      ],
    };
  }

  /** Connect to a running engine: start this node's dispatcher, and its worker for remote nodes. */
  attach(options: DagJobsAttachOptions): void {
    if (this.#attached !== undefined) throw new InvalidArgumentError('the DAG jobs are attached already');
    const coordination = options.coordination ?? createLocalCoordination();
    const nodeId = options.nodeId ?? coordination.nodeId;
    const queue = options.engine.queue;
    const groups = new Set<string>();
    for (const job of this.#jobs.values()) {
      for (const id of job.dag.topologicalOrder) {
        const placement = job.dag.node(id).placement;
        if (placement.kind === 'remote') groups.add(placement.workerGroup);
      }
    }
    const dispatcher = createQueueDagDispatcher({ queue, nodeId });
    const worker =
      groups.size === 0
        ? undefined
        : createDagWorker({
            queue,
            nodeId,
            groups: [...groups],
            graphs: (graph) => this.#jobs.get(graph)?.dag,
            ...(this.#options.workerConcurrency === undefined
              ? {}
              : { concurrency: this.#options.workerConcurrency }),
          });
    worker?.start();
    this.#attached = {
      engine: options.engine,
      coordination,
      ownsCoordination: options.coordination === undefined,
      dispatcher,
      worker,
    };
  }

  /** Stop the worker (its running nodes go back on the queue) and the dispatcher. */
  async close(): Promise<void> {
    const a = this.#attached;
    this.#attached = undefined;
    if (a === undefined) return;
    await a.worker?.close();
    await a.dispatcher.close();
    if (a.ownsCoordination) await a.coordination.close();
  }

  async #run(name: string, ctx: GenerateContext): Promise<void> {
    const a = this.#attached;
    const job = this.#jobs.get(name)!;
    if (a === undefined) {
      throw new InvalidArgumentError(`DAG job '${name}' ran on an engine its jobs were not attached to`);
    }
    const key = typeof ctx.params.key === 'string' && ctx.params.key !== '' ? ctx.params.key : ctx.runId;
    const runKey = `${name}:${key}`;
    const doneKey = `dag:done:${runKey}`;
    const registered = a.engine.registry.get(name);
    const meta = {
      itemId: `dag:${runKey}`,
      index: 0,
      url: `dag://${encodeURIComponent(name)}/${encodeURIComponent(key)}`,
      module: name,
      node: MODULE_NODE,
      runId: ctx.runId,
    };
    const done = await a.coordination.get(doneKey);
    if (done !== undefined) {
      // Finished before (this task was delivered again): write the same item again, nothing more.
      await registered.sink.write(JSON.parse(done) as DagJobResult, meta);
      return;
    }
    const guardTtlMs = job.options.guardTtlMs ?? 30_000;
    const scheduler = new DagScheduler(job.dag, {
      ...job.options.scheduler,
      eventSink: engineEvents(ctx.runId, name, job.options.scheduler?.eventSink),
      key: runKey,
      runGuard: { guard: createCoordinationRunGuard(a.coordination), ttlMs: guardTtlMs },
      fencing: { store: createCoordinationFencingStore(a.coordination) },
      runState: { store: createCoordinationRunStateStore(a.coordination) },
      idempotency: { store: createCoordinationIdempotencyStore(a.coordination) },
      dispatcher: a.dispatcher.for(name),
    });
    let report: DagReport;
    try {
      report = await scheduler.run({ signal: ctx.signal });
    } catch (err) {
      // Another node holds the run (or the previous holder's guard has not lapsed yet): come back.
      if (
        err instanceof DagError &&
        (err.code === 'MOCRA_ERR_DAG_RUN_IN_PROGRESS' || err.code === 'MOCRA_ERR_DAG_RUN_GUARD_ACQUIRE')
      ) {
        throw new RetryLaterError(`DAG run '${runKey}' is held by another node`, Math.ceil(guardTtlMs / 2), {
          cause: err,
        });
      }
      throw err;
    }
    const outputs: Record<string, unknown> = {};
    for (const [id, payload] of report.outputs) outputs[id] = readable(payload);
    const result: DagJobResult = {
      job: name,
      key,
      runId: report.runId,
      fencingToken: report.fencingToken,
      outputs,
      restored: report.results.filter((r) => r.source === 'checkpoint').map((r) => r.nodeId),
    };
    ctx.log.info(
      { job: name, key, runId: report.runId, token: report.fencingToken, restored: result.restored },
      'DAG run finished',
    );
    await registered.sink.write(result, meta);
    await a.coordination.set(doneKey, JSON.stringify(result), {
      ttlMs: this.#options.doneTtlMs ?? 86_400_000,
    });
  }
}

export function createDagJobs(options: DagJobsOptions = {}): DagJobs {
  return new DagJobs(options);
}

/**
 * Hands every event of a job's run to the engine's `mocra:engine:dag` channel (metrics and the
 * dashboard read it there, tagged with the engine run), then to the job's own sink if it has one.
 */
function engineEvents(runId: string, job: string, own: EventSink | undefined): EventSink {
  return {
    emit(event: DagEvent) {
      if (channels.dag.hasSubscribers) channels.dag.publish({ runId, job, event } satisfies DagMessage);
      return own?.emit(event);
    },
  };
}

function readable(payload: Payload): unknown {
  if (isJsonContentType(payload.contentType)) {
    try {
      return readJson(payload);
    } catch {
      // fall through: keep the bytes
    }
  }
  if (payload.contentType.startsWith('text/')) return readText(payload);
  return Buffer.from(payload.bytes).toString('base64');
}
