/**
 * One crawl across many processes, by configuration only: from a queue URL (and a coordination
 * URL) to everything the engine needs to run as one worker of a cluster.
 *
 * ```
 *  connectDistributed({ queue: 'redis://…', coordination?: 'redis://…' })
 *    ├─ queue backend          createQueueBackend(queue)         the stage topics
 *    ├─ coordination           createCoordination(coordination)  membership, locks, KV
 *    ├─ shared dedup           Redis hashes (redis://) or NATS KV (nats://) — a URL is fetched once
 *    └─ shared host budget     Redis, under the HostScheduler, when politeness is configured
 *
 *  runtime.run(engine)
 *    ├─ joins the run's membership; leader election
 *    ├─ seeds once per run across the cluster (seed lock + run marker)
 *    └─ ends the run when the whole cluster is idle (ClusterRun), on every member —
 *       unless a member is a service node: then each node runs until it is stopped
 * ```
 *
 * A service node is one told to stay up: `service: true`, an engine built with
 * `endWhenIdle: false` (a dashboard's `keepAlive`), or a module with a cron (and cron enabled).
 * It is fed by cron, `/start_work`, `submit()` and the other nodes, and stops on SIGTERM/SIGINT
 * (with `handleSignals`), `/control/stop` or `engine.stop()`, draining what it has in flight.
 *
 * The coordination URL defaults to the queue URL when that is Redis; NATS and Kafka need one
 * (`redis://…`, `raft://…`, or `local://` for a single process). A coordination backend that is
 * already open (the embedded Raft cluster's, from `.cluster(ClusterConfig…)`) can be given instead
 * of a URL; the runtime then owns it.
 *
 * Cron jobs fire on the owner of their key's partition (cluster/cron-ownership.ts); times a dead
 * owner left unfired are fired late by the new owner, once.
 *
 * With no queue URL and an open Raft coordination the cluster is *partitioned*: no shared queue,
 * dedup or budget — each engine keeps its own — and a {@link PartitionRouter} on the engine sends
 * each task and entry request to the node that owns its account or host, over the Raft nodes'
 * transport (distributed/partition-router.ts). Seeding, completion and cron are the same as above.
 */
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import { type CronOwnership, createCronOwnership } from '../cluster/cron-ownership.js';
import { type CreateCoordinationOptions, createCoordination } from '../coordination/create-coordination.js';
import type { RaftCoordination } from '../coordination/raft-coordination.js';
import type { Coordination } from '../coordination/types.js';
import { MOCRA_VERSION } from '../downloader/version.js';
import type { Engine, EngineOptions, RunSummary } from '../engine/engine.js';
import { InvalidArgumentError, InvalidBackendUrlError, isDataLost } from '../errors.js';
import { createNatsDeduplicator } from '../frontier/dedup/nats-deduplicator.js';
import { createRedisDeduplicator } from '../frontier/dedup/redis-deduplicator.js';
import type { Deduplicator } from '../frontier/dedup.js';
import {
  createHostScheduler,
  type HostScheduler,
  type HostSchedulerOptions,
} from '../frontier/politeness/host-scheduler.js';
import { TOPICS } from '../model/events.js';
import { type CreateQueueBackendOptions, createQueueBackend } from '../queue/create-queue-backend.js';
import type { RedisClient } from '../queue/redis-connection.js';
import type { QueueBackend } from '../queue/types.js';
import { type ClusterRunOptions, createClusterRun } from './cluster-run.js';
import { createRedisHostBudget, type RedisHostBudget } from './host-budget.js';
import { FORWARD_TOPIC, PartitionRouter } from './partition-router.js';

/** How long a forward may take before its work runs on the sending node instead. */
const FORWARD_TIMEOUT_MS = 10_000;

