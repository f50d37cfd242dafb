/**
 * The shapes of the control API, in zod: request bodies and query strings are validated with
 * them, the response views are typed from them (`z.output`), and `/openapi.json` is generated
 * from them — one definition, so the description cannot drift from what the server does.
 *
 * Field names are camelCase, times are epoch milliseconds, durations say their unit
 * (`uptimeMs`, `p95Ms`).
 */
import { z } from 'zod';

/** The named schemas that become `components.schemas` of `/openapi.json`. */
export const apiSchemas = z.registry<{ id: string; description?: string }>();

function named<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  apiSchemas.add(schema, description === undefined ? { id } : { id, description });
  return schema;
}

const count = z.number().int().min(0);
const epochMs = z.number().int();

// ── inputs ──────────────────────────────────────────────────────────────────────

const name = (what: string) =>
  z
    .string({ error: `${what} must be a string` })
    .trim()
    .min(1, `${what} must not be empty`)
    .max(200, `${what} must be at most 200 characters`);

/** Only the wrong-type case gets our message; unknown keys keep zod's (it names the key). */
const bodyMustBeObject = (issue: { code: string }) =>
  issue.code === 'invalid_type' ? 'the body must be a JSON object' : undefined;

/** `POST /start_work`, native body: one run of a registered module. */
const nativeStartWorkBody = z.strictObject(
  {
    module: name('module'),
    account: name('account').optional(),
    platform: name('platform').optional(),
    params: z.record(z.string(), z.unknown(), { error: 'params must be an object' }).optional(),
    priority: z
      .number({ error: 'priority must be a number' })
      .int('priority must be an integer')
      .min(-1000, 'priority must be at least -1000')
      .max(1000, 'priority must be at most 1000')
      .optional(),
    runId: name('runId').optional(),
  },
  { error: bodyMustBeObject },
);

/** Queue priorities of the named priorities of Rust mocra (there Low 1, Normal 5, High 10). */
export const UPSTREAM_PRIORITIES = Object.freeze({ low: -5, normal: 0, high: 5 });
const upstreamPriorityNames = ['Low', 'Normal', 'High', 'low', 'normal', 'high'] as const;

/**
 * `POST /start_work`, the `TaskEvent` body of Rust mocra: `module` a list of names (`null` or
 * absent: every module of the account × platform), `priority` by name, `run_id`.
 */
const upstreamTaskEventBody = z.strictObject(
  {
    account: name('account'),
    platform: name('platform'),
    module: z
      .array(name('module'), { error: 'module must be an array of module names, or null' })
      .min(1, 'module must name at least one module (null: every module)')
      .nullable()
      .optional(),
    priority: z
      .enum(upstreamPriorityNames, { error: "priority must be 'Low', 'Normal' or 'High'" })
      .optional(),
    run_id: name('run_id').optional(),
  },
  { error: bodyMustBeObject },
);

/** `POST /start_work`: one task to put on the `task` topic (a module run: its entry nodes' generate). */
export const startWorkBodySchema = named(
  'StartWorkBody',
  z.union([nativeStartWorkBody, upstreamTaskEventBody]),
  'A task that starts a run of a registered module; or the TaskEvent body of Rust mocra (`module` an array, `priority` Low | Normal | High, `run_id`).',
);

/** What `/start_work` hands the engine, from either body. */
export interface StartWorkInput {
  /** One module (native body). */
  module?: string;
  /** Several modules (Rust body); neither this nor `module`: every module. */
  modules?: string[];
  account?: string;
  platform?: string;
  params?: Record<string, unknown>;
  priority?: number;
  runId?: string;
}

/** The task a validated `/start_work` body asks for. */
export function startWorkInputOf(body: z.output<typeof startWorkBodySchema>): StartWorkInput {
  // Only the native body names one module as a string.
  if (typeof body.module === 'string') {
    return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined)) as StartWorkInput;
  }
  const upstream = body as z.output<typeof upstreamTaskEventBody>;
  const input: StartWorkInput = { account: upstream.account, platform: upstream.platform };
  if (upstream.module != null) input.modules = upstream.module;
  if (upstream.priority !== undefined)
    input.priority = UPSTREAM_PRIORITIES[upstream.priority.toLowerCase() as keyof typeof UPSTREAM_PRIORITIES];
  if (upstream.run_id !== undefined) input.runId = upstream.run_id;
  return input;
}