export interface DistributedOptions {
  /**
   * Queue backend URL: `redis://…`, `nats://…`, `kafka://…` (`memory://` is one process). Unset
   * with an open Raft coordination: a partitioned cluster — each node on its own queues, work
   * routed to the owner of its account or host (distributed/partition-router.ts).
   */
  queue?: string;
  /**
   * Partitioned cluster: the modules whose entry requests are routed by host (spiders); the
   * others' tasks are routed by account. @default none
   */
  partitionByHost?: readonly string[];
  /**
   * Coordination URL: `redis://…`, `raft://…`, or `local://` for one process — or an open
   * coordination backend (closed with the runtime).
   * @default the queue URL when it is redis://, else required
   */
  coordination?: string | Coordination;
  /** Keeps crawls sharing servers apart: topics, dedup, budget and coordination keys. @default 'mocra' */
  namespace?: string;
  /**
   * Shared by every process of one crawl; a finished run stays finished (a process started later
   * ends at once), so give a new crawl a new id.
   * @default the namespace
   */
  runId?: string;
  /** This process's member id. @default `${hostname}-${pid}` */
  nodeId?: string;
  /** Share one dedup set across the cluster (false: each process keeps its own). @default true */
  dedup?: boolean;
  /**
   * Per-host politeness for the whole cluster: a HostScheduler in each process whose slots and
   * start gaps live in Redis (the coordination's Redis, else the queue's). Unset: no politeness gate.
   */
  politeness?: HostSchedulerOptions & {
    /** Slots of a dead worker come back after this long. @default 60000 */
    leaseTtlMs?: number;
  };
  /** Options of the queue backend (codec, payload limits, lease, per-backend blocks). */
  queueOptions?: CreateQueueBackendOptions;
  /** Options of the coordination backend (member TTL, …). */
  coordinationOptions?: CreateCoordinationOptions;
  /** Timing of the cluster-wide completion detection. */
  completion?: Pick<ClusterRunOptions, 'pollMs' | 'checkEveryMs' | 'probeTimeoutMs' | 'lockTtlMs'>;
  /**
   * How often cron's partition owners are looked up again, and refused cron times asked about
   * again (so a dead owner's times are fired by the next one). @default 1000
   */
  cronOwnershipMs?: number;
  /**
   * Keep this node up until it is stopped, even when the whole cluster is idle (a service node,
   * fed by cron and `/start_work`); `false` makes a node with cron modules end with the crawl.
   * @default true when the engine has `endWhenIdle: false` or a module with a cron, else false
   */
  service?: boolean;
}

function schemeOf(url: string): string {
  const m = /^([a-z][a-z0-9+.-]*):/i.exec(url.trim());
  if (!m) throw new InvalidBackendUrlError(url, 'no scheme');
  return m[1]!.toLowerCase();
}