const dlqSelectorShape = {
  topic: name('topic').optional(),
  ids: z.array(name('id')).min(1, 'ids must not be empty').max(1000, 'at most 1000 ids at a time').optional(),
  reasonIncludes: z.string().min(1).max(500).optional(),
  since: epochMs.min(0).optional(),
  all: z.boolean().optional(),
};

interface SelectorInput {
  topic?: string | undefined;
  ids?: string[] | undefined;
  reasonIncludes?: string | undefined;
  since?: number | undefined;
  all?: boolean | undefined;
}

const atLeastOneSelector = (value: SelectorInput) =>
  value.all === true ||
  value.topic !== undefined ||
  value.ids !== undefined ||
  value.reasonIncludes !== undefined ||
  value.since !== undefined;
const selectorMessage = 'name what to select (topic, ids, reasonIncludes or since), or pass all: true';

/** `POST /dlq/replay`: which dead letters to publish again. An empty selection is refused, not "everything". */
export const dlqReplayBodySchema = named(
  'DlqSelection',
  z
    .strictObject(dlqSelectorShape, { error: bodyMustBeObject })
    .refine(atLeastOneSelector, { message: selectorMessage }),
  'Which dead letters to act on; an empty selection is refused (use all: true).',
);

/** `DELETE /dlq?…`: the same selection, in the query string (`ids` comma-separated, `all=true`). */
export const dlqPurgeQuerySchema = z
  .strictObject({
    topic: name('topic').optional(),
    ids: z
      .string()
      .transform((s) =>
        s
          .split(',')
          .map((id) => id.trim())
          .filter((id) => id !== ''),
      )
      .pipe(
        z.array(z.string()).min(1, 'ids must name at least one id').max(1000, 'at most 1000 ids at a time'),
      )
      .optional(),
    reasonIncludes: z.string().min(1).max(500).optional(),
    since: z.coerce.number().int().min(0).optional(),
    all: z
      .enum(['true', 'false'])
      .transform((v) => v === 'true')
      .optional(),
  })
  .refine(atLeastOneSelector, { message: selectorMessage });

/** `GET /dlq?topic&limit&offset&reasonIncludes`. */
export const dlqListQuerySchema = z.strictObject({
  topic: name('topic').optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  offset: z.coerce.number().int().min(0).default(0),
  reasonIncludes: z.string().min(1).max(500).optional(),
});

export const LOG_LEVEL_FILTERS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

/** `GET /observability/logs?limit&level&module&after`. */
export const logsQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(200),
  level: z
    .string()
    .transform((s) => s.toLowerCase())
    .pipe(z.enum(LOG_LEVEL_FILTERS, { error: `level must be one of ${LOG_LEVEL_FILTERS.join(', ')}` }))
    .optional(),
  module: z.string().max(200).optional(),
  after: z.coerce.number().int().min(0).optional(),
});

// ── views (responses) ───────────────────────────────────────────────────────────

export const stageViewSchema = named(
  'StageView',
  z.object({
    /** Ready on the stage's topic. */
    queued: count,
    delayed: count,
    inFlight: count,
    done: count,
    failed: count,
    concurrency: count,
    paused: z.boolean(),
  }),
);

export const throughputViewSchema = named(
  'ThroughputView',
  z.object({
    success: count,
    failure: count,
    total: count,
    /** success / total, null before anything finished. */
    successRate: z.number().min(0).max(1).nullable(),
  }),
);

export const latencyViewSchema = named(
  'LatencyView',
  z.object({
    /** Samples in the window the percentiles are computed over. */
    count,
    p50Ms: z.number().nullable(),
    p95Ms: z.number().nullable(),
    p99Ms: z.number().nullable(),
  }),
);

const successFailure = z.object({ success: count, failure: count });

export const dagViewSchema = named(
  'DagView',
  z.object({
    /** DAG job runs that finished, by outcome. */
    runs: successFailure,
    /** Node attempts that finished, by outcome. */
    attempts: successFailure,
    retries: count,
    /** Node attempts and runs that ran past their timeout. */
    timeouts: count,
    runGuard: z.object({ acquired: count, contended: count, lost: count }),
    fencingRejections: count,
    checkpointWrites: count,
    /** Nodes served by another with the same idempotency key. */
    singleflightHits: count,
  }),
);

export const engineViewSchema = named(
  'EngineView',
  z.object({
    node: z.string(),
    namespace: z.string(),
    version: z.string(),
    runId: z.string().nullable(),
    state: z.enum(['created', 'running', 'stopping', 'stopped']),
    paused: z.boolean(),
    /** cluster: the pause holds for every node through the coordination backend. */
    pauseScope: z.enum(['local', 'cluster']),
    mode: z.object({
      singleNode: z.boolean(),
      clustered: z.boolean(),
      queue: z.string(),
      coordination: z.string(),
    }),
    startedAt: epochMs.nullable(),
    uptimeMs: count,
    /** Messages waiting on every topic (ready + delayed). */
    pending: count,
    /** Handlers running now, every stage. */
    inflight: count,
    stages: z.record(z.string(), stageViewSchema),
    throughput: z.record(z.string(), throughputViewSchema),
    latency: z.record(z.string(), latencyViewSchema),
    /** What the engine's DAG jobs did (all zero without DAG jobs). */
    dag: dagViewSchema,
    totals: z.object({
      pages: count,
      items: count,
      bytes: count,
      errors: count,
      retries: count,
      deadLettered: count,
      dropped: count,
    }),
    errorsByCode: z.record(z.string(), count),
    sampledAt: epochMs,
  }),
);

export const queueViewSchema = named(
  'QueueView',
  z.object({
    topic: z.string(),
    /** The stage that consumes the topic. */
    stage: z.string(),
    ready: count,
    delayed: count,
    inflight: count,
    deadLettered: count,
    /** null: unbounded. */
    capacity: count.nullable(),
  }),
);

export const queuesViewSchema = named(
  'QueuesView',
  z.object({
    backend: z.string(),
    namespace: z.string(),
    queues: z.array(queueViewSchema),
    sampledAt: epochMs,
  }),
);

export const hostViewSchema = named(
  'HostView',
  z.object({
    host: z.string(),
    inFlight: count,
    requests: count,
    errors: count,
    lastStatus: z.number().int().nullable(),
    avgLatencyMs: z.number().nullable(),
    /** Politeness delay between two requests to the host. */
    delayMs: z.number().nullable(),
    /** Epoch ms until which the host is backed off (Retry-After, 429/503), null when it is not. */
    backoffUntil: epochMs.nullable(),
    concurrency: count.nullable(),
    breaker: z.enum(['closed', 'half-open', 'open']).nullable(),
  }),
);

export const hostsViewSchema = named(
  'HostsView',
  z.object({ hosts: z.array(hostViewSchema), total: count, sampledAt: epochMs }),
);

export const memberViewSchema = named(
  'MemberView',
  z.object({
    id: z.string(),
    addr: z.string().nullable(),
    lastSeen: epochMs,
    leader: z.boolean(),
    self: z.boolean(),
    meta: z.record(z.string(), z.string()),
  }),
);

export const clusterViewSchema = named(
  'ClusterView',
  z.object({
    kind: z.string(),
    nodeId: z.string(),
    leader: z.string().nullable(),
    isLeader: z.boolean(),
    members: z.array(memberViewSchema),
    /** Backend-specific facts (Raft term, commit index, …) shown as a key/value table. */
    details: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])),
    sampledAt: epochMs,
  }),
);

export const componentHealthSchema = z.object({
  status: z.enum(['up', 'down']),
  error: z.string().optional(),
});

export const healthViewSchema = named(
  'HealthView',
  z.object({
    status: z.enum(['up', 'degraded', 'down']),
    components: z.record(z.string(), componentHealthSchema),
    checkedAt: epochMs,
  }),
);

export const systemViewSchema = named(
  'SystemView',
  z.object({
    hostname: z.string(),
    platform: z.string(),
    nodeVersion: z.string(),
    cpuCount: count,
    cpuUsagePercent: z.number(),
    loadAverage: z.tuple([z.number(), z.number(), z.number()]),
    memoryUsedBytes: count,
    memoryTotalBytes: count,
    memoryUsagePercent: z.number(),
    swapUsedBytes: count,
    swapTotalBytes: count,
    process: z.object({
      pid: count,
      cpuUsagePercent: z.number(),
      rssBytes: count,
      heapUsedBytes: count,
      heapTotalBytes: count,
      externalBytes: count,
      uptimeSeconds: z.number(),
    }),
    updatedAt: epochMs,
  }),
);