/** Connect everything a worker of a distributed crawl needs. Closes what it opened on failure. */
export async function connectDistributed(options: DistributedOptions): Promise<DistributedRuntime> {
  if (options.queue === undefined && typeof options.coordination === 'object') {
    return connectPartitioned(options, options.coordination);
  }
  if (typeof options.queue !== 'string' || options.queue.trim() === '') {
    throw new InvalidArgumentError('a distributed run needs a queue URL (redis://, nats:// or kafka://)');
  }
  const namespace = options.namespace ?? 'mocra';
  const runId = options.runId ?? namespace;
  if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(runId)) {
    throw new InvalidArgumentError(`runId '${runId}' must be 1–128 characters of A–Z a–z 0–9 _ . : -`);
  }
  const queueScheme = schemeOf(options.queue);
  const given = typeof options.coordination === 'object' ? options.coordination : undefined;
  const coordinationUrl =
    given !== undefined
      ? `${given.kind}://`
      : ((options.coordination as string | undefined) ??
        (queueScheme === 'redis' || queueScheme === 'rediss' ? options.queue : undefined));
  if (coordinationUrl === undefined) {
    throw new InvalidArgumentError(
      `a ${queueScheme}:// queue needs a coordination backend: set coordination to redis://host:6379 (or local:// for a single process)`,
    );
  }
  const coordinationScheme = schemeOf(coordinationUrl);
  const redisUrl =
    coordinationScheme === 'redis' || coordinationScheme === 'rediss'
      ? coordinationUrl
      : queueScheme === 'redis' || queueScheme === 'rediss'
        ? options.queue
        : undefined;
  const nodeId = options.nodeId ?? `${hostname()}-${process.pid}`;
  const opened: { close(): Promise<unknown> }[] = given === undefined ? [] : [given];
  try {
    // Many handlers issue commands in the same tick: auto-pipelining sends them in one write
    // (one syscall) instead of one per command and argument.
    const queueOptions = {
      ...options.queueOptions,
      redis: {
        ...options.queueOptions?.redis,
        redisOptions: { enableAutoPipelining: true, ...options.queueOptions?.redis?.redisOptions },
      },
    };
    const queue = await createQueueBackend(options.queue, { namespace, ...queueOptions });
    opened.push(queue);
    const coordination =
      given ??
      (await createCoordination(coordinationUrl, {
        namespace,
        nodeId,
        ...options.coordinationOptions,
      }));
    if (given === undefined) opened.push(coordination);
    let deduplicator: Deduplicator | undefined;
    if (options.dedup ?? true) {
      if (queueScheme === 'nats') {
        const nats = options.queueOptions?.nats;
        const connection = (queue as { connection?: NatsConnection }).connection;
        deduplicator = await createNatsDeduplicator({
          ...(connection === undefined
            ? { servers: options.queue.split(',').map((s) => s.trim()) }
            : { connection }),
          namespace,
          scope: runId,
          ...(nats?.storage === undefined ? {} : { storage: nats.storage }),
        });
      } else if (redisUrl !== undefined) {
        // On the queue's own Redis, share its connection: the dedup script then joins the same
        // auto-pipelined writes as the queue's commands (fewer syscalls per page).
        const shared = redisUrl === options.queue ? (queue as { client?: RedisClient }).client : undefined;
        deduplicator = await createRedisDeduplicator({
          namespace,
          scope: runId,
          ...(shared === undefined
            ? { url: redisUrl, redisOptions: { enableAutoPipelining: true } }
            : { client: shared }),
        });
      } else if (coordinationScheme !== 'local') {
        throw new InvalidArgumentError(
          'a shared dedup set needs Redis or NATS: use a redis:// coordination URL with this queue',
        );
      }
      if (deduplicator) opened.push(deduplicator);
    }
    let budget: RedisHostBudget | undefined;
    let gate: HostScheduler | undefined;
    if (options.politeness) {
      const { leaseTtlMs, ...schedulerOptions } = options.politeness;
      if (redisUrl !== undefined) {
        budget = await createRedisHostBudget({
          url: redisUrl,
          namespace,
          ...(leaseTtlMs === undefined ? {} : { leaseTtlMs }),
        });
        opened.push(budget);
      } else if (coordinationScheme !== 'local') {
        // Host budgets are a slot counter and a start gap per host, taken at every request start:
        // on Raft that would be a log entry per page, so the budgets live on a Redis only.
        throw new InvalidArgumentError(
          coordinationScheme === 'raft'
            ? `cluster-wide politeness needs Redis, and the Raft cluster keeps no host budgets: put the data plane on Redis (.queue('redis://…'); the budgets live there), or give each node its own politeness with .politeness() instead of .cluster({ politeness })`
            : `cluster-wide politeness needs Redis: use a redis:// coordination URL or queue, or give each node its own politeness with .politeness() instead of .cluster({ politeness })`,
        );
      }
      gate = createHostScheduler({ ...schedulerOptions, ...(budget ? { budget } : {}) });
    }
    return new DistributedRuntime({
      queue,
      partitionByHost: undefined,
      coordination,
      deduplicator,
      budget,
      gate,
      namespace,
      runId,
      completion: options.completion ?? {},
      cronOwnershipMs: options.cronOwnershipMs ?? 1_000,
      service: options.service,
    });
  } catch (err) {
    for (const o of opened.reverse()) await o.close().catch(() => undefined);
    throw err;
  }
}

/** A partitioned cluster: the Raft coordination only; the engine keeps its own queues and dedup set. */
function connectPartitioned(options: DistributedOptions, coordination: Coordination): DistributedRuntime {
  const namespace = options.namespace ?? 'mocra';
  const runId = options.runId ?? namespace;
  const fail = (message: string): never => {
    void coordination.close().catch(() => undefined);
    throw new InvalidArgumentError(message);
  };
  if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(runId)) {
    fail(`runId '${runId}' must be 1–128 characters of A–Z a–z 0–9 _ . : -`);
  }
  if (!isRaft(coordination)) {
    fail(
      'a cluster without a queue service partitions its work over the embedded Raft cluster: use .cluster(ClusterConfig…), or give a queue URL',
    );
  }
  if (options.politeness) {
    fail(
      'a partitioned cluster keeps no cluster-wide host budgets: each host is crawled by one node, so give the nodes their own politeness with .politeness() instead of .cluster({ politeness })',
    );
  }
  return new DistributedRuntime({
    queue: undefined,
    partitionByHost: options.partitionByHost ?? [],
    coordination,
    deduplicator: undefined,
    budget: undefined,
    gate: undefined,
    namespace,
    runId,
    completion: options.completion ?? {},
    cronOwnershipMs: options.cronOwnershipMs ?? 1_000,
    service: options.service,
  });
}

function isRaft(coordination: Coordination): coordination is RaftCoordination {
  return coordination.kind === 'raft' && 'node' in coordination;
}

interface RuntimeParts {
  /** Undefined: a partitioned cluster (the engine's own queues). */
  queue: QueueBackend | undefined;
  partitionByHost: readonly string[] | undefined;
  coordination: Coordination;
  deduplicator: Deduplicator | undefined;
  budget: RedisHostBudget | undefined;
  gate: HostScheduler | undefined;
  namespace: string;
  runId: string;
  completion: NonNullable<DistributedOptions['completion']>;
  cronOwnershipMs: number;
  service: boolean | undefined;
}

export class DistributedRuntime {
  /** The shared queue; undefined on a partitioned cluster (each engine keeps its own). */
  readonly queue: QueueBackend | undefined;
  /** Where work goes on a partitioned cluster; undefined with a shared queue. */
  readonly router: PartitionRouter | undefined;
  readonly coordination: Coordination;
  /** The shared dedup set (closed by the engine with its frontier). */
  readonly deduplicator: Deduplicator | undefined;
  readonly budget: RedisHostBudget | undefined;
  /** The politeness gate (a HostScheduler over the shared budget), when configured. */
  readonly gate: HostScheduler | undefined;
  readonly namespace: string;
  readonly runId: string;
  readonly #completion: RuntimeParts['completion'];
  readonly #cronOwnershipMs: number;
  /** Who fires which cron job: the owner of its key's partition. */
  readonly cron: CronOwnership;
  readonly #service: boolean | undefined;
  /** What {@link engineOptions} was asked for that makes a service node, when not set explicitly. */
  #keptUp = false;
  /** The running engine's logger (forward failures are reported there). */
  #log: Engine['log'] | undefined;
  #cronEnabled = true;
  #closed = false;

  constructor(parts: RuntimeParts) {
    this.queue = parts.queue;
    this.coordination = parts.coordination;
    this.deduplicator = parts.deduplicator;
    this.budget = parts.budget;
    this.gate = parts.gate;
    this.namespace = parts.namespace;
    this.runId = parts.runId;
    this.#completion = parts.completion;
    this.#cronOwnershipMs = parts.cronOwnershipMs;
    this.#service = parts.service;
    this.cron = createCronOwnership(this.coordination, { refreshMs: parts.cronOwnershipMs });
    const byHost = new Set(parts.partitionByHost);
    const coordination = this.coordination;
    this.router =
      parts.queue !== undefined || !isRaft(coordination)
        ? undefined
        : new PartitionRouter({
            ownership: this.cron.partitions,
            nodeId: coordination.nodeId,
            runId: this.runId,
            byHost: (module) => byHost.has(module),
            send: async (to, body) => {
              await coordination.node.callApp(to, this.#forwardTopic, body, FORWARD_TIMEOUT_MS);
            },
            onForwardFailed: (err, to) =>
              this.#log?.warn({ err, to }, 'forwarding work to its owner failed; it runs on this node'),
          });
  }

  /** One topic per run on the cluster's transport: a forward never reaches another run's engine. */
  get #forwardTopic(): string {
    return `${FORWARD_TOPIC}:${this.runId}`;
  }

  /**
   * Engine options of a worker: `base` plus the shared queue, dedup and gate, the coordination
   * (cron claims, the advance gate and stop flags hold cluster-wide), cron on partition owners,
   * the run id, no auto-seed (seeding is cluster-wide) and no local idle end (completion is
   * cluster-wide).
   */
  engineOptions(base: EngineOptions = {}): EngineOptions {
    this.#keptUp = base.endWhenIdle === false;
    this.#cronEnabled = base.cron?.enabled !== false;
    const gate = base.cron?.gate;
    const cron = {
      recheckRefusedMs: this.#cronOwnershipMs,
      ...base.cron,
      gate: (job: { id: string; key: string }) => this.cron.gate(job) && (gate === undefined || gate(job)),
    };
    const shared = {
      coordination: base.coordination ?? this.coordination,
      cron,
      runId: this.runId,
      autoSeed: false,
      endWhenIdle: false,
    };
    // Partitioned: the engine's own queues, dedup set and politeness; only routing is added.
    if (this.queue === undefined)
      return { ...base, ...shared, ...(this.router ? { router: this.router } : {}) };
    const frontier = { ...base.frontier };
    if (this.deduplicator) frontier.deduplicator = this.deduplicator;
    if (this.gate) frontier.gate = this.gate;
    // The response topic is shared by every worker: sized for one process it would make N
    // processes' downloads wait on each other's parse backlog (its publishers poll for room).
    const downloads = base.stages?.download ?? base.concurrency ?? 32;
    const topics = {
      ...base.topics,
      response: { capacity: Math.max(512, 16 * downloads), ...base.topics?.response },
    };
    // Each hand-off is a round trip to the broker: the stages that only hand work on (parse,
    // followUp) spend most of their time waiting on it, so give them as many workers as
    // downloads to keep the pipeline full (unless set explicitly).
    const stages = {
      parse: Math.max(16, downloads),
      followUp: Math.max(8, downloads),
      ...base.stages,
    };
    return {
      ...base,
      ...shared,
      queue: this.queue,
      frontier,
      topics,
      stages,
    };
  }