export const historySampleSchema = named(
  'HistorySample',
  z.object({
    t: epochMs,
    pages: z.number().describe('pages per second since the previous sample'),
    items: z.number(),
    errors: z.number(),
    bytes: z.number(),
  }),
  'Rates per second over one sampling interval, ending at `t`.',
);

export const historyViewSchema = named(
  'HistoryView',
  z.object({
    intervalMs: count,
    samples: z.array(historySampleSchema),
    sampledAt: epochMs,
  }),
  'Throughput of the last minutes, sampled on the server, oldest first (the dashboard chart starts from it).',
);

export const logRecordSchema = named(
  'LogRecord',
  z.object({
    seq: count,
    time: epochMs,
    level: z.enum(LOG_LEVEL_FILTERS),
    module: z.string(),
    message: z.string(),
    runId: z.string().optional(),
    taskId: z.string().optional(),
    requestId: z.string().optional(),
    traceId: z.string().optional(),
    stage: z.string().optional(),
    code: z.string().optional(),
    url: z.string().optional(),
    status: z.number().optional(),
    attempt: z.number().optional(),
    traceback: z.string().optional(),
    fields: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
  }),
);

export const logsViewSchema = named(
  'LogsView',
  z.object({
    /** Newest first. */
    records: z.array(logRecordSchema),
    capacity: count,
    /** MOCRA_DISABLE_LOGS is set: nothing is recorded. */
    disabled: z.boolean(),
    lastSeq: count,
  }),
);

export const nodeViewSchema = named(
  'NodeView',
  z.object({
    id: z.string(),
    addr: z.string().nullable(),
    hostname: z.string().nullable(),
    version: z.string().nullable(),
    /** Null for a Raft node whose membership lapsed (not live). */
    lastHeartbeat: epochMs.nullable(),
    self: z.boolean(),
    /** A current member of the run's membership (heartbeating). */
    live: z.boolean(),
    meta: z.record(z.string(), z.string()),
    /** A partitioned cluster's keys (`host:…`, `account:…`) this node owns now. */
    partitions: z.array(z.string()).optional(),
  }),
);

export const nodesViewSchema = named('NodesView', z.object({ nodes: z.array(nodeViewSchema) }));

export const pauseViewSchema = named(
  'PauseView',
  z.object({ paused: z.boolean(), scope: z.enum(['local', 'cluster']) }),
);

export const stopViewSchema = named('StopView', z.object({ stopping: z.literal(true), node: z.string() }));

export const startWorkResultSchema = named(
  'StartWorkResult',
  z.object({
    accepted: z.literal(true),
    /** The module, for a native body. */
    module: z.string().optional(),
    /** The modules asked for, for a Rust mocra body that names them. */
    modules: z.array(z.string()).optional(),
    runId: z.string(),
  }),
);

export const dlqEntrySchema = named(
  'DlqEntry',
  z.object({
    id: z.string(),
    topic: z.string(),
    messageId: z.string(),
    reason: z.string(),
    attempts: count,
    publishedAt: epochMs,
    deadLetteredAt: epochMs,
    key: z.string().nullable(),
    /** One line naming the work (e.g. `download GET https://…`). */
    summary: z.string(),
    /** The payload made JSON-safe and size-capped (large strings are cut). */
    payload: z.unknown(),
  }),
);

export const dlqPageSchema = named(
  'DlqPage',
  z.object({
    entries: z.array(dlqEntrySchema),
    /** Entries matching the query over all listed topics. */
    total: count,
    /** DLQ size per topic. */
    counts: z.record(z.string(), count),
    limit: count,
    offset: count,
  }),
);

export const dlqResultSchema = named('DlqResult', z.object({ count }));

export const errorBodySchema = named(
  'Error',
  z.object({
    error: z.object({
      code: z.string(),
      message: z.string(),
      status: z.number().int(),
      issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
      retryAfterMs: z.number().int().optional(),
    }),
    requestId: z.string(),
  }),
  'Every error: a stable code (see docs/errors.md), a message, the HTTP status.',
);

export const rootInfoSchema = named(
  'RootInfo',
  z.object({ name: z.string(), version: z.string(), dashboard: z.boolean(), openapi: z.string() }),
);