  /**
   * Run `engine` (built with {@link engineOptions}) as one worker of the cluster: join, seed
   * once across the cluster, end when the whole cluster is idle. Resolves with this worker's
   * summary. Does not close the runtime.
   */
  async run(engine: Engine): Promise<RunSummary> {
    this.#log = engine.log;
    const queue = this.queue ?? engine.queue;
    const topics = Object.values(TOPICS).map((name) => queue.topic(name));
    const topicsEmpty = async () => {
      for (const topic of topics) {
        const s = await topic.stats();
        if (s.ready + s.delayed + s.inflight > 0) return false;
      }
      return true;
    };
    const router = this.router;
    // Partitioned: take the work other nodes route here. Registered before joining (as soon as
    // this node is a member it owns keys); a forward that comes before the engine runs waits
    // for it (the sender gives up after its timeout and keeps the work).
    let engineStarted: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      engineStarted = resolve;
    });
    const unsubscribe =
      router === undefined || !isRaft(this.coordination)
        ? undefined
        : this.coordination.node.onAppRequest(this.#forwardTopic, async (body) => {
            const work = router.received(body);
            await started;
            await engine.accept(work);
            return { accepted: true };
          });
    const cluster = createClusterRun({
      coordination: this.coordination,
      runId: this.runId,
      activity: () => engine.activity(),
      topicsEmpty,
      ...(router === undefined ? {} : { ownTopicsEmpty: topicsEmpty }),
      onDone: () => {
        if (engine.state === 'running') void engine.stop('idle');
      },
      onError: (err, context) => {
        if (!isDataLost(err)) {
          engine.log.warn({ err }, `cluster run: ${context}`);
        } else if (engine.state === 'running') {
          // The run's markers are gone with the data: it could never be seen to end.
          engine.log.error({ err }, err.message);
          void engine.stop('critical');
        }
      },
      meta: { namespace: this.namespace, hostname: hostname(), version: MOCRA_VERSION },
      service: this.isService(engine),
      ...this.#completion,
    });
    try {
      await cluster.start();
    } catch (err) {
      unsubscribe?.();
      throw err;
    }
    await this.cron
      .start()
      .catch((err: unknown) => engine.log.warn({ err }, 'cron ownership: members not read'));
    const running = engine.run();
    engineStarted();
    if (cluster.done) void engine.stop('idle'); // the run had ended before this process joined
    const seeding = (async () => {
      // Retried while the run lasts: the run cannot end before it was seeded.
      while (engine.state === 'running' && !cluster.done) {
        try {
          const outcome = await cluster.seedOnce(async () => {
            // As the engine's own auto-seed: a module with a cron starts on its schedule instead.
            for (const registered of engine.registry.values()) {
              if (registered.module.cron === undefined)
                await engine.submit({ module: registered.module.name });
            }
          });
          engine.log.info({ runId: this.runId, outcome }, 'seeding');
          return;
        } catch (err) {
          if (isDataLost(err)) return; // the cluster run stops the engine on it
          engine.log.warn({ err }, 'seeding failed; trying again in 1 s');
          await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
        }
      }
    })();
    try {
      return await running;
    } finally {
      unsubscribe?.();
      this.cron.stop();
      await cluster.close();
      await seeding.catch(() => undefined);
    }
  }

  /** Whether `engine` runs as a service node here (stays up until stopped; see the top of this file). */
  isService(engine: Engine): boolean {
    if (this.#service !== undefined) return this.#service;
    if (this.#keptUp) return true;
    return this.#cronEnabled && [...engine.registry.values()].some((r) => r.module.cron !== undefined);
  }

  /** Close the queue, coordination, budget and dedup connections. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.gate?.close();
    await this.deduplicator?.close().catch(() => undefined);
    await this.budget?.close().catch(() => undefined);
    await this.coordination.close().catch(() => undefined);
    await this.queue?.close().catch(() => undefined);
  }
}
